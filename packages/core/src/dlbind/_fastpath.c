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

static PyMethodDef dlbind_methods[] = {
    {"export", (PyCFunction)(void (*)(void))dlbind_py_export, METH_FASTCALL,
     "export(keepalive, address, versioned) -> capsule"},
    {"take", (PyCFunction)dlbind_py_take, METH_O, "take(capsule) -> (address, versioned)"},
    {"deleter_calls", (PyCFunction)dlbind_py_deleter_calls, METH_NOARGS, "how many times dlbind's C deleters ran"},
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
