/* A recording fake of the HIP runtime (libamdhip64), for dlbind-rocm's call-sequence tests (no GPU needed).

   It exports the HIP runtime symbols dlbind-rocm binds, with the runtime's C signatures, and records every
   call (but the error-string look-ups) as one line of text: the tests load it through DLBIND_ROCM_LIBRARY
   and check which calls dlbind made, in which order, with which streams, events and devices. It is not a
   GPU: "device" memory is host memory from malloc, kept in a table so that hipPointerGetAttributes can
   answer, and copies (hipMemcpy, hipMemcpyAsync, hipMemcpy2DAsync) are memmove, checked as the runtime
   checks them (recording_runtime.h). Work is never queued: an "async" call has finished when it returns.
   Nothing it returns is a hardware result; the tests never treat it so.

   hipPointerGetAttributes answers as the configured runtime version's HIP would: HIP 5 numbers
   hipMemoryType Host 0, Device 1 and refuses unknown pointers with hipErrorInvalidValue; HIP 6 numbers
   Unregistered 0, Host 1, Device 2, Managed 3 and answers Unregistered for unknown pointers.

   Names in the log: allocations D<n> (hipMalloc), H<n> (hipHostMalloc), M<n> (hipMallocManaged), with
   +offset for interior pointers; streams default (0), S<n> (hipStreamCreateWithFlags) or their hex value;
   events E<n>; other pointers "host".

   Control (for the tests, through ctypes): recording_log() returns the log, recording_clear() empties it,
   recording_set(key, value) sets "devices", "runtime_version", "driver_version" or "device_count_error"
   (what hipGetDeviceCount returns), recording_fail(call, code) makes the next call of `call` return
   `code` (recording_fail_times(call, code, n): the next n calls; recording_fail_after(call, code, n, k): the n
   after the next k), recording_live(kind, &bytes) counts the allocations of a kind ('D', 'H', 'M') not freed
   yet, and their bytes.

   The log, the controls and the calls CUDA has too are in tests/gpu_backends/recording_runtime.h, shared
   with recording_cudart.c; this file gives the HIP names and what only HIP has.

   Built by the tests: gcc -shared -fPIC -I tests/gpu_backends -o librecording_amdhip64.so
   recording_amdhip64.c -lpthread */

#define RT_PREFIX hip
#define RT_RUNTIME_VERSION 50221153
#define RT_UNKNOWN_ERROR "hipErrorUnknown"

static const struct { int code; const char *name, *text; } errors[] = {
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {12, "hipErrorInvalidPitchValue", "hipErrorInvalidPitchValue"},
    {21, "hipErrorInvalidMemcpyDirection", "hipErrorInvalidMemcpyDirection"},
    {35, "hipErrorInsufficientDriver", "hipErrorInsufficientDriver"},
    {100, "hipErrorNoDevice", "hipErrorNoDevice"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {400, "hipErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "hipErrorNotReady", "device not ready"},
};

#include "recording_runtime.h" /* its TYPE_ values are HIP 6's numbering */

static const char *special_stream(const void *p) { return p ? NULL : "default"; }

typedef struct { /* HIP 5's layout (HIP 6 renames memoryType to type) */
    int memoryType;
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

hipError_t hipHostMalloc(void **p, size_t size, unsigned int flags) {
    return allocate_pinned("hipHostMalloc", p, size, flags);
}

hipError_t hipHostFree(void *p) { return release("hipHostFree", p); }

hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attrs, const void *p) {
    ENTER("hipPointerGetAttributes");
    int hip6 = cfg_runtime >= 60000000;
    struct block *b = attributes_of("hipPointerGetAttributes", attrs, sizeof *attrs, p);
    if (b) {
        if (hip6) attrs->memoryType = b->type; /* 6: Host 1, Device 2, Managed 3 */
        else attrs->memoryType = b->type == TYPE_HOST ? 0 : 1; /* 5: Host 0, Device 1 (managed: isManaged) */
        attrs->isManaged = b->type == TYPE_MANAGED;
        SET_POINTERS(attrs, b, p);
    } else if (!code_ && !hip6) {
        code_ = 1; /* hipErrorInvalidValue */
    }
    LEAVE();
}
