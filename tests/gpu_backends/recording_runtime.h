/* The body of the recording fakes of the GPU runtimes (recording_cudart.c for CUDA, recording_amdhip64.c for
   HIP): everything the two runtimes have in common, under the vendor's symbol names.

   The including file defines, before #include "recording_runtime.h":
     RT_PREFIX                the symbols' prefix, a bare token: cuda, hip (RT(Malloc) is cudaMalloc);
     RT_RUNTIME_VERSION       the default runtime and driver version;
     RT_UNKNOWN_ERROR         the name of a code the error table does not list;
   and, after the include, whatever only its runtime has (pinned allocations, pointer attributes), and
     static const char *special_stream(const void *p): the name of the runtime's special stream handles
     (NULL for others), declared here.

   The log, the controls (recording_log, recording_clear, recording_set, recording_fail), the allocation and
   handle tables, and the runtime calls both runtimes have with the same signature are here; the error table
   (`errors`) and the vendor's type names come from the including file. See recording_cudart.c for what the
   fake is and is not. */

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

static RT(Error_t) allocate(const char *call, void **out, size_t size, int type, char prefix) {
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

static const char *kinds[] = {"HostToHost", "HostToDevice", "DeviceToHost", "DeviceToDevice", "Default"};

RT(Error_t) RT(Memcpy)(void *dst, const void *src, size_t n, int kind) {
    ENTER(RT_NAME(Memcpy));
    char a[48], b[48];
    record(RT_NAME(Memcpy) "(%s, %s, %zu, %s)", pointer_name(dst, a, sizeof a), pointer_name(src, b, sizeof b), n,
           kind >= 0 && kind <= 4 ? kinds[kind] : "?");
    if (!code_) memmove(dst, src, n);
    LEAVE();
}

RT(Error_t) RT(MemcpyAsync)(void *dst, const void *src, size_t n, int kind, RT(Stream_t) s) {
    ENTER(RT_NAME(MemcpyAsync));
    char a[48], b[48], c[32];
    record(RT_NAME(MemcpyAsync) "(%s, %s, %zu, %s, %s)", pointer_name(dst, a, sizeof a),
           pointer_name(src, b, sizeof b), n, kind >= 0 && kind <= 4 ? kinds[kind] : "?", handle_name(s, c, sizeof c));
    if (!code_) memmove(dst, src, n);
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

RT(Error_t) RT(StreamCreateWithFlags)(RT(Stream_t) *s, unsigned int flags) {
    ENTER(RT_NAME(StreamCreateWithFlags));
    char c[32];
    if (!code_) {
        *s = new_handle('S', ++nstreams);
        record(RT_NAME(StreamCreateWithFlags) "(%u) -> %s", flags, handle_name(*s, c, sizeof c));
    } else {
        record(RT_NAME(StreamCreateWithFlags) "(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

RT(Error_t) RT(StreamDestroy)(RT(Stream_t) s) {
    ENTER(RT_NAME(StreamDestroy));
    char c[32];
    record(RT_NAME(StreamDestroy) "(%s)", handle_name(s, c, sizeof c));
    forget_handle(s);
    LEAVE();
}

RT(Error_t) RT(StreamSynchronize)(RT(Stream_t) s) {
    ENTER(RT_NAME(StreamSynchronize));
    char c[32];
    record(RT_NAME(StreamSynchronize) "(%s)", handle_name(s, c, sizeof c));
    LEAVE();
}

RT(Error_t) RT(StreamWaitEvent)(RT(Stream_t) s, RT(Event_t) e, unsigned int flags) {
    ENTER(RT_NAME(StreamWaitEvent));
    char c[32], d[32];
    record(RT_NAME(StreamWaitEvent) "(%s, %s, %u)", handle_name(s, c, sizeof c), handle_name(e, d, sizeof d), flags);
    LEAVE();
}

RT(Error_t) RT(EventCreateWithFlags)(RT(Event_t) *e, unsigned int flags) {
    ENTER(RT_NAME(EventCreateWithFlags));
    if (!code_) {
        *e = new_handle('E', ++nevents);
        char c[32];
        record(RT_NAME(EventCreateWithFlags) "(%u) -> %s", flags, handle_name(*e, c, sizeof c));
    } else {
        record(RT_NAME(EventCreateWithFlags) "(%u) -> error %d", flags, code_);
    }
    LEAVE();
}

RT(Error_t) RT(EventRecord)(RT(Event_t) e, RT(Stream_t) s) {
    ENTER(RT_NAME(EventRecord));
    char c[32], d[32];
    record(RT_NAME(EventRecord) "(%s, %s)", handle_name(e, c, sizeof c), handle_name(s, d, sizeof d));
    LEAVE();
}

RT(Error_t) RT(EventDestroy)(RT(Event_t) e) {
    ENTER(RT_NAME(EventDestroy));
    char c[32];
    record(RT_NAME(EventDestroy) "(%s)", handle_name(e, c, sizeof c));
    forget_handle(e);
    LEAVE();
}
