/* BufferExporter: what dlbind.asdlpack returns for objects with the buffer protocol (registered as
 * a dlbind.Exporter), and asdlpack itself. The plain __dlpack__ call is answered here; any other
 * keyword goes to the Python Exporter of the same object (made on first need). */
#include "fastpath.h"

typedef struct {
    PyObject_HEAD
    Py_buffer view;
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
static dlbind_exporter *dlbind_exporter_free[DLBIND_EXPORTER_FREE_MAX];
static int dlbind_exporter_nfree = 0;

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
    if (self->view.obj != NULL) PyBuffer_Release(&self->view);
    return 0;
}

static void dlbind_exporter_dealloc(dlbind_exporter *self) {
    PyObject_GC_UnTrack((PyObject *)self);
    (void)dlbind_exporter_clear(self);
    if (self->dims != self->inline_dims) PyMem_Free(self->dims);
    self->dims = self->inline_dims;
    if (dlbind_exporter_nfree < DLBIND_EXPORTER_FREE_MAX)
        dlbind_exporter_free[dlbind_exporter_nfree++] = self;
    else
        PyObject_GC_Del(self);
}

/* NULL without an exception: not a buffer this path takes (the caller asks Python, which either
 * exports it or says exactly what is wrong). */
static PyObject *dlbind_exporter_new(PyObject *obj, int force_readonly) {
    if (!PyObject_CheckBuffer(obj)) return NULL;
    dlbind_exporter *self;
    if (dlbind_exporter_nfree > 0) {
        self = dlbind_exporter_free[--dlbind_exporter_nfree];
        (void)PyObject_Init((PyObject *)self, &dlbind_exporter_type);
    } else {
        self = PyObject_GC_New(dlbind_exporter, &dlbind_exporter_type);
        if (self == NULL) return NULL;
    }
    /* untracked until every field is set (the buffer call below may run Python code, and a
     * collection) */
    self->dims = self->inline_dims;
    self->slow = NULL;
    self->view.obj = NULL;
    if (PyObject_GetBuffer(obj, &self->view, PyBUF_RECORDS_RO) != 0) {
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

/* As dlbind.producer.Exporter's repr. */
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

static PyMethodDef dlbind_exporter_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))dlbind_exporter_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "The array API's __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)."},
    {"__dlpack_device__", dlbind_exporter_device, METH_NOARGS, "(DeviceType.kDLCPU, 0)"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject dlbind_exporter_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = DLBIND_MODULE ".BufferExporter",
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
