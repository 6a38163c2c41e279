/* stdint.h stand-in for parsing dlpack.h: pycparser only needs to know these names are types.
   Widths never come from here: see dlbind_generator.layout. */
typedef signed char int8_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef unsigned short uint16_t;
typedef int int32_t;
typedef unsigned int uint32_t;
typedef long int64_t;
typedef unsigned long uint64_t;
typedef long intptr_t;
typedef unsigned long uintptr_t;
