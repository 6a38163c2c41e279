/* copy_strided: the compact row-major copy of strided host memory behind every copy dlbind makes
 * (Tensor.copy, __dlpack__(copy=True), the bridges of dlbind.convert). dlbind.export.copy_host checks
 * the arguments (host memory, byte sizes in int64) and calls this with byte strides. */
#include "fastpath.h"

#include <string.h>

#define DLBIND_COPY_MAX_NDIM 64

/* dims/strides after merging neighbours that are contiguous with each other; returns the new ndim */
static int dlbind_coalesce(int ndim, int64_t *shape, int64_t *strides) {
    int out = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 1) continue; /* a dimension of one never moves the pointer */
        if (out > 0 && strides[out - 1] == strides[i] * shape[i]) {
            shape[out - 1] *= shape[i];
            strides[out - 1] = strides[i];
        } else {
            shape[out] = shape[i];
            strides[out] = strides[i];
            out++;
        }
    }
    return out;
}

/* one innermost row: n items of `item` bytes, `step` bytes apart in the source, packed in dst */
static void dlbind_copy_row(char *dst, const char *src, int64_t n, int64_t step, int64_t item) {
    if (step == item) {
        memcpy(dst, src, (size_t)(n * item));
        return;
    }
    if (step == -item && (item == 2 || item == 4 || item == 8) &&
        ((uintptr_t)dst | (uintptr_t)(src - (n - 1) * item)) % (uintptr_t)item == 0) {
        /* aligned elements in reverse: a loop the compiler vectorises; dst[i] = last[n - 1 - i] */
        const char *last = src - (n - 1) * item; /* the lowest address */
        if (item == 2) {
            uint16_t *d = (uint16_t *)dst;
            const uint16_t *s = (const uint16_t *)last;
            for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];
        } else if (item == 4) {
            uint32_t *d = (uint32_t *)dst;
            const uint32_t *s = (const uint32_t *)last;
            for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];
        } else {
            uint64_t *d = (uint64_t *)dst;
            const uint64_t *s = (const uint64_t *)last;
            for (int64_t i = 0; i < n; i++) d[i] = s[n - 1 - i];
        }
        return;
    }
/* a gather of items of a size the compiler knows: single loads and stores */
#define DLBIND_GATHER(size)                                                                     \
    case size:                                                                                  \
        for (int64_t i = 0; i < n; i++) memcpy(dst + (size) * i, src + i * step, (size));      \
        break;
    switch (item) {
        DLBIND_GATHER(1)
        DLBIND_GATHER(2)
        DLBIND_GATHER(4)
        DLBIND_GATHER(8)
        DLBIND_GATHER(16)
    default:
        for (int64_t i = 0; i < n; i++) memcpy(dst + item * i, src + i * step, (size_t)item);
    }
#undef DLBIND_GATHER
}

/* Copies every element of the strided source into dst in row-major order. A 2-d block whose inner
 * source stride is not the item (a transpose) is walked in tiles, so both sides stay in cache. */
static void dlbind_copy_nd(char *dst, const char *src, int ndim, const int64_t *shape, const int64_t *strides,
                           int64_t item) {
    if (ndim == 0) {
        memcpy(dst, src, (size_t)item);
        return;
    }
    if (ndim == 1) {
        dlbind_copy_row(dst, src, shape[0], strides[0], item);
        return;
    }
    int64_t rows = shape[ndim - 2], cols = shape[ndim - 1];
    int64_t rstep = strides[ndim - 2], cstep = strides[ndim - 1];
    int64_t outer = 1;
    for (int i = 0; i < ndim - 2; i++) outer *= shape[i];
    int64_t index[DLBIND_COPY_MAX_NDIM] = {0};
    int64_t block = rows * cols * item;
    const int tiled = cstep != item && cstep != -item && rows >= 16 && cols >= 16; /* reversed rows: see copy_row */
    for (int64_t o = 0; o < outer; o++) {
        const char *s = src;
        for (int i = 0; i < ndim - 2; i++) s += index[i] * strides[i];
        if (tiled) {
            const int64_t T = 32;
            for (int64_t r0 = 0; r0 < rows; r0 += T)
                for (int64_t c0 = 0; c0 < cols; c0 += T) {
                    int64_t r1 = r0 + T < rows ? r0 + T : rows, c1 = c0 + T < cols ? c0 + T : cols;
                    for (int64_t r = r0; r < r1; r++)
                        dlbind_copy_row(dst + (r * cols + c0) * item, s + r * rstep + c0 * cstep, c1 - c0, cstep, item);
                }
        } else {
            for (int64_t r = 0; r < rows; r++) dlbind_copy_row(dst + r * cols * item, s + r * rstep, cols, cstep, item);
        }
        dst += block;
        for (int i = ndim - 3; i >= 0; i--) {
            if (++index[i] < shape[i]) break;
            index[i] = 0;
        }
    }
}

/* The compact row-major copy of the strided source (byte strides) into dst; the caller guarantees host
 * memory, no overlap, ndim <= 64 and that every address the strides reach is the source's. */
void dlbind_copy_strided(char *dst, const char *src, int ndim, const int64_t *shape, const int64_t *byte_strides,
                         int64_t item) {
    int64_t dims[DLBIND_COPY_MAX_NDIM], steps[DLBIND_COPY_MAX_NDIM];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0) return;
        dims[i] = shape[i];
        steps[i] = byte_strides[i];
    }
    int n = dlbind_coalesce(ndim, dims, steps);
    if (n == 1 && steps[0] == item)
        memcpy(dst, src, (size_t)(dims[0] * item));
    else
        dlbind_copy_nd(dst, src, n, dims, steps, item);
}

/* copy_strided(dst, src, shape, byte_strides, itemsize): dst and src addresses (ints); the caller
 * guarantees host memory, no overlap, and that every address the strides reach is the source's. */
PyObject *dlbind_py_copy_strided(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 5 || !PyTuple_Check(args[2]) || !PyTuple_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "copy_strided(dst, src, shape: tuple, byte_strides: tuple, itemsize)");
        return NULL;
    }
    char *dst = (char *)PyLong_AsVoidPtr(args[0]);
    if (dst == NULL && PyErr_Occurred()) return NULL;
    const char *src = (const char *)PyLong_AsVoidPtr(args[1]);
    if (src == NULL && PyErr_Occurred()) return NULL;
    int64_t item = PyLong_AsLongLong(args[4]);
    if (item == -1 && PyErr_Occurred()) return NULL;
    Py_ssize_t ndim = PyTuple_GET_SIZE(args[2]);
    if (ndim != PyTuple_GET_SIZE(args[3]) || ndim > DLBIND_COPY_MAX_NDIM || item <= 0) {
        PyErr_SetString(PyExc_ValueError, "copy_strided: shape and strides differ in length, or too many dims");
        return NULL;
    }
    int64_t shape[DLBIND_COPY_MAX_NDIM], strides[DLBIND_COPY_MAX_NDIM];
    for (Py_ssize_t i = 0; i < ndim; i++) {
        shape[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[2], i));
        strides[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(args[3], i));
        if (PyErr_Occurred()) return NULL;
        if (shape[i] == 0) Py_RETURN_NONE;
        if (shape[i] < 0) {
            PyErr_SetString(PyExc_ValueError, "copy_strided: negative dimension");
            return NULL;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    dlbind_copy_strided(dst, src, (int)ndim, shape, strides, item);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}
