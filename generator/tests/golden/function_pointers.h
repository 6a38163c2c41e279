/* v1.2+ style: function-pointer typedefs with a nested function-pointer parameter, `**`
   out-parameters, and clang-format guard comments at the end of parameter lines. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 2
#include <stdint.h>
#include <stddef.h>
typedef struct {
  void *data;
} DLTensor;
typedef int (*Allocator)(                                    //
    DLTensor *prototype, DLTensor **out, void *error_ctx,    //
    void (*SetError)(void *error_ctx, const char *kind,      //
                     const char *message)                    //
);
typedef int (*CurrentStream)(int32_t device_id, void **out_stream);
typedef struct Table {
  struct Table *prev;
  Allocator allocator;
  CurrentStream current_stream;
} Table;
