/* DLPack capsules: making them (export, make_capsule), taking them (take), the deleters and the
 * capsule destructor.
 *
 * Ownership: an exported DLManagedTensor(Versioned) keeps its Python owner alive through
 * manager_ctx (one reference). The deleter drops that reference, with the GIL, keeping any pending
 * exception intact, and does nothing once the interpreter is finalizing (leaking is the only safe
 * choice then). A second call of a deleter does nothing. */
#include "fastpath.h"

const char DLBIND_NAME_VERSIONED[] = "dltensor_versioned";
const char DLBIND_NAME_USED_VERSIONED[] = "used_dltensor_versioned";
const char DLBIND_NAME_LEGACY[] = "dltensor";
const char DLBIND_NAME_USED_LEGACY[] = "used_dltensor";

static int dlbind_finalizing(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return !Py_IsInitialized() || Py_IsFinalizing();
#else
    return !Py_IsInitialized() || _Py_IsFinalizing();
#endif
}

/* Drop the owner's reference (with the GIL, from any thread). A pending exception stays intact;
 * the owner's dealloc can leave none behind. Fetching only when one is pending keeps the common
 * call (no exception) to a pointer test. */
static void dlbind_drop_held(PyObject *owner) {
    PyObject *type = NULL, *value = NULL, *tb = NULL;
    int pending = PyErr_Occurred() != NULL;
    if (pending) PyErr_Fetch(&type, &value, &tb);
    dlbind_deleter_count++;
    Py_DECREF(owner);
    if (pending)
        PyErr_Restore(type, value, tb);
    else if (PyErr_Occurred())
        PyErr_Clear();
}

static void dlbind_drop(void *manager_ctx) {
    if (manager_ctx == NULL || dlbind_finalizing()) return;
    PyGILState_STATE state = PyGILState_Ensure();
    dlbind_drop_held((PyObject *)manager_ctx);
    PyGILState_Release(state);
}

/* Deleters of structs the Python side laid out (export): the struct's memory is the owner's. */
static void dlbind_deleter_versioned(DLManagedTensorVersioned *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_drop(ctx);
}

static void dlbind_deleter_legacy(DLManagedTensor *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_drop(ctx);
}

/* Deleters of the blocks make_capsule allocates: one allocation, the struct then shape and strides. */
typedef struct {
    DLManagedTensorVersioned m;
    int64_t dims[];
} dlbind_block_v;
typedef struct {
    DLManagedTensor m;
    int64_t dims[];
} dlbind_block_l;

/* Blocks with room for DLBIND_INLINE_NDIM dimensions are kept on a free list when their deleter
 * runs and reused by the next export (a malloc/free pair saved per exchange). The list is only
 * touched with the GIL held; every block comes from PyMem_RawMalloc, so one can always be freed
 * without it (at interpreter exit blocks are freed, never listed). */
#define DLBIND_BLOCK_BYTES \
    ((sizeof(dlbind_block_v) > sizeof(dlbind_block_l) ? sizeof(dlbind_block_v) : sizeof(dlbind_block_l)) + \
     2 * DLBIND_INLINE_NDIM * sizeof(int64_t))
#define DLBIND_BLOCK_FREE_MAX 64
static void *dlbind_block_free[DLBIND_BLOCK_FREE_MAX];
static int dlbind_block_nfree = 0;

static void *dlbind_block_alloc(int ndim, size_t bytes) {
    if (ndim <= DLBIND_INLINE_NDIM) {
        if (dlbind_block_nfree > 0) return dlbind_block_free[--dlbind_block_nfree];
        return PyMem_RawMalloc(DLBIND_BLOCK_BYTES);
    }
    return PyMem_RawMalloc(bytes);
}

static void dlbind_block_release(void *block, void *ctx, int ndim) {
    if (dlbind_finalizing()) { /* the owner leaks (nothing may run now); the memory is ours to free */
        PyMem_RawFree(block);
        return;
    }
    PyGILState_STATE state = PyGILState_Ensure();
    if (ctx != NULL) dlbind_drop_held((PyObject *)ctx);
    if (ndim <= DLBIND_INLINE_NDIM && dlbind_block_nfree < DLBIND_BLOCK_FREE_MAX)
        dlbind_block_free[dlbind_block_nfree++] = block;
    else
        PyMem_RawFree(block);
    PyGILState_Release(state);
}

static void dlbind_block_deleter_v(DLManagedTensorVersioned *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_block_release(self, ctx, self->dl_tensor.ndim);
}

static void dlbind_block_deleter_l(DLManagedTensor *self) {
    if (self == NULL) return;
    void *ctx = self->manager_ctx;
    self->manager_ctx = NULL;
    dlbind_block_release(self, ctx, self->dl_tensor.ndim);
}

/* The Python owner a struct holds through manager_ctx when its deleter is one of ours (export and
 * make_capsule: one reference, dropped by the deleter), else NULL: a foreign struct's context is
 * opaque. Borrowed; for tp_traverse of the objects that own such a struct. */
PyObject *dlbind_managed_owner(void *managed, int versioned) {
    if (managed == NULL) return NULL;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
        if (m->deleter == dlbind_block_deleter_v || m->deleter == dlbind_deleter_versioned) return (PyObject *)m->manager_ctx;
    } else {
        DLManagedTensor *m = (DLManagedTensor *)managed;
        if (m->deleter == dlbind_block_deleter_l || m->deleter == dlbind_deleter_legacy) return (PyObject *)m->manager_ctx;
    }
    return NULL;
}

void dlbind_call_deleter(void *managed, int versioned) {
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
        if (m->deleter) m->deleter(m);
    } else {
        DLManagedTensor *m = (DLManagedTensor *)managed;
        if (m->deleter) m->deleter(m);
    }
}

/* An unconsumed capsule frees its tensor; a consumed one (renamed used_*) belongs to the consumer.
 * Our capsules carry our own name strings, so a pointer test settles the common cases; a rename
 * to another copy of the same text is still found by strcmp. */
void dlbind_capsule_destructor(PyObject *capsule) {
    const char *name = PyCapsule_GetName(capsule);
    int versioned;
    if (name == DLBIND_NAME_VERSIONED || (name != NULL && strcmp(name, DLBIND_NAME_VERSIONED) == 0))
        versioned = 1;
    else if (name == DLBIND_NAME_LEGACY || (name != NULL && strcmp(name, DLBIND_NAME_LEGACY) == 0))
        versioned = 0;
    else /* consumed (or renamed to NULL, which GetName reports without an error) */
        return;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    void *m = PyCapsule_GetPointer(capsule, name);
    if (m != NULL) dlbind_call_deleter(m, versioned);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

/* export(keepalive, address, versioned) -> capsule: wire our deleter and wrap the struct. */
PyObject *dlbind_py_export(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
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
        capsule = PyCapsule_New(m, DLBIND_NAME_VERSIONED, dlbind_capsule_destructor);
    } else {
        DLManagedTensor *m = (DLManagedTensor *)address;
        m->manager_ctx = keepalive;
        m->deleter = dlbind_deleter_legacy;
        capsule = PyCapsule_New(m, DLBIND_NAME_LEGACY, dlbind_capsule_destructor);
    }
    if (capsule == NULL) dlbind_call_deleter(address, versioned);
    return capsule;
}

PyObject *dlbind_make_capsule(PyObject *owner, void *data, int ndim, const int64_t *shape, const int64_t *strides,
                              DLDevice device, DLDataType dtype, uint64_t byte_offset, int versioned, uint64_t flags) {
    size_t dims_bytes = (size_t)(ndim > 0 ? ndim : 0) * 2 * sizeof(int64_t);
    DLTensor *t;
    void *block;
    if (versioned) {
        dlbind_block_v *b = (dlbind_block_v *)dlbind_block_alloc(ndim, sizeof(dlbind_block_v) + dims_bytes);
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
        dlbind_block_l *b = (dlbind_block_l *)dlbind_block_alloc(ndim, sizeof(dlbind_block_l) + dims_bytes);
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
    PyObject *capsule = PyCapsule_New(block, versioned ? DLBIND_NAME_VERSIONED : DLBIND_NAME_LEGACY, dlbind_capsule_destructor);
    if (capsule == NULL) dlbind_call_deleter(block, versioned);
    return capsule;
}

/* Check the name, rename to used_*, hand over the pointer. Messages as dlbind.capsule.take's. */
void *dlbind_take(PyObject *capsule, int *versioned) {
    if (!PyCapsule_CheckExact(capsule)) {
        PyObject *type_name = dlbind_type_name(capsule);
        if (type_name == NULL) return NULL;
        PyErr_Format(PyExc_TypeError, "expected a DLPack capsule (PyCapsule), got %S", type_name);
        Py_DECREF(type_name);
        return NULL;
    }
    const char *name = PyCapsule_GetName(capsule);
    const char *used;
    if (name != NULL && strcmp(name, DLBIND_NAME_VERSIONED) == 0) {
        *versioned = 1;
        used = DLBIND_NAME_USED_VERSIONED;
    } else if (name != NULL && strcmp(name, DLBIND_NAME_LEGACY) == 0) {
        *versioned = 0;
        used = DLBIND_NAME_USED_LEGACY;
    } else if (name != NULL && (strcmp(name, DLBIND_NAME_USED_VERSIONED) == 0 || strcmp(name, DLBIND_NAME_USED_LEGACY) == 0)) {
        PyErr_Format(PyExc_BufferError, "this DLPack capsule was already consumed (its name is '%s')", name);
        return NULL;
    } else {
        if (name == NULL) {
            PyErr_SetString(PyExc_BufferError, "not a DLPack capsule: no name; expected 'dltensor_versioned' or 'dltensor'");
        } else {
            PyObject *text = PyUnicode_DecodeUTF8(name, (Py_ssize_t)strlen(name), "replace");
            if (text == NULL) return NULL;
            PyErr_Format(PyExc_BufferError, "not a DLPack capsule: %R; expected 'dltensor_versioned' or 'dltensor'", text);
            Py_DECREF(text);
        }
        return NULL;
    }
    void *pointer = PyCapsule_GetPointer(capsule, name);
    if (pointer == NULL) {
        PyErr_Clear();
        PyErr_SetString(PyExc_BufferError, "the DLPack capsule holds a NULL pointer");
        return NULL;
    }
    if (PyCapsule_SetName(capsule, used) != 0) return NULL;
    return pointer;
}

/* take(capsule) -> (address, versioned) */
PyObject *dlbind_py_take(PyObject *mod, PyObject *capsule) {
    (void)mod;
    int versioned;
    void *pointer = dlbind_take(capsule, &versioned);
    if (pointer == NULL) return NULL;
    PyObject *address = PyLong_FromVoidPtr(pointer);
    if (address == NULL) { /* the capsule is renamed: the struct is ours to free */
        dlbind_call_deleter(pointer, versioned);
        return NULL;
    }
    return Py_BuildValue("(NO)", address, versioned ? Py_True : Py_False);
}

PyObject *dlbind_readonly_legacy_error(void) {
    PyErr_SetString(PyExc_BufferError,
                    "read-only data cannot be exported in a legacy 'dltensor' capsule (it has no read-only flag); "
                    "the consumer must ask for max_version=(1, 0) or newer");
    return NULL;
}

/* The fast case of __dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): no
 * stream, no copy, dl_device None or where the data is. Anything else (or a value this parser
 * does not read) goes to Python, which owns the rules and the messages. `owner` names the method's
 * class in the messages of a wrong call, as Python's own would. */
int dlbind_parse_dlpack(const char *owner, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames, DLDevice here,
                        dlbind_dlpack_args *out) {
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError, "%s.__dlpack__() takes 1 positional argument but %zd were given", owner, nargs + 1);
        return -1;
    }
    out->versioned = 0;
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    int fast = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[i];
        int kw = dlbind_keyword(key);
        if (kw == DLBIND_KW_STREAM) {
            if (value != Py_None) fast = 0;
        } else if (kw == DLBIND_KW_MAX_VERSION) {
            if (value == Py_None) continue;
            if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(value, 0))) {
                fast = 0;
                continue;
            }
            int overflow = 0;
            long long major = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(value, 0), &overflow);
            if (major == -1 && PyErr_Occurred()) return -1;
            if (overflow) fast = 0;
            out->versioned = overflow > 0 || major >= DLPACK_MAJOR_VERSION;
        } else if (kw == DLBIND_KW_DL_DEVICE) {
            if (value == Py_None) continue;
            if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(value, 0)) ||
                !PyLong_CheckExact(PyTuple_GET_ITEM(value, 1))) {
                fast = 0;
                continue;
            }
            int o1 = 0, o2 = 0;
            long long kind = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(value, 0), &o1);
            long long index = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(value, 1), &o2);
            if (PyErr_Occurred()) return -1;
            if (o1 || o2 || kind != (long long)here.device_type || index != (long long)here.device_id) fast = 0;
        } else if (kw == DLBIND_KW_COPY) {
            if (value != Py_None && value != Py_False) fast = 0;
        } else {
            PyErr_Format(PyExc_TypeError, "%s.__dlpack__() got an unexpected keyword argument '%U'", owner, key);
            return -1;
        }
    }
    return fast;
}
