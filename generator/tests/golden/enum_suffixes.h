/* Enumerators written with U / UL / hex suffixes, and implicit increments. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
typedef enum {
  kA = 0U,
  kB = 1UL,
  kC = 0x10u,
  kD,
  kE = 077,
} Suffixed;
