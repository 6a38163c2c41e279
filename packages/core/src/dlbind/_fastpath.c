/* Hand-written C of the compiled build, appended to the generated declarations by
 * _generated/build_api.py. dlbind_install() registers CPython functions on the cffi module
 * (dlbind._api) once at import; dlbind.capsule uses them when the compiled build is loaded.
 *
 * Ownership: an exported DLManagedTensor(Versioned) lives inside a Python "keepalive" object
 * (a tuple holding the struct's memory, the shape/strides array and the data's owner);
 * manager_ctx holds one reference to it. The deleter drops that reference, with the GIL, keeping
 * any pending exception intact, and does nothing once the interpreter is finalizing (leaking is
 * the only safe choice then).
 */
#include <Python.h>
#include <string.h>

static const char NAME_VERSIONED[] = "dltensor_versioned";
static const char NAME_USED_VERSIONED[] = "used_dltensor_versioned";
static const char NAME_LEGACY[] = "dltensor";
static const char NAME_USED_LEGACY[] = "used_dltensor";

/* How many tensors we exported and how many of our deleters ran (read by the leak tests). */
static unsigned long long dlbind_deleter_count = 0;
static unsigned long long dlbind_export_count = 0;

static int dlbind_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

static void dlbind_drop(void *manager_ctx) {
    if (manager_ctx == NULL || dlbind_finalizing()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    dlbind_deleter_count++;
    Py_DECREF((PyObject *)manager_ctx);
    PyErr_Restore(type, value, tb);
    PyGILState_Release(state);
}

static void dlbind_deleter_versioned(DLManagedTensorVersioned *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL; /* a second call does nothing */
    dlbind_drop(ctx);
}

static void dlbind_deleter_legacy(DLManagedTensor *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_drop(ctx);
}

/* An unconsumed capsule frees its tensor; a consumed one (renamed used_*) belongs to the consumer. */
static void dlbind_capsule_destructor(PyObject *capsule) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const char *name = PyCapsule_GetName(capsule);
    if (name != NULL && strcmp(name, NAME_VERSIONED) == 0) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)PyCapsule_GetPointer(capsule, NAME_VERSIONED);
        if (m != NULL && m->deleter != NULL) m->deleter(m);
    } else if (name != NULL && strcmp(name, NAME_LEGACY) == 0) {
        DLManagedTensor *m = (DLManagedTensor *)PyCapsule_GetPointer(capsule, NAME_LEGACY);
        if (m != NULL && m->deleter != NULL) m->deleter(m);
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* export(keepalive, address, versioned) -> capsule: wire our deleter and wrap the struct. */
static PyObject *dlbind_py_export(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "export(keepalive, address, versioned)");
        return NULL;
    }
    void *address = PyLong_AsVoidPtr(args[1]);
    if (address == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "NULL struct address");
        return NULL;
    }
    int versioned = PyObject_IsTrue(args[2]);
    if (versioned < 0) return NULL;
    PyObject *keepalive = args[0];
    Py_INCREF(keepalive);
    dlbind_export_count++;
    PyObject *capsule;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)address;
        m->manager_ctx = keepalive;
        m->deleter = dlbind_deleter_versioned;
        capsule = PyCapsule_New(m, NAME_VERSIONED, dlbind_capsule_destructor);
        if (capsule == NULL) m->deleter(m);
    } else {
        DLManagedTensor *m = (DLManagedTensor *)address;
        m->manager_ctx = keepalive;
        m->deleter = dlbind_deleter_legacy;
        capsule = PyCapsule_New(m, NAME_LEGACY, dlbind_capsule_destructor);
        if (capsule == NULL) m->deleter(m);
    }
    return capsule;
}

/* take(capsule) -> (address, versioned): check the name, rename to used_*, hand over the pointer. */
static PyObject *dlbind_py_take(PyObject *mod, PyObject *capsule) {
    (void)mod;
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "expected a DLPack capsule (PyCapsule), got %.200s", Py_TYPE(capsule)->tp_name);
        return NULL;
    }
    const char *name = PyCapsule_GetName(capsule);
    int versioned;
    const char *used;
    if (name != NULL && strcmp(name, NAME_VERSIONED) == 0) {
        versioned = 1;
        used = NAME_USED_VERSIONED;
    } else if (name != NULL && strcmp(name, NAME_LEGACY) == 0) {
        versioned = 0;
        used = NAME_USED_LEGACY;
    } else if (name != NULL && (strcmp(name, NAME_USED_VERSIONED) == 0 || strcmp(name, NAME_USED_LEGACY) == 0)) {
        PyErr_Format(PyExc_BufferError, "this DLPack capsule was already consumed (its name is '%s')", name);
        return NULL;
    } else {
        if (name == NULL)
            PyErr_SetString(PyExc_BufferError,
                            "not a DLPack capsule: no name; expected 'dltensor_versioned' or 'dltensor'");
        else
            PyErr_Format(PyExc_BufferError,
                         "not a DLPack capsule: '%.100s'; expected 'dltensor_versioned' or 'dltensor'", name);
        return NULL;
    }
    void *pointer = PyCapsule_GetPointer(capsule, name);
    if (pointer == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_BufferError, "the DLPack capsule holds a NULL pointer");
        return NULL;
    }
    if (PyCapsule_SetName(capsule, used) != 0) return NULL;
    return Py_BuildValue("(NO)", PyLong_FromVoidPtr(pointer), versioned ? Py_True : Py_False);
}

/* ---- DLPack 1.3 C exchange API ---------------------------------------------------------------
 * Consumer: exchange_import(obj) uses the table on type(obj) (cached per type) and returns the
 * address of an owned DLManagedTensorVersioned, or None when the type has no usable table.
 * Producer: dlbind's own table, whose functions go through dlbind.exchange (Python) for the work
 * that needs Python objects; it is static and lives as long as the process. */

static PyObject *dlbind_api_cache = NULL; /* type -> capsule or None */

static const DLPackExchangeAPI *dlbind_table_of_type(PyObject *type) {
    if (dlbind_api_cache == NULL && (dlbind_api_cache = PyDict_New()) == NULL) return NULL;
    PyObject *cap = PyDict_GetItemWithError(dlbind_api_cache, type);
    if (cap == NULL) {
        if (PyErr_Occurred()) return NULL;
        cap = PyObject_GetAttrString(type, "__dlpack_c_exchange_api__");
        if (cap == NULL) {
            PyErr_Clear();
            cap = Py_None;
            Py_INCREF(cap);
        }
        if (PyDict_SetItem(dlbind_api_cache, type, cap) != 0) {
            Py_DECREF(cap);
            return NULL;
        }
        Py_DECREF(cap); /* the dict holds it */
    }
    if (!PyCapsule_IsValid(cap, "dlpack_exchange_api")) return NULL;
    const DLPackExchangeAPI *api = (const DLPackExchangeAPI *)PyCapsule_GetPointer(cap, "dlpack_exchange_api");
    if (api == NULL) {
        PyErr_Clear();
        return NULL;
    }
    /* walk to a major version we understand */
    const DLPackExchangeAPIHeader *h = &api->header;
    while (h != NULL && h->version.major != DLPACK_MAJOR_VERSION) h = h->prev_api;
    if (h == NULL) return NULL;
    api = (const DLPackExchangeAPI *)h;
    if (api->managed_tensor_from_py_object_no_sync == NULL) return NULL;
    return api;
}

static const DLPackExchangeAPI *dlbind_table_of(PyObject *obj) { return dlbind_table_of_type((PyObject *)Py_TYPE(obj)); }

static PyObject *dlbind_py_exchange_import(PyObject *mod, PyObject *obj) {
    (void)mod;
    const DLPackExchangeAPI *api = dlbind_table_of(obj);
    if (api == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    DLManagedTensorVersioned *out = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &out) != 0 || out == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_BufferError, "%.200s's DLPack exchange table failed without saying why",
                         Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyLong_FromVoidPtr(out);
}

/* The helpers in dlbind.exchange our table calls (looked up once). */
static PyObject *dlbind_exchange_module = NULL;

static PyObject *dlbind_exchange_helper(const char *name) {
    if (dlbind_exchange_module == NULL) {
        dlbind_exchange_module = PyImport_ImportModule("dlbind.exchange");
        if (dlbind_exchange_module == NULL) return NULL;
    }
    return PyObject_GetAttrString(dlbind_exchange_module, name);
}

/* Call helper(args...) which returns an int address; store it in *out. */
static int dlbind_call_address(const char *helper, PyObject *args, void **out) {
    PyObject *fn = dlbind_exchange_helper(helper);
    if (fn == NULL) {
        Py_XDECREF(args);
        return -1;
    }
    PyObject *res = args ? PyObject_Call(fn, args, NULL) : NULL;
    Py_DECREF(fn);
    Py_XDECREF(args);
    if (res == NULL) return -1;
    *out = PyLong_AsVoidPtr(res);
    Py_DECREF(res);
    return (*out == NULL && PyErr_Occurred()) ? -1 : 0;
}

/* Callers hold the GIL (they pass PyObject*); Ensure/Release is cheap then, and makes calls
 * through cffi (which releases the GIL around foreign calls) safe too. */
static int dlbind_x_from_py(void *py_object, DLManagedTensorVersioned **out) {
    PyGILState_STATE state = PyGILState_Ensure();
    void *address = NULL;
    int rc = dlbind_call_address("managed_from_object", Py_BuildValue("(O)", (PyObject *)py_object), &address);
    *out = (DLManagedTensorVersioned *)address;
    PyGILState_Release(state);
    return rc;
}

static int dlbind_x_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = -1;
    PyObject *fn = dlbind_exchange_helper("object_from_managed");
    if (fn != NULL) {
        PyObject *res = PyObject_CallFunction(fn, "N", PyLong_FromVoidPtr(tensor));
        Py_DECREF(fn);
        if (res != NULL) {
            *out_py_object = res; /* a new reference, as the API asks */
            rc = 0;
        }
    }
    PyGILState_Release(state);
    return rc;
}

static int dlbind_x_allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                             void (*SetError)(void *error_ctx, const char *kind, const char *message)) {
    PyGILState_STATE state = PyGILState_Ensure();
    void *address = NULL;
    int rc = dlbind_call_address("allocate", Py_BuildValue("(n)", (Py_ssize_t)prototype), &address);
    if (rc != 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *message = text ? PyUnicode_AsUTF8(text) : "allocation failed";
        if (SetError) SetError(error_ctx, type ? ((PyTypeObject *)type)->tp_name : "RuntimeError", message ? message : "");
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
        *out = NULL;
    } else {
        *out = (DLManagedTensorVersioned *)address;
    }
    PyGILState_Release(state);
    return rc;
}

static int dlbind_x_stream(DLDeviceType device_type, int32_t device_id, void **out_current_stream) {
    (void)device_id;
    if (device_type == kDLCPU || device_type == kDLCUDAHost || device_type == kDLROCMHost) {
        *out_current_stream = NULL;
        return 0;
    }
    PyGILState_STATE state = PyGILState_Ensure();
    PyErr_Format(PyExc_BufferError, "dlbind's core has no stream for device type %d: install its dlbind backend",
                 (int)device_type);
    PyGILState_Release(state);
    return -1;
}

static DLPackExchangeAPI dlbind_exchange_table = {
    {{DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION}, NULL},
    dlbind_x_allocate,
    dlbind_x_from_py,
    dlbind_x_to_py,
    NULL, /* dltensor_from_py_object_no_sync: optional; dlbind.Tensor keeps no C-level shape arrays */
    dlbind_x_stream,
};

static PyObject *dlbind_py_exchange_table(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyCapsule_New(&dlbind_exchange_table, "dlpack_exchange_api", NULL);
}


/* ---- the fast paths ----------------------------------------------------------------------------
 * configure() hands C the Python pieces it needs once: the tables of known dtype codes and device
 * types (from the generated enums), the Tensor class (a Python subclass of TensorCore), the CPU
 * device tuple, and the Python implementations every unusual case is delegated to. The C code
 * handles the common exchange only; anything else goes to the Python code, which owns the rules
 * and the error messages. */

static unsigned char dlbind_known_code[256];
static unsigned char dlbind_known_device[256];
static unsigned char dlbind_host_device[256];
static PyTypeObject *dlbind_tensor_type = NULL;   /* dlbind.Tensor */
static PyObject *dlbind_cpu_device = NULL;        /* (DeviceType.kDLCPU, 0) */
static PyObject *dlbind_slow_asdlpack = NULL;     /* dlbind.producer.asdlpack */
static PyObject *dlbind_slow_from_dlpack = NULL;  /* dlbind.consumer.from_dlpack */
static PyObject *dlbind_slow_from_managed = NULL; /* dlbind.tensor.check_managed: raises the right error */
static PyObject *dlbind_slow_export_view = NULL;  /* dlbind.producer.export_view */
static PyObject *dlbind_slow_after_type_error = NULL; /* dlbind.consumer.after_type_error */
static PyObject *dlbind_max_version = NULL;       /* (1, 3) */
static PyObject *dlbind_str_stream, *dlbind_str_max_version, *dlbind_str_dl_device, *dlbind_str_copy;
static PyObject *dlbind_str_dlpack, *dlbind_kwnames_dlpack;

/* One allocation per export: the managed struct, then shape and strides. */
typedef struct {
    DLManagedTensorVersioned m;
    int64_t dims[];
} dlbind_block_v;
typedef struct {
    DLManagedTensor m;
    int64_t dims[];
} dlbind_block_l;

static void dlbind_block_drop(void *ctx) {
    /* drop the exporter's reference (as dlbind_drop), the block itself is freed by the caller */
    dlbind_drop(ctx);
}

static void dlbind_block_deleter_v(DLManagedTensorVersioned *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_block_drop(ctx);
    PyMem_RawFree(self);
}

static void dlbind_block_deleter_l(DLManagedTensor *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_block_drop(ctx);
    PyMem_RawFree(self);
}

/* A capsule over memory described by the arguments; owner gets one reference until the deleter. */
static PyObject *dlbind_make_capsule(PyObject *owner, void *data, int ndim, const int64_t *shape,
                                     const int64_t *strides, DLDevice device, DLDataType dtype, uint64_t byte_offset,
                                     int versioned, uint64_t flags) {
    size_t dims_bytes = (size_t)(ndim > 0 ? ndim : 0) * 2 * sizeof(int64_t);
    DLTensor *t;
    void *block;
    if (versioned) {
        dlbind_block_v *b = (dlbind_block_v *)PyMem_RawMalloc(sizeof(dlbind_block_v) + dims_bytes);
        if (b == NULL) return PyErr_NoMemory();
        b->m.version.major = DLPACK_MAJOR_VERSION;
        b->m.version.minor = DLPACK_MINOR_VERSION;
        b->m.manager_ctx = owner;
        b->m.deleter = dlbind_block_deleter_v;
        b->m.flags = flags;
        t = &b->m.dl_tensor;
        t->shape = ndim > 0 ? b->dims : NULL;
        t->strides = ndim > 0 ? b->dims + ndim : NULL;
        block = b;
    } else {
        dlbind_block_l *b = (dlbind_block_l *)PyMem_RawMalloc(sizeof(dlbind_block_l) + dims_bytes);
        if (b == NULL) return PyErr_NoMemory();
        b->m.manager_ctx = owner;
        b->m.deleter = dlbind_block_deleter_l;
        t = &b->m.dl_tensor;
        t->shape = ndim > 0 ? b->dims : NULL;
        t->strides = ndim > 0 ? b->dims + ndim : NULL;
        block = b;
    }
    t->data = data;
    t->device = device;
    t->ndim = ndim;
    t->dtype = dtype;
    t->byte_offset = byte_offset;
    if (ndim > 0) {
        memcpy(t->shape, shape, (size_t)ndim * sizeof(int64_t));
        memcpy(t->strides, strides, (size_t)ndim * sizeof(int64_t));
    }
    Py_INCREF(owner);
    dlbind_export_count++;
    PyObject *capsule = PyCapsule_New(block, versioned ? NAME_VERSIONED : NAME_LEGACY, dlbind_capsule_destructor);
    if (capsule == NULL) {
        if (versioned) dlbind_block_deleter_v((DLManagedTensorVersioned *)block);
        else dlbind_block_deleter_l((DLManagedTensor *)block);
    }
    return capsule;
}

/* The keywords of __dlpack__, parsed; returns 1 for the fast case, 0 for "ask Python", -1 on error. */
typedef struct {
    int versioned;
} dlbind_dlpack_args;

static int dlbind_parse_dlpack(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, int host,
                               dlbind_dlpack_args *out) {
    if (nargs != 0) {
        PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
        return -1;
    }
    out->versioned = 0;
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[i];
        if (PyUnicode_Compare(key, dlbind_str_stream) == 0) {
            if (value != Py_None) return 0;
        } else if (PyUnicode_Compare(key, dlbind_str_max_version) == 0) {
            if (value == Py_None) continue;
            if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) return 0;
            long major = PyLong_AsLong(PyTuple_GET_ITEM(value, 0));
            if (major == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            out->versioned = major >= DLPACK_MAJOR_VERSION;
        } else if (PyUnicode_Compare(key, dlbind_str_dl_device) == 0) {
            if (value == Py_None) continue;
            if (!host || !PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) return 0;
            long kind = PyLong_AsLong(PyTuple_GET_ITEM(value, 0));
            long index = PyLong_AsLong(PyTuple_GET_ITEM(value, 1));
            if (PyErr_Occurred()) {
                PyErr_Clear();
                return 0;
            }
            if (kind != kDLCPU || index != 0) return 0;
        } else if (PyUnicode_Compare(key, dlbind_str_copy) == 0) {
            if (value != Py_None && value != Py_False) return 0;
        } else {
            PyErr_Format(PyExc_TypeError, "__dlpack__() got an unexpected keyword argument '%U'", key);
            return -1;
        }
    }
    return 1;
}

static PyObject *dlbind_readonly_legacy_error(void) {
    PyErr_SetString(PyExc_BufferError,
                    "read-only data cannot be exported in a legacy 'dltensor' capsule (it has no read-only flag); "
                    "the consumer must ask for max_version=(1, 0) or newer");
    return NULL;
}

/* -- BufferExporter: what dlbind.asdlpack returns for buffer-protocol objects ---------------- */

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int readonly;
    int ndim;
    DLDataType dtype;
    int64_t *dims; /* shape then strides, in elements */
    PyObject *slow; /* the Python Exporter for unusual keywords, made on first need */
} dlbind_exporter;

static PyTypeObject dlbind_exporter_type;

static int dlbind_format(const char *fmt, Py_ssize_t itemsize, DLDataType *out) {
    if (fmt == NULL) fmt = "B";
    if (*fmt == '@' || *fmt == '=' || *fmt == '<') { /* '<' is native on the little-endian machines we build for */
#if PY_LITTLE_ENDIAN
        fmt++;
#else
        if (*fmt == '<') return 0;
        fmt++;
#endif
    }
    uint8_t code;
    switch (fmt[0]) {
        case '?': code = kDLBool; break;
        case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': code = kDLInt; break;
        case 'B': case 'c': case 'H': case 'I': case 'L': case 'Q': case 'N': code = kDLUInt; break;
        case 'e': case 'f': case 'd': code = kDLFloat; break;
        case 'Z':
            if ((fmt[1] != 'f' && fmt[1] != 'd') || fmt[2] != '\0') return 0;
            code = kDLComplex;
            break;
        default: return 0;
    }
    if (code != kDLComplex && fmt[1] != '\0') return 0;
    if (itemsize <= 0 || itemsize > 16) return 0;
    out->code = code;
    out->bits = (uint8_t)(itemsize * 8);
    out->lanes = 1;
    return 1;
}

static void dlbind_exporter_dealloc(dlbind_exporter *self) {
    PyBuffer_Release(&self->view);
    PyMem_Free(self->dims);
    Py_XDECREF(self->slow);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* NULL without an exception: not a buffer this path can take (the caller asks Python). */
static PyObject *dlbind_exporter_new(PyObject *obj, int force_readonly) {
    if (!PyObject_CheckBuffer(obj)) return NULL;
    dlbind_exporter *self = PyObject_New(dlbind_exporter, &dlbind_exporter_type);
    if (self == NULL) return NULL;
    self->dims = NULL;
    self->slow = NULL;
    if (PyObject_GetBuffer(obj, &self->view, PyBUF_RECORDS_RO) != 0) {
        PyErr_Clear();
        self->view.obj = NULL;
        Py_DECREF(self);
        return NULL;
    }
    Py_buffer *v = &self->view;
    if (v->suboffsets != NULL || !dlbind_format(v->format, v->itemsize, &self->dtype) || v->ndim < 0) goto refuse;
    self->ndim = v->ndim;
    self->readonly = v->readonly || force_readonly;
    if (v->ndim > 0) {
        self->dims = (int64_t *)PyMem_Malloc((size_t)v->ndim * 2 * sizeof(int64_t));
        if (self->dims == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        if (v->shape == NULL) goto refuse;
        int64_t acc = 1; /* some exporters (ctypes) leave strides NULL for C-contiguous data */
        for (int i = v->ndim - 1; i >= 0; i--) {
            self->dims[i] = v->shape[i];
            if (v->strides == NULL) {
                self->dims[v->ndim + i] = acc;
                acc *= v->shape[i];
            } else {
                if (v->strides[i] % v->itemsize) goto refuse;
                self->dims[v->ndim + i] = v->strides[i] / v->itemsize;
            }
        }
    }
    return (PyObject *)self;
refuse:
    Py_DECREF(self);
    return NULL;
}

static PyObject *dlbind_exporter_slow(dlbind_exporter *self) {
    if (self->slow == NULL) {
        PyObject *kw = Py_BuildValue("{s:O}", "readonly", self->readonly ? Py_True : Py_False);
        if (kw == NULL) return NULL;
        PyObject *args = PyTuple_Pack(1, self->view.obj);
        if (args != NULL) self->slow = PyObject_Call(dlbind_slow_asdlpack, args, kw);
        Py_XDECREF(args);
        Py_DECREF(kw);
    }
    return self->slow;
}

static PyObject *dlbind_exporter_dlpack(dlbind_exporter *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    dlbind_dlpack_args parsed;
    int fast = dlbind_parse_dlpack(args, nargs, kwnames, 1, &parsed);
    if (fast < 0) return NULL;
    if (fast == 0) {
        PyObject *slow = dlbind_exporter_slow(self);
        if (slow == NULL) return NULL;
        PyObject *method = PyObject_GetAttr(slow, dlbind_str_dlpack);
        if (method == NULL) return NULL;
        PyObject *res = PyObject_Vectorcall(method, args, nargs, kwnames);
        Py_DECREF(method);
        return res;
    }
    if (!parsed.versioned && self->readonly) return dlbind_readonly_legacy_error();
    DLDevice cpu = {kDLCPU, 0};
    return dlbind_make_capsule((PyObject *)self, self->view.buf, self->ndim, self->dims, self->dims ? self->dims + self->ndim : NULL,
                               cpu, self->dtype, 0, parsed.versioned, self->readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0);
}

static PyObject *dlbind_exporter_device(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    Py_INCREF(dlbind_cpu_device);
    return dlbind_cpu_device;
}

static PyObject *dlbind_exporter_repr(dlbind_exporter *self) {
    return PyUnicode_FromFormat("dlbind.Exporter(buffer of %.100s, ndim=%d, readonly=%s)", Py_TYPE(self->view.obj)->tp_name,
                                self->ndim, self->readonly ? "True" : "False");
}

static PyMethodDef dlbind_exporter_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))dlbind_exporter_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "The array API's __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)."},
    {"__dlpack_device__", dlbind_exporter_device, METH_NOARGS, "(DeviceType.kDLCPU, 0)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject dlbind_exporter_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dlbind.BufferExporter",
    .tp_basicsize = sizeof(dlbind_exporter),
    .tp_dealloc = (destructor)dlbind_exporter_dealloc,
    .tp_repr = (reprfunc)dlbind_exporter_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A DLPack producer over an object's buffer (what dlbind.asdlpack returns for buffers).",
    .tp_methods = dlbind_exporter_methods,
};

/* asdlpack(obj, *, readonly=None, device_id=None) */
static PyObject *dlbind_py_asdlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    (void)mod;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int force_readonly = 0, fast = nargs == 1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; fast && i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
        if (value == Py_None) continue;
        if (PyUnicode_CompareWithASCIIString(key, "readonly") == 0 && value == Py_True) force_readonly = 1;
        else fast = 0;
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
    return PyObject_Vectorcall(dlbind_slow_asdlpack, args, nargsf, kwnames);
}

/* -- TensorCore: the C base of dlbind.Tensor -------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    void *managed;   /* DLManagedTensor(Versioned)*, owned: its deleter runs in dealloc */
    int versioned;
    DLTensor *t;
    int64_t *strides; /* t->strides, or computed row-major strides (owned) */
    int own_strides;
    PyObject *weakrefs;
} dlbind_tensor;

static void dlbind_tensor_dealloc(dlbind_tensor *self) {
    if (self->weakrefs != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    if (self->own_strides) PyMem_Free(self->strides);
    void *m = self->managed;
    self->managed = NULL;
    if (m != NULL) {
        if (self->versioned) {
            DLManagedTensorVersioned *mv = (DLManagedTensorVersioned *)m;
            if (mv->deleter) mv->deleter(mv);
        } else {
            DLManagedTensor *ml = (DLManagedTensor *)m;
            if (ml->deleter) ml->deleter(ml);
        }
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Quick validity check; on doubt the Python check runs and raises the precise error. */
static int dlbind_valid(DLTensor *t, int versioned, void *m, int allow_vector) {
    if (versioned && ((DLManagedTensorVersioned *)m)->version.major != DLPACK_MAJOR_VERSION) return 0;
    if (t->ndim < 0 || t->ndim > 64) return 0;
    if (!dlbind_known_code[t->dtype.code] || t->dtype.lanes == 0 || (t->dtype.lanes != 1 && !allow_vector) ||
        t->dtype.bits == 0)
        return 0;
    if (t->device.device_type < 0 || t->device.device_type > 255 || !dlbind_known_device[t->device.device_type]) return 0;
    if (t->ndim > 0 && t->shape == NULL) return 0;
    int64_t size = 1;
    for (int i = 0; i < t->ndim; i++) {
        if (t->shape[i] < 0) return 0;
        size *= t->shape[i];
    }
    if (t->data == NULL && size != 0 && dlbind_host_device[t->device.device_type]) return 0;
    return 1;
}

static void dlbind_call_deleter(void *m, int versioned) {
    if (versioned) {
        DLManagedTensorVersioned *mv = (DLManagedTensorVersioned *)m;
        if (mv->deleter) mv->deleter(mv);
    } else {
        DLManagedTensor *ml = (DLManagedTensor *)m;
        if (ml->deleter) ml->deleter(ml);
    }
}

/* Wrap a consumed struct in a new dlbind.Tensor; the deleter runs on failure. */
static PyObject *dlbind_tensor_wrap(void *m, int versioned, int allow_vector) {
    DLTensor *t = versioned ? &((DLManagedTensorVersioned *)m)->dl_tensor : &((DLManagedTensor *)m)->dl_tensor;
    if (!dlbind_valid(t, versioned, m, allow_vector)) {
        PyObject *res = PyObject_CallFunction(dlbind_slow_from_managed, "NOO", PyLong_FromVoidPtr(m), versioned ? Py_True : Py_False,
                                              allow_vector ? Py_True : Py_False);
        if (res == NULL) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            dlbind_call_deleter(m, versioned);
            PyErr_Restore(type, value, tb);
        } else {
            Py_DECREF(res);
            PyErr_SetString(PyExc_SystemError, "dlbind: the C and Python checks of a DLPack tensor disagree");
            dlbind_call_deleter(m, versioned);
        }
        return NULL;
    }
    dlbind_tensor *self = (dlbind_tensor *)dlbind_tensor_type->tp_alloc(dlbind_tensor_type, 0);
    if (self == NULL) {
        dlbind_call_deleter(m, versioned);
        return NULL;
    }
    self->managed = m;
    self->versioned = versioned;
    self->t = t;
    self->own_strides = 0;
    self->strides = t->strides;
    if (t->ndim > 0 && t->strides == NULL) { /* NULL strides: compact row-major (allowed before DLPack 1.2) */
        self->strides = (int64_t *)PyMem_Malloc((size_t)t->ndim * sizeof(int64_t));
        if (self->strides == NULL) {
            Py_DECREF(self);
            return PyErr_NoMemory();
        }
        self->own_strides = 1;
        int64_t acc = 1;
        for (int i = t->ndim - 1; i >= 0; i--) {
            self->strides[i] = acc;
            acc *= t->shape[i];
        }
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

static PyObject *dlbind_get_shape(dlbind_tensor *self, void *c) { (void)c; return dlbind_int64_tuple(self->t->shape, self->t->ndim); }
static PyObject *dlbind_get_strides(dlbind_tensor *self, void *c) { (void)c; return dlbind_int64_tuple(self->strides, self->t->ndim); }
static PyObject *dlbind_get_data_ptr(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromVoidPtr(self->t->data); }
static PyObject *dlbind_get_byte_offset(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromUnsignedLongLong(self->t->byte_offset); }
static PyObject *dlbind_get_ndim(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->ndim); }
static PyObject *dlbind_get_code(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->dtype.code); }
static PyObject *dlbind_get_bits(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->dtype.bits); }
static PyObject *dlbind_get_lanes(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->dtype.lanes); }
static PyObject *dlbind_get_device_type(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->device.device_type); }
static PyObject *dlbind_get_device_id(dlbind_tensor *self, void *c) { (void)c; return PyLong_FromLong(self->t->device.device_id); }
static PyObject *dlbind_get_flags(dlbind_tensor *self, void *c) {
    (void)c;
    return PyLong_FromUnsignedLongLong(self->versioned ? ((DLManagedTensorVersioned *)self->managed)->flags : 0);
}
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
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject *dlbind_tensor_dlpack(dlbind_tensor *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    DLTensor *t = self->t;
    int host = t->device.device_type == kDLCPU;
    dlbind_dlpack_args parsed;
    int fast = dlbind_parse_dlpack(args, nargs, kwnames, host, &parsed);
    if (fast < 0) return NULL;
    if (fast == 0) { /* export_view(self, **kwargs) */
        PyObject *stack[5];
        if (nargs != 0 || (kwnames && PyTuple_GET_SIZE(kwnames) > 4)) {
            PyErr_SetString(PyExc_TypeError, "__dlpack__() takes keyword arguments only");
            return NULL;
        }
        stack[0] = (PyObject *)self;
        Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
        for (Py_ssize_t i = 0; i < n; i++) stack[1 + i] = args[i];
        return PyObject_Vectorcall(dlbind_slow_export_view, stack, 1, kwnames);
    }
    uint64_t flags = self->versioned ? ((DLManagedTensorVersioned *)self->managed)->flags : 0;
    int readonly = (flags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    if (!parsed.versioned && readonly) return dlbind_readonly_legacy_error();
    return dlbind_make_capsule((PyObject *)self, t->data, t->ndim, t->shape, self->strides, t->device, t->dtype, t->byte_offset,
                               parsed.versioned, flags & (DLPACK_FLAG_BITMASK_READ_ONLY | DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED));
}

/* Buffer protocol (host memory, whole-byte dtypes the struct module can name). */
static int dlbind_tensor_getbuffer(dlbind_tensor *self, Py_buffer *view, int flags) {
    DLTensor *t = self->t;
    if (!dlbind_host_device[t->device.device_type]) {
        PyErr_SetString(PyExc_BufferError, "the buffer protocol needs host memory");
        return -1;
    }
    uint64_t dlflags = self->versioned ? ((DLManagedTensorVersioned *)self->managed)->flags : 0;
    int readonly = (dlflags & DLPACK_FLAG_BITMASK_READ_ONLY) != 0;
    if ((flags & PyBUF_WRITABLE) && readonly) {
        PyErr_SetString(PyExc_BufferError, "this DLPack tensor is read-only");
        return -1;
    }
    const char *fmt = NULL;
    int bits = t->dtype.bits;
    switch (t->dtype.code) {
        case kDLBool: fmt = bits == 8 ? "?" : NULL; break;
        case kDLInt: fmt = bits == 8 ? "b" : bits == 16 ? "h" : bits == 32 ? "i" : bits == 64 ? "q" : NULL; break;
        case kDLUInt: fmt = bits == 8 ? "B" : bits == 16 ? "H" : bits == 32 ? "I" : bits == 64 ? "Q" : NULL; break;
        case kDLFloat: fmt = bits == 16 ? "e" : bits == 32 ? "f" : bits == 64 ? "d" : NULL; break;
        case kDLComplex: fmt = bits == 64 ? "Zf" : bits == 128 ? "Zd" : NULL; break;
        default: break;
    }
    if (fmt == NULL || t->dtype.lanes != 1) {
        PyErr_Format(PyExc_BufferError, "the buffer protocol has no format for DLPack dtype code %d bits %d", t->dtype.code, bits);
        return -1;
    }
    Py_ssize_t itemsize = bits / 8, ndim = t->ndim, len = itemsize;
    Py_ssize_t *dims = (Py_ssize_t *)PyMem_Malloc((size_t)(ndim > 0 ? ndim : 1) * 2 * sizeof(Py_ssize_t));
    if (dims == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < ndim; i++) {
        dims[i] = (Py_ssize_t)t->shape[i];
        dims[ndim + i] = (Py_ssize_t)(self->strides[i] * itemsize);
        len *= dims[i];
    }
    int contiguous = 1;
    Py_ssize_t expected = itemsize;
    for (Py_ssize_t i = ndim - 1; i >= 0; i--) {
        if (dims[i] != 1 && dims[ndim + i] != expected) contiguous = 0;
        expected *= dims[i];
    }
    if (!contiguous && (flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
        PyMem_Free(dims);
        PyErr_SetString(PyExc_BufferError, "this DLPack tensor is not contiguous: ask for strides");
        return -1;
    }
    view->buf = (char *)t->data + t->byte_offset;
    view->obj = (PyObject *)self;
    Py_INCREF(self);
    view->len = len;
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
    {"__dlpack__", (PyCFunction)(void (*)(void))dlbind_tensor_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "The array API's __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None)."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject dlbind_tensor_core_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "dlbind.TensorCore",
    .tp_basicsize = sizeof(dlbind_tensor),
    .tp_dealloc = (destructor)dlbind_tensor_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "The C core of dlbind.Tensor: owns a consumed DLPack tensor.",
    .tp_methods = dlbind_tensor_methods,
    .tp_getset = dlbind_tensor_getset,
    .tp_as_buffer = &dlbind_tensor_buffer,
    .tp_weaklistoffset = offsetof(dlbind_tensor, weakrefs),
};

/* Consume a capsule (checked, renamed) and wrap it. */
static PyObject *dlbind_consume_capsule(PyObject *capsule) {
    PyObject *taken = dlbind_py_take(NULL, capsule);
    if (taken == NULL) return NULL;
    void *m = PyLong_AsVoidPtr(PyTuple_GET_ITEM(taken, 0));
    int versioned = PyTuple_GET_ITEM(taken, 1) == Py_True;
    Py_DECREF(taken);
    return dlbind_tensor_wrap(m, versioned, 0);
}

/* from_dlpack(x, *, device=None, copy=None, stream=None): the plain case in C, the rest in Python. */
static PyObject *dlbind_py_from_dlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    (void)mod;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    int fast = nargs == 1;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; fast && i < nkw; i++)
        if (args[nargs + i] != Py_None) fast = 0;
    if (!fast) return PyObject_Vectorcall(dlbind_slow_from_dlpack, args, nargsf, kwnames);
    PyObject *x = args[0];
    if (PyCapsule_CheckExact(x)) return dlbind_consume_capsule(x);
    const DLPackExchangeAPI *api = dlbind_table_of(x);
    if (api != NULL) {
        DLManagedTensorVersioned *out = NULL;
        if (api->managed_tensor_from_py_object_no_sync(x, &out) != 0 || out == NULL) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_BufferError, "%.200s's DLPack exchange table failed without saying why", Py_TYPE(x)->tp_name);
            return NULL;
        }
        if (!dlbind_host_device[out->dl_tensor.device.device_type & 0xff] || out->dl_tensor.device.device_type > 255) {
            /* NoSync: device work may be queued; let __dlpack__ synchronise instead */
            dlbind_call_deleter(out, 1);
            return PyObject_Vectorcall(dlbind_slow_from_dlpack, args, nargsf, kwnames);
        }
        return dlbind_tensor_wrap(out, 1, 0);
    }
    if (PyErr_Occurred()) return NULL;
    PyObject *stack[3] = {x, Py_None, dlbind_max_version};
    PyObject *capsule = PyObject_VectorcallMethod(dlbind_str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, dlbind_kwnames_dlpack);
    if (capsule == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) { /* maybe an older producer: Python goes on */
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            if (tb != NULL) PyException_SetTraceback(value, tb);
            PyObject *res = PyObject_CallFunctionObjArgs(dlbind_slow_after_type_error, x, value, NULL);
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            return res;
        }
        return NULL;
    }
    if (!PyCapsule_CheckExact(capsule)) {
        PyErr_Format(PyExc_TypeError, "%.200s.__dlpack__() returned %.200s, not a DLPack capsule", Py_TYPE(x)->tp_name,
                     Py_TYPE(capsule)->tp_name);
        Py_DECREF(capsule);
        return NULL;
    }
    PyObject *res = dlbind_consume_capsule(capsule);
    Py_DECREF(capsule);
    return res;
}

/* convert_to(x, target_type, refuse) -> object of target_type, or NotImplemented when
 * this route does not apply (the Python code then takes the general one). Goes producer table (or
 * __dlpack__) -> DLManagedTensorVersioned -> the target type's managed_tensor_to_py_object_no_sync. */
static PyObject *dlbind_py_convert_to(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "convert_to(x, target_type, refuse: 1 negative strides | 2 read-only)");
        return NULL;
    }
    PyObject *x = args[0];
    const DLPackExchangeAPI *target = dlbind_table_of_type(args[1]);
    if (target == NULL || target->managed_tensor_to_py_object_no_sync == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    DLManagedTensorVersioned *m = NULL;
    const DLPackExchangeAPI *source = dlbind_table_of(x);
    if (source != NULL) {
        if (source->managed_tensor_from_py_object_no_sync(x, &m) != 0 || m == NULL) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_BufferError, "the producer's exchange table failed");
            return NULL;
        }
    } else {
        if (PyErr_Occurred()) return NULL;
        PyObject *stack[3] = {x, Py_None, dlbind_max_version};
        PyObject *capsule =
            PyObject_VectorcallMethod(dlbind_str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, dlbind_kwnames_dlpack);
        if (capsule == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
            PyErr_Clear();
            Py_RETURN_NOTIMPLEMENTED;
        }
        int legacy = PyCapsule_IsValid(capsule, NAME_LEGACY);
        if (legacy) {
            Py_DECREF(capsule); /* unconsumed: its destructor frees it */
            Py_RETURN_NOTIMPLEMENTED;
        }
        PyObject *taken = dlbind_py_take(NULL, capsule);
        Py_DECREF(capsule);
        if (taken == NULL) return NULL;
        m = (DLManagedTensorVersioned *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(taken, 0));
        Py_DECREF(taken);
    }
    DLTensor *t = &m->dl_tensor;
    int hand_back = !dlbind_valid(t, 1, m, 0) || !dlbind_host_device[t->device.device_type & 0xff] ||
                    t->device.device_type > 255;
    long refuse = PyLong_AsLong(args[2]);
    if (refuse == -1 && PyErr_Occurred()) {
        dlbind_call_deleter(m, 1);
        return NULL;
    }
    if (!hand_back && (refuse & 1) && t->strides != NULL)
        for (int i = 0; i < t->ndim; i++)
            if (t->strides[i] < 0) hand_back = 1;
    if ((refuse & 2) && (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)) hand_back = 1;
    if (hand_back) { /* the general route checks, copies or synchronises as needed */
        dlbind_call_deleter(m, 1);
        Py_RETURN_NOTIMPLEMENTED;
    }
    void *out = NULL;
    if (target->managed_tensor_to_py_object_no_sync(m, &out) != 0 || out == NULL) {
        dlbind_call_deleter(m, 1);
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_BufferError, "the consumer's exchange table failed");
        return NULL;
    }
    return (PyObject *)out;
}

/* convert(x, to, **kw): the exchange-table route in C when dlbind.convert has cached one for `to`
 * (routes: to -> (target_type, refuse_negative_strides)); everything else in Python. */
static PyObject *dlbind_convert_routes = NULL;
static PyObject *dlbind_slow_convert = NULL;

static PyObject *dlbind_py_convert(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *to = nargs == 2 ? args[1] : NULL;
    int plain = (nargs == 1 || nargs == 2) && dlbind_convert_routes != NULL;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; plain && i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (to == NULL && PyUnicode_CompareWithASCIIString(key, "to") == 0) to = args[nargs + i];
        else if (args[nargs + i] != Py_None) plain = 0;
    }
    if (plain && to != NULL) {
        PyObject *route = PyDict_GetItemWithError(dlbind_convert_routes, to);
        if (route == NULL && PyErr_Occurred()) PyErr_Clear(); /* unhashable `to`: Python explains */
        if (route != NULL) {
            if (PyObject_TypeCheck(args[0], (PyTypeObject *)PyTuple_GET_ITEM(route, 0))) { /* already there */
                Py_INCREF(args[0]);
                return args[0];
            }
            PyObject *call[3] = {args[0], PyTuple_GET_ITEM(route, 0), PyTuple_GET_ITEM(route, 1)};
            PyObject *out = dlbind_py_convert_to(mod, call, 3);
            if (out != Py_NotImplemented) return out;
            Py_DECREF(out);
        }
    }
    if (dlbind_slow_convert == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "dlbind.convert is not configured");
        return NULL;
    }
    return PyObject_Vectorcall(dlbind_slow_convert, args, nargsf, kwnames);
}

static PyObject *dlbind_py_configure_convert(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "configure_convert(routes: dict, slow_convert)");
        return NULL;
    }
    Py_INCREF(args[0]);
    Py_XSETREF(dlbind_convert_routes, args[0]);
    Py_INCREF(args[1]);
    Py_XSETREF(dlbind_slow_convert, args[1]);
    Py_RETURN_NONE;
}

static PyObject *dlbind_py_counts(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return Py_BuildValue("(KK)", dlbind_export_count, dlbind_deleter_count);
}

static PyObject *dlbind_py_wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "wrap(address, versioned, allow_vector)");
        return NULL;
    }
    void *m = PyLong_AsVoidPtr(args[0]);
    if (m == NULL) return NULL;
    return dlbind_tensor_wrap(m, PyObject_IsTrue(args[1]), PyObject_IsTrue(args[2]));
}

/* configure(tensor_type, cpu_device, known_codes, known_devices, host_devices, slow_asdlpack,
 *           slow_from_dlpack, check_managed, export_view, after_type_error) */
static PyObject *dlbind_py_configure(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 10 || !PyType_Check(args[0]) || !PyType_IsSubtype((PyTypeObject *)args[0], &dlbind_tensor_core_type)) {
        PyErr_SetString(PyExc_TypeError, "configure(...) takes the 10 pieces dlbind._native passes");
        return NULL;
    }
    const PyObject *tables[3] = {args[2], args[3], args[4]};
    unsigned char *dest[3] = {dlbind_known_code, dlbind_known_device, dlbind_host_device};
    for (int k = 0; k < 3; k++) {
        if (!PyBytes_Check(tables[k]) || PyBytes_GET_SIZE(tables[k]) != 256) {
            PyErr_SetString(PyExc_TypeError, "tables are 256-byte bytes objects");
            return NULL;
        }
        memcpy(dest[k], PyBytes_AS_STRING(tables[k]), 256);
    }
    PyObject **slots[] = {(PyObject **)&dlbind_tensor_type, &dlbind_cpu_device, &dlbind_slow_asdlpack, &dlbind_slow_from_dlpack,
                          &dlbind_slow_from_managed, &dlbind_slow_export_view, &dlbind_slow_after_type_error};
    PyObject *values[] = {args[0], args[1], args[5], args[6], args[7], args[8], args[9]};
    for (int k = 0; k < 7; k++) {
        Py_INCREF(values[k]);
        Py_XSETREF(*slots[k], values[k]);
    }
    if (dlbind_max_version == NULL) {
        dlbind_max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
        dlbind_str_stream = PyUnicode_InternFromString("stream");
        dlbind_str_max_version = PyUnicode_InternFromString("max_version");
        dlbind_str_dl_device = PyUnicode_InternFromString("dl_device");
        dlbind_str_copy = PyUnicode_InternFromString("copy");
        dlbind_str_dlpack = PyUnicode_InternFromString("__dlpack__");
        dlbind_kwnames_dlpack = PyTuple_Pack(2, dlbind_str_stream, dlbind_str_max_version);
        if (dlbind_kwnames_dlpack == NULL) return NULL;
    }
    Py_RETURN_NONE;
}

static PyMethodDef dlbind_methods[] = {
    {"export", (PyCFunction)(void (*)(void))dlbind_py_export, METH_FASTCALL,
     "export(keepalive, address, versioned) -> capsule"},
    {"take", (PyCFunction)dlbind_py_take, METH_O, "take(capsule) -> (address, versioned)"},
    {"exchange_import", (PyCFunction)dlbind_py_exchange_import, METH_O,
     "exchange_import(obj) -> owned DLManagedTensorVersioned address, or None without a usable table"},
    {"exchange_table", (PyCFunction)dlbind_py_exchange_table, METH_NOARGS, "dlbind's own exchange table capsule"},
    {"asdlpack", (PyCFunction)(void (*)(void))dlbind_py_asdlpack, METH_FASTCALL | METH_KEYWORDS,
     "asdlpack(obj, *, readonly=None, device_id=None): see dlbind.producer.asdlpack"},
    {"from_dlpack", (PyCFunction)(void (*)(void))dlbind_py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack(x, *, device=None, copy=None, stream=None): see dlbind.consumer.from_dlpack"},
    {"wrap", (PyCFunction)(void (*)(void))dlbind_py_wrap, METH_FASTCALL, "wrap(address, versioned, allow_vector) -> Tensor (owns it)"},
    {"counts", (PyCFunction)dlbind_py_counts, METH_NOARGS, "(exports made in C, deleters run in C)"},
    {"convert", (PyCFunction)(void (*)(void))dlbind_py_convert, METH_FASTCALL | METH_KEYWORDS,
     "convert(x, to, *, device=None, copy=None, stream=None): see dlbind.convert"},
    {"configure_convert", (PyCFunction)(void (*)(void))dlbind_py_configure_convert, METH_FASTCALL, "internal"},
    {"convert_to", (PyCFunction)(void (*)(void))dlbind_py_convert_to, METH_FASTCALL,
     "convert_to(x, target_type, refuse): see dlbind.convert"},
    {"configure", (PyCFunction)(void (*)(void))dlbind_py_configure, METH_FASTCALL, "internal: see dlbind._native"},
    {NULL, NULL, 0, NULL},
};

int dlbind_install(void) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = -1;
    PyObject *module = PyImport_ImportModule("dlbind._api");
    if (module != NULL) {
        rc = PyModule_AddFunctions(module, dlbind_methods);
        if (rc == 0 && (PyType_Ready(&dlbind_exporter_type) < 0 || PyType_Ready(&dlbind_tensor_core_type) < 0)) rc = -1;
        if (rc == 0) {
            Py_INCREF(&dlbind_exporter_type);
            Py_INCREF(&dlbind_tensor_core_type);
            if (PyModule_AddObject(module, "BufferExporter", (PyObject *)&dlbind_exporter_type) < 0 ||
                PyModule_AddObject(module, "TensorCore", (PyObject *)&dlbind_tensor_core_type) < 0)
                rc = -1;
        }
        Py_DECREF(module);
    }
    if (rc != 0) PyErr_Print();
    PyGILState_Release(state);
    return rc;
}

