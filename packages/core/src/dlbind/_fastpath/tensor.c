/* TensorCore, the C base of dlbind.Tensor: owns a consumed DLManagedTensor(Versioned) and runs its
 * deleter exactly once, when freed. Also its buffer protocol, wrap() and from_dlpack(). */
#include "fastpath.h"


typedef struct {
    PyObject_HEAD
    void *managed; /* DLManagedTensor(Versioned)*, owned: its deleter runs in dealloc */
    int versioned;
    DLTensor *t;
    int64_t *strides; /* t->strides, or computed row-major strides (owned) */
    int own_strides;
    uint64_t sealed; /* flags added by dlbind: READ_ONLY for arrays of an immutable library */
    PyObject *weakrefs;
    PyObject *stream; /* the stream the data is ready on (a DLPack stream int), or NULL: none orders it */
} dlbind_tensor;

/* Garbage collection: a struct exported by dlbind itself holds a reference to its owner (an
 * exporter, another Tensor, or the object Python's export keeps alive), which the tensor owns
 * through the struct; visiting it lets the collector see cycles such as
 * `b.t = from_dlpack(asdlpack(b))`. A foreign struct's context is opaque: its owner is not visited
 * (the collector then treats what it holds as reachable, never the reverse). No tp_clear: running
 * the deleter early would leave the tensor's shape and data dangling; every such cycle passes
 * through an object that clears (an instance dict, a list, an exporter's view). */
static int dlbind_tensor_traverse(dlbind_tensor *self, visitproc visit, void *arg) {
    Py_VISIT(dlbind_managed_owner(self->managed, self->versioned));
    return 0;
}

static void dlbind_tensor_dealloc(dlbind_tensor *self) {
    PyObject_GC_UnTrack((PyObject *)self);
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    if (self->own_strides) PyMem_Free(self->strides);
    Py_CLEAR(self->stream);
    void *m = self->managed;
    self->managed = NULL;
    if (m != NULL) {
        /* A tensor freed while an exception unwinds (a consumer's refusal): the producer's deleter may run
         * Python (a cffi callback), which must not see that exception (Python 3.10 turns it into a
         * SystemError). Kept aside and restored, as CPython does around __del__. */
        dlbind_error_kept kept; /* as the export block's deleter and the capsule destructor keep it */
        dlbind_error_aside(&kept);
        dlbind_call_deleter(m, self->versioned);
        dlbind_error_back(&kept);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyObject *dlbind_tensor_wrap(void *m, int versioned, int allow_vector, PyObject *producer) {
    if (!dlbind_configured()) {
        dlbind_call_deleter(m, versioned);
        return NULL;
    }
    if (!versioned) dlbind_legacy_reading(&((DLManagedTensor *)m)->dl_tensor.dtype); /* spec/dtypes.toml [[legacy]] */
    if (!dlbind_valid(m, versioned, allow_vector)) {
        PyObject *res = PyObject_CallFunction(dlbind_cfg.check_managed, "NOOO", PyLong_FromVoidPtr(m), versioned ? Py_True : Py_False,
                                              allow_vector ? Py_True : Py_False, producer ? producer : Py_None);
        if (res == NULL) {
            dlbind_error_kept kept; /* the check's error outlives the deleter */
            dlbind_error_aside(&kept);
            dlbind_call_deleter(m, versioned);
            dlbind_error_back(&kept);
        } else {
            Py_DECREF(res);
            PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": the C and Python checks of a DLPack tensor disagree");
            dlbind_call_deleter(m, versioned);
        }
        return NULL;
    }
    DLTensor *t = dlbind_dl_tensor(m, versioned);
    PyTypeObject *type = dlbind_cfg.tensor_type;
    dlbind_tensor *self = (dlbind_tensor *)type->tp_alloc(type, 0);
    if (self == NULL) {
        dlbind_call_deleter(m, versioned);
        return NULL;
    }
    self->managed = m;
    self->versioned = versioned;
    self->t = t;
    self->own_strides = 0;
    self->sealed = 0;
    self->stream = NULL;
    self->strides = t->strides;
    if (t->ndim > 0 && t->strides == NULL) { /* NULL strides: compact row-major (allowed before DLPack 1.2) */
        self->strides = (int64_t *)PyMem_Malloc((size_t)t->ndim * sizeof(int64_t));
        if (self->strides == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        self->own_strides = 1;
        dlbind_compact_strides(t->ndim, t->shape, self->strides); /* as dlbind.validate.check_managed */
    }
    return (PyObject *)self;
}

static PyObject *dlbind_int64_tuple(const int64_t *values, int n) {
    PyObject *out = PyTuple_New(n);
    if (out == NULL) return NULL;
    for (int i = 0; i < n; i++) {
        PyObject *v = PyLong_FromLongLong(values[i]);
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, v);
    }
    return out;
}

static uint64_t dlbind_tensor_flags(dlbind_tensor *self) {
    return (self->versioned ? ((DLManagedTensorVersioned *)self->managed)->flags : 0) | self->sealed;
}

void dlbind_tensor_seal(PyObject *tensor) {
    ((dlbind_tensor *)tensor)->sealed |= DLBIND_FLAG_READ_ONLY;
}

/* A tensor imported from x: read-only when x's library never writes its arrays (unless the
 * producer made a copy for us); a uint8 one of a type whose capsules cannot say bool (DLBIND_TYPE_PYTHON) is
 * read as what x's plan says (ExportPlan.uint8_read_as: kDLBool or -1), as the pure build's dlbind.tensor._made does. Steals
 * and returns tensor. */
static PyObject *dlbind_finished(PyObject *tensor, PyObject *x, const dlbind_type_info *info) {
    int bits = info->bits;
    if (tensor == NULL) return NULL;
    if ((bits & DLBIND_TYPE_IMMUTABLE) && !(dlbind_tensor_flags((dlbind_tensor *)tensor) & DLBIND_FLAG_IS_COPIED))
        dlbind_tensor_seal(tensor);
    if (dlbind_uint8_reading(info, x, ((dlbind_tensor *)tensor)->t) != 0) {
        Py_DECREF(tensor);
        return NULL;
    }
    return tensor;
}

int dlbind_uint8_reading(const dlbind_type_info *info, PyObject *x, DLTensor *t) {
    if (!(info->bits & DLBIND_TYPE_PYTHON) || t->dtype.code != kDLUInt || t->dtype.bits != 8 || t->dtype.lanes != 1)
        return 0;
    /* uint8 that may be bool (export.bool = "uint8"): the plan reads the array's dtype (Python code: the call
     * holds the plan, which it may evict from the type cache; info is not read after it) */
    PyObject *said = PyObject_CallMethodOneArg(info->plan, dlbind_cfg.attr_uint8_read_as, x);
    long code = said != NULL ? PyLong_AsLong(said) : -1;
    Py_XDECREF(said);
    if (said == NULL || (code == -1 && PyErr_Occurred())) return -1;
    if (code > UINT8_MAX) { /* a DLDataType code is a uint8_t */
        PyErr_Format(PyExc_ValueError, "ExportPlan.uint8_read_as gave %ld, not a DLPack dtype code", code);
        return -1;
    }
    if (code >= 0) t->dtype.code = (uint8_t)code; /* in place: the consumer owns the struct */
    return 0;
}

int dlbind_tensor_set_stream(PyObject *tensor, long long stream) {
    PyObject *value = NULL;
    if (stream != -1 && (value = PyLong_FromLongLong(stream)) == NULL) return -1;
    Py_XSETREF(((dlbind_tensor *)tensor)->stream, value);
    return 0;
}

static PyObject *dlbind_get_stream(dlbind_tensor *self, void *c) {
    (void)c;
    return Py_NewRef(self->stream != NULL ? self->stream : Py_None);
}


/* x.__dlpack__(stream=None) or x.__dlpack__(): the call a producer of an older spec accepted, made as the bits its
 * type has at its current version say. A class whose attributes can change is checked again here, after any
 * Python code that ran since the caller read its bits: a class whose __dlpack__ was replaced since has another
 * version (no bits cached for it yet), and is asked by Python's route (dlbind.asking.style_for reads the plan's
 * record against the method it calls). NULL with no error set: that case. No Python code runs between this
 * check and the call's lookup of the method. */
PyObject *dlbind_older_call(PyObject *x, int bits) {
    static PyObject *kwnames_stream = NULL;
    if (!PyType_HasFeature(Py_TYPE(x), Py_TPFLAGS_IMMUTABLETYPE)) {
        int now = dlbind_type_bits_now(x);
        if (now < 0 || !(now & DLBIND_TYPE_LEGACY_CALL)) return NULL;
        bits = now;
    }
    if (bits & DLBIND_TYPE_BARE_CALL) return PyObject_CallMethodNoArgs(x, dlbind_cfg.str_dlpack);
    if (kwnames_stream == NULL && (kwnames_stream = Py_BuildValue("(O)", dlbind_cfg.kw[DLBIND_KW_STREAM])) == NULL)
        return NULL;
    PyObject *stack[2] = {x, Py_None};
    return PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames_stream);
}

#define DLBIND_GETTER(name, expr)                                  \
    static PyObject *dlbind_get_##name(dlbind_tensor *self, void *c) { \
        (void)c;                                                   \
        return expr;                                               \
    }
DLBIND_GETTER(shape, dlbind_int64_tuple(self->t->shape, self->t->ndim))
DLBIND_GETTER(strides, dlbind_int64_tuple(self->strides, self->t->ndim))
DLBIND_GETTER(data_ptr, PyLong_FromVoidPtr(self->t->data))
DLBIND_GETTER(byte_offset, PyLong_FromUnsignedLongLong(self->t->byte_offset))
DLBIND_GETTER(ndim, PyLong_FromLong(self->t->ndim))
DLBIND_GETTER(code, PyLong_FromLong(self->t->dtype.code))
DLBIND_GETTER(bits, PyLong_FromLong(self->t->dtype.bits))
DLBIND_GETTER(lanes, PyLong_FromLong(self->t->dtype.lanes))
DLBIND_GETTER(device_type, PyLong_FromLong(self->t->device.device_type))
DLBIND_GETTER(device_id, PyLong_FromLong(self->t->device.device_id))
DLBIND_GETTER(flags, PyLong_FromUnsignedLongLong(dlbind_tensor_flags(self)))

static PyObject *dlbind_get_version(dlbind_tensor *self, void *c) {
    (void)c;
    if (!self->versioned) Py_RETURN_NONE;
    DLPackVersion v = ((DLManagedTensorVersioned *)self->managed)->version;
    return Py_BuildValue("(kk)", (unsigned long)v.major, (unsigned long)v.minor);
}

static PyGetSetDef dlbind_tensor_getset[] = {
    {"shape", (getter)dlbind_get_shape, NULL, "shape", NULL},
    {"strides", (getter)dlbind_get_strides, NULL, "strides in elements (DLPack's unit)", NULL},
    {"data_ptr", (getter)dlbind_get_data_ptr, NULL, "data pointer as the producer gave it (add byte_offset)", NULL},
    {"byte_offset", (getter)dlbind_get_byte_offset, NULL, "bytes from data_ptr to the first element", NULL},
    {"ndim", (getter)dlbind_get_ndim, NULL, "number of dimensions", NULL},
    {"version", (getter)dlbind_get_version, NULL, "(major, minor) of a versioned capsule, None for legacy", NULL},
    {"_code", (getter)dlbind_get_code, NULL, NULL, NULL},
    {"_bits", (getter)dlbind_get_bits, NULL, NULL, NULL},
    {"_lanes", (getter)dlbind_get_lanes, NULL, NULL, NULL},
    {"_device_type", (getter)dlbind_get_device_type, NULL, NULL, NULL},
    {"_device_id", (getter)dlbind_get_device_id, NULL, NULL, NULL},
    {"_flags", (getter)dlbind_get_flags, NULL, NULL, NULL},
    /* given when the tensor is made (wrap's `ready`), never set after: a Tensor is immutable (issue 38) */
    {"_stream", (getter)dlbind_get_stream, NULL, "the stream the data is ready on, or None", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *dlbind_tensor_dlpack(dlbind_tensor *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    DLTensor *t = self->t;
    dlbind_dlpack_args parsed = {0, self->stream != NULL, NULL};
    int fast = dlbind_parse_dlpack("Tensor", args, nargs, kwnames, t->device, &parsed);
    if (fast < 0) return NULL;
    if (fast && self->stream != NULL) {
        /* ready on self->stream: fast when the consumer asks on that very stream, or orders nothing (-1), or
         * asks with None on the device's default stream and that is the tensor's; else Python waits */
        long long ready = PyLong_AsLongLong(self->stream), asked;
        if (parsed.stream == NULL) {
            asked = dlbind_device_default_stream(t->device.device_type);
            fast = !dlbind_device_host(t->device.device_type) && asked == ready; /* managed memory: a host reader */
        } else {
            int overflow = 0;
            asked = PyLong_AsLongLongAndOverflow(parsed.stream, &overflow);
            fast = !overflow && (asked == -1 || asked == ready) && dlbind_device_stream_accepted(t->device.device_type, asked);
        }
        if (PyErr_Occurred()) return NULL;
    }
    /* export_view(self, **kwargs): the parser checked there are only known keywords; a legacy capsule of
     * a sub-byte dtype goes there too (DType.legacy_refusal), and a tensor ordered on a stream (the consumer's
     * stream may have to wait for it) */
    if (fast == 0 || (!parsed.versioned && (t->dtype.bits * t->dtype.lanes) % 8 != 0)) {
        PyObject *stack[5];
        Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        if (n > 4) {
            PyErr_SetString(PyExc_TypeError, "Tensor.__dlpack__() got multiple values for a keyword argument");
            return NULL;
        }
        stack[0] = (PyObject *)self;
        for (Py_ssize_t i = 0; i < n; i++) stack[1 + i] = args[i];
        return PyObject_Vectorcall(dlbind_cfg.export_view, stack, 1, kwnames);
    }
    uint64_t flags = dlbind_tensor_flags(self);
    if (!parsed.versioned && (flags & DLBIND_FLAG_READ_ONLY)) return dlbind_readonly_legacy_error();
    return dlbind_make_capsule((PyObject *)self, t->data, t->ndim, t->shape, self->strides, t->device, t->dtype, t->byte_offset,
                               parsed.versioned, flags & (DLBIND_FLAG_READ_ONLY | DLBIND_FLAG_SUBBYTE_PADDED));
}

/* No buffer format: BufferError with the message of the Python rule (Tensor.dtype.format's ValueError). */
static int dlbind_no_format(PyObject *self) {
    PyObject *dtype = PyObject_GetAttrString(self, "dtype");
    PyObject *format = dtype ? PyObject_GetAttrString(dtype, "format") : NULL;
    Py_XDECREF(dtype);
    if (format != NULL) { /* the Python side names one: the tables and dtypes.py disagree */
        Py_DECREF(format);
        PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": the C and Python buffer formats disagree");
        return -1;
    }
    if (PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        if (text == NULL) return -1;
        PyErr_SetObject(PyExc_BufferError, text);
        Py_DECREF(text);
    }
    return -1;
}

/* Buffer protocol: host memory, dtypes the generated tables give a buffer format. */
static int dlbind_tensor_getbuffer(dlbind_tensor *self, Py_buffer *view, int flags) {
    DLTensor *t = self->t;
    if (!dlbind_device_host(t->device.device_type)) {
        const char *name = dlbind_device_name(t->device.device_type);
        if (name != NULL)
            PyErr_Format(PyExc_BufferError, "the buffer protocol needs host memory; this tensor is on %s", name);
        else /* as dlbind.devices.device_name and unnamed_note say it */
            PyErr_Format(PyExc_BufferError, "the buffer protocol needs host memory; this tensor is on device type %d, "
                         "which this dlbind's DLPack header does not name (a header bump would name it)",
                         (int)t->device.device_type);
        return -1;
    }
    int readonly = (dlbind_tensor_flags(self) & DLBIND_FLAG_READ_ONLY) != 0;
    if ((flags & PyBUF_WRITABLE) && readonly) {
        PyErr_SetString(PyExc_BufferError, "this DLPack tensor is read-only");
        return -1;
    }
    const char *fmt = t->dtype.lanes == 1 ? dlbind_dtype_format(t->dtype.code, t->dtype.bits) : NULL;
    if (fmt == NULL) return dlbind_no_format((PyObject *)self);
    Py_ssize_t itemsize = t->dtype.bits / 8, ndim = t->ndim;
    int64_t count, len;
    if (dlbind_count(t->shape, t->ndim, &count) != 0 || dlbind_mul_overflow(count, (int64_t)itemsize, &len)) {
        PyErr_SetString(PyExc_BufferError, "the tensor's byte size does not fit in int64");
        return -1;
    }
    Py_ssize_t *dims = (Py_ssize_t *)PyMem_Malloc((size_t)(ndim > 0 ? ndim : 1) * 2 * sizeof(Py_ssize_t));
    if (dims == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ndim; i++) {
        int64_t byte_stride;
        if (dlbind_mul_overflow(self->strides[i], (int64_t)itemsize, &byte_stride)) {
            PyMem_Free(dims);
            PyErr_Format(PyExc_BufferError, "stride %lld of %zd-byte items does not fit in int64 bytes",
                         (long long)self->strides[i], itemsize);
            return -1;
        }
        dims[i] = (Py_ssize_t)t->shape[i];
        dims[ndim + i] = (Py_ssize_t)byte_stride;
    }
    int contiguous = 1, fortran = 1; /* row-major, column-major (size-1 dimensions' strides say nothing) */
    Py_ssize_t expected = itemsize, expected_f = itemsize;
    for (Py_ssize_t i = ndim - 1; i >= 0 && count > 0; i--) {
        if (dims[i] != 1 && dims[ndim + i] != expected) contiguous = 0;
        if (dims[ndim - 1 - i] != 1 && dims[2 * ndim - 1 - i] != expected_f) fortran = 0;
        expected *= dims[i]; /* bounded by len */
        expected_f *= dims[ndim - 1 - i];
    }
    const char *lacks = NULL; /* the layout asked for that this one is not (the consumer reads len bytes so) */
    if (!contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES)
        lacks = "contiguous: ask for strides";
    else if (!contiguous && (flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS)
        lacks = "C-contiguous";
    else if (!fortran && (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS)
        lacks = "Fortran-contiguous";
    else if (!contiguous && !fortran && (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS)
        lacks = "contiguous";
    if (lacks != NULL) {
        PyMem_Free(dims);
        PyErr_Format(PyExc_BufferError, "this DLPack tensor is not %s", lacks);
        return -1;
    }
    /* dlbind_valid checked that data + byte_offset does not wrap. No element: an aligned address that nothing
     * reads, as the pure build's __array_interface__ gives (the producer's may be NULL, and numpy allocates a
     * writable array of its own for a NULL buffer, read-only tensor or not) */
    static _Alignas(64) char empty[64];
    if (self->stream != NULL && t->device.device_type != kDLCPU) {
        /* managed memory a stream orders: synchronised first, by the Tensor's own _host_ready (export.host_ready) */
        PyObject *res = PyObject_CallMethod((PyObject *)self, "_host_ready", NULL);
        if (res == NULL) {
            PyMem_Free(dims);
            return -1;
        }
        Py_DECREF(res);
    }
    view->buf = count == 0 ? (void *)empty : (void *)((uintptr_t)t->data + (uintptr_t)t->byte_offset);
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->len = (Py_ssize_t)len;
    view->itemsize = itemsize;
    view->readonly = readonly;
    view->ndim = (int)ndim;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->shape = (flags & PyBUF_ND) ? dims : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? dims + ndim : NULL;
    view->suboffsets = NULL;
    view->internal = dims;
    return 0;
}

static void dlbind_tensor_releasebuffer(dlbind_tensor *self, Py_buffer *view) {
    (void)self;
    PyMem_Free(view->internal);
}

static PyBufferProcs dlbind_tensor_buffer = {
    (getbufferproc)dlbind_tensor_getbuffer,
    (releasebufferproc)dlbind_tensor_releasebuffer,
};

static PyMethodDef dlbind_tensor_methods[] = {
    DLBIND_DLPACK_METHOD(dlbind_tensor_dlpack),
    {NULL, NULL, 0, NULL},
};

PyTypeObject dlbind_tensor_core_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = DLBIND_MODULE ".TensorCore",
    .tp_basicsize = sizeof(dlbind_tensor),
    .tp_dealloc = (destructor)dlbind_tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)dlbind_tensor_traverse,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "The C core of dlbind.Tensor: owns a consumed DLPack tensor.",
    .tp_methods = dlbind_tensor_methods,
    .tp_getset = dlbind_tensor_getset,
    .tp_as_buffer = &dlbind_tensor_buffer,
    .tp_weaklistoffset = offsetof(dlbind_tensor, weakrefs),
};

PyObject *dlbind_consume_capsule(PyObject *capsule, PyObject *producer) {
    int versioned;
    void *m = dlbind_take(capsule, &versioned);
    if (m == NULL) return NULL;
    return dlbind_tensor_wrap(m, versioned, 0, producer);
}

/* The arguments wrap() and take_wrap() share: `fixed` of them, the last `allow_vector`, then an optional
 * `ready`: None, or (device type, stream), the stream the data is ready on when the tensor is on that type (-1
 * for both when not given). */
static int dlbind_wrap_args(PyObject *const *args, Py_ssize_t nargs, Py_ssize_t fixed, const char *usage,
                            int *allow_vector, long long *type, long long *stream) {
    *type = *stream = -1;
    if (nargs != fixed && nargs != fixed + 1) {
        PyErr_SetString(PyExc_TypeError, usage);
        return -1;
    }
    if ((*allow_vector = PyObject_IsTrue(args[fixed - 1])) < 0) return -1;
    PyObject *ready = nargs > fixed ? args[fixed] : Py_None;
    if (ready == Py_None) return 0;
    if (!PyTuple_Check(ready) || PyTuple_GET_SIZE(ready) != 2) {
        PyErr_SetString(PyExc_TypeError, "ready is None or (device_type, stream)");
        return -1;
    }
    *type = PyLong_AsLongLong(PyTuple_GET_ITEM(ready, 0));
    *stream = PyLong_AsLongLong(PyTuple_GET_ITEM(ready, 1));
    return PyErr_Occurred() ? -1 : 0;
}

/* The tensor just made, ready on `stream` when it is on device type `type` (given when it is made: issue 38). */
static PyObject *dlbind_ready(PyObject *tensor, long long type, long long stream) {
    if (tensor != NULL && stream != -1 && ((dlbind_tensor *)tensor)->t->device.device_type == type &&
        dlbind_tensor_set_stream(tensor, stream) != 0)
        Py_CLEAR(tensor);
    return tensor;
}

/* wrap(address, versioned, allow_vector[, ready]) -> Tensor that owns the struct */
PyObject *dlbind_py_wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    int allow_vector;
    long long ready_type, ready_stream;
    const char *usage = "wrap(address, versioned, allow_vector[, ready])";
    if (dlbind_wrap_args(args, nargs, 3, usage, &allow_vector, &ready_type, &ready_stream) != 0) return NULL;
    void *m;
    int versioned;
    if (dlbind_struct_args(args[0], args[1], "wrap()", &m, &versioned) != 0) return NULL;
    return dlbind_ready(dlbind_tensor_wrap(m, versioned, allow_vector, NULL), ready_type, ready_stream);
}

/* take_wrap(capsule, allow_vector[, ready[, producer[, plan]]]): take the capsule and own its struct in one step,
 * with no Python code between (issue 39: a signal handler's exception there leaked the export for good), then
 * finished as the producer's dlbind.sources.ExportPlan says (read-only, bool read), when one is given. */
PyObject *dlbind_py_take_wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    int allow_vector, versioned;
    long long ready_type, ready_stream;
    /* the producer, when given, is named by the validator's refusal of an extent (dlbind_tensor_wrap) */
    PyObject *producer = nargs >= 4 && args[3] != Py_None ? args[3] : NULL;
    PyObject *plan = nargs == 5 && args[4] != Py_None ? args[4] : NULL;
    if (dlbind_wrap_args(args, nargs >= 4 ? 3 : nargs, 2,
                         "take_wrap(capsule, allow_vector[, ready[, producer[, plan]]])", &allow_vector, &ready_type,
                         &ready_stream) != 0)
        return NULL;
    if (nargs > 5 || (plan != NULL && producer == NULL)) {
        PyErr_SetString(PyExc_TypeError, "take_wrap(capsule, allow_vector[, ready[, producer[, plan]]]): a plan is "
                                         "the producer's");
        return NULL;
    }
    dlbind_type_info finish = {NULL, NULL, NULL, plan, NULL, 0};
    if (plan != NULL && (finish.bits = dlbind_plan_finish_bits(plan)) < 0) return NULL; /* before the capsule is taken */
    void *m = dlbind_take(args[0], &versioned);
    if (m == NULL) return NULL;
    PyObject *tensor = dlbind_tensor_wrap(m, versioned, allow_vector, producer);
    if (finish.bits != 0) tensor = dlbind_finished(tensor, producer, &finish);
    return dlbind_ready(tensor, ready_type, ready_stream);
}

/* exchange_import(obj) -> a dlbind.Tensor that owns the struct obj's table handed over, or None without a usable
 * table. Taken and owned in one step, with no Python code between (a signal handler's exception there would leak
 * the struct for good, as take_wrap's capsule would); ready, as __dlpack__(stream=None) would be, on the device
 * rule's default stream. */
PyObject *dlbind_py_exchange_import(PyObject *mod, PyObject *obj) {
    (void)mod;
    if (!DLBIND_VERSIONED_CAPSULES) Py_RETURN_NONE; /* a DLPack 0.x copy has no exchange API (fastpath.h) */
    dlbind_type_info info;
    if (dlbind_type_info_of(obj, &info) != 0) return NULL;
    DLManagedTensorVersioned *out = NULL;
    int found = dlbind_table_take(obj, &info, &out);
    if (found < 0) return NULL;
    if (found == 0) Py_RETURN_NONE;
    /* NoSync: a device with streams is ordered here as __dlpack__(stream=None) would be (its default stream) */
    long long consumer = dlbind_device_default_stream(out->dl_tensor.device.device_type);
    if (consumer != -1 && dlbind_table_order(&info, out, consumer) != 0) {
        dlbind_call_deleter(out, 1);
        return NULL;
    }
    PyObject *tensor = dlbind_tensor_wrap(out, 1, 0, NULL); /* owned: an invalid struct's deleter runs there */
    if (tensor != NULL && consumer != -1 && dlbind_tensor_set_stream(tensor, consumer) != 0) Py_CLEAR(tensor);
    return tensor;
}

/* x.__dlpack_device__() as (device type, id) (fastpath.h). */
int dlbind_producer_device(PyObject *x, DLDevice *out) {
    PyObject *dev = PyObject_CallMethodNoArgs(x, dlbind_cfg.str_dlpack_device);
    if (dev == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
        PyErr_Clear();
        return 0;
    }
    int ok = PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 && PyLong_Check(PyTuple_GET_ITEM(dev, 0)) &&
             !PyBool_Check(PyTuple_GET_ITEM(dev, 0)) && PyLong_CheckExact(PyTuple_GET_ITEM(dev, 1));
    long kind = ok ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0)) : 0, index = ok ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 1)) : 0;
    Py_DECREF(dev);
    if (PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (!ok || kind < 0 || kind > INT32_MAX || index < 0 || index > INT32_MAX) return 0;
    out->device_type = (DLDeviceType)kind;
    out->device_id = (int32_t)index;
    return 1;
}

/* What a step of the plain import answers where Python's rules decide: the entry point hands the call over. */
#define DLBIND_TO_PYTHON() Py_NewRef(Py_NotImplemented)

/* Whether from_dlpack's arguments make a plain call: x alone, device and copy None, stream None or an int
 * (*stream_obj and *stream: that int; NULL where None), allow_vector None or False. 1 plain, 0 not, -1 error. */
static int dlbind_plain_call(PyObject *const *args, size_t nargsf, PyObject *kwnames, PyObject **stream_obj,
                             long long *stream) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs != 1) return 0;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *value = args[nargs + i];
        int kw = dlbind_keyword(PyTuple_GET_ITEM(kwnames, i));
        if (kw == DLBIND_KW_STREAM && PyLong_CheckExact(value))
            *stream_obj = value;
        else if (!(kw == DLBIND_KW_DEVICE || kw == DLBIND_KW_COPY || kw == DLBIND_KW_STREAM || kw == DLBIND_KW_ALLOW_VECTOR) ||
                 !(value == Py_None || (value == Py_False && kw == DLBIND_KW_ALLOW_VECTOR)))
            return 0;
    }
    if (*stream_obj == NULL) return 1;
    int overflow = 0;
    *stream = PyLong_AsLongLongAndOverflow(*stream_obj, &overflow);
    if (*stream == -1 && PyErr_Occurred()) return -1;
    return !(overflow || *stream < -1 || *stream > DLBIND_STREAM_MAX); /* else Python says what is wrong with it */
}

/* The struct x's DLPack 1.3 exchange table gave (out, owned here) as a Tensor: ready on the consumer's stream
 * (None: the device rule's default), ordered after the producer's current stream as __dlpack__(stream=...)
 * would order it. */
static PyObject *dlbind_from_table(PyObject *x, const dlbind_type_info *info, DLManagedTensorVersioned *out,
                                   PyObject *stream_obj, long long stream) {
    DLDevice dev = out->dl_tensor.device;
    if (dlbind_device_stream_free(dev.device_type)) {
        if (stream_obj == NULL) return dlbind_tensor_wrap(out, 1, 0, x);
        dlbind_call_deleter(out, 1); /* a stream for a stream-free device: Python's refusal */
        return DLBIND_TO_PYTHON();
    }
    long long consumer = stream_obj != NULL ? stream : dlbind_device_default_stream(dev.device_type);
    if (!dlbind_device_known(dev.device_type) ||
        (stream_obj != NULL && stream != -1 && !dlbind_device_stream_accepted(dev.device_type, stream))) {
        dlbind_call_deleter(out, 1); /* Python says what is wrong (an unknown device, a refused stream) */
        return DLBIND_TO_PYTHON();
    }
    if (dlbind_table_order(info, out, consumer) != 0) {
        dlbind_call_deleter(out, 1);
        return NULL;
    }
    PyObject *tensor = dlbind_tensor_wrap(out, 1, 0, x);
    if (tensor != NULL && consumer != -1 && dlbind_tensor_set_stream(tensor, consumer) != 0) Py_CLEAR(tensor);
    return tensor;
}


/* A producer that may be on a device with streams: None names the device's default stream, which it is asked
 * for explicitly (as torch and CuPy ask), and the Tensor is ready there. 1: answered in *res (NULL: an error),
 * 0: its device is stream-free, asked as any host producer is. */
static int dlbind_on_default_stream(PyObject *x, const dlbind_type_info *info, PyObject **res) {
    DLDevice dev;
    int found = dlbind_producer_device(x, &dev);
    if (found < 0) return 1; /* *res stays NULL: the error stands */
    /* an older producer on a device with streams is asked its way on the default stream by Python; on a
     * stream-free device it is asked its way (stream=None, or nothing) */
    int legacy_on_streams = (info->bits & DLBIND_TYPE_LEGACY_CALL) && !dlbind_device_stream_free(dev.device_type);
    if (found == 0 || !dlbind_device_known(dev.device_type) || legacy_on_streams) {
        *res = DLBIND_TO_PYTHON();
        return 1;
    }
    long long consumer = dlbind_device_default_stream(dev.device_type);
    if (consumer == -1) return 0;
    PyObject *consumer_obj = PyLong_FromLongLong(consumer);
    if (consumer_obj == NULL) return 1;
    PyObject *stack[3] = {x, consumer_obj, dlbind_cfg.max_version};
    PyObject *capsule = PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                  dlbind_cfg.kwnames_dlpack);
    Py_DECREF(consumer_obj);
    if (capsule == NULL) {
        /* a refusal, or an older producer: continued by Python on that stream without asking this again; any
         * other error stands */
        if (!PyErr_ExceptionMatches(PyExc_BufferError) && !PyErr_ExceptionMatches(PyExc_TypeError)) return 1;
        PyObject *ready = Py_BuildValue("(iL)", (int)dev.device_type, consumer);
        *res = ready != NULL ? dlbind_after_refusal(x, 0, ready) : NULL;
        Py_XDECREF(ready);
        return 1;
    }
    if (!PyCapsule_CheckExact(capsule)) {
        *res = dlbind_not_capsule(x, capsule);
        return 1;
    }
    PyObject *tensor = dlbind_consume_capsule(capsule, x);
    Py_DECREF(capsule);
    tensor = dlbind_finished(tensor, x, info);
    if (tensor != NULL && ((dlbind_tensor *)tensor)->t->device.device_type == dev.device_type &&
        dlbind_tensor_set_stream(tensor, consumer) != 0)
        Py_CLEAR(tensor);
    *res = tensor;
    return 1;
}

/* NULL, with the TypeError Python's asking raises where x.__dlpack__ returned result, not a capsule (released:
 * unconsumed, its destructor frees what it holds). */
PyObject *dlbind_not_capsule(PyObject *x, PyObject *result) {
    PyObject *x_name = dlbind_type_name(x), *result_name = dlbind_type_name(result);
    if (x_name != NULL && result_name != NULL)
        PyErr_Format(PyExc_TypeError, "%S.__dlpack__() returned %S, not a DLPack capsule", x_name, result_name);
    Py_XDECREF(x_name);
    Py_XDECREF(result_name);
    Py_DECREF(result);
    return NULL;
}

/* x.__dlpack__'s refusal (the pending TypeError or BufferError) handed to from_dlpack's fall-back,
 * dlbind.consumer.resume((error, older, ready), x): an older producer (asked again with fewer keywords), its
 * system's refusal type, or one whose buffer protocol carries what __dlpack__ refuses; never a second call of the
 * call it accepted before (older). ready: (device type, stream) it was asked on, or NULL (None). */
PyObject *dlbind_after_refusal(PyObject *x, int older, PyObject *ready) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL) PyException_SetTraceback(value, tb);
    int legacy = !older && PyErr_GivenExceptionMatches(value, PyExc_TypeError);
    PyObject *refused = PyTuple_Pack(3, value, older ? Py_True : Py_False, ready != NULL ? ready : Py_None);
    PyObject *res = refused != NULL ? dlbind_resume(dlbind_cfg.from_dlpack, refused, &x, 1, NULL) : NULL;
    Py_XDECREF(refused);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    /* the older call worked: from now on this type is asked the way it accepted */
    if (res != NULL && legacy) dlbind_type_learn(x);
    return res; /* Python finished it */
}

/* x asked by its __dlpack__ on no stream (the way its type accepted, where it refused max_version before),
 * and the capsule it gives consumed and finished. */
static PyObject *dlbind_asked(PyObject *x, const dlbind_type_info *info) {
    int bits = info->bits;
    int older = (bits & DLBIND_TYPE_LEGACY_CALL) != 0;
    PyObject *capsule;
    if (older) {
        capsule = dlbind_older_call(x, bits);
        if (capsule == NULL && !PyErr_Occurred()) return DLBIND_TO_PYTHON(); /* replaced since: Python asks it */
    } else {
        PyObject *stack[3] = {x, Py_None, dlbind_cfg.max_version};
        capsule = PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            dlbind_cfg.kwnames_dlpack);
    }
    if (capsule == NULL) {
        if (!older && PyErr_ExceptionMatches(PyExc_AttributeError)) {
            /* not a producer at all? Python says so (a TypeError); a producer's own AttributeError stands */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (!PyObject_HasAttr(x, dlbind_cfg.str_dlpack)) {
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
                return DLBIND_TO_PYTHON();
            }
            PyErr_Restore(type, value, tb);
            return NULL;
        }
        if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError))
            return dlbind_after_refusal(x, older, NULL);
        return NULL;
    }
    if (!PyCapsule_CheckExact(capsule)) return dlbind_not_capsule(x, capsule);
    PyObject *res = dlbind_consume_capsule(capsule, x);
    Py_DECREF(capsule);
    return dlbind_finished(res, x, info);
}

/* Whether a stream= given (stream_obj, stream) is one the producer's device takes, asked before its exchange table
 * is (the pure build asks the device and checks the stream before it asks the producer for anything): 1 yes, 0 Python
 * says what is wrong (a stream-free or unknown device, a refused stream, a device it cannot read), -1 an error. The
 * struct's own device is checked again when the table gave it (dlbind_from_table). */
static int dlbind_stream_fits(PyObject *x, const dlbind_type_info *info, PyObject *stream_obj, long long stream) {
    if (stream_obj == NULL || info->api == NULL || (info->bits & DLBIND_TYPE_PYTHON)) return 1; /* no table asked */
    DLDevice dev;
    int found = dlbind_producer_device(x, &dev);
    if (found <= 0) return found;
    return !dlbind_device_stream_free(dev.device_type) && dlbind_device_known(dev.device_type) &&
           (stream == -1 || dlbind_device_stream_accepted(dev.device_type, stream));
}

/* The plain import of x, of the type info describes: its exchange table, its __dlpack__ on the device's
 * default stream or on none; DLBIND_TO_PYTHON() where Python's rules decide. */
static PyObject *dlbind_typed_import(PyObject *x, const dlbind_type_info *info, PyObject *stream_obj,
                                     long long stream) {
    int fits = dlbind_stream_fits(x, info, stream_obj, stream);
    if (fits <= 0) return fits < 0 ? NULL : DLBIND_TO_PYTHON();
    DLManagedTensorVersioned *out = NULL;
    int taken = dlbind_table_take(x, info, &out);
    if (taken < 0) return NULL;
    if (taken == 1) return dlbind_from_table(x, info, out, stream_obj, stream);
    if (stream_obj != NULL) return DLBIND_TO_PYTHON();
    if (!(info->bits & DLBIND_TYPE_HOST_ONLY)) {
        PyObject *res = NULL;
        if (dlbind_on_default_stream(x, info, &res)) return res;
    }
    return dlbind_asked(x, info);
}

/* The plain import in C: a capsule taken, a producer's exchange table, its __dlpack__ on the device's default
 * stream or on none; DLBIND_TO_PYTHON() where Python's rules decide. */
static PyObject *dlbind_plain_import(PyObject *const *args, size_t nargsf, PyObject *kwnames, int *planless) {
    PyObject *stream_obj = NULL; /* an int stream= (None: NULL) */
    long long stream = -1;
    int plain = dlbind_plain_call(args, nargsf, kwnames, &stream_obj, &stream);
    if (plain <= 0) return plain < 0 ? NULL : DLBIND_TO_PYTHON();
    PyObject *x = args[0];
    if (PyCapsule_CheckExact(x) && stream_obj == NULL) return dlbind_consume_capsule(x, NULL);
    /* a DLPack 0.x copy: producers are called the 0.x way, __dlpack__(stream=...), by the Python code (its
     * capsule comes back here through take and wrap); no exchange table, no versioned call */
    if (!DLBIND_VERSIONED_CAPSULES || PyCapsule_CheckExact(x)) return DLBIND_TO_PYTHON();
    dlbind_type_info info;
    if (dlbind_type_info_of(x, &info) != 0) return NULL;
    *planless = info.plan == Py_None;
    if (*planless) return DLBIND_TO_PYTHON(); /* a type Python has not planned yet: it plans it now */
    Py_INCREF(info.plan); /* borrowed from the type's cache entry, which the producer's code below may evict */
    PyObject *res = dlbind_typed_import(x, &info, stream_obj, stream);
    Py_DECREF(info.plan);
    return res;
}

/* from_dlpack(x, *, device=None, copy=None, stream=None, allow_vector=False): the plain call of a
 * producer or capsule in C; any other call (and every error to explain) in Python. */
PyObject *dlbind_py_from_dlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    (void)mod;
    if (!dlbind_configured()) return NULL;
    int planless = 0;
    PyObject *res = dlbind_plain_import(args, nargsf, kwnames, &planless);
    if (res != Py_NotImplemented) return res;
    Py_DECREF(res); /* the one fall-back into Python: any call the C code does not answer */
    res = dlbind_resume(dlbind_cfg.from_dlpack, Py_None, args, nargsf, kwnames);
    if (res != NULL && planless) dlbind_type_learn(args[0]); /* how Python asked it, once it planned the type */
    return res;
}
