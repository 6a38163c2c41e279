/* Layout rules: padding between members, trailing padding, fixed arrays, nested structs. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
#include <stdint.h>
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} Small;
typedef struct {
  char tag;
  int64_t big;
  uint16_t shorts[3];
  Small small;
  double last;
  uint8_t tail;
} Padded;
