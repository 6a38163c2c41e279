/* v1.0/v1.1 style: a struct declared without typedef, whose deleter refers to itself. */
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#include <stdint.h>
typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
};
