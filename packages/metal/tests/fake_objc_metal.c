/* A fake of the Objective-C runtime and of Metal, for dlbind-metal's tests off macOS. It is no Metal:
 * it exports the functions spec/backends/metal.toml declares (objc_getClass, sel_registerName,
 * objc_msgSend, MTLCreateSystemDefaultDevice, MTLCopyAllDevices) and answers the messages dlbind-metal
 * sends with objects kept in host memory, so that the code paths of dlbind_metal (probe, buffers,
 * contents + byte_offset, blits, device ids, releases) run and are checked on Linux. Loaded through
 * DLBIND_METAL_LIBRARY. Every message is recorded ("log"); fake_set configures it.
 *
 * objc_msgSend is variadic here and called through fixed-argument function pointers, as dlbind-metal
 * calls the real one: on x86-64 and AArch64 Linux integer and pointer arguments travel the same way in
 * both conventions (Apple's arm64 is where they differ, which is why dlbind-metal casts).
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum kind { DEVICE = 1, BUFFER, ARRAY, QUEUE, COMMAND, ENCODER, POOL, CLASS, STRING };

typedef struct obj {
    int kind;
    int refs;
    struct obj *device;      /* BUFFER, QUEUE: its device; COMMAND, ENCODER: the queue's */
    unsigned char *bytes;    /* BUFFER: its storage */
    unsigned long length;    /* BUFFER */
    unsigned long mode;      /* BUFFER: MTLStorageMode */
    unsigned long index;     /* DEVICE: registryID */
    const char *text;        /* STRING */
} obj;

static obj devices[4];
static obj names[4];
static obj pool_class = {CLASS, 1, 0, 0, 0, 0, 0, 0};
static long n_devices = 1;
static long live_buffers = 0;
static long fail_blit = 0;
static char log_text[1 << 16];

static void record(const char *fmt, ...) {
    size_t used = strlen(log_text);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(log_text + used, sizeof log_text - used, fmt, ap);
    va_end(ap);
    used = strlen(log_text);
    if (used + 1 < sizeof log_text) {
        log_text[used] = '\n';
        log_text[used + 1] = 0;
    }
}

const char *fake_log(void) { return log_text; }
void fake_clear(void) { log_text[0] = 0; }
long fake_live_buffers(void) { return live_buffers; }

int fake_set(const char *key, long value) {
    if (!strcmp(key, "devices")) n_devices = value;
    else if (!strcmp(key, "fail_blit")) fail_blit = value;
    else return -1;
    return 0;
}

static obj *new_obj(int kind) {
    obj *o = calloc(1, sizeof *o);
    o->kind = kind;
    o->refs = 1;
    return o;
}

static void init_devices(void) {
    static const char *device_names[4] = {"Fake GPU 0", "Fake GPU 1", "Fake GPU 2", "Fake GPU 3"};
    for (int i = 0; i < 4; i++) {
        devices[i].kind = DEVICE;
        devices[i].refs = 1;
        devices[i].index = 0x1000 + (unsigned long)i;
        names[i].kind = STRING;
        names[i].text = device_names[i];
    }
}

void *objc_getClass(const char *name) {
    return strcmp(name, "NSAutoreleasePool") ? NULL : &pool_class;
}

void *sel_registerName(const char *name) { return strdup(name); } /* compared by text below */

void *MTLCreateSystemDefaultDevice(void) {
    init_devices();
    record("MTLCreateSystemDefaultDevice");
    return n_devices ? &devices[0] : NULL;
}

void *MTLCopyAllDevices(void) {
    init_devices();
    record("MTLCopyAllDevices");
    obj *a = new_obj(ARRAY);
    a->length = (unsigned long)n_devices;
    return a;
}

static obj *new_buffer(obj *device, unsigned long length, unsigned long options, const void *bytes) {
    obj *b = new_obj(BUFFER);
    b->device = device;
    b->length = length;
    b->mode = (options >> 4) & 0xF;
    b->bytes = calloc(length ? length : 1, 1);
    if (bytes) memcpy(b->bytes, bytes, length);
    live_buffers++;
    return b;
}

uintptr_t objc_msgSend(void *self, const char *sel, ...) {
    obj *o = self;
    va_list ap;
    va_start(ap, sel);
    uintptr_t out = 0;
    if (!strcmp(sel, "alloc") && o == &pool_class) out = (uintptr_t)new_obj(POOL);
    else if (!strcmp(sel, "init")) out = (uintptr_t)o;
    else if (!strcmp(sel, "drain")) free(o);
    else if (!strcmp(sel, "retain")) { o->refs++; out = (uintptr_t)o; }
    else if (!strcmp(sel, "release")) {
        record("release %s", o->kind == BUFFER ? "buffer" : o->kind == DEVICE ? "device" : "object");
        if (o->kind != DEVICE && --o->refs == 0) {
            if (o->kind == BUFFER) { free(o->bytes); live_buffers--; }
            free(o);
        }
    }
    else if (!strcmp(sel, "count")) out = o->length;
    else if (!strcmp(sel, "objectAtIndex:")) out = (uintptr_t)&devices[va_arg(ap, unsigned long)];
    else if (!strcmp(sel, "name")) out = (uintptr_t)&names[o - devices];
    else if (!strcmp(sel, "UTF8String")) out = (uintptr_t)o->text;
    else if (!strcmp(sel, "registryID")) out = o->index;
    else if (!strcmp(sel, "newBufferWithLength:options:")) {
        unsigned long length = va_arg(ap, unsigned long), options = va_arg(ap, unsigned long);
        record("newBufferWithLength:%lu options:%lu on %s", length, options, names[o - devices].text);
        out = (uintptr_t)new_buffer(o, length, options, NULL);
    }
    else if (!strcmp(sel, "newBufferWithBytes:length:options:")) {
        const void *bytes = va_arg(ap, const void *);
        unsigned long length = va_arg(ap, unsigned long), options = va_arg(ap, unsigned long);
        record("newBufferWithBytes:length:%lu options:%lu on %s", length, options, names[o - devices].text);
        out = (uintptr_t)(options >> 4 == 2 ? NULL : new_buffer(o, length, options, bytes)); /* private: nil */
    }
    else if (!strcmp(sel, "contents")) out = o->mode == 2 ? 0 : (uintptr_t)o->bytes; /* private: NULL */
    else if (!strcmp(sel, "length")) out = o->length;
    else if (!strcmp(sel, "storageMode")) out = o->mode;
    else if (!strcmp(sel, "device")) out = (uintptr_t)o->device;
    else if (!strcmp(sel, "newCommandQueue")) { obj *q = new_obj(QUEUE); q->device = o; out = (uintptr_t)q; }
    else if (!strcmp(sel, "commandBuffer")) { obj *c = new_obj(COMMAND); c->device = o->device; out = (uintptr_t)c; }
    else if (!strcmp(sel, "blitCommandEncoder")) { obj *e = new_obj(ENCODER); e->device = o->device; out = (uintptr_t)e; }
    else if (!strcmp(sel, "copyFromBuffer:sourceOffset:toBuffer:destinationOffset:size:")) {
        obj *src = va_arg(ap, obj *);
        unsigned long so = va_arg(ap, unsigned long);
        obj *dst = va_arg(ap, obj *);
        unsigned long dof = va_arg(ap, unsigned long), n = va_arg(ap, unsigned long);
        record("blit %lu bytes from offset %lu to offset %lu", n, so, dof);
        /* macOS: both offsets and the size must be multiples of 4 (the Metal validation layer asserts) */
        if ((so | dof | n) % 4 != 0) fail_blit = 1;
        else if (so + n <= src->length && dof + n <= dst->length) memcpy(dst->bytes + dof, src->bytes + so, n);
        else fail_blit = 1;
    }
    else if (!strcmp(sel, "synchronizeResource:")) {
        obj *b = va_arg(ap, obj *);
        record("synchronizeResource: a buffer of %lu bytes", b->length);
    }
    else if (!strcmp(sel, "endEncoding")) free(o);
    else if (!strcmp(sel, "commit") || !strcmp(sel, "waitUntilCompleted")) record("%s", sel);
    else if (!strcmp(sel, "status")) { out = fail_blit ? 5 : 4; fail_blit = 0; free(o); }
    else { fprintf(stderr, "fake Metal: unknown message %s\n", sel); abort(); }
    va_end(ap);
    return out;
}
