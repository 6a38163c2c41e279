/* string.h stand-in for the backends' vendor headers (HIP's hip_runtime_api.h includes it first, and uses
   size_t from it before it includes stddef.h). */
#include <stddef.h>
