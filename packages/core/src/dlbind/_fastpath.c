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

/* How many times our deleters ran (read by the leak tests through dlbind.capsule). */
static unsigned long long dlbind_deleter_count = 0;

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

static PyObject *dlbind_py_deleter_calls(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromUnsignedLongLong(dlbind_deleter_count);
}

/* ---- DLPack 1.3 C exchange API ---------------------------------------------------------------
 * Consumer: exchange_import(obj) uses the table on type(obj) (cached per type) and returns the
 * address of an owned DLManagedTensorVersioned, or None when the type has no usable table.
 * Producer: dlbind's own table, whose functions go through dlbind.exchange (Python) for the work
 * that needs Python objects; it is static and lives as long as the process. */

static PyObject *dlbind_api_cache = NULL; /* type -> capsule or None */

static const DLPackExchangeAPI *dlbind_table_of(PyObject *obj) {
    PyObject *type = (PyObject *)Py_TYPE(obj);
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

static PyMethodDef dlbind_methods[] = {
    {"export", (PyCFunction)(void (*)(void))dlbind_py_export, METH_FASTCALL,
     "export(keepalive, address, versioned) -> capsule"},
    {"take", (PyCFunction)dlbind_py_take, METH_O, "take(capsule) -> (address, versioned)"},
    {"deleter_calls", (PyCFunction)dlbind_py_deleter_calls, METH_NOARGS, "how many times dlbind's C deleters ran"},
    {"exchange_import", (PyCFunction)dlbind_py_exchange_import, METH_O,
     "exchange_import(obj) -> owned DLManagedTensorVersioned address, or None without a usable table"},
    {"exchange_table", (PyCFunction)dlbind_py_exchange_table, METH_NOARGS, "dlbind's own exchange table capsule"},
    {NULL, NULL, 0, NULL},
};

int dlbind_install(void) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = -1;
    PyObject *module = PyImport_ImportModule("dlbind._api");
    if (module != NULL) {
        rc = PyModule_AddFunctions(module, dlbind_methods);
        Py_DECREF(module);
    }
    if (rc != 0) PyErr_Print();
    PyGILState_Release(state);
    return rc;
}

