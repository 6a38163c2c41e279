/* v0.1 style: a C99 line comment inside an enum, names without the DL prefix,
   and an octal version macro (010 means 0.1, not eight). */
#ifndef GOLDEN_H_
#define GOLDEN_H_
#define DLPACK_VERSION 010
#include <stdint.h>
typedef enum {
  kCPU = 1,
  kGPU = 2,
  // kCPUPinned = kCPU | kGPU
  kCPUPinned = 3,
  kOpenCL = 4,
} DLDeviceType;
#endif
