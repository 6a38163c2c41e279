/* A typedef'd struct with a tag that points to itself. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 2
typedef struct Node {
  struct Node *next;
  int value;
} Node;
