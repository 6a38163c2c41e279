/* The body of the recording fakes of the GPU runtimes (recording_cudart.c for CUDA, recording_amdhip64.c for
   HIP): everything the two runtimes have in common, under the vendor's symbol names.

   The including file defines, before #include "recording_runtime.h":
     RT_PREFIX                the symbols' prefix, a bare token: cuda, hip (RT(Malloc) is cudaMalloc);
     RT_RUNTIME_VERSION       the default runtime and driver version;
     RT_UNKNOWN_ERROR         the name of a code the error table does not list;
   and, after the include, whatever only its runtime has (pinned allocations, pointer attributes), and
     static const char *special_stream(const void *p): the name of the runtime's special stream handles
     (NULL for others), declared here.

   The log, the controls (recording_log, recording_clear, recording_set, recording_fail, recording_fail_times,
   recording_fail_after, recording_live), the allocation and handle tables, and the runtime calls both runtimes have with the same
   signature are here; the error table (`errors`, which must list the codes RT_INVALID_VALUE,
   RT_INVALID_PITCH and RT_INVALID_DIRECTION, the same in both runtimes, defined below) and the vendor's type
   names come from the including file.
   See recording_cudart.c for what the fake is and is not.

   Copies check what the real runtime checks and what would corrupt the fake's own memory: a range that starts
   in an allocation must end in it, and one that starts outside every allocation must not reach into one
   (invalid value); a direction must match the memory (HostToDevice into device or managed memory from
   anything but device memory, and so on: invalid memcpy direction); a 2-D copy's pitches must be at least
   its width and, with more than one row, at most 2**31 - 1 (invalid pitch value). */

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RT_CAT_(a, b) a##b
#define RT_CAT(a, b) RT_CAT_(a, b)
#define RT(name) RT_CAT(RT_PREFIX, name)
#define RT_STR_(x) #x
#define RT_STR(x) RT_STR_(x)
#define RT_NAME(name) RT_STR(RT(name))

/* the error codes the copies return: invalid value, invalid pitch value, invalid memcpy direction (both runtimes
   number them alike) */
#define RT_INVALID_VALUE 1
#define RT_INVALID_PITCH 12
#define RT_INVALID_DIRECTION 21

typedef int RT(Error_t);
typedef void *RT(Stream_t);
typedef void *RT(Event_t);

enum { TYPE_UNREGISTERED = 0, TYPE_HOST = 1, TYPE_DEVICE = 2, TYPE_MANAGED = 3 };

static const char *special_stream(const void *p);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 16];
static size_t log_len;
static long cfg_devices = 1, cfg_runtime = RT_RUNTIME_VERSION, cfg_driver = RT_RUNTIME_VERSION, cfg_count_error = 0;
static char fail_call[64];
static int fail_code, fail_left, fail_skip;
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
    if (fail_left > 0 && strcmp(call, fail_call) == 0) {
        if (fail_skip > 0) { /* this one succeeds: a later one fails */
            fail_skip--;
            return 0;
        }
        fail_left--;
        return fail_code;
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

/* The next `times` calls of `call` after the next `skip` (which succeed) return `code`. */
void recording_fail_after(const char *call, int code, int times, int skip) {
    pthread_mutex_lock(&lock);
    snprintf(fail_call, sizeof fail_call, "%s", call);
    fail_code = code;
    fail_left = code ? times : 0;
    fail_skip = skip;
    pthread_mutex_unlock(&lock);
}

void recording_fail_times(const char *call, int code, int times) { recording_fail_after(call, code, times, 0); }

void recording_fail(const char *call, int code) { recording_fail_times(call, code, 1); }

/* The allocations not freed yet whose log names start with `kind` ('D', 'H', 'M'): their number, and their
   bytes through `bytes` (when not NULL). */
long recording_live(char kind, long *bytes) {
    long n = 0, total = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].base && blocks[i].name[0] == kind) {
            n++;
            total += (long)blocks[i].size;
        }
    pthread_mutex_unlock(&lock);
    if (bytes) *bytes = total;
    return n;
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
    const char *special = special_stream(p);
    if (special) return special;
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

const char *RT(GetErrorName)(RT(Error_t) code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].name;
    return RT_UNKNOWN_ERROR;
}

const char *RT(GetErrorString)(RT(Error_t) code) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == code) return errors[i].text;
    return "unknown error";
}

#define ENTER(call) pthread_mutex_lock(&lock); int code_ = injected(call)
#define LEAVE() pthread_mutex_unlock(&lock); return code_

RT(Error_t) RT(RuntimeGetVersion)(int *v) {
    ENTER(RT_NAME(RuntimeGetVersion));
    record(RT_NAME(RuntimeGetVersion) "()");
    *v = (int)cfg_runtime;
    LEAVE();
}

RT(Error_t) RT(DriverGetVersion)(int *v) {
    ENTER(RT_NAME(DriverGetVersion));
    record(RT_NAME(DriverGetVersion) "()");
    *v = (int)cfg_driver;
    LEAVE();
}

RT(Error_t) RT(GetDeviceCount)(int *count) {
    ENTER(RT_NAME(GetDeviceCount));
    record(RT_NAME(GetDeviceCount) "()");
    if (!code_) code_ = (int)cfg_count_error;
    *count = code_ ? 0 : (int)cfg_devices;
    LEAVE();
}

RT(Error_t) RT(GetDevice)(int *device) {
    ENTER(RT_NAME(GetDevice));
    record(RT_NAME(GetDevice) "() -> %d", current_device);
    *device = current_device;
    LEAVE();
}

RT(Error_t) RT(SetDevice)(int device) {
    ENTER(RT_NAME(SetDevice));
    record(RT_NAME(SetDevice) "(%d)", device);
    if (!code_ && (device < 0 || device >= cfg_devices)) code_ = 101;
    if (!code_) current_device = device;
    LEAVE();
}

/* -- memory ---------------------------------------------------------------------------------------------- */

/* `flags`: the allocation's flags as the log shows them after the size (", 1"), or "". */
static RT(Error_t) allocate_flags(const char *call, void **out, size_t size, int type, char prefix, const char *flags) {
    ENTER(call);
    if (!code_) {
        int slot = 0;
        while (slot < nblocks && blocks[slot].base) slot++; /* a freed slot, or the next one */
        if (slot == nblocks && nblocks < 4096) nblocks++;
        struct block *b = &blocks[slot < 4096 ? slot : 4095];
        b->base = malloc(size ? size : 1);
        b->size = size;
        b->type = type;
        b->device = current_device;
        snprintf(b->name, sizeof b->name, "%c%d", prefix, counters[type]++);
        *out = b->base;
        record("%s(%zu%s) -> %s on device %d", call, size, flags, b->name, current_device);
    } else {
        record("%s(%zu%s) -> error %d", call, size, flags, code_);
    }
    LEAVE();
}

static RT(Error_t) allocate(const char *call, void **out, size_t size, int type, char prefix) {
    return allocate_flags(call, out, size, type, prefix, "");
}

/* under lock, in the pointer-attribute calls (cudaPointerGetAttributes, hipPointerGetAttributes): log `call` on
   `p`, zero the caller's attribute struct (`size` bytes) and return the allocation `p` is in, or NULL */
static struct block *attributes_of(const char *call, void *attrs, size_t size, const void *p) {
    char a[48];
    record("%s(%s)", call, pointer_name(p, a, sizeof a));
    memset(attrs, 0, size);
    return find_block(p);
}

/* the fields both runtimes' attribute structs have: the device, and the pointer as the device and the host see it */
#define SET_POINTERS(attrs, b, p)                                                                                     \
    ((attrs)->device = (b)->device, (attrs)->devicePointer = (void *)(p),                                           \
     (attrs)->hostPointer = (b)->type == TYPE_DEVICE ? NULL : (void *)(p))

/* pinned host memory allocated with flags (cudaHostAlloc, hipHostMalloc): the log shows them after the size */
static RT(Error_t) allocate_pinned(const char *call, void **out, size_t size, unsigned int flags) {
    char shown[16];
    snprintf(shown, sizeof shown, ", %u", flags);
    return allocate_flags(call, out, size, TYPE_HOST, 'H', shown);
}

RT(Error_t) RT(Malloc)(void **p, size_t size) { return allocate(RT_NAME(Malloc), p, size, TYPE_DEVICE, 'D'); }

RT(Error_t) RT(MallocManaged)(void **p, size_t size, unsigned int flags) {
    (void)flags;
    return allocate(RT_NAME(MallocManaged), p, size, TYPE_MANAGED, 'M');
}

static RT(Error_t) release(const char *call, void *p) {
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

RT(Error_t) RT(Free)(void *p) { return release(RT_NAME(Free), p); }

/* the largest pitch a 2-D copy takes (cudaDeviceProp::memPitch, hipDeviceProp_t::memPitch on today's GPUs) */
#define RT_MAX_PITCH ((size_t)0x7fffffff)

static const char *kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};

/* under lock: `rows` rows of `width` bytes, `pitch` apart from `p`, stay in the allocation `p` is in; a range
   that starts outside every allocation (the caller's own memory) must not reach into one */
static int in_bounds(const void *p, size_t width, size_t rows, size_t pitch) {
    if (!rows || !width) return 1;
    const char *c = p;
    size_t length = (rows - 1) * pitch + width;
    struct block *b = find_block(p);
    if (b) return (size_t)(c - b->base) + length <= b->size;
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].base && c < blocks[i].base && c + length > blocks[i].base) return 0;
    return 1;
}

/* under lock: the copy's direction says where each side is, as the runtime checks it */
static int direction_ok(const void *dst, const void *src, int kind) {
    struct block *d = find_block(dst), *s = find_block(src);
    int d_dev = d && d->type != TYPE_HOST, s_dev = s && s->type != TYPE_HOST; /* device or managed */
    int d_host = !d || d->type != TYPE_DEVICE, s_host = !s || s->type != TYPE_DEVICE; /* host, pinned, managed */
    switch (kind) {
    case 0: return d_host && s_host;
    case 1: return d_dev && s_host;
    case 2: return d_host && s_dev;
    case 3: return d_dev && s_dev;
    case 4: return 1;
    default: return 0;
    }
}

static int copy_checked(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t rows,
                        int kind) { /* under lock: the error code, or 0 after copying */
    if (dpitch < width || spitch < width) return RT_INVALID_PITCH;
    if (rows > 1 && (dpitch > RT_MAX_PITCH || spitch > RT_MAX_PITCH)) return RT_INVALID_PITCH;
    if (!direction_ok(dst, src, kind)) return RT_INVALID_DIRECTION;
    if (!in_bounds(dst, width, rows, dpitch) || !in_bounds(src, width, rows, spitch)) return RT_INVALID_VALUE;
    for (size_t r = 0; r < rows; r++) memmove((char *)dst + r * dpitch, (const char *)src + r * spitch, width);
    return 0;
}

RT(Error_t) RT(Memcpy)(void *dst, const void *src, size_t n, int kind) {
    ENTER(RT_NAME(Memcpy));
    char a[48], b[48];
    record(RT_NAME(Memcpy) "(%s, %s, %zu, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b), n,
           kind >= 0 && kind <= 4 ? kinds[kind] : "?");
    if (!code_) code_ = copy_checked(dst, n, src, n, n, 1, kind);
    LEAVE();
}

RT(Error_t) RT(MemcpyAsync)(void *dst, const void *src, size_t n, int kind, RT(Stream_t) s) {
    ENTER(RT_NAME(MemcpyAsync));
    char a[48], b[48], c[32];
    record(RT_NAME(MemcpyAsync) "(%s, %s, %zu, %s, %s)", pointer_name(dst, a, sizeof a),
           pointer_name(src, b, sizeof b), n, kind >= 0 && kind <= 4 ? kinds[kind] : "?", handle_name(s, c, sizeof c));
    if (!code_) code_ = copy_checked(dst, n, src, n, n, 1, kind);
    LEAVE();
}

RT(Error_t) RT(Memcpy2DAsync)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              int kind, RT(Stream_t) s) {
    ENTER(RT_NAME(Memcpy2DAsync));
    char a[48], b[48], c[32];
    record(RT_NAME(Memcpy2DAsync) "(%s, %zu, %s, %zu, %zu, %zu, %s, %s)", pointer_name(dst, a, sizeof a), dpitch,
           pointer_name(src, b, sizeof b), spitch, width, height, kind >= 0 && kind <= 4 ? kinds[kind] : "?",
           handle_name(s, c, sizeof c));
    if (!code_) code_ = copy_checked(dst, dpitch, src, spitch, width, height, kind);
    LEAVE();
}

RT(Error_t) RT(MemsetAsync)(void *dst, int value, size_t n, RT(Stream_t) s) {
    ENTER(RT_NAME(MemsetAsync));
    char a[48], c[32];
    record(RT_NAME(MemsetAsync) "(%s, %d, %zu, %s)", pointer_name(dst, a, sizeof a), value, n,
           handle_name(s, c, sizeof c));
    if (!code_) memset(dst, value, n);
    LEAVE();
}

/* -- streams and events ---------------------------------------------------------------------------------- */

/* StreamCreateWithFlags, EventCreateWithFlags: a new handle, `prefix` and the next of `*counter` in the log */
static RT(Error_t) create_handle(const char *call, void **out, unsigned int flags, char prefix, int *counter) {
    ENTER(call);
    char c[32];
    if (!code_) {
        *out = new_handle(prefix, ++*counter);
        record("%s(%u) -> %s", call, flags, handle_name(*out, c, sizeof c));
    } else {
        record("%s(%u) -> error %d", call, flags, code_);
    }
    LEAVE();
}

/* the calls on one handle (StreamSynchronize, EventDestroy, ...): logged by name; `forget` for the destroying ones */
static RT(Error_t) on_handle(const char *call, void *handle, int forget) {
    ENTER(call);
    char c[32];
    record("%s(%s)", call, handle_name(handle, c, sizeof c));
    if (forget) forget_handle(handle);
    LEAVE();
}

RT(Error_t) RT(StreamCreateWithFlags)(RT(Stream_t) *s, unsigned int flags) {
    return create_handle(RT_NAME(StreamCreateWithFlags), s, flags, 'S', &nstreams);
}

RT(Error_t) RT(StreamDestroy)(RT(Stream_t) s) { return on_handle(RT_NAME(StreamDestroy), s, 1); }

RT(Error_t) RT(StreamSynchronize)(RT(Stream_t) s) { return on_handle(RT_NAME(StreamSynchronize), s, 0); }

RT(Error_t) RT(StreamWaitEvent)(RT(Stream_t) s, RT(Event_t) e, unsigned int flags) {
    ENTER(RT_NAME(StreamWaitEvent));
    char c[32], d[32];
    record(RT_NAME(StreamWaitEvent) "(%s, %s, %u)", handle_name(s, c, sizeof c), handle_name(e, d, sizeof d), flags);
    LEAVE();
}

RT(Error_t) RT(EventCreateWithFlags)(RT(Event_t) *e, unsigned int flags) {
    return create_handle(RT_NAME(EventCreateWithFlags), e, flags, 'E', &nevents);
}

RT(Error_t) RT(EventRecord)(RT(Event_t) e, RT(Stream_t) s) {
    ENTER(RT_NAME(EventRecord));
    char c[32], d[32];
    record(RT_NAME(EventRecord) "(%s, %s)", handle_name(e, c, sizeof c), handle_name(s, d, sizeof d));
    LEAVE();
}

RT(Error_t) RT(EventSynchronize)(RT(Event_t) e) { return on_handle(RT_NAME(EventSynchronize), e, 0); }

RT(Error_t) RT(EventDestroy)(RT(Event_t) e) { return on_handle(RT_NAME(EventDestroy), e, 1); }
