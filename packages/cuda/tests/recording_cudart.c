/* A recording fake of the CUDA runtime, for dlbind-cuda's call-sequence tests (no GPU needed).

   It exports the CUDA runtime symbols dlbind-cuda binds, with the runtime's C signatures, and records every
   call (but the error-string look-ups) as one line of text: the tests load it through DLBIND_CUDA_LIBRARY
   and check which calls dlbind made, in which order, with which streams, events and devices. It is not a
   GPU: "device" memory is host memory from malloc, kept in a table so that cudaPointerGetAttributes can
   answer, and copies (cudaMemcpy, cudaMemcpyAsync, cudaMemcpy2DAsync) are memmove, checked as the runtime
   checks them (recording_runtime.h). Work is never queued: an "async" call has finished when it returns.
   Nothing it returns is a hardware result; the tests never treat it so.

   Names in the log: allocations D<n> (cudaMalloc), H<n> (cudaMallocHost, cudaHostAlloc), M<n>
   (cudaMallocManaged), with +offset for interior pointers; streams legacy (1), per-thread (2), S<n>
   (cudaStreamCreateWithFlags) or their hex value; events E<n>; other pointers "host".

   Control (for the tests, through ctypes): recording_log() returns the log, recording_clear() empties it,
   recording_set(key, value) sets "devices", "runtime_version", "driver_version" or "device_count_error"
   (what cudaGetDeviceCount returns), recording_fail(call, code) makes the next call of `call` return
   `code` (recording_fail_times(call, code, n): the next n calls; recording_fail_after(call, code, n, k): the n
   after the next k), recording_live(kind, &bytes) counts the allocations of a kind ('D', 'H', 'M') not freed
   yet, and their bytes.

   The log, the controls and the calls HIP has too are in tests/gpu_backends/recording_runtime.h, shared
   with recording_amdhip64.c; this file gives the CUDA names and what only CUDA has.

   Built by the tests: gcc -shared -fPIC -I tests/gpu_backends -o librecording_cudart.so recording_cudart.c
   -lpthread */

#define RT_PREFIX cuda
#define RT_RUNTIME_VERSION 13000
#define RT_UNKNOWN_ERROR "cudaErrorUnknown"

static const struct { int code; const char *name, *text; } errors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {12, "cudaErrorInvalidPitchValue", "invalid pitch argument"},
    {21, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "cudaErrorNotReady", "device not ready"},
};

#include "recording_runtime.h"

static const char *special_stream(const void *p) {
    if ((uintptr_t)p == 1) return "legacy";
    if ((uintptr_t)p == 2) return "per-thread";
    return NULL;
}

struct cudaPointerAttributes { /* CUDA 13's layout (12's is its prefix) */
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
    long reserved[8];
};

cudaError_t cudaMallocHost(void **p, size_t size) { return allocate("cudaMallocHost", p, size, TYPE_HOST, 'H'); }

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
    return allocate_pinned("cudaHostAlloc", p, size, flags);
}
cudaError_t cudaFreeHost(void *p) { return release("cudaFreeHost", p); }

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attrs, const void *p) {
    ENTER("cudaPointerGetAttributes");
    struct block *b = attributes_of("cudaPointerGetAttributes", attrs, sizeof *attrs, p);
    if (b) {
        attrs->type = b->type;
        SET_POINTERS(attrs, b, p);
    } else {
        attrs->device = -2;
    }
    LEAVE();
}
