/* v0.7+ style: an underlying type in C++ only, inside extern "C"; parsed in C mode. */
#define DLPACK_VERSION 70
#define DLPACK_ABI_VERSION 1
#ifdef __cplusplus
#define DLPACK_EXTERN_C extern "C"
#else
#define DLPACK_EXTERN_C
#endif
#ifdef _WIN32
#define DLPACK_DLL __declspec(dllexport)
#else
#define DLPACK_DLL
#endif
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif
/*! \brief Where memory lives. */
#ifdef __cplusplus
typedef enum : int32_t {
#else
typedef enum {
#endif
  /*! \brief host memory */
  kDLCPU = 1,
  kDLCUDA = 2, /*!< a device */
} DLDeviceType;
#ifdef __cplusplus
}  // DLPACK_EXTERN_C
#endif
