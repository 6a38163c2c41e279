/* A recording fake of the HIP runtime (libamdhip64), for dlbind-rocm's call-sequence tests (no GPU needed).

   It exports the HIP runtime symbols dlbind-rocm binds, with the runtime's C signatures, and records every
   call (but the error-string look-ups) as one line of text: the tests load it through DLBIND_ROCM_LIBRARY
   and check which calls dlbind made, in which order, with which streams, events and devices. It is not a
   GPU: "device" memory is host memory from malloc, kept in a table so that hipPointerGetAttributes can
   answer, and copies are memmove. Nothing it returns is a hardware result; the tests never treat it so.

   hipPointerGetAttributes answers as the configured runtime version's HIP would: HIP 5 numbers
   hipMemoryType Host 0, Device 1 and refuses unknown pointers with hipErrorInvalidValue; HIP 6 numbers
   Unregistered 0, Host 1, Device 2, Managed 3 and answers Unregistered for unknown pointers.

   Names in the log: allocations D<n> (hipMalloc), H<n> (hipHostMalloc), M<n> (hipMallocManaged), with
   +offset for interior pointers; streams default (0), S<n> (hipStreamCreateWithFlags) or their hex value;
   events E<n>; other pointers "host".

   Control (for the tests, through ctypes): recording_log() returns the log, recording_clear() empties it,
   recording_set(key, value) sets "devices", "runtime_version", "driver_version" or "device_count_error"
   (what hipGetDeviceCount returns), recording_fail(call, code) makes the next call of `call` return
   `code`.

   Built by the tests: gcc -shared -fPIC -o librecording_amdhip64.so recording_amdhip64.c -lpthread */

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int hipError_t;
typedef void *hipStream_t;
typedef void *hipEvent_t;

enum { TYPE_UNREGISTERED = 0, TYPE_HOST = 1, TYPE_DEVICE = 2, TYPE_MANAGED = 3 }; /* HIP 6 numbering */

typedef struct { /* HIP 5's layout (HIP 6 renames memoryType to type) */
    int memoryType;
    int device;
    void *devicePointer;
    void *hostPointer;
    int isManaged;
    unsigned allocationFlags;
} hipPointerAttribute_t;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;
static long cfg_devices = 1, cfg_runtime = 50221153, cfg_driver = 50221153, cfg_count_error = 0;
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
    if (!p) return "default";
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
    {0, "hipSuccess", "no error"},
    {1, "hipErrorInvalidValue", "invalid argument"},
    {2, "hipErrorOutOfMemory", "out of memory"},
    {35, "hipErrorInsufficientDriver", "hipErrorInsufficientDriver"},
    {100, "hipErrorNoDevice", "hipErrorNoDevice"},
    {101, "hipErrorInvalidDevice", "invalid device ordinal"},
    {400, "hipErrorInvalidResourceHandle", "invalid resource handle"},
    {600, "hipErrorNotReady", "device not ready"},
};

const char *hipGetErrorName(hipError_t code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].name;
    return "hipErrorUnknown";
}

const char *hipGetErrorString(hipError_t code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].text;
    return "unknown error";
}

#define ENTER(call) pthread_mutex_lock(&lock); int code_ = injected(call)
#define LEAVE() pthread_mutex_unlock(&lock); return code_

hipError_t hipRuntimeGetVersion(int *v) {
    ENTER("hipRuntimeGetVersion");
    record("hipRuntimeGetVersion()");
    *v = (int)cfg_runtime;
    LEAVE();
}

hipError_t hipDriverGetVersion(int *v) {
    ENTER("hipDriverGetVersion");
    record("hipDriverGetVersion()");
    *v = (int)cfg_driver;
    LEAVE();
}

hipError_t hipGetDeviceCount(int *count) {
    ENTER("hipGetDeviceCount");
    record("hipGetDeviceCount()");
    if (!code_) code_ = (int)cfg_count_error;
    *count = code_ ? 0 : (int)cfg_devices;
    LEAVE();
}

hipError_t hipGetDevice(int *device) {
    ENTER("hipGetDevice");
    record("hipGetDevice() -> %d", current_device);
    *device = current_device;
    LEAVE();
}

hipError_t hipSetDevice(int device) {
    ENTER("hipSetDevice");
    record("hipSetDevice(%d)", device);
    if (!code_ && (device < 0 || device >= cfg_devices)) code_ = 101;
    if (!code_) current_device = device;
    LEAVE();
}

/* -- memory ---------------------------------------------------------------------------------------------- */

static hipError_t allocate(const char *call, void **out, size_t size, int type, char prefix) {
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

hipError_t hipMalloc(void **p, size_t size) { return allocate("hipMalloc", p, size, TYPE_DEVICE, 'D'); }
hipError_t hipHostMalloc(void **p, size_t size, unsigned int flags) {
    (void)flags;
    return allocate("hipHostMalloc", p, size, TYPE_HOST, 'H');
}

hipError_t hipMallocManaged(void **p, size_t size, unsigned int flags) {
    (void)flags;
    return allocate("hipMallocManaged", p, size, TYPE_MANAGED, 'M');
}

static hipError_t release(const char *call, void *p) {
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

hipError_t hipFree(void *p) { return release("hipFree", p); }
hipError_t hipHostFree(void *p) { return release("hipHostFree", p); }

static const char *kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};

hipError_t hipMemcpy(void *dst, const void *src, size_t n, int kind) {
    ENTER("hipMemcpy");
    char a[48], b[48];
    record("hipMemcpy(%s, %s, %zu, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b), n,
           kind >= 0 && kind <= 4 ? kinds[kind] : "?");
    if (!code_) memmove(dst, src, n);
    LEAVE();
}

hipError_t hipMemcpyAsync(void *dst, const void *src, size_t n, int kind, hipStream_t s) {
    ENTER("hipMemcpyAsync");
    char a[48], b[48], c[32];
    record("hipMemcpyAsync(%s, %s, %zu, %s, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b),
           n, kind >= 0 && kind <= 4 ? kinds[kind] : "?", handle_name(s, c, sizeof c));
    if (!code_) memmove(dst, src, n);
    LEAVE();
}

hipError_t hipMemsetAsync(void *dst, int value, size_t n, hipStream_t s) {
    ENTER("hipMemsetAsync");
    char a[48], c[32];
    record("hipMemsetAsync(%s, %d, %zu, %s)", pointer_name(dst, a, sizeof a), value, n, handle_name(s, c, sizeof c));
    if (!code_) memset(dst, value, n);
    LEAVE();
}

hipError_t hipPointerGetAttributes(hipPointerAttribute_t *attrs, const void *p) {
    ENTER("hipPointerGetAttributes");
    char a[48];
    record("hipPointerGetAttributes(%s)", pointer_name(p, a, sizeof a));
    memset(attrs, 0, sizeof *attrs);
    int hip6 = cfg_runtime >= 60000000;
    struct block *b = find_block(p);
    if (b) {
        if (hip6) attrs->memoryType = b->type; /* 6: Host 1, Device 2, Managed 3 */
        else attrs->memoryType = b->type == TYPE_HOST ? 0 : 1; /* 5: Host 0, Device 1 (managed: isManaged) */
        attrs->isManaged = b->type == TYPE_MANAGED;
        attrs->device = b->device;
        attrs->devicePointer = (void *)p;
        attrs->hostPointer = b->type == TYPE_DEVICE ? NULL : (void *)p;
    } else if (!code_ && !hip6) {
        code_ = 1; /* hipErrorInvalidValue */
    }
    LEAVE();
}

/* -- streams and events ---------------------------------------------------------------------------------- */

hipError_t hipStreamCreateWithFlags(hipStream_t *s, unsigned int flags) {
    ENTER("hipStreamCreateWithFlags");
    char c[32];
    if (!code_) {
        *s = new_handle('S', ++nstreams);
        record("hipStreamCreateWithFlags(%u) -> %s", flags, handle_name(*s, c, sizeof c));
    } else {
        record("hipStreamCreateWithFlags(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

hipError_t hipStreamDestroy(hipStream_t s) {
    ENTER("hipStreamDestroy");
    char c[32];
    record("hipStreamDestroy(%s)", handle_name(s, c, sizeof c));
    forget_handle(s);
    LEAVE();
}

hipError_t hipStreamSynchronize(hipStream_t s) {
    ENTER("hipStreamSynchronize");
    char c[32];
    record("hipStreamSynchronize(%s)", handle_name(s, c, sizeof c));
    LEAVE();
}

hipError_t hipStreamWaitEvent(hipStream_t s, hipEvent_t e, unsigned int flags) {
    ENTER("hipStreamWaitEvent");
    char c[32], d[32];
    record("hipStreamWaitEvent(%s, %s, %u)", handle_name(s, c, sizeof c), handle_name(e, d, sizeof d), flags);
    LEAVE();
}

hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned int flags) {
    ENTER("hipEventCreateWithFlags");
    if (!code_) {
        *e = new_handle('E', ++nevents);
        char c[32];
        record("hipEventCreateWithFlags(%u) -> %s", flags, handle_name(*e, c, sizeof c));
    } else {
        record("hipEventCreateWithFlags(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

hipError_t hipEventRecord(hipEvent_t e, hipStream_t s) {
    ENTER("hipEventRecord");
    char c[32], d[32];
    record("hipEventRecord(%s, %s)", handle_name(e, c, sizeof c), handle_name(s, d, sizeof d));
    LEAVE();
}

hipError_t hipEventDestroy(hipEvent_t e) {
    ENTER("hipEventDestroy");
    char c[32];
    record("hipEventDestroy(%s)", handle_name(e, c, sizeof c));
    forget_handle(e);
    LEAVE();
}
