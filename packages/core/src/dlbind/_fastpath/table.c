/* dlbind's own DLPack 1.3 exchange table (dlbind.Tensor.__dlpack_c_exchange_api__), static for the life of the
 * process: a producer's versioned struct (its __dlpack__, asked on no stream) and the Tensor of a struct
 * (validated, as from_dlpack's) in C; the allocator calls dlbind.exchange.allocate, which configure() hands over,
 * and takes the capsule it returns. Above tensor.c, whose wrap it uses. */
#include "fastpath.h"

#if DLBIND_HEADER_HAS_EXCHANGE_API

/* Call a configured helper with one argument; it returns a versioned capsule, whose struct is taken into *out
 * (owned by the caller) with no Python code between the taking and the return (a capsule dropped before, on an
 * error or a signal handler's exception, frees what it holds). */
static int dlbind_call_taken(PyObject *helper, PyObject *arg, void **out) {
    if (arg == NULL) return -1;
    if (helper == NULL) {
        Py_DECREF(arg);
        PyErr_SetString(PyExc_RuntimeError, DLBIND_MODULE " is not configured: import " DLBIND_PACKAGE " first");
        return -1;
    }
    PyObject *res = PyObject_CallOneArg(helper, arg);
    Py_DECREF(arg);
    if (res == NULL) return -1;
    int versioned = 0;
    void *m = dlbind_take(res, &versioned);
    if (m != NULL && !versioned) { /* never: dlbind.exchange.allocate exports versioned */
        dlbind_call_deleter(m, 0);
        m = NULL;
        PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": the allocator gave a legacy capsule");
    }
    Py_DECREF(res); /* a used capsule's destructor does nothing: the struct is ours */
    *out = m;
    return m == NULL ? -1 : 0;
}

/* Callers hold the GIL (they pass PyObject*); Ensure/Release is cheap then, and makes calls
 * through cffi (which releases the GIL around foreign calls) safe too. The producer is asked by its
 * __dlpack__ for a versioned capsule on no stream (the call synchronises nothing), whose struct is handed
 * over (owned by the caller). */
static int dlbind_x_from_py(void *py_object, DLManagedTensorVersioned **out) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = -1, versioned = 0;
    *out = NULL;
    if (dlbind_configured()) {
        PyObject *stack[2] = {(PyObject *)py_object, dlbind_cfg.max_version}; /* no stream: *NoSync */
        PyObject *capsule = PyObject_VectorcallMethod(dlbind_cfg.str_dlpack, stack, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                                      dlbind_cfg.kwnames_max_version);
        void *m = capsule != NULL ? dlbind_take(capsule, &versioned) : NULL;
        Py_XDECREF(capsule);
        if (m != NULL && !versioned) {
            dlbind_call_deleter(m, 0);
            PyErr_SetString(PyExc_BufferError, "__dlpack__(max_version=...) gave a legacy capsule: the exchange table hands over versioned structs only");
        } else if (m != NULL) {
            *out = (DLManagedTensorVersioned *)m;
            rc = 0;
        }
    }
    PyGILState_Release(state);
    return rc;
}

/* The struct as a dlbind.Tensor that owns it (validated: an invalid one's deleter runs, and the error says why). */
static int dlbind_x_to_py(DLManagedTensorVersioned *tensor, void **out_py_object) {
    PyGILState_STATE state = PyGILState_Ensure();
    PyObject *res = dlbind_tensor_wrap(tensor, 1, 0, NULL);
    if (res != NULL) *out_py_object = res; /* a new reference, as the API asks */
    PyGILState_Release(state);
    return res != NULL ? 0 : -1;
}

static int dlbind_x_allocate(DLTensor *prototype, DLManagedTensorVersioned **out, void *error_ctx,
                             void (*SetError)(void *error_ctx, const char *kind, const char *message)) {
    PyGILState_STATE state = PyGILState_Ensure();
    void *address = NULL;
    /* configured first (dlbind loads its runtime lazily), as from_py is: a table taken before any import works */
    int rc = dlbind_configured() ? dlbind_call_taken(dlbind_cfg.allocate, PyLong_FromVoidPtr(prototype), &address) : -1;
    if (rc != 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *text = value ? PyObject_Str(value) : NULL;
        const char *message = text ? PyUnicode_AsUTF8(text) : NULL;
        PyErr_Clear(); /* a message that could not be read: the default one */
        if (SetError)
            SetError(error_ctx, type ? ((PyTypeObject *)type)->tp_name : "RuntimeError", message ? message : "allocation failed");
        Py_XDECREF(text);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb); /* what SetError set (a Python error, for a consumer in Python) stands, as the API says */
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

const void *dlbind_own_exchange_table(void) { return &dlbind_exchange_table; }
#else
/* A header without the exchange API: no table to offer (None). */
PyObject *dlbind_py_exchange_table(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    Py_RETURN_NONE;
}

const void *dlbind_own_exchange_table(void) { return NULL; }
#endif
