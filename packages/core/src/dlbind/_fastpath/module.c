/* dlbind._fastpath: the compiled build's hot paths, a C extension module of its own.
 *
 * Single-phase init: the module's state is process-wide by nature (the exchange table must live as
 * long as the process, deleters run from any thread and at exit, and the export/deleter counts are
 * global), so it lives in C globals; the module is not meant for subinterpreters.
 *
 * configure(**pieces), called once by dlbind at import, hands over every Python object the C code
 * uses, by name: the C code looks up no module. */
#include "fastpath.h"

static PyObject *dlbind_py_counts(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return Py_BuildValue("(KK)", dlbind_export_count, dlbind_deleter_count);
}

static PyObject *dlbind_py_pinned(PyObject *mod, PyObject *unused) {
    (void)mod;
    (void)unused;
    return PyLong_FromUnsignedLongLong(dlbind_blocks_pinned());
}

/* What configure() takes, by keyword: the Python pieces the C code calls, and the records it reads. kind: 't'
 * the Tensor class, 'o' any object, 'c' a callable, 'd' a dict. */
typedef struct {
    const char *name;
    PyObject **slot;
    char kind;
} dlbind_cfg_entry;

static const dlbind_cfg_entry dlbind_cfg_entries[] = {
    {"tensor_type", (PyObject **)&dlbind_cfg.tensor_type, 't'},
    {"cpu_device", &dlbind_cfg.cpu_device, 'o'},
    {"asdlpack", &dlbind_cfg.asdlpack, 'c'},
    {"from_dlpack", &dlbind_cfg.from_dlpack, 'c'},
    {"check_managed", &dlbind_cfg.check_managed, 'c'},
    {"export_view", &dlbind_cfg.export_view, 'c'},
    {"allocate", &dlbind_cfg.allocate, 'c'},
    {"convert", &dlbind_cfg.convert, 'c'},
    {"routes", &dlbind_cfg.routes, 'd'},
    {"plans", &dlbind_cfg.plans, 'o'},
    {"order", &dlbind_cfg.order, 'c'},
};
#define DLBIND_CFG_ENTRIES ((Py_ssize_t)(sizeof dlbind_cfg_entries / sizeof dlbind_cfg_entries[0]))

/* Whether value is what configure()'s keyword `e` takes; a TypeError naming it otherwise. */
static int dlbind_cfg_checked(const dlbind_cfg_entry *e, PyObject *value) {
    if (e->kind == 't' && !(PyType_Check(value) && PyType_IsSubtype((PyTypeObject *)value, &dlbind_tensor_core_type))) {
        PyErr_Format(PyExc_TypeError, "configure(): %s must be a subclass of " DLBIND_MODULE ".TensorCore", e->name);
        return -1;
    }
    if ((e->kind == 'c' && !PyCallable_Check(value)) || (e->kind == 'd' && !PyDict_Check(value))) {
        PyErr_Format(PyExc_TypeError, "configure(): %s must be %s, not %.200s", e->name,
                     e->kind == 'c' ? "callable" : "a dict", Py_TYPE(value)->tp_name);
        return -1;
    }
    return 0;
}

static PyObject *dlbind_py_configure(PyObject *mod, PyObject *args, PyObject *kwargs) {
    (void)mod;
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments only");
        return NULL;
    }
    PyObject *values[DLBIND_CFG_ENTRIES];
    for (Py_ssize_t i = 0; i < DLBIND_CFG_ENTRIES; i++) { /* all required; each checked before any is kept */
        const dlbind_cfg_entry *e = &dlbind_cfg_entries[i];
        values[i] = kwargs != NULL ? PyDict_GetItemString(kwargs, e->name) : NULL;
        if (values[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "configure() missing required keyword argument '%s'", e->name);
            return NULL;
        }
        if (dlbind_cfg_checked(e, values[i]) != 0) return NULL;
    }
    if (PyDict_GET_SIZE(kwargs) != DLBIND_CFG_ENTRIES) {
        PyErr_SetString(PyExc_TypeError, "configure() got an unexpected keyword argument");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < DLBIND_CFG_ENTRIES; i++) {
        Py_INCREF(values[i]);
        Py_XSETREF(*dlbind_cfg_entries[i].slot, values[i]);
    }
    dlbind_exchange_clear(); /* tables seen before (re)configuration are looked up again */
    Py_RETURN_NONE;
}

static PyObject *dlbind_py_set_loader(PyObject *mod, PyObject *loader) {
    (void)mod;
    if (!PyCallable_Check(loader)) {
        PyErr_SetString(PyExc_TypeError, "set_loader(loader): loader must be callable");
        return NULL;
    }
    Py_INCREF(loader);
    Py_XSETREF(dlbind_loader, loader);
    Py_RETURN_NONE;
}

static PyObject *dlbind_py_public(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);

static PyMethodDef dlbind_methods[] = {
    {"public", (PyCFunction)(void (*)(void))dlbind_py_public, METH_FASTCALL,
     "public(builtin, python): the public function calling builtin that reads as python (help, signature)"},
    {"set_loader", (PyCFunction)dlbind_py_set_loader, METH_O,
     "set_loader(loader): what a call before configure() calls first (dlbind._load.ensure)"},
    {"configure", (PyCFunction)(void (*)(void))dlbind_py_configure, METH_VARARGS | METH_KEYWORDS,
     "configure(*, tensor_type, cpu_device, asdlpack, from_dlpack, check_managed, export_view, allocate, convert, "
     "routes, plans, order): the Python pieces the C code uses (dlbind passes them at import)"},
    {"counts", (PyCFunction)dlbind_py_counts, METH_NOARGS, "(exports made in C, deleters run in C)"},
    {"ndarray_struct", (PyCFunction)dlbind_py_ndarray_struct, METH_NOARGS,
     "whether asdlpack reads exact numpy.ndarrays from their struct: True, False (its probe disagreed), None (none "
     "probed yet)"},
    {"pinned", (PyCFunction)dlbind_py_pinned, METH_NOARGS,
     "export blocks ever pinned (deleted while their capsule may live; kept for reuse, never freed)"},
    {"export", (PyCFunction)(void (*)(void))dlbind_py_export, METH_FASTCALL, "export(keepalive, address, versioned) -> capsule"},
    {"take", (PyCFunction)dlbind_py_take, METH_O, "take(capsule) -> (address, versioned)"},
    {"forget_type", (PyCFunction)dlbind_py_forget_type, METH_O,
     "forget_type(type): drop the type's cached entry (its plan learned a call style): made again when next read"},
    {"asdlpack", (PyCFunction)(void (*)(void))dlbind_py_asdlpack, METH_FASTCALL | METH_KEYWORDS,
     "asdlpack($module, /, obj, *, readonly=None, device_id=None)\n--\n\nsee dlbind.producer.asdlpack"},
    {"from_dlpack", (PyCFunction)(void (*)(void))dlbind_py_from_dlpack, METH_FASTCALL | METH_KEYWORDS,
     "from_dlpack($module, /, x, *, device=None, copy=None, stream=None, allow_vector=False)\n--\n\n"
     "see dlbind.consumer.from_dlpack"},
    {"wrap", (PyCFunction)(void (*)(void))dlbind_py_wrap, METH_FASTCALL,
     "wrap(address, versioned, allow_vector[, ready]) -> Tensor (owns it)"},
    {"take_wrap", (PyCFunction)(void (*)(void))dlbind_py_take_wrap, METH_FASTCALL,
     "take_wrap(capsule, allow_vector[, ready[, producer[, plan]]]) -> Tensor: take, own and finish in one step"},
    {"exchange_import", (PyCFunction)dlbind_py_exchange_import, METH_O,
     "exchange_import(obj) -> Tensor owning what obj's exchange table handed over, or None without a usable table"},
    {"exchange_table", (PyCFunction)dlbind_py_exchange_table, METH_NOARGS, "dlbind's own exchange table capsule"},
    {"convert_to", (PyCFunction)(void (*)(void))dlbind_py_convert_to, METH_FASTCALL,
     "convert_to(x, route): convert's C route of a dlbind.routes.Route; see dlbind.convert"},
    {"copy_strided", (PyCFunction)(void (*)(void))dlbind_py_copy_strided, METH_FASTCALL,
     "copy_strided(dst, src, shape, byte_strides, itemsize): row-major copy of strided host memory (GIL released)"},
    {"convert", (PyCFunction)(void (*)(void))dlbind_py_convert, METH_FASTCALL | METH_KEYWORDS,
     "convert($module, /, x, to, *, device=None, copy=None, stream=None)\n--\n\nsee dlbind.conversion.convert"},
    {NULL, NULL, 0, NULL},
};

/* A public function of the compiled build (dlbind.convert, from_dlpack, asdlpack): called as the builtin it
 * wraps (the vectorcall goes straight into that builtin's C implementation) and read as the Python implementation
 * it stands for. Its __wrapped__ is that function, so inspect.signature() and help() show its signature with its
 * annotations, and its __doc__, __name__, __qualname__ and __module__ are that function's (a builtin's
 * __text_signature__ cannot carry annotations). A non-data descriptor that does not bind, as a staticmethod: help()
 * documents it as a routine. */
typedef PyObject *(*dlbind_fastcall)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    dlbind_fastcall impl; /* the builtin's C function */
    PyObject *self;       /* the builtin's self (this module) */
    PyObject *dict;       /* __wrapped__, __doc__, __name__, __qualname__, __module__ */
} dlbind_function;

#ifndef Py_TPFLAGS_HAVE_VECTORCALL
#define Py_TPFLAGS_HAVE_VECTORCALL _Py_TPFLAGS_HAVE_VECTORCALL
#endif

static PyObject *dlbind_function_call(PyObject *op, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    dlbind_function *f = (dlbind_function *)op;
    return f->impl(f->self, args, PyVectorcall_NARGS(nargsf), kwnames);
}

static int dlbind_function_traverse(PyObject *op, visitproc visit, void *arg) {
    Py_VISIT(((dlbind_function *)op)->self);
    Py_VISIT(((dlbind_function *)op)->dict);
    return 0;
}

static int dlbind_function_clear(PyObject *op) {
    Py_CLEAR(((dlbind_function *)op)->self);
    Py_CLEAR(((dlbind_function *)op)->dict);
    return 0;
}

static void dlbind_function_dealloc(PyObject *op) {
    PyObject_GC_UnTrack(op);
    dlbind_function_clear(op);
    Py_TYPE(op)->tp_free(op);
}

static PyObject *dlbind_function_get(PyObject *op, PyObject *obj, PyObject *type) {
    (void)obj;
    (void)type;
    return Py_NewRef(op);
}

static PyObject *dlbind_function_repr(PyObject *op) {
    PyObject *name = PyDict_GetItemString(((dlbind_function *)op)->dict, "__qualname__"); /* borrowed */
    return PyUnicode_FromFormat("<function " DLBIND_PACKAGE ".%S (compiled)>", name != NULL ? name : Py_None);
}

static PyGetSetDef dlbind_function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject dlbind_function_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = DLBIND_MODULE ".Function",
    .tp_basicsize = sizeof(dlbind_function),
    .tp_dealloc = dlbind_function_dealloc,
    .tp_vectorcall_offset = offsetof(dlbind_function, vectorcall),
    .tp_repr = dlbind_function_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "A public function of dlbind's compiled build: see its __wrapped__, the Python implementation.",
    .tp_traverse = dlbind_function_traverse,
    .tp_clear = dlbind_function_clear,
    .tp_getset = dlbind_function_getset,
    .tp_descr_get = dlbind_function_get,
    .tp_dictoffset = offsetof(dlbind_function, dict),
};

/* public(builtin, python): the Function calling ``builtin`` (a function of this module taking fast-call
 * arguments and keywords) that reads as ``python``. */
static PyObject *dlbind_py_public(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 2 || !PyCFunction_Check(args[0]) || PyCFunction_GET_FLAGS(args[0]) != (METH_FASTCALL | METH_KEYWORDS)) {
        PyErr_SetString(PyExc_TypeError, "public(builtin, python): builtin is a fast-call function of this module");
        return NULL;
    }
    dlbind_function *f = PyObject_GC_New(dlbind_function, &dlbind_function_type);
    if (f == NULL) return NULL;
    f->vectorcall = dlbind_function_call;
    f->impl = (dlbind_fastcall)(void (*)(void))PyCFunction_GET_FUNCTION(args[0]);
    f->self = Py_XNewRef(PyCFunction_GET_SELF(args[0]));
    f->dict = PyDict_New();
    PyObject_GC_Track((PyObject *)f);
    if (f->dict == NULL || PyDict_SetItemString(f->dict, "__wrapped__", args[1]) != 0) goto fail;
    static const char *copied[] = {"__doc__", "__name__", "__qualname__", "__module__"};
    for (size_t i = 0; i < sizeof copied / sizeof copied[0]; i++) {
        PyObject *value = PyObject_GetAttrString(args[1], copied[i]);
        int failed = value == NULL || PyDict_SetItemString(f->dict, copied[i], value) != 0;
        Py_XDECREF(value);
        if (failed) goto fail;
    }
    return (PyObject *)f;
fail:
    Py_DECREF(f);
    return NULL;
}

static struct PyModuleDef dlbind_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = DLBIND_MODULE,
    .m_doc = "The compiled build's hot paths (capsules, exporter, tensor, exchange table); configured by dlbind when its runtime loads.",
    .m_size = -1,
    .m_methods = dlbind_methods,
};

PyMODINIT_FUNC PyInit__fastpath(void) {
    dlbind_policy_init();
    dlbind_cfg.own_table = dlbind_own_exchange_table();
    if (dlbind_cfg.max_version == NULL && dlbind_intern_all() != 0) return NULL;
    if (PyType_Ready(&dlbind_exporter_type) < 0 || PyType_Ready(&dlbind_tensor_core_type) < 0 ||
        PyType_Ready(&dlbind_function_type) < 0 || dlbind_convert_init() < 0)
        return NULL;
    PyObject *module = PyModule_Create(&dlbind_module);
    if (module == NULL) return NULL;
    Py_INCREF(&dlbind_exporter_type);
    if (PyModule_AddObject(module, "BufferExporter", (PyObject *)&dlbind_exporter_type) < 0) {
        Py_DECREF(&dlbind_exporter_type);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&dlbind_tensor_core_type);
    if (PyModule_AddObject(module, "TensorCore", (PyObject *)&dlbind_tensor_core_type) < 0) {
        Py_DECREF(&dlbind_tensor_core_type);
        Py_DECREF(module);
        return NULL;
    }
    Py_INCREF(&dlbind_function_type);
    if (PyModule_AddObject(module, "Function", (PyObject *)&dlbind_function_type) < 0) {
        Py_DECREF(&dlbind_function_type);
        Py_DECREF(module);
        return NULL;
    }
    if (PyModule_AddIntConstant(module, "QUARANTINE", DLBIND_QUARANTINE_MAX) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
