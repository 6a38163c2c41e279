/* The DLPack 1.3 C exchange API (__dlpack_c_exchange_api__), both sides.
 *
 * Consumer: exchange_import(obj) and from_dlpack/convert_to use the table on type(obj) (cached per
 * type) to get an owned DLManagedTensorVersioned without the __dlpack__ round trip.
 * Producer: dlbind's own table, static for the life of the process; the work that needs Python
 * objects goes to the dlbind.exchange helpers configure() handed over. */
#include "fastpath.h"

static PyObject *dlbind_api_cache = NULL; /* type -> capsule or None */

void dlbind_exchange_clear(void) { Py_CLEAR(dlbind_api_cache); }

const DLPackExchangeAPI *dlbind_table_of_type(PyObject *type) {
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

const DLPackExchangeAPI *dlbind_table_of(PyObject *obj) { return dlbind_table_of_type((PyObject *)Py_TYPE(obj)); }

/* exchange_import(obj) -> owned DLManagedTensorVersioned address, or None without a usable table */
PyObject *dlbind_py_exchange_import(PyObject *mod, PyObject *obj) {
    (void)mod;
    const DLPackExchangeAPI *api = dlbind_table_of(obj);
    if (api == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NONE;
    }
    DLManagedTensorVersioned *out = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &out) != 0 || out == NULL) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_BufferError, "%.200s's DLPack exchange table failed without saying why", Py_TYPE(obj)->tp_name);
        return NULL;
    }
    return PyLong_FromVoidPtr(out);
}

/* ---- dlbind's own table -------------------------------------------------------------------- */

/* Call a configured helper with one argument; it returns an int address, stored in *out. */
static int dlbind_call_address(PyObject *helper, PyObject *arg, void **out) {
    if (arg == NULL) return -1;
    if (helper == NULL) {
        Py_DECREF(arg);
        PyErr_SetString(PyExc_RuntimeError, DLBIND_MODULE " is not configured: import " DLBIND_PACKAGE " first");
        return -1;
    }
    PyObject *res = PyObject_CallOneArg(helper, arg);
    Py_DECREF(arg);
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
    PyObject *obj = (PyObject *)py_object;
    Py_INCREF(obj);
    int rc = dlbind_call_address(dlbind_cfg.managed_from_object, obj, &address);
    *out = (DLManagedTensorVersioned *)address;
    PyGILState_Release(state);
    return rc;
}

static int dlbind_x_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = -1;
    if (dlbind_configured()) {
        PyObject *res = PyObject_CallFunction(dlbind_cfg.object_from_managed, "N", PyLong_FromVoidPtr(tensor));
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
    int rc = dlbind_call_address(dlbind_cfg.allocate, PyLong_FromVoidPtr(prototype), &address);
    if (rc != 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
        if (SetError)
            SetError(error_ctx, type ? ((PyTypeObject *)type)->tp_name : "RuntimeError", message ? message : "allocation failed");
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

/* dlbind queues no device work of its own: what it exports is ordered on the stream that
 * `stream=None` names, which every stream rule accepts (no stream for the none_only rule, the
 * default stream for the others). So the answer is NULL for every known device type; an unknown
 * one is an error, as in dlbind.exchange's pure table. */
static int dlbind_x_stream(DLDeviceType device_type, int32_t device_id, void **out_current_stream) {
    (void)device_id;
    if (dlbind_device_known(device_type)) {
        *out_current_stream = NULL;
        return 0;
    }
    PyGILState_STATE state = PyGILState_Ensure();
    PyErr_Format(PyExc_BufferError, "unknown DLPack device type %d", (int)device_type);
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

PyObject *dlbind_py_exchange_table(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyCapsule_New(&dlbind_exchange_table, "dlpack_exchange_api", NULL);
}

/* ---- convert --------------------------------------------------------------------------------- */

/* convert_to(x, target_type, refuse) -> object of target_type, or NotImplemented when this route
 * does not apply (the Python code then takes the general one). Goes producer table (or
 * __dlpack__) -> DLManagedTensorVersioned -> the target type's managed_tensor_to_py_object_no_sync. */
PyObject *dlbind_py_convert_to(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "convert_to(x, target_type, refuse: 1 negative strides | 2 read-only)");
        return NULL;
    }
    if (!dlbind_configured()) return NULL;
    PyObject *x = args[0];
    long refuse = PyLong_AsLong(args[2]);
    if (refuse == -1 && PyErr_Occurred()) return NULL;
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
        PyObject *stack[3] = {x, Py_None, dlbind_cfg.max_version};
        PyObject *capsule = PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                      dlbind_cfg.kwnames_dlpack);
        if (capsule == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
            PyErr_Clear(); /* the general route says what is wrong */
            Py_RETURN_NOTIMPLEMENTED;
        }
        if (PyCapsule_IsValid(capsule, DLBIND_NAME_LEGACY) || !PyCapsule_CheckExact(capsule)) {
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
    int hand_back = !dlbind_valid(m, 1, 0) || !dlbind_device_stream_free(t->device.device_type);
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

/* convert(x, to, *, device=None, copy=None, stream=None): the exchange-table route in C when
 * dlbind.convert has cached one for `to` (convert_routes: to -> (target_type, refuse)); every
 * other call in Python. */
PyObject *dlbind_py_convert(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    if (!dlbind_configured()) return NULL;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *to = nargs == 2 ? args[1] : NULL;
    int plain = nargs == 1 || nargs == 2;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; plain && i < nkw; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i);
        if (to == NULL && PyUnicode_CompareWithASCIIString(key, "to") == 0)
            to = args[nargs + i];
        else if (args[nargs + i] != Py_None || !(PyUnicode_CompareWithASCIIString(key, "device") == 0 ||
                                                   PyUnicode_CompareWithASCIIString(key, "copy") == 0 ||
                                                   PyUnicode_CompareWithASCIIString(key, "stream") == 0))
            plain = 0;
    }
    if (plain && to != NULL && PyUnicode_CheckExact(to)) {
        PyObject *route = PyDict_GetItemWithError(dlbind_cfg.convert_routes, to);
        if (route == NULL && PyErr_Occurred()) return NULL;
        if (route != NULL) {
            PyObject *target_type = PyTuple_GET_ITEM(route, 0);
            if (PyObject_TypeCheck(args[0], (PyTypeObject *)target_type)) { /* already there */
                Py_INCREF(args[0]);
                return args[0];
            }
            PyObject *call[3] = {args[0], target_type, PyTuple_GET_ITEM(route, 1)};
            PyObject *out = dlbind_py_convert_to(mod, call, 3);
            if (out != Py_NotImplemented) return out;
            Py_DECREF(out);
        }
    }
    return PyObject_Vectorcall(dlbind_cfg.convert, args, nargsf, kwnames);
}
