/* BufferExporter: what dlbind.asdlpack returns for objects with the buffer protocol (registered as
 * a dlbind.Exporter, and named so: its type's name is dlbind.Exporter), and asdlpack itself. The plain
 * __dlpack__ call is answered here; any other keyword goes to the Python Exporter of the same object (made on
 * first need). */
#include "fastpath.h"

typedef struct {
    PyObject_HEAD
    Py_buffer view; /* a buffer view of the source, or (held) only view.obj and view.buf, by reference */
    int held;       /* 1: view.obj is a plain reference (an exact numpy.ndarray read from its struct) */
    int readonly;
    int ndim;
    DLDataType dtype;
    int64_t *dims;  /* shape then strides, in elements: inline_dims, or allocated beyond DLBIND_INLINE_NDIM */
    PyObject *slow; /* the Python Exporter for unusual keywords, made on first need */
    int64_t inline_dims[2 * DLBIND_INLINE_NDIM];
} dlbind_exporter;

/* Freed exporters are kept for the next asdlpack (GIL-protected, like every Python object). An
 * exporter on this list is untracked by the garbage collector; reuse tracks it again. */
#define DLBIND_EXPORTER_FREE_MAX 16
static PyObject *dlbind_exporter_kept[DLBIND_EXPORTER_FREE_MAX];
static dlbind_free_list dlbind_exporters = {dlbind_exporter_kept, 0, DLBIND_EXPORTER_FREE_MAX};

/* Garbage collection: the exporter owns a reference to its source object (view.obj, through the
 * buffer view) and to the Python Exporter made for unusual keywords (slow), so
 * `b.e = asdlpack(b)` (b a bytearray subclass) is a cycle the collector must see.
 *
 * Every capsule struct exported from here holds its own reference to the exporter (manager_ctx),
 * so while a consumer may still read the data, the exporter stays alive and its view held. The
 * collector clears an exporter only when everything referring to it is unreachable too (the
 * consumers of its structs included: a struct the collector cannot see inside keeps the exporter
 * reachable), so releasing the view in tp_clear cannot pull memory from under a live consumer.
 * The view is released exactly once: tp_clear or dealloc, whichever comes first (PyBuffer_Release
 * sets view.obj to NULL). */
static int dlbind_exporter_traverse(dlbind_exporter *self, visitproc visit, void *arg) {
    Py_VISIT(self->view.obj);
    Py_VISIT(self->slow);
    return 0;
}

static int dlbind_exporter_clear(dlbind_exporter *self) {
    Py_CLEAR(self->slow);
    if (self->held)
        Py_CLEAR(self->view.obj);
    else if (self->view.obj != NULL)
        PyBuffer_Release(&self->view);
    return 0;
}

/* numpy.ndarray, read from its struct instead of through the buffer protocol (which builds a format
 * string and caches a buffer-info record on every call: two thirds of an exchange's cost).
 *
 * The leading fields of numpy's array and descriptor structs are numpy's public C ABI, the same in
 * numpy 1.x and 2.x (what its PyArray_DATA, PyArray_NDIM, PyArray_DESCR and PyDataType_TYPE macros
 * read); the descriptor's element size moved in 2.0 and is not read. dlbind does not build against
 * numpy's headers, so nothing here is trusted before it is checked: the first exact numpy.ndarray the
 * buffer protocol exports is read both ways, and only if the two agree field by field is the type
 * read from its struct from then on (else never). The array is held by a reference, as numpy's own
 * __dlpack__ holds it. Only builtin numeric dtypes (numpy's type numbers 0-16 and 23, float16) and
 * native byte order are read so; anything else takes the buffer protocol, as before. */
typedef struct {
    PyObject_HEAD
    char *data;
    int nd;
    Py_ssize_t *dimensions;
    Py_ssize_t *strides;
    PyObject *base;
    PyObject *descr;
    int flags;
} dlbind_np_array;

typedef struct {
    PyObject_HEAD
    PyTypeObject *typeobj;
    char kind;
    char type;
    char byteorder;
    char flags;
    int type_num;
} dlbind_np_descr;

#define DLBIND_NP_C_CONTIGUOUS 0x0001 /* NPY_ARRAY_C_CONTIGUOUS */
#define DLBIND_NP_F_CONTIGUOUS 0x0002 /* NPY_ARRAY_F_CONTIGUOUS */
#define DLBIND_NP_WRITEABLE 0x0400    /* NPY_ARRAY_WRITEABLE */
#define DLBIND_NP_HALF 23          /* NPY_HALF; 0-16 are bool through complex long double */

static PyTypeObject *dlbind_ndarray_type = NULL; /* set once the probe agreed */
static int dlbind_ndarray_refused = 0;           /* the probe disagreed: the buffer protocol only */

/* The dtype of an ndarray's descriptor, from its type character (the buffer protocol's format
 * character, but for complex), native byte order only. 0: not one this path reads. What each builtin
 * type number reads as is worked out once (the format table is the one source) and kept. */
static struct {
    char known, ok;
    DLDataType dtype;
} dlbind_np_types[DLBIND_NP_HALF + 1];

static int dlbind_np_dtype(const dlbind_np_descr *d, DLDataType *out) {
    int num = d->type_num;
    if (num < 0 || num > DLBIND_NP_HALF || (num > 16 && num < DLBIND_NP_HALF)) return 0;
#if PY_LITTLE_ENDIAN
    if (d->byteorder == '>') return 0;
#else
    if (d->byteorder == '<') return 0;
#endif
    if (!dlbind_np_types[num].known) { /* a builtin type number has one type character */
        char format[3] = {d->type, '\0', '\0'};
        if (d->type == 'F' || d->type == 'D' || d->type == 'G') { /* complex: "Zf", "Zd", "Zg" */
            format[0] = 'Z';
            format[1] = (char)(d->type - 'A' + 'a');
        }
        dlbind_np_types[num].ok = (char)dlbind_format_dtype(format, &dlbind_np_types[num].dtype);
        dlbind_np_types[num].known = 1;
    }
    *out = dlbind_np_types[num].dtype;
    return dlbind_np_types[num].ok;
}

/* Shape and strides (in elements) of an ndarray into self->dims, as numpy's buffer protocol gives them: a
 * C-contiguous array's strides are the compact row-major ones (numpy lets a dimension of length 0 or 1 carry
 * any stride), an F-contiguous one's the compact column-major ones, any other array's its own. 0: not one
 * this path reads. */
static int dlbind_np_dims(const dlbind_np_array *a, DLDataType dtype, int64_t *dims) {
    int64_t itemsize = dtype.bits / 8;
    int nd = a->nd;
    if (nd < 0 || nd > DLBIND_INLINE_NDIM || itemsize <= 0) return 0;
    int64_t *shape = dims, *strides = dims + nd;
    for (int i = 0; i < nd; i++) shape[i] = a->dimensions[i];
    if (a->flags & (DLBIND_NP_C_CONTIGUOUS | DLBIND_NP_F_CONTIGUOUS)) {
        int c = (a->flags & DLBIND_NP_C_CONTIGUOUS) != 0;
        int64_t acc = 1;
        for (int k = 0; k < nd; k++) {
            int i = c ? nd - 1 - k : k;
            strides[i] = acc;
            if (dlbind_mul_overflow(acc, shape[i], &acc)) return 0; /* a zero-length array of vast dimensions */
        }
        return 1;
    }
    for (int i = 0; i < nd; i++) {
        if (a->strides[i] % itemsize) return 0;
        strides[i] = a->strides[i] / itemsize;
    }
    return 1; /* numpy keeps its dimensions non-negative and their product within npy_intp */
}

/* Read an exact ndarray from its struct (the probe agreed). 1: read; 0: not one this path reads. */
static int dlbind_exporter_from_ndarray(dlbind_exporter *self, PyObject *obj, int force_readonly) {
    const dlbind_np_array *a = (const dlbind_np_array *)obj;
    if (!dlbind_np_dtype((const dlbind_np_descr *)a->descr, &self->dtype) || !dlbind_np_dims(a, self->dtype, self->dims) ||
        !dlbind_description_ok(a->data, a->nd, self->dims, self->dims + a->nd, self->dtype))
        return 0; /* as_strided's arrays may reach anywhere: the buffer path, then Python, says what is wrong */
    self->ndim = a->nd;
    self->readonly = !(a->flags & DLBIND_NP_WRITEABLE) || force_readonly;
    self->held = 1;
    self->view.buf = a->data;
    Py_INCREF(obj);
    self->view.obj = obj;
    return 1;
}

/* The first exact numpy.ndarray the buffer protocol exported: does its struct say the same? */
static void dlbind_ndarray_probe(dlbind_exporter *self, PyObject *obj) {
    if (dlbind_ndarray_type != NULL || dlbind_ndarray_refused || strcmp(Py_TYPE(obj)->tp_name, "numpy.ndarray") != 0)
        return;
    const dlbind_np_array *a = (const dlbind_np_array *)obj;
    const Py_buffer *v = &self->view;
    DLDataType dtype;
    int64_t dims[2 * DLBIND_INLINE_NDIM];
    /* wait for an array this path reads */
    if (!dlbind_np_dtype((const dlbind_np_descr *)a->descr, &dtype) || !dlbind_np_dims(a, dtype, dims)) return;
    int same = a->data == v->buf && a->nd == self->ndim && dtype.code == self->dtype.code &&
               dtype.bits == self->dtype.bits && dtype.lanes == self->dtype.lanes &&
               !(a->flags & DLBIND_NP_WRITEABLE) == !!v->readonly;
    for (int i = 0; same && i < 2 * a->nd; i++) same = dims[i] == self->dims[i];
    if (same) { /* the module holds numpy's type for the process's life */
        dlbind_ndarray_type = Py_TYPE(obj);
        Py_INCREF(dlbind_ndarray_type);
    } else {
        dlbind_ndarray_refused = 1;
    }
}

static void dlbind_exporter_dealloc(dlbind_exporter *self) {
    PyObject_GC_UnTrack((PyObject *)self);
    (void)dlbind_exporter_clear(self);
    if (self->dims != self->inline_dims) PyMem_Free(self->dims);
    self->dims = self->inline_dims;
    dlbind_free_list_keep(&dlbind_exporters, (PyObject *)self);
}

/* NULL without an exception: not a buffer this path takes (the caller asks Python, which either
 * exports it or says exactly what is wrong). */
static PyObject *dlbind_exporter_new(PyObject *obj, int force_readonly) {
    if (!PyObject_CheckBuffer(obj)) return NULL;
    dlbind_exporter *self = (dlbind_exporter *)dlbind_free_list_new(&dlbind_exporters, &dlbind_exporter_type);
    if (self == NULL) return NULL;
    /* untracked until every field is set (the buffer call below may run Python code, and a
     * collection) */
    self->dims = self->inline_dims;
    self->slow = NULL;
    self->view.obj = NULL;
    self->held = 0;
    if (Py_TYPE(obj) == dlbind_ndarray_type && dlbind_exporter_from_ndarray(self, obj, force_readonly)) {
        PyObject_GC_Track((PyObject *)self);
        return (PyObject *)self;
    }
    /* a memoryview is held through a view of its own (as Python's memoryview(obj) holds it): the memory stays
     * exported, and the memoryview given can still be released */
    PyObject *source = PyMemoryView_Check(obj) ? PyMemoryView_FromObject(obj) : Py_NewRef(obj);
    int got = source != NULL ? PyObject_GetBuffer(source, &self->view, PyBUF_RECORDS_RO) : -1;
    Py_XDECREF(source); /* the view holds it */
    if (got != 0) {
        PyErr_Clear();
        self->view.obj = NULL;
        Py_DECREF(self);
        return NULL;
    }
    Py_buffer *v = &self->view;
    if (v->suboffsets != NULL || v->ndim < 0 || !dlbind_format_dtype(v->format, &self->dtype) ||
        (int64_t)v->itemsize * 8 != (int64_t)self->dtype.bits)
        goto refuse;
    self->ndim = v->ndim;
    self->readonly = v->readonly || force_readonly;
    if (v->ndim > 0) {
        if (v->shape == NULL) goto refuse;
        if (v->ndim > DLBIND_INLINE_NDIM) {
            self->dims = (int64_t *)PyMem_Malloc((size_t)v->ndim * 2 * sizeof(int64_t));
            if (self->dims == NULL) {
                self->dims = self->inline_dims;
                Py_DECREF(self);
                return PyErr_NoMemory();
            }
        }
        for (int i = 0; i < v->ndim; i++) self->dims[i] = v->shape[i];
        int64_t count;
        if (dlbind_count(self->dims, v->ndim, &count) != 0) goto refuse;
        int64_t acc = 1; /* some exporters (ctypes) leave strides NULL for C-contiguous data */
        for (int i = v->ndim - 1; i >= 0; i--) {
            if (v->strides == NULL) {
                self->dims[v->ndim + i] = acc;
                acc *= v->shape[i] > 0 ? v->shape[i] : 1; /* bounded by count: no overflow */
            } else {
                if (v->strides[i] % v->itemsize) goto refuse;
                self->dims[v->ndim + i] = v->strides[i] / v->itemsize;
            }
        }
    }
    /* a strided buffer may describe memory beyond int64 or the address space: Python's validator names it */
    if (!dlbind_description_ok(v->buf, v->ndim, self->dims, self->dims + v->ndim, self->dtype)) goto refuse;
    dlbind_ndarray_probe(self, obj);
    PyObject_GC_Track((PyObject *)self);
    return (PyObject *)self;
refuse:
    Py_DECREF(self);
    return NULL;
}

/* An exporter the garbage collector cleared (only reachable then from other garbage, by a
 * finalizer) exports nothing. */
static PyObject *dlbind_exporter_released(void) {
    PyErr_SetString(PyExc_BufferError, "this " DLBIND_PACKAGE ".Exporter was released by the garbage collector");
    return NULL;
}

static PyObject *dlbind_exporter_slow(dlbind_exporter *self) {
    if (self->view.obj == NULL) return dlbind_exporter_released();
    if (self->slow == NULL) {
        PyObject *kw = Py_BuildValue("{s:O}", "readonly", self->readonly ? Py_True : Py_False);
        if (kw == NULL) return NULL;
        PyObject *args = PyTuple_Pack(1, self->view.obj);
        if (args != NULL) self->slow = PyObject_Call(dlbind_cfg.asdlpack, args, kw);
        Py_XDECREF(args);
        Py_DECREF(kw);
    }
    return self->slow;
}

static PyObject *dlbind_exporter_dlpack(dlbind_exporter *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    dlbind_dlpack_args parsed = {0, 0, NULL};
    DLDevice cpu = {kDLCPU, 0};
    int fast = dlbind_parse_dlpack("Exporter", args, nargs, kwnames, cpu, &parsed);
    if (fast < 0) return NULL;
    /* a DLPack 0.x copy has no versioned capsule for read-only data: Python refuses it, in its words */
    if (fast == 1 && !DLBIND_VERSIONED_CAPSULES && self->readonly) fast = 0;
    if (fast == 0) {
        PyObject *slow = dlbind_exporter_slow(self);
        if (slow == NULL) return NULL;
        PyObject *method = PyObject_GetAttr(slow, dlbind_cfg.str_dlpack);
        if (method == NULL) return NULL;
        PyObject *res = PyObject_Vectorcall(method, args, nargs, kwnames);
        Py_DECREF(method);
        return res;
    }
    if (self->view.obj == NULL) return dlbind_exporter_released();
    if (!parsed.versioned && self->readonly) return dlbind_readonly_legacy_error();
    return dlbind_make_capsule((PyObject *)self, self->view.buf, self->ndim, self->dims, self->dims + self->ndim,
                               cpu, self->dtype, 0, parsed.versioned, self->readonly ? DLBIND_FLAG_READ_ONLY : 0);
}

static PyObject *dlbind_exporter_device(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Py_INCREF(dlbind_cfg.cpu_device);
    return dlbind_cfg.cpu_device;
}

/* As dlbind.described.Exporter's repr. */
static PyObject *dlbind_exporter_repr(dlbind_exporter *self) {
    PyObject *shape = PyTuple_New(self->ndim);
    if (shape == NULL) return NULL;
    for (int i = 0; i < self->ndim; i++) {
        PyObject *d = PyLong_FromLongLong(self->dims[i]);
        if (d == NULL) {
            Py_DECREF(shape);
            return NULL;
        }
        PyTuple_SET_ITEM(shape, i, d);
    }
    const char *name = dlbind_dtype_name(self->dtype.code, self->dtype.bits);
    PyObject *res = PyUnicode_FromFormat(DLBIND_PACKAGE ".Exporter(shape=%R, dtype=%s, device=%s:0)", shape, name ? name : "?",
                                         dlbind_device_name(kDLCPU));
    Py_DECREF(shape);
    return res;
}

/* Neither pickled nor copied by the copy module (an exporter holds its source's memory, which a copy would share
 * unseen): the pure Exporter's refusal, in its words. */
static PyObject *dlbind_exporter_reduce_ex(PyObject *self, PyObject *protocol) {
    (void)self;
    (void)protocol;
    PyErr_SetString(PyExc_TypeError, "cannot pickle 'Exporter' object");
    return NULL;
}

static PyMethodDef dlbind_exporter_methods[] = {
    DLBIND_DLPACK_METHOD(dlbind_exporter_dlpack),
    {"__reduce_ex__", dlbind_exporter_reduce_ex, METH_O,
     "__reduce_ex__($self, protocol, /)\n--\n\nRefused: an Exporter is neither pickled nor copied."},
    {"__dlpack_device__", dlbind_exporter_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(DeviceType.kDLCPU, 0)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject dlbind_exporter_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = DLBIND_PACKAGE ".Exporter", /* the name users know it by (messages show it): dlbind.Exporter's */
    .tp_basicsize = sizeof(dlbind_exporter),
    .tp_dealloc = (destructor)dlbind_exporter_dealloc,
    .tp_repr = (reprfunc)dlbind_exporter_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)dlbind_exporter_traverse,
    .tp_clear = (inquiry)dlbind_exporter_clear,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "A dlbind.Exporter over an object's buffer (what dlbind.asdlpack returns for buffers).",
    .tp_methods = dlbind_exporter_methods,
};

/* ndarray_struct() -> True (exact ndarrays are read from their struct), False (the probe disagreed: the buffer
 * protocol only), None (no ndarray probed yet). */
PyObject *dlbind_py_ndarray_struct(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    if (dlbind_ndarray_type != NULL) Py_RETURN_TRUE;
    if (dlbind_ndarray_refused) Py_RETURN_FALSE;
    Py_RETURN_NONE;
}

/* asdlpack(obj, *, readonly=None, device_id=None): buffers in C, everything else in Python. */
PyObject *dlbind_py_asdlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    (void)mod;
    if (!dlbind_configured()) return NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int force_readonly = 0, fast = nargs == 1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; fast && i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        int kw = dlbind_keyword(key);
        if (kw == DLBIND_KW_READONLY && (value == Py_None || value == Py_True))
            force_readonly = value == Py_True;
        else if (!(kw == DLBIND_KW_DEVICE_ID && value == Py_None))
            fast = 0;
    }
    if (fast) {
        PyObject *obj = args[0];
        if (Py_IS_TYPE(obj, &dlbind_exporter_type)) {
            Py_INCREF(obj);
            return obj;
        }
        PyObject *res = dlbind_exporter_new(obj, force_readonly);
        if (res != NULL || PyErr_Occurred()) return res;
    }
    return PyObject_Vectorcall(dlbind_cfg.asdlpack, args, nargsf, kwnames);
}
