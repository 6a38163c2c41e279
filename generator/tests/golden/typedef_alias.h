/* v0.4 style: a struct renamed, its old name kept as an alias typedef. */
#define DLPACK_VERSION 040
#include <stdint.h>
typedef struct {
  int32_t device_type;
  int device_id;
} DLDevice;
typedef DLDevice DLContext;
