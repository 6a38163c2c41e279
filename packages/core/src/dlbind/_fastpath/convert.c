/* dlbind.convert's C routes (compiled build): the producer's DLManagedTensorVersioned, from its type's
 * exchange table or its __dlpack__, handed to the target's exchange table or, in a one-shot producer, to its
 * from_dlpack; and the direct hand-overs of lasting producer types on devices with streams. Every case
 * these routes do not take goes to the Python convert (dlbind.conversion), which runs the same Decision.
 * Above tensor.c and exchange.c, which it uses; module.c registers it. */
#include "fastpath.h"

#include <stdlib.h>
#if !defined(_WIN32)
#include <sys/mman.h>
#endif

/* ---- convert --------------------------------------------------------------------------------- */

/* A legacy struct as a versioned one for the C routes of convert: the legacy struct stays the owner
 * (its deleter runs from ours, exactly once), its dtype is read as a legacy capsule's is
 * (spec/dtypes.toml [[legacy]]), and NULL strides become the compact ones. NULL when out of memory. */
typedef struct {
    DLManagedTensorVersioned v;
    DLManagedTensor *legacy;
    int64_t strides[]; /* ndim entries when the legacy struct has NULL strides */
} dlbind_legacy_view;

static void dlbind_legacy_view_deleter(DLManagedTensorVersioned *self) {
    DLManagedTensor *legacy = ((dlbind_legacy_view *)self)->legacy;
    PyMem_RawFree(self); /* any thread, with or without the GIL */
    if (legacy->deleter != NULL) legacy->deleter(legacy);
}

static DLManagedTensorVersioned *dlbind_versioned_of_legacy(DLManagedTensor *legacy) { /* dlbind_valid first */
    DLTensor *t = &legacy->dl_tensor;
    size_t extra = (t->strides == NULL && t->ndim > 0 && t->ndim <= DLBIND_MAX_NDIM) ? (size_t)t->ndim : 0;
    dlbind_legacy_view *view = (dlbind_legacy_view *)PyMem_RawCalloc(1, sizeof(dlbind_legacy_view) + extra * sizeof(int64_t));
    if (view == NULL) return NULL;
    view->legacy = legacy;
    view->v.version.major = DLPACK_MAJOR_VERSION;
    view->v.version.minor = DLPACK_MINOR_VERSION;
    view->v.deleter = dlbind_legacy_view_deleter;
    view->v.dl_tensor = *t;
    dlbind_legacy_reading(&view->v.dl_tensor.dtype);
    if (extra) {
        dlbind_compact_strides(t->ndim, t->shape, view->strides);
        view->v.dl_tensor.strides = view->strides;
    }
    return &view->v;
}

/* A compact host copy of what m describes (host-readable, whole-byte elements), as a new struct that
 * owns it (IS_COPIED), for a target that cannot view m (negative strides, read-only data it would
 * import writable). Large copies get 2 MiB-aligned memory the kernel may back with huge pages, as
 * dlbind.export._allocate's (and numpy's) do. m is released. NULL with an error set on failure. */
#define DLBIND_HUGE_COPY ((int64_t)4 << 20)

typedef struct {
    DLManagedTensorVersioned v;
    void *data;          /* malloc'd or posix_memalign'd: free() either way */
    int64_t dims[];      /* shape, then strides */
} dlbind_host_copy;

static void dlbind_host_copy_deleter(DLManagedTensorVersioned *self) { /* any thread, GIL or not */
    free(((dlbind_host_copy *)self)->data);
    free(self);
}

static void *dlbind_copy_memory(int64_t nbytes) {
    size_t size = nbytes > 0 ? (size_t)nbytes : 1;
#if defined(_WIN32)
    return malloc(size); /* freed with free(): no aligned allocation that free() releases there */
#else
    void *p = NULL;
    size_t alignment = nbytes >= DLBIND_HUGE_COPY ? (size_t)2 << 20 : 64; /* 64: what jax's zero-copy needs */
    if (posix_memalign(&p, alignment, size) != 0) return NULL;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (nbytes >= DLBIND_HUGE_COPY) (void)madvise(p, size, MADV_HUGEPAGE); /* a page fault per 2 MiB, not 4 KiB */
#endif
    return p;
#endif
}

static DLManagedTensorVersioned *dlbind_host_copy_of(DLManagedTensorVersioned *m) {
    DLTensor *t = &m->dl_tensor;
    int ndim = t->ndim;
    int64_t item = (int64_t)t->dtype.bits * t->dtype.lanes / 8, count, nbytes;
    if (dlbind_count(t->shape, ndim, &count) != 0 || dlbind_mul_overflow(count, item, &nbytes) ||
        nbytes > (int64_t)(PY_SSIZE_T_MAX / 2)) {
        dlbind_call_deleter(m, 1);
        PyErr_SetString(PyExc_BufferError, "the tensor is too large to copy");
        return NULL;
    }
    dlbind_host_copy *c = (dlbind_host_copy *)calloc(1, sizeof(dlbind_host_copy) + 2 * (size_t)ndim * sizeof(int64_t));
    void *data = c != NULL ? dlbind_copy_memory(nbytes) : NULL;
    if (data == NULL) {
        free(c);
        dlbind_call_deleter(m, 1);
        PyErr_Format(PyExc_MemoryError, "cannot allocate %lld bytes for a copy", (long long)nbytes); /* as Python's */
        return NULL;
    }
    int64_t *dims = c->dims, *strides = c->dims + ndim;
    int64_t steps[DLBIND_MAX_NDIM];
    dlbind_compact_strides(ndim, t->shape, strides);
    for (int i = 0; i < ndim; i++) {
        dims[i] = t->shape[i];
        steps[i] = (t->strides ? t->strides[i] : strides[i]) * item; /* fits: dlbind_import_for_convert checked */
    }
    const char *src = (const char *)t->data + t->byte_offset;
    Py_BEGIN_ALLOW_THREADS
    if (count > 0) dlbind_copy_strided((char *)data, src, ndim, dims, steps, item);
    Py_END_ALLOW_THREADS
    c->data = data;
    c->v.version.major = DLPACK_MAJOR_VERSION;
    c->v.version.minor = DLPACK_MINOR_VERSION;
    c->v.deleter = dlbind_host_copy_deleter;
    c->v.flags = DLBIND_FLAG_IS_COPIED;
    c->v.dl_tensor.data = data;
    c->v.dl_tensor.device.device_type = kDLCPU;
    c->v.dl_tensor.device.device_id = 0;
    c->v.dl_tensor.ndim = ndim;
    c->v.dl_tensor.dtype = t->dtype;
    c->v.dl_tensor.shape = dims;
    c->v.dl_tensor.strides = strides;
    c->v.dl_tensor.byte_offset = 0;
    dlbind_call_deleter(m, 1);
    return &c->v;
}

/* Whether a target whose importer takes the device types `imports` (Route.c_imports: bit d for device type d)
 * takes data on `device_type` where it is. */
static int dlbind_imports_type(uint64_t imports, int64_t device_type) {
    return device_type >= 0 && device_type < 64 && (imports >> device_type) & 1;
}

/* Every device type: where Python's plan already chose the C route (convert_to), nothing is checked again. */
#define DLBIND_IMPORTS_CHECKED (~(uint64_t)0)

/* The places of the fields of dlbind.routes.Route (a NamedTuple) that the C routes read, found by name in its
 * _fields the first time a Route is seen: the record Python's convert runs is the one read here. */
static PyTypeObject *dlbind_route_type; /* strong: the Route class these places are of */
static Py_ssize_t dlbind_route_importer, dlbind_route_table, dlbind_route_handover, dlbind_route_refuse,
    dlbind_route_stream_of, dlbind_route_imports, dlbind_route_lacks;

static int dlbind_route_places(PyObject *route) {
    if (Py_TYPE(route) == dlbind_route_type) return 0;
    if (!PyTuple_Check(route)) {
        PyErr_Format(PyExc_TypeError, "dlbind.routes.ROUTES holds a %.200s, not a Route", Py_TYPE(route)->tp_name);
        return -1;
    }
    PyObject *fields = PyObject_GetAttrString((PyObject *)Py_TYPE(route), "_fields");
    if (fields == NULL) return -1;
    const char *names[7] = {"importer", "table_type", "handover_type", "refuse", "stream_of", "c_imports", "c_lacks"};
    Py_ssize_t found[7];
    for (int i = 0; i < 7; i++) {
        PyObject *name = PyUnicode_FromString(names[i]);
        found[i] = name != NULL ? PySequence_Index(fields, name) : -1;
        Py_XDECREF(name);
        if (found[i] < 0 || found[i] >= PyTuple_GET_SIZE(route)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "dlbind.routes.ROUTES holds a %.200s without a field %s",
                         Py_TYPE(route)->tp_name, names[i]);
            Py_DECREF(fields);
            return -1;
        }
    }
    Py_DECREF(fields);
    dlbind_route_importer = found[0], dlbind_route_table = found[1];
    dlbind_route_handover = found[2], dlbind_route_refuse = found[3], dlbind_route_stream_of = found[4];
    dlbind_route_imports = found[5], dlbind_route_lacks = found[6];
    Py_INCREF(Py_TYPE(route));
    Py_XSETREF(dlbind_route_type, Py_TYPE(route));
    return 0;
}

/* What the C routes read of a Route: the target array type (its exchange table's, else the one handed over to
 * through `from_dlpack`, its importer; None: no C route), the refuse bits, the device types its importer takes
 * and the dtypes it lacks (Route.c_lacks: None or bytes, two a dtype: code, bits). Borrowed from the Route. */
typedef struct {
    PyObject *target_type, *from_dlpack, *lacks;
    long refuse;
    uint64_t imports;
} dlbind_route_view;

static int dlbind_route_read(PyObject *route, dlbind_route_view *r) {
    if (dlbind_route_places(route) < 0) return -1;
    r->target_type = PyTuple_GET_ITEM(route, dlbind_route_table), r->from_dlpack = Py_None;
    if (r->target_type == Py_None) { /* a handover: its importer is handed the producer */
        r->target_type = PyTuple_GET_ITEM(route, dlbind_route_handover);
        r->from_dlpack = PyTuple_GET_ITEM(route, dlbind_route_importer);
    }
    r->lacks = PyTuple_GET_ITEM(route, dlbind_route_lacks);
    if (r->lacks != Py_None && !PyBytes_CheckExact(r->lacks)) {
        PyErr_SetString(PyExc_TypeError, "dlbind.routes.Route.c_lacks must be None or bytes");
        return -1;
    }
    r->refuse = PyLong_AsLong(PyTuple_GET_ITEM(route, dlbind_route_refuse));
    if (r->refuse == -1 && PyErr_Occurred()) return -1;
    r->imports = PyLong_AsUnsignedLongLongMask(PyTuple_GET_ITEM(route, dlbind_route_imports));
    return r->imports == (uint64_t)-1 && PyErr_Occurred() ? -1 : 0;
}

/* Whether the route's target is handed `dtype` by Python's bridge rather than by a C route: a vector dtype, or one
 * it lacks (both refused by the bridge in dlbind's words, or viewed; a target may take such a struct and only then
 * refuse it, and x would be asked again). */
static int dlbind_bridged_dtype(const dlbind_route_view *r, DLDataType dtype) {
    if (dtype.lanes != 1) return 1;
    if (r->lacks == Py_None) return 0;
    const unsigned char *pair = (const unsigned char *)PyBytes_AS_STRING(r->lacks);
    for (Py_ssize_t i = 0; i + 1 < PyBytes_GET_SIZE(r->lacks) && pair[i] <= dtype.code; i += 2) /* by code */
        if (pair[i] == dtype.code && pair[i + 1] == dtype.bits) return 1;
    return 0;
}

/* A struct taken from x that is not valid: refused as Python's import refuses it (its validator's BufferError,
 * naming x), not handed back, for Python's route would ask x again. -1; 0 only where the struct is valid once
 * read as its version says (a legacy dtype): handed back then, for Python's route to import. */
static int dlbind_invalid_struct(void *managed, int versioned, PyObject *x) {
    PyObject *tensor = dlbind_tensor_wrap(managed, versioned, 0, x); /* its deleter runs on failure */
    if (tensor == NULL) return -1;
    Py_DECREF(tensor); /* the struct released */
    return 0;
}

/* An owned DLManagedTensorVersioned of x for the C routes of convert: its type's exchange table, or
 * x.__dlpack__(stream=None, max_version=(1, 3)) (or the call an older producer accepted; a legacy capsule
 * becomes a versioned view, read-only when x's library never writes its arrays). 1 with *out set; 0 (no error set) when the C
 * route does not apply and Python's general route must say what is wrong; 2 with *imported set, the Tensor of x
 * that Python's route finishes (x refused this call: imported as from_dlpack continues, not asked again);
 * -1 on error. The struct is refused where it is not valid (dlbind_invalid_struct); else handed back (its
 * deleter run: Python's route asks x on a stream, or for another device) unless it is readable now (stream-free
 * device) where the target imports it; what the target cannot view (the refuse bits: 1 negative strides, 2
 * read-only, 4 a byte_offset of a part of an element) is copied here, and what C cannot copy is Python's to copy or
 * explain from its Tensor (2), as a dtype the target's importer lacks or a vector one is Python's to bridge
 * (dlbind_bridged_dtype). `r->imports`: the device types the target's importer takes (Route.c_imports),
 * or DLBIND_IMPORTS_CHECKED where Python's plan already chose this route: data elsewhere (pinned host memory,
 * which Python's route asks for on the CPU) is Python's, as dlbind.routes decides it. */
static int dlbind_import_for_convert(PyObject *x, const dlbind_route_view *r, DLManagedTensorVersioned **out,
                                     PyObject **imported) {
    DLManagedTensorVersioned *m = NULL;
    dlbind_type_info info;
    if (dlbind_type_info_of(x, &info) != 0) return -1;
    if (info.plan == Py_None) return 0; /* a type Python has not planned yet: its route plans it now */
    int taken = dlbind_table_take(x, &info, &m);
    if (taken < 0) return -1;
    if (taken == 0 && !(info.bits & DLBIND_TYPE_HOST_ONLY)) {
        /* data that may be on a device with streams: Python's route asks it on the target's stream; data that
         * is not host memory (Vulkan, Metal): no C route's target reads it, Python's bridges or copies it. Either
         * way it is not exported here first (the producer would be asked twice) */
        DLDevice dev;
        int found = dlbind_producer_device(x, &dev);
        if (found < 0) return -1;
        if (found == 0 || !dlbind_device_stream_free(dev.device_type) || !dlbind_device_host(dev.device_type))
            return 0;
        if (!dlbind_imports_type(r->imports, dev.device_type)) return 0;
    }
    if (taken == 0) {
        int older = (info.bits & DLBIND_TYPE_LEGACY_CALL) != 0; /* asked the way it accepted, legacy capsules too */
        PyObject *capsule;
        if (older) {
            capsule = dlbind_older_call(x, info.bits);
            if (capsule == NULL && !PyErr_Occurred()) return 0; /* replaced since: Python's route asks it */
        } else {
            PyObject *stack[3] = {x, Py_None, dlbind_cfg.max_version};
            capsule = PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                dlbind_cfg.kwnames_dlpack);
        }
        if (capsule == NULL) {
            if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_BufferError)) {
                /* an older producer, or one whose buffer carries what it refuses: continued as from_dlpack's */
                *imported = dlbind_after_refusal(x, older, NULL);
                return *imported != NULL ? 2 : -1;
            }
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear(); /* the general route bridges it (a buffer protocol) or says why not */
            return 0;
        }
        if (!PyCapsule_CheckExact(capsule)) {
            dlbind_not_capsule(x, capsule); /* Python's convert raises it too: it is not asked again */
            return -1;
        }
        int versioned;
        void *taken_struct = dlbind_take(capsule, &versioned);
        Py_DECREF(capsule);
        if (taken_struct == NULL) return -1;
        if (versioned) {
            m = (DLManagedTensorVersioned *)taken_struct;
        } else if (!dlbind_valid(taken_struct, 0, 0)) {
            return dlbind_invalid_struct(taken_struct, 0, x);
        } else if ((m = dlbind_versioned_of_legacy((DLManagedTensor *)taken_struct)) == NULL) {
            dlbind_call_deleter(taken_struct, 0);
            PyErr_NoMemory();
            return -1;
        }
        if ((info.bits & DLBIND_TYPE_IMMUTABLE) && !(m->flags & DLBIND_FLAG_IS_COPIED))
            m->flags |= DLBIND_FLAG_READ_ONLY; /* its library never writes it: nor may the target */
    }
    if (!dlbind_valid(m, 1, 0)) return dlbind_invalid_struct(m, 1, x);
    DLTensor *t = &m->dl_tensor;
    int hand_back = !dlbind_device_stream_free(t->device.device_type);
    int here = hand_back || dlbind_imports_type(r->imports, t->device.device_type);
    /* uint8 that may be bool (export.bool = "uint8"): read as the plan reads the array's dtype, as Python's */
    if (!hand_back && here && (info.bits & DLBIND_TYPE_PYTHON) && dlbind_uint8_reading(&info, x, t) != 0) {
        dlbind_call_deleter(m, 1);
        return -1;
    }
    hand_back = hand_back || !here;
    /* Python's route finishes the Tensor of it, x not asked again: a dtype its bridge says what the target makes of */
    int python = !hand_back && dlbind_bridged_dtype(r, t->dtype);
    /* what the target cannot view is copied here (refuse: 1 negative strides, 2 read-only, 4 a byte_offset of a
     * part of an element) */
    int copy = 0, item = t->dtype.bits * t->dtype.lanes / 8;
    if ((r->refuse & 4) && item > 0 && t->byte_offset % (uint64_t)item) copy = 1;
    if (!hand_back && (r->refuse & 1) && t->strides != NULL)
        for (int i = 0; i < t->ndim; i++)
            if (t->strides[i] < 0) copy = 1;
    if ((r->refuse & 2) && (m->flags & DLBIND_FLAG_READ_ONLY)) copy = 1;
    if (copy && !hand_back && (!dlbind_device_host(t->device.device_type) || (t->dtype.bits * t->dtype.lanes) % 8 != 0))
        python = 1; /* device memory, sub-byte elements: Python's copies */
    for (int i = 0; copy && !hand_back && t->strides != NULL && i < t->ndim; i++) {
        int64_t bytes; /* strides whose byte size overflows: Python says what is wrong */
        if (dlbind_mul_overflow(t->strides[i], (int64_t)t->dtype.bits * t->dtype.lanes / 8, &bytes)) python = 1;
    }
    if (hand_back && taken) { /* a table's export, unordered (no_sync): Python's route asks it on the target's stream */
        dlbind_call_deleter(m, 1);
        return 0;
    }
    /* Python's route finishes the struct x gave, x not asked again: a dtype its bridge reads, a copy it makes, or
     * (hand_back) a capsule on another device than __dlpack_device__ said (host memory the target imports) */
    if (hand_back || python) return (*imported = dlbind_tensor_wrap(m, 1, 0, x)) != NULL ? 2 : -1;
    if (copy && (m = dlbind_host_copy_of(m)) == NULL) return -1;
    *out = m;
    return 1;
}

/* NotImplemented, with *taken the Tensor of what a target that refused the C route's struct left of it: the
 * struct wrapped, or the Tensor a call of the target made of it, which Python's route finishes so that x is not
 * asked again (*taken stays NULL where the target took the struct: Python's route asks x again). NULL on error. */
static PyObject *dlbind_untaken(DLManagedTensorVersioned *m, PyObject *tensor, PyObject **taken) {
    if (tensor != NULL) *taken = Py_NewRef(tensor); /* m was moved into it */
    else if (m != NULL && (*taken = dlbind_tensor_wrap(m, 1, 0, NULL)) == NULL) return NULL; /* checked when taken */
    Py_RETURN_NOTIMPLEMENTED;
}

/* Handover: a producer of one imported struct, for a consumer that has no exchange table. Its
 * first plain __dlpack__ call (versioned, no stream/copy, dl_device None or where the data is)
 * hands the struct itself over in a capsule: no second struct, no dlbind.Tensor in between. Any
 * other call wraps the struct in a dlbind.Tensor once and answers through it (Tensor's rules and
 * messages). Made only by convert's C route; never seen by users unless the consumer keeps it. */
typedef struct {
    PyObject_HEAD
    DLManagedTensorVersioned *m; /* owned until handed over */
    PyObject *tensor;            /* the dlbind.Tensor of m, once a call needed one */
    PyObject *handed;            /* the capsule m was handed over in: taken back if the consumer failed unconsumed */
    DLDevice device;
} dlbind_handover;

/* Freed handovers are kept for the next convert, untracked by the garbage collector until reused. */
#define DLBIND_HANDOVER_FREE_MAX 8
static PyObject *dlbind_handover_kept[DLBIND_HANDOVER_FREE_MAX];
static dlbind_free_list dlbind_handovers = {dlbind_handover_kept, 0, DLBIND_HANDOVER_FREE_MAX};

/* Garbage collection: a consumer that keeps its producer can make a cycle through the owner the
 * struct holds (when the struct is dlbind's own) or through the Tensor. No tp_clear: whatever a
 * cycle through a Handover passes through (the consumer's containers) clears. */
static int dlbind_handover_traverse(dlbind_handover *self, visitproc visit, void *arg) {
    Py_VISIT(self->tensor);
    Py_VISIT(dlbind_managed_owner(self->m, 1));
    return 0;
}

static void dlbind_handover_dealloc(dlbind_handover *self) {
    PyObject_GC_UnTrack((PyObject *)self);
    DLManagedTensorVersioned *m = self->m;
    self->m = NULL;
    if (m != NULL) dlbind_call_deleter(m, 1);
    Py_CLEAR(self->tensor);
    Py_CLEAR(self->handed);
    dlbind_free_list_keep(&dlbind_handovers, (PyObject *)self);
}

static PyTypeObject dlbind_handover_type;

/* Takes m (its deleter runs on failure). */
static PyObject *dlbind_handover_new(DLManagedTensorVersioned *m) {
    dlbind_handover *self = (dlbind_handover *)dlbind_free_list_new(&dlbind_handovers, &dlbind_handover_type);
    if (self == NULL) {
        dlbind_call_deleter(m, 1);
        return NULL;
    }
    self->m = m;
    self->tensor = NULL;
    self->handed = NULL;
    self->device = m->dl_tensor.device;
    PyObject_GC_Track((PyObject *)self);
    return (PyObject *)self;
}

static PyObject *dlbind_handover_tensor(dlbind_handover *self) {
    if (self->tensor == NULL) {
        if (self->m == NULL) {
            PyErr_SetString(PyExc_BufferError, "this DLPack producer has already handed its tensor over");
            return NULL;
        }
        DLManagedTensorVersioned *m = self->m;
        self->m = NULL;
        self->tensor = dlbind_tensor_wrap(m, 1, 0, NULL);
    }
    return self->tensor;
}

static PyObject *dlbind_handover_dlpack(dlbind_handover *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    dlbind_dlpack_args parsed = {0, 0, NULL};
    int fast = dlbind_parse_dlpack("Handover", args, nargs, kwnames, self->device, &parsed);
    if (fast < 0) return NULL;
    if (fast && parsed.versioned && self->m != NULL) {
        DLManagedTensorVersioned *m = self->m;
        self->m = NULL; /* the capsule owns it now (or its deleter ran) */
        PyObject *capsule = dlbind_capsule_of(m, 1);
        Py_XSETREF(self->handed, Py_XNewRef(capsule));
        return capsule;
    }
    PyObject *tensor = dlbind_handover_tensor(self);
    if (tensor == NULL) return NULL;
    PyObject *stack[5];
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (n > 4) {
        PyErr_SetString(PyExc_TypeError, "Handover.__dlpack__() got multiple values for a keyword argument");
        return NULL;
    }
    stack[0] = tensor;
    for (Py_ssize_t i = 0; i < n; i++) stack[1 + i] = args[i];
    return PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1, kwnames);
}

static PyObject *dlbind_handover_device(dlbind_handover *self, PyObject *unused) {
    (void)unused;
    return Py_BuildValue("(ii)", (int)self->device.device_type, (int)self->device.device_id);
}

static PyMethodDef dlbind_handover_methods[] = {
    DLBIND_DLPACK_METHOD(dlbind_handover_dlpack),
    {"__dlpack_device__", (PyCFunction)dlbind_handover_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(device type, device id)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject dlbind_handover_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = DLBIND_MODULE ".Handover",
    .tp_basicsize = sizeof(dlbind_handover),
    .tp_dealloc = (destructor)dlbind_handover_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)dlbind_handover_traverse,
    .tp_free = PyObject_GC_Del,
    .tp_doc = "A DLPack producer of one imported tensor (dlbind.convert's C route to consumers without an exchange table).",
    .tp_methods = dlbind_handover_methods,
};

int dlbind_convert_init(void) { return PyType_Ready(&dlbind_handover_type); }

#if DLBIND_HEADER_HAS_EXCHANGE_API
typedef struct {
    void *ctx;
    void (*deleter)(struct DLManagedTensorVersioned *);
    int called;
} dlbind_inflight;

/* The deleter of a struct while a target's exchange table imports it (dlbind_convert_table). */
static void dlbind_inflight_deleter(DLManagedTensorVersioned *m) {
    dlbind_inflight *rec = (dlbind_inflight *)m->manager_ctx;
    rec->called = 1;
    m->manager_ctx = rec->ctx;
    m->deleter = rec->deleter;
    if (m->deleter != NULL) m->deleter(m);
}

/* The route to a target with an exchange table: its managed_tensor_to_py_object_no_sync. A failure
 * there hands back to Python (NotImplemented), like the Handover route: the general route gives the
 * library's own error for the same call, so both builds raise the same. */
static PyObject *dlbind_convert_table(PyObject *x, const dlbind_exchange_api *target, const dlbind_route_view *r,
                                      PyObject **taken) {
    DLManagedTensorVersioned *m = NULL;
    int found = dlbind_import_for_convert(x, r, &m, taken);
    if (found != 1) return found < 0 ? NULL : Py_NewRef(Py_NotImplemented); /* 2: *taken is Python's */
    void *out = NULL;
    /* Who owns the struct when the target fails? The spec does not say, and torch differs by failure
     * (it calls the deleter when its checks run after taking the struct: "numel ... overflow", not for
     * an unknown dtype code). The struct goes in with a trampoline deleter that records the call, so it
     * is released exactly once either way; the original deleter is back in place when we return
     * (torch reads m->deleter when it releases, not when it imports). */
    dlbind_inflight rec = {m->manager_ctx, m->deleter, 0};
    m->manager_ctx = &rec;
    m->deleter = dlbind_inflight_deleter;
    int failed = target->managed_tensor_to_py_object_no_sync(m, &out) != 0 || out == NULL;
    /* the target's error dropped while the trampoline still records: what it held of m releases m there */
    int interrupt = failed && PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_Exception); /* it stands */
    if (failed && !interrupt) PyErr_Clear();
    if (!rec.called) { /* m is alive: put its own deleter back */
        m->manager_ctx = rec.ctx;
        m->deleter = rec.deleter;
    }
    if (interrupt) {
        if (!rec.called) dlbind_call_deleter(m, 1);
        return NULL;
    }
    return failed ? dlbind_untaken(rec.called ? NULL : m, NULL, taken) : (PyObject *)out;
}
#endif

/* The route to a target without one: its from_dlpack(Handover of the imported struct). A failure
 * there hands back to Python (NotImplemented), whose general route then gives that library's own
 * error for the same call. */
static PyObject *dlbind_convert_handover(PyObject *x, const dlbind_route_view *r, PyObject **taken) {
    DLManagedTensorVersioned *m = NULL;
    int found = dlbind_import_for_convert(x, r, &m, taken);
    if (found != 1) return found < 0 ? NULL : Py_NewRef(Py_NotImplemented); /* 2: *taken is Python's */
    PyObject *producer = dlbind_handover_new(m);
    if (producer == NULL) return NULL;
    PyObject *out = PyObject_Vectorcall(r->from_dlpack, &producer, 1, NULL);
    if (out == NULL && PyErr_ExceptionMatches(PyExc_Exception)) { /* KeyboardInterrupt and the like stand */
        PyErr_Clear();
        dlbind_handover *h = (dlbind_handover *)producer; /* what the importer left of the struct */
        DLManagedTensorVersioned *left = h->m;
        h->m = NULL;
        if (left == NULL && h->handed != NULL && PyCapsule_IsValid(h->handed, DLBIND_NAME_VERSIONED)) {
            int versioned; /* handed over, failed unconsumed: its capsule's destructor would release it */
            left = (DLManagedTensorVersioned *)dlbind_take(h->handed, &versioned);
            if (left == NULL) PyErr_Clear(); /* not taken back: Python's route asks again */
        }
        out = dlbind_untaken(left, h->tensor, taken);
    }
    Py_DECREF(producer);
    return out;
}

/* A C route's NotImplemented with the Tensor it imported and left to Python (taken; NULL: none) as convert_to
 * answers it to Python's route: (NotImplemented, taken). Steals both. */
static PyObject *dlbind_with_taken(PyObject *out, PyObject *taken) {
    if (out != Py_NotImplemented || taken == NULL) {
        Py_XDECREF(taken); /* set only with NotImplemented */
        return out;
    }
    PyObject *pair = PyTuple_Pack(2, out, taken);
    Py_DECREF(out);
    Py_DECREF(taken);
    return pair;
}

/* x converted by the C route the view r reads of a Route: the target's exchange table, or its importer handed the
 * struct in a Handover; NotImplemented where there is none (with *taken, the Tensor it imported and leaves to
 * Python's route, where it made one); NULL with the error the target (or x) raised. */
static PyObject *dlbind_route_run(PyObject *x, const dlbind_route_view *r, PyObject **taken) {
    if (r->from_dlpack != Py_None) return dlbind_convert_handover(x, r, taken);
#if DLBIND_HEADER_HAS_EXCHANGE_API
    const dlbind_exchange_api *target = dlbind_table_of_type(r->target_type);
    if (target != NULL && target->managed_tensor_to_py_object_no_sync != NULL)
        return dlbind_convert_table(x, target, r, taken);
    if (PyErr_Occurred()) return NULL;
#endif
    Py_RETURN_NOTIMPLEMENTED; /* no exchange table: the Python route */
}

/* convert_to(x, route) -> x converted by the C route of `route` (a dlbind.routes.Route Python's plan chose it
 * for), or NotImplemented when it does not apply (the Python code then takes the general one), or
 * (NotImplemented, Tensor) when it imported x and leaves the Tensor to Python's route (x refused that call, or the
 * target the struct, or the target is bridged that dtype). */
PyObject *dlbind_py_convert_to(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "convert_to(x, route) takes 2 arguments: x and its dlbind.routes.Route");
        return NULL;
    }
    if (!dlbind_configured()) return NULL;
    /* a DLPack 0.x copy: both C routes carry a versioned struct; the Python route imports legacily */
    if (!DLBIND_VERSIONED_CAPSULES) Py_RETURN_NOTIMPLEMENTED;
    dlbind_route_view r;
    if (dlbind_route_read(args[1], &r) < 0) return NULL;
    if (!PyType_Check(r.target_type)) Py_RETURN_NOTIMPLEMENTED;
    r.imports = DLBIND_IMPORTS_CHECKED; /* Python's plan chose this route for the device x is on */
    PyObject *taken = NULL;
    PyObject *out = dlbind_route_run(args[0], &r, &taken); /* before taken is read: a sequence point */
    return dlbind_with_taken(out, taken);
}

/* The pending exception of a failed C route to `to` handed to convert's fall-back,
 * dlbind.conversion.resume(exc, x, to), which raises what Python's convert raises for it (a target's RuntimeError
 * etc. becomes a BufferError naming it). Always returns NULL. */
static PyObject *dlbind_target_error(PyObject *x, PyObject *to) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (value == NULL) { /* nothing raised: leave it to the caller's SystemError */
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    if (tb != NULL) PyException_SetTraceback(value, tb);
    PyObject *args[2] = {x, to};
    PyObject *res = dlbind_resume(dlbind_cfg.convert, value, args, 2, NULL);
    if (res != NULL) { /* a fall-back that returned said nothing of the failure: the original stands */
        Py_DECREF(res);
        PyErr_Restore(type, value, tb);
        return NULL;
    }
    Py_XDECREF(type);
    Py_DECREF(value);
    Py_XDECREF(tb);
    return NULL;
}

/* Whether the target's current stream on device `dev` (route.stream_of(index)) is one the producer refuses
 * (plan.refused_streams): 1 yes (Python's relay asks on the device's default), 0 no, -1 error. */
static int dlbind_stream_refused(PyObject *route, PyObject *plan, DLDevice dev) {
    if (dlbind_route_places(route) < 0) return -1; /* found here: Python code ran since the route was read */
    PyObject *stream_of = PyTuple_GET_ITEM(route, dlbind_route_stream_of);
    if (stream_of == Py_None) return 0;
    PyObject *refused = PyObject_GetAttr(plan, dlbind_cfg.attr_refused_streams);
    PyObject *stream = refused != NULL ? PyObject_CallFunction(stream_of, "i", (int)dev.device_id) : NULL;
    PyObject *pair = stream != NULL ? Py_BuildValue("(iO)", (int)dev.device_type, stream) : NULL;
    int found = pair != NULL ? PySequence_Contains(refused, pair) : -1;
    Py_XDECREF(pair);
    Py_XDECREF(stream);
    Py_XDECREF(refused);
    return found;
}

/* The direct hand-over of a producer on a device with streams to the target's importer (one exchange, which
 * the target asks on its own stream), where dlbind.routes.decide made that the plain call's decision for x's
 * type, `to` and the device x is on (its plan's direct: to -> {device type: watch_stream}); x's export guards
 * first, as Python's plan checks them; where the decision watches the stream, the target's current stream is
 * read and one the producer refuses left to Python's relay. NotImplemented (a new reference) where C does not
 * hand over. */
static PyObject *dlbind_convert_direct(PyObject *x, PyObject *to, PyObject *route) {
    dlbind_type_info info;
    if (dlbind_type_info_of(x, &info) != 0) return NULL;
    if (info.direct == NULL || !PyDict_Check(info.direct) || PyDict_GET_SIZE(info.direct) == 0)
        return Py_NewRef(Py_NotImplemented);
    PyObject *types = PyDict_GetItemWithError(info.direct, to);
    if (types == NULL) return PyErr_Occurred() ? NULL : Py_NewRef(Py_NotImplemented);
    /* the producer's code below may change the plan's dict, or evict the type's entry that lends these */
    PyObject *held[3] = {Py_NewRef(types), Py_NewRef(info.guards), Py_NewRef(info.plan)}, *out = NULL;
    DLDevice dev;
    PyObject *watch = NULL;
    int direct = dlbind_producer_device(x, &dev); /* -1 error, 0 no device said: Python's route says why */
    if (direct == 1) {
        PyObject *kind = PyLong_FromLong((long)dev.device_type);
        watch = kind != NULL && PyDict_Check(types) ? PyDict_GetItemWithError(types, kind) : NULL;
        direct = watch != NULL ? 1 : PyErr_Occurred() ? -1 : 0;
        Py_XDECREF(kind);
    }
    if (direct == 1 && dlbind_guards_pass(x, &info, DLBIND_GUARDS_ALL) != 0) direct = -1;
    if (direct == 1 && watch == Py_True) {
        int refused = dlbind_stream_refused(route, info.plan, dev);
        direct = refused < 0 ? -1 : !refused;
    }
    if (direct == 1 && dlbind_route_places(route) < 0) direct = -1; /* found here, after Python code ran */
    if (direct == 1) out = PyObject_CallOneArg(PyTuple_GET_ITEM(route, dlbind_route_importer), x);
    else if (direct == 0) out = Py_NewRef(Py_NotImplemented);
    for (int i = 0; i < 3; i++) Py_DECREF(held[i]);
    return out;
}

/* x converted by the C route of `route` (to's Route record): where it has a target array type with an exchange
 * table (table_type), or one it hands over in C (handover_type, through its importer); NotImplemented (a new
 * reference) where it has neither or the producer takes another way (with *taken, the Tensor it imported and
 * leaves to Python's route, where it made one), NULL with the error convert raises. */
static PyObject *dlbind_convert_route(PyObject *x, PyObject *to, PyObject *route, PyObject **taken) {
    dlbind_route_view r;
    if (dlbind_route_read(route, &r) < 0) return NULL;
    if (!PyType_Check(r.target_type)) return Py_NewRef(Py_NotImplemented);
    if (PyObject_TypeCheck(x, (PyTypeObject *)r.target_type)) return Py_NewRef(x); /* already there */
    PyObject *out = dlbind_route_run(x, &r, taken);
    return out == NULL ? dlbind_target_error(x, to) : out;
}

/* convert(x, to, *, device=None, copy=None, stream=None): the C routes where `to`'s Route (routes: to -> the
 * Route record dlbind.routes.route_to made) has a target array type with an exchange table (table_type) or one
 * handed over in C (handover_type, through its importer); every other call in Python. */
PyObject *dlbind_py_convert(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    (void)mod;
    if (!dlbind_configured()) return NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *to = nargs == 2 ? args[1] : NULL;
    int plain = DLBIND_VERSIONED_CAPSULES && (nargs == 1 || nargs == 2); /* 0.x: no C route (convert_to) */
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; plain && i < nkw; i++) {
        int kw = dlbind_keyword(PyTuple_GET_ITEM(kwnames, i));
        PyObject *value = args[nargs + i];
        if (kw == DLBIND_KW_TO && to == NULL)
            to = value;
        else if (value != Py_None || !(kw == DLBIND_KW_DEVICE || kw == DLBIND_KW_COPY || kw == DLBIND_KW_STREAM))
            plain = 0;
    }
    if (plain && to != NULL && PyUnicode_CheckExact(to)) {
        PyObject *route = PyDict_GetItemWithError(dlbind_cfg.routes, to);
        if (route == NULL && PyErr_Occurred()) return NULL;
        if (route != NULL) {
            Py_INCREF(route); /* the producer's code below may change ROUTES */
            PyObject *out = dlbind_convert_direct(args[0], to, route), *taken = NULL;
            if (out == NULL) out = dlbind_target_error(args[0], to);
            else if (out == Py_NotImplemented) {
                Py_DECREF(out);
                out = dlbind_convert_route(args[0], to, route, &taken);
            }
            Py_DECREF(route);
            if (out == Py_NotImplemented && taken != NULL) { /* x imported: Python's route finishes */
                PyObject *pair[2] = {args[0], to};
                Py_SETREF(out, dlbind_resume(dlbind_cfg.convert, taken, pair, 2, NULL));
            }
            Py_XDECREF(taken);
            if (out != Py_NotImplemented) return out;
            Py_DECREF(out);
        }
    }
    return dlbind_resume(dlbind_cfg.convert, Py_None, args, nargsf, kwnames); /* the one fall-back into Python */
}
