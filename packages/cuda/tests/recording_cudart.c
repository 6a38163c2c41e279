/* A recording fake of the CUDA runtime, for dlbind-cuda's call-sequence tests (no GPU needed).

   It exports the CUDA runtime symbols dlbind-cuda binds, with the runtime's C signatures, and records every
   call (but the error-string look-ups) as one line of text: the tests load it through DLBIND_CUDA_LIBRARY
   and check which calls dlbind made, in which order, with which streams, events and devices. It is not a
   GPU: "device" memory is host memory from malloc, kept in a table so that cudaPointerGetAttributes can
   answer, and copies are memmove. Nothing it returns is a hardware result; the tests never treat it so.

   Names in the log: allocations D<n> (cudaMalloc), H<n> (cudaMallocHost), M<n> (cudaMallocManaged), with
   +offset for interior pointers; streams legacy (1), per-thread (2), S<n> (cudaStreamCreateWithFlags) or
   their hex value; events E<n>; other pointers "host".

   Control (for the tests, through ctypes): recording_log() returns the log, recording_clear() empties it,
   recording_set(key, value) sets "devices", "runtime_version", "driver_version" or "device_count_error"
   (what cudaGetDeviceCount returns), recording_fail(call, code) makes the next call of `call` return
   `code`.

   Built by the tests: gcc -shared -fPIC -o librecording_cudart.so recording_cudart.c -lpthread */

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cudaError_t;
typedef void *cudaStream_t;
typedef void *cudaEvent_t;

enum { TYPE_UNREGISTERED = 0, TYPE_HOST = 1, TYPE_DEVICE = 2, TYPE_MANAGED = 3 };

struct cudaPointerAttributes { /* CUDA 13's layout (12's is its prefix) */
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
    long reserved[8];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;
static long cfg_devices = 1, cfg_runtime = 13000, cfg_driver = 13000, cfg_count_error = 0;
static char fail_call[64];
static int fail_code;
static __thread int current_device;

struct block { char *base; size_t size; int type; int device; char name[16]; };
static struct block blocks[4096];
static int nblocks, counters[4];

struct handle { void *ptr; char name[16]; };
static struct handle handles[4096];
static int nhandles, nstreams, nevents;

/* -- the log --------------------------------------------------------------------------------------------- */

static void record(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (log_len < sizeof log_text - 256) {
        int n = vsnprintf(log_text + log_len, sizeof log_text - log_len - 1, fmt, ap);
        if (n > 0) log_len += (size_t)n;
        log_text[log_len++] = '\n';
        log_text[log_len] = 0;
    }
    va_end(ap);
}

static int injected(const char *call) { /* under lock */
    if (fail_code && strcmp(call, fail_call) == 0) {
        int code = fail_code;
        fail_code = 0;
        return code;
    }
    return 0;
}

const char *recording_log(void) { return log_text; }

void recording_clear(void) {
    pthread_mutex_lock(&lock);
    log_len = 0;
    log_text[0] = 0;
    pthread_mutex_unlock(&lock);
}

int recording_set(const char *key, long value) {
    if (!strcmp(key, "devices")) cfg_devices = value;
    else if (!strcmp(key, "runtime_version")) cfg_runtime = value;
    else if (!strcmp(key, "driver_version")) cfg_driver = value;
    else if (!strcmp(key, "device_count_error")) cfg_count_error = value;
    else return -1;
    return 0;
}

void recording_fail(const char *call, int code) {
    pthread_mutex_lock(&lock);
    snprintf(fail_call, sizeof fail_call, "%s", call);
    fail_code = code;
    pthread_mutex_unlock(&lock);
}

/* -- names ------------------------------------------------------------------------------------------------- */

static struct block *find_block(const void *p) {
    for (int i = 0; i < nblocks; i++) {
        const char *c = p;
        if (blocks[i].base && c >= blocks[i].base && c < blocks[i].base + (blocks[i].size ? blocks[i].size : 1))
            return &blocks[i];
    }
    return NULL;
}

static const char *pointer_name(const void *p, char *out, size_t n) {
    struct block *b = find_block(p);
    if (b) snprintf(out, n, "%s+%ld", b->name, (long)((const char *)p - b->base));
    else snprintf(out, n, "%s", p ? "host" : "NULL");
    return out;
}

static const char *handle_name(void *p, char *out, size_t n) {
    if ((uintptr_t)p == 1) return "legacy";
    if ((uintptr_t)p == 2) return "per-thread";
    for (int i = 0; i < nhandles; i++)
        if (handles[i].ptr == p) return handles[i].name;
    snprintf(out, n, "%#lx", (unsigned long)(uintptr_t)p);
    return out;
}

static void *new_handle(char prefix, int number) {
    void *p = malloc(1);
    if (nhandles < 4096) {
        handles[nhandles].ptr = p;
        snprintf(handles[nhandles].name, sizeof handles[nhandles].name, "%c%d", prefix, number);
        nhandles++;
    }
    return p;
}

static void forget_handle(void *p) {
    for (int i = 0; i < nhandles; i++)
        if (handles[i].ptr == p) {
            handles[i] = handles[--nhandles];
            free(p);
            return;
        }
}

/* -- errors and versions --------------------------------------------------------------------------------- */

static const struct { int code; const char *name, *text; } errors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "cudaErrorNotReady", "device not ready"},
};

const char *cudaGetErrorName(cudaError_t code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].text;
    return "unknown error";
}

#define ENTER(call) pthread_mutex_lock(&lock); int code_ = injected(call)
#define LEAVE() pthread_mutex_unlock(&lock); return code_

cudaError_t cudaRuntimeGetVersion(int *v) {
    ENTER("cudaRuntimeGetVersion");
    record("cudaRuntimeGetVersion()");
    *v = (int)cfg_runtime;
    LEAVE();
}

cudaError_t cudaDriverGetVersion(int *v) {
    ENTER("cudaDriverGetVersion");
    record("cudaDriverGetVersion()");
    *v = (int)cfg_driver;
    LEAVE();
}

cudaError_t cudaGetDeviceCount(int *count) {
    ENTER("cudaGetDeviceCount");
    record("cudaGetDeviceCount()");
    if (!code_) code_ = (int)cfg_count_error;
    *count = code_ ? 0 : (int)cfg_devices;
    LEAVE();
}

cudaError_t cudaGetDevice(int *device) {
    ENTER("cudaGetDevice");
    record("cudaGetDevice() -> %d", current_device);
    *device = current_device;
    LEAVE();
}

cudaError_t cudaSetDevice(int device) {
    ENTER("cudaSetDevice");
    record("cudaSetDevice(%d)", device);
    if (!code_ && (device < 0 || device >= cfg_devices)) code_ = 101;
    if (!code_) current_device = device;
    LEAVE();
}

/* -- memory ---------------------------------------------------------------------------------------------- */

static cudaError_t allocate(const char *call, void **out, size_t size, int type, char prefix) {
    ENTER(call);
    if (!code_) {
        struct block *b = &blocks[nblocks < 4096 ? nblocks++ : 4095];
        b->base = malloc(size ? size : 1);
        b->size = size;
        b->type = type;
        b->device = current_device;
        snprintf(b->name, sizeof b->name, "%c%d", prefix, counters[type]++);
        *out = b->base;
        record("%s(%zu) -> %s on device %d", call, size, b->name, current_device);
    } else {
        record("%s(%zu) -> error %d", call, size, code_);
    }
    LEAVE();
}

cudaError_t cudaMalloc(void **p, size_t size) { return allocate("cudaMalloc", p, size, TYPE_DEVICE, 'D'); }
cudaError_t cudaMallocHost(void **p, size_t size) { return allocate("cudaMallocHost", p, size, TYPE_HOST, 'H'); }

cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags) {
    (void)flags;
    return allocate("cudaMallocManaged", p, size, TYPE_MANAGED, 'M');
}

static cudaError_t release(const char *call, void *p) {
    ENTER(call);
    struct block *b = find_block(p);
    record("%s(%s)", call, b ? b->name : "unknown");
    if (b && b->base == p) {
        free(b->base);
        b->base = NULL;
    } else if (!code_ && p) {
        code_ = 1;
    }
    LEAVE();
}

cudaError_t cudaFree(void *p) { return release("cudaFree", p); }
cudaError_t cudaFreeHost(void *p) { return release("cudaFreeHost", p); }

static const char *kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
    ENTER("cudaMemcpy");
    char a[48], b[48];
    record("cudaMemcpy(%s, %s, %zu, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b), n,
           kind >= 0 && kind <= 4 ? kinds[kind] : "?");
    if (!code_) memmove(dst, src, n);
    LEAVE();
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, cudaStream_t s) {
    ENTER("cudaMemcpyAsync");
    char a[48], b[48], c[32];
    record("cudaMemcpyAsync(%s, %s, %zu, %s, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b),
           n, kind >= 0 && kind <= 4 ? kinds[kind] : "?", handle_name(s, c, sizeof c));
    if (!code_) memmove(dst, src, n);
    LEAVE();
}

cudaError_t cudaMemsetAsync(void *dst, int value, size_t n, cudaStream_t s) {
    ENTER("cudaMemsetAsync");
    char a[48], c[32];
    record("cudaMemsetAsync(%s, %d, %zu, %s)", pointer_name(dst, a, sizeof a), value, n, handle_name(s, c, sizeof c));
    if (!code_) memset(dst, value, n);
    LEAVE();
}

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attrs, const void *p) {
    ENTER("cudaPointerGetAttributes");
    char a[48];
    record("cudaPointerGetAttributes(%s)", pointer_name(p, a, sizeof a));
    memset(attrs, 0, sizeof *attrs);
    struct block *b = find_block(p);
    if (b) {
        attrs->type = b->type;
        attrs->device = b->device;
        attrs->devicePointer = (void *)p;
        attrs->hostPointer = b->type == TYPE_DEVICE ? NULL : (void *)p;
    } else {
        attrs->device = -2;
    }
    LEAVE();
}

/* -- streams and events ---------------------------------------------------------------------------------- */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    ENTER("cudaStreamCreateWithFlags");
    char c[32];
    if (!code_) {
        *s = new_handle('S', ++nstreams);
        record("cudaStreamCreateWithFlags(%u) -> %s", flags, handle_name(*s, c, sizeof c));
    } else {
        record("cudaStreamCreateWithFlags(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    ENTER("cudaStreamDestroy");
    char c[32];
    record("cudaStreamDestroy(%s)", handle_name(s, c, sizeof c));
    forget_handle(s);
    LEAVE();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    ENTER("cudaStreamSynchronize");
    char c[32];
    record("cudaStreamSynchronize(%s)", handle_name(s, c, sizeof c));
    LEAVE();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    ENTER("cudaStreamWaitEvent");
    char c[32], d[32];
    record("cudaStreamWaitEvent(%s, %s, %u)", handle_name(s, c, sizeof c), handle_name(e, d, sizeof d), flags);
    LEAVE();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    ENTER("cudaEventCreateWithFlags");
    if (!code_) {
        *e = new_handle('E', ++nevents);
        char c[32];
        record("cudaEventCreateWithFlags(%u) -> %s", flags, handle_name(*e, c, sizeof c));
    } else {
        record("cudaEventCreateWithFlags(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    ENTER("cudaEventRecord");
    char c[32], d[32];
    record("cudaEventRecord(%s, %s)", handle_name(e, c, sizeof c), handle_name(s, d, sizeof d));
    LEAVE();
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    ENTER("cudaEventDestroy");
    char c[32];
    record("cudaEventDestroy(%s)", handle_name(e, c, sizeof c));
    forget_handle(e);
    LEAVE();
}
