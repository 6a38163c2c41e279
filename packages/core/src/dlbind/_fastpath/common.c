/* What every C file of dlbind._fastpath uses, below them all: the configuration configure() fills (the
 * Python pieces, the interned names), the export and deleter counters, keyword lookup, a type's name for
 * messages, and the call of an entry point's one fall-back into Python. module.c (the top) registers the
 * functions and fills the configuration; nothing here calls up into another file. */
#include "fastpath.h"

dlbind_config dlbind_cfg;
unsigned long long dlbind_deleter_count = 0;
unsigned long long dlbind_export_count = 0;

/* dlbind._load.ensure (set_loader): loads the package's runtime, whose wiring configures this module. `import
 * dlbind` loads nothing of it, so a module of dlbind imported on its own may call in here first. */
PyObject *dlbind_loader = NULL;

int dlbind_configured(void) {
    if (dlbind_cfg.tensor_type != NULL) return 1;
    if (dlbind_loader != NULL) {
        /* another thread waits for the one loading; a call from inside the load returns at once (the error) */
        PyObject *res = PyObject_CallNoArgs(dlbind_loader);
        if (res == NULL) return 0;
        Py_DECREF(res);
        if (dlbind_cfg.tensor_type != NULL) return 1;
    }
    PyErr_SetString(PyExc_RuntimeError, DLBIND_MODULE " is not configured: import " DLBIND_PACKAGE " first");
    return 0;
}

static const char *const dlbind_keyword_names[DLBIND_KW_COUNT] = {
    "stream", "max_version", "dl_device", "copy", "device", "allow_vector", "readonly", "device_id", "to",
};

int dlbind_keyword(PyObject *key) {
    for (int i = 0; i < DLBIND_KW_COUNT; i++)
        if (key == dlbind_cfg.kw[i]) return i;
    if (!PyUnicode_Check(key)) return -1;
    for (int i = 0; i < DLBIND_KW_COUNT; i++)
        if (PyUnicode_CompareWithASCIIString(key, dlbind_keyword_names[i]) == 0) return i;
    return -1;
}

int dlbind_intern_all(void) {
    dlbind_cfg.max_version = Py_BuildValue("(ii)", DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION);
    dlbind_cfg.str_dlpack = PyUnicode_InternFromString("__dlpack__");
    if (dlbind_cfg.max_version == NULL || dlbind_cfg.str_dlpack == NULL) return -1;
    for (int i = 0; i < DLBIND_KW_COUNT; i++)
        if ((dlbind_cfg.kw[i] = PyUnicode_InternFromString(dlbind_keyword_names[i])) == NULL) return -1;
    dlbind_cfg.kwnames_dlpack = PyTuple_Pack(2, dlbind_cfg.kw[DLBIND_KW_STREAM], dlbind_cfg.kw[DLBIND_KW_MAX_VERSION]);
    dlbind_cfg.kwnames_max_version = PyTuple_Pack(1, dlbind_cfg.kw[DLBIND_KW_MAX_VERSION]);
    if (dlbind_cfg.kwnames_dlpack == NULL || dlbind_cfg.kwnames_max_version == NULL) return -1;
    PyObject **attrs[] = {&dlbind_cfg.str_dlpack_device, &dlbind_cfg.attr_guards, &dlbind_cfg.attr_immutable,
                          &dlbind_cfg.attr_python, &dlbind_cfg.attr_host_only, &dlbind_cfg.attr_call_style,
                          &dlbind_cfg.attr_complex_guards, &dlbind_cfg.attr_refuse, &dlbind_cfg.attr_uint8_read_as,
                          &dlbind_cfg.attr_direct, &dlbind_cfg.attr_lasting, &dlbind_cfg.attr_passing,
                          &dlbind_cfg.attr_refused_streams};
    const char *names[] = {"__dlpack_device__", "guards", "immutable", "python", "host_only", "call_style",
                           "complex_guards", "refuse", "uint8_read_as", "direct", "lasting", "passing",
                           "refused_streams"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if ((*attrs[i] = PyUnicode_InternFromString(names[i])) == NULL) return -1;
    return 0;
}

/* Does this thread hold the GIL, through its own (PyGILState) thread state? PyGILState_Check is not used: it
 * answers yes for every thread once a subinterpreter was made. A thread that holds the GIL through another
 * thread state is answered no, and PyGILState_Ensure would deadlock there, as it always did. */
int dlbind_holds_gil(void) {
#if PY_VERSION_HEX >= 0x030D0000
    PyThreadState *current = PyThreadState_GetUnchecked();
#else
    PyThreadState *current = _PyThreadState_UncheckedGet();
#endif
    return current != NULL && current == PyGILState_GetThisThreadState();
}

/* The (address, versioned) arguments of export() and wrap(), named `what` in errors: a struct's address, never
 * NULL, and whether it is a DLManagedTensorVersioned, which a build for a DLPack 0.x header has none of (such a
 * struct is neither read nor released). */
int dlbind_struct_args(PyObject *address_arg, PyObject *versioned_arg, const char *what, void **address,
                       int *versioned) {
    *address = PyLong_AsVoidPtr(address_arg);
    if (*address == NULL) {
        if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "%s of a NULL struct address", what);
        return -1;
    }
    if ((*versioned = PyObject_IsTrue(versioned_arg)) < 0) return -1;
    if (*versioned && !DLBIND_VERSIONED_CAPSULES) {
        PyErr_Format(PyExc_ValueError, "%s: " DLBIND_PACKAGE " (DLPack 0.x) has legacy structs only", what);
        return -1;
    }
    return 0;
}

/* fn(state, *args, **kwargs) of a vectorcall's arguments: an entry point's one fall-back into Python, told where
 * the C code stopped (state: None, the whole call is Python's). */
PyObject *dlbind_resume(PyObject *fn, PyObject *state, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t total = nargs + (kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8], **stack = total < 8 ? small : PyMem_New(PyObject *, (size_t)total + 1);
    if (stack == NULL) return PyErr_NoMemory();
    stack[0] = state;
    for (Py_ssize_t i = 0; i < total; i++) stack[i + 1] = args[i];
    PyObject *res = PyObject_Vectorcall(fn, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small) PyMem_Free(stack);
    return res;
}

PyObject *dlbind_type_name(PyObject *obj) { return PyObject_GetAttrString((PyObject *)Py_TYPE(obj), "__name__"); }

