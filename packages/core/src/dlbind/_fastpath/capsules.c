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
/* The way out of a consumed capsule: dlbind.capsule.CONSUMED_HINT, the same words in the pure build. */
#define DLBIND_CONSUMED_HINT ": a capsule is consumed once; ask the producer for a new one (call its __dlpack__ again)"
/* dlbind.capsule.STALE, in the same words */
#define DLBIND_STALE                                                                                              \
    "this DLPack capsule's tensor was already released: a consumer ran its deleter without renaming the capsule " \
    "(torch does when its import fails)" DLBIND_CONSUMED_HINT

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
    dlbind_error_kept kept;
    dlbind_error_aside(&kept);
    dlbind_deleter_count++;
    Py_DECREF(owner);
    dlbind_error_back(&kept);
}

/* Export blocks: every struct dlbind's C code exports lives in a block, with its shape and strides
 * (inline up to DLBIND_INLINE_NDIM dimensions, else one more allocation). The deleter drops the
 * owner's reference; the capsule destructor runs the deleter unless the capsule was consumed.
 *
 * A consumer may run the deleter and leave the capsule unrenamed (torch does when its own checks
 * fail after it took the pointer: issue 8, defect 16); the capsule's destructor must then not
 * delete again, and must not read memory that was freed. A consumer may also null the capsule's
 * destructor (tvm-ffi does when it consumes), so the capsule can die without telling us, and may
 * write the capsule's context (jaxlib does), so nothing can be kept there. What is certain: the
 * capsule's pointer is the block. So blocks know the capsule made for them (by address, never
 * dereferenced), whether their deleter ran and whether that capsule's destructor ran:
 *
 *   - the destructor acts only when the block's capsule is this capsule and the deleter has not
 *     run; a capsule whose block was deleted (and perhaps reused for another export) does nothing;
 *   - a block's memory goes back to the system only when no capsule can still point at it: its own
 *     capsule's destructor ran. A block deleted while its capsule may still live is "pinned": never
 *     freed, so a late destructor always reads live memory, and poisoned, so a consumer that retries
 *     the capsule it left unrenamed finds nothing it can import;
 *   - a pinned block is not reused while its capsule may still live: reused, it would hand that
 *     capsule's retry the next export's struct (two owners of one struct). It waits in a quarantine
 *     until its capsule's destructor runs, then is reused first. A consumer that nulls the destructor
 *     never tells us, so the quarantine keeps DLBIND_QUARANTINE_MAX blocks at most, oldest reused
 *     first: a retry is refused until that many later blocks were quarantined (docs/reliability.md).
 *
 * Lists and flags are touched only with the GIL held. */
typedef struct dlbind_block {
    union { /* first: the capsule's pointer is the block */
        DLManagedTensorVersioned v;
        DLManagedTensor l;
    } m;
    PyObject *capsule; /* the capsule made for this export: compared, never dereferenced */
    struct dlbind_block *next; /* on a free list, or the next newer in the quarantine */
    struct dlbind_block *prev; /* the next older in the quarantine */
    int64_t *dims;             /* shape then strides: inline_dims, or allocated */
    void *foreign;             /* a foreign struct this block hands over (its deleter runs once), or NULL */
    unsigned char versioned;   /* which member of m (and which kind a foreign struct is) */
    unsigned char live;        /* the deleter has not run */
    unsigned char capsule_gone; /* the capsule's destructor ran */
    unsigned char pinned;      /* a capsule may point here: the memory is never freed */
    unsigned char quarantined; /* pinned, and its capsule may still live: not reused */
    int64_t inline_dims[2 * DLBIND_INLINE_NDIM];
} dlbind_block;

#define DLBIND_BLOCK_FREE_MAX 64
static dlbind_block *dlbind_pinned_free = NULL; /* deleted pinned blocks no capsule is known to name: reused first */
static dlbind_block *dlbind_quarantine_oldest = NULL, *dlbind_quarantine_newest = NULL;
static int dlbind_quarantine_n = 0;
static dlbind_block *dlbind_block_free = NULL;  /* deleted blocks no capsule points at: up to FREE_MAX */
static int dlbind_block_nfree = 0;
static unsigned long long dlbind_pinned_count = 0; /* for the tests: blocks ever pinned */

static dlbind_block *dlbind_block_alloc(int ndim) {
    dlbind_block *b;
    if (dlbind_pinned_free != NULL) {
        b = dlbind_pinned_free;
        dlbind_pinned_free = b->next;
    } else if (dlbind_block_free != NULL) {
        b = dlbind_block_free;
        dlbind_block_free = b->next;
        dlbind_block_nfree--;
    } else {
        b = (dlbind_block *)PyMem_RawMalloc(sizeof(dlbind_block));
        if (b == NULL) return NULL;
        b->pinned = 0;
        b->quarantined = 0;
    }
    if (ndim > DLBIND_INLINE_NDIM) {
        b->dims = (int64_t *)PyMem_RawMalloc((size_t)ndim * 2 * sizeof(int64_t));
        if (b->dims == NULL) { /* back where it came from */
            b->dims = b->inline_dims;
            b->live = 0;
            b->capsule_gone = 1;
            if (b->pinned) {
                b->next = dlbind_pinned_free;
                dlbind_pinned_free = b;
            } else {
                PyMem_RawFree(b);
            }
            return NULL;
        }
    } else {
        b->dims = b->inline_dims;
    }
    b->capsule = NULL;
    b->next = NULL;
    b->foreign = NULL;
    b->live = 1;
    b->capsule_gone = 0;
    return b;
}

/* A capsule may still point at b: its memory is never freed from now on (GIL held). */
static void dlbind_block_pin(dlbind_block *b) {
    if (!b->pinned) {
        b->pinned = 1;
        dlbind_pinned_count++;
    }
}

/* Out of the quarantine, onto the pinned free list: reused first (GIL held). */
static void dlbind_unquarantine(dlbind_block *b) {
    if (b->prev != NULL) b->prev->next = b->next;
    else dlbind_quarantine_oldest = b->next;
    if (b->next != NULL) b->next->prev = b->prev;
    else dlbind_quarantine_newest = b->prev;
    dlbind_quarantine_n--;
    b->quarantined = 0;
    b->prev = NULL;
    b->next = dlbind_pinned_free;
    dlbind_pinned_free = b;
}

/* A pinned block whose capsule may still live waits here (GIL held); past the bound, the oldest leaves. */
static void dlbind_quarantine(dlbind_block *b) {
    b->quarantined = 1;
    b->next = NULL;
    b->prev = dlbind_quarantine_newest;
    if (dlbind_quarantine_newest != NULL) dlbind_quarantine_newest->next = b;
    else dlbind_quarantine_oldest = b;
    dlbind_quarantine_newest = b;
    if (++dlbind_quarantine_n > DLBIND_QUARANTINE_MAX) dlbind_unquarantine(dlbind_quarantine_oldest);
}

/* The deleter ran (GIL held): keep or free the block's memory as the rules above say. */
static void dlbind_block_recycle(dlbind_block *b) {
    if (b->dims != b->inline_dims) {
        PyMem_RawFree(b->dims);
        b->dims = b->inline_dims;
    }
    if (!b->capsule_gone) dlbind_block_pin(b);
    if (b->pinned) {
        /* a consumer may retry the capsule it left unrenamed: it must find nothing it can import */
        DLTensor *t = b->versioned ? &b->m.v.dl_tensor : &b->m.l.dl_tensor;
        if (b->versioned) b->m.v.version.major = UINT32_MAX; /* newer than any consumer: refused */
        t->data = NULL;
        t->ndim = 0;
        t->shape = NULL;
        t->strides = NULL;
        t->dtype.code = UINT8_MAX; /* no such dtype code */
        t->dtype.bits = 0;
        if (b->capsule_gone) {
            b->next = dlbind_pinned_free;
            dlbind_pinned_free = b;
        } else {
            dlbind_quarantine(b);
        }
    } else if (dlbind_block_nfree < DLBIND_BLOCK_FREE_MAX) {
        b->next = dlbind_block_free;
        dlbind_block_free = b;
        dlbind_block_nfree++;
    } else {
        PyMem_RawFree(b);
    }
}

static void dlbind_block_delete(dlbind_block *b, void **manager_ctx) {
    if (dlbind_finalizing()) {
        /* no Python may run now: the owner leaks, and so does the block, unless our capsule's
         * destructor is the caller (it frees the block when this returns: no capsule is left) */
        if (b->live) {
            b->live = 0;
            if (b->foreign != NULL) dlbind_call_deleter(b->foreign, b->versioned);
            b->foreign = NULL;
        }
        return;
    }
    /* Consumers call deleters from any thread, most with the GIL held (numpy, torch, dlbind): taking it
     * only when this thread does not hold it keeps the common call to a thread-state test. */
    int has_gil = dlbind_holds_gil();
    PyGILState_STATE state = has_gil ? PyGILState_LOCKED : PyGILState_Ensure();
    /* A consumer may call the deleter while its own exception is set (numpy refusing the tensor): what
     * the release runs (the owner's __del__, a foreign deleter) must neither see nor clear it. Fetched
     * only when one is pending: the common call has none. */
    dlbind_error_kept kept;
    dlbind_error_aside(&kept);
    if (b->live) { /* a second call of the deleter does nothing */
        void *ctx = *manager_ctx;
        *manager_ctx = NULL;
        b->live = 0;
        if (b->foreign != NULL) { /* a handed-over foreign struct: released once, by its own deleter */
            void *foreign = b->foreign;
            b->foreign = NULL;
            dlbind_call_deleter(foreign, b->versioned);
        }
        if (ctx != NULL) dlbind_drop_held((PyObject *)ctx);
        dlbind_block_recycle(b);
    }
    dlbind_error_back(&kept);
    if (!has_gil) PyGILState_Release(state);
}

static void dlbind_block_deleter_v(DLManagedTensorVersioned *self) {
    if (self == NULL) return;
    dlbind_block_delete((dlbind_block *)self, &self->manager_ctx);
}

static void dlbind_block_deleter_l(DLManagedTensor *self) {
    if (self == NULL) return;
    dlbind_block_delete((dlbind_block *)self, &self->manager_ctx);
}

/* The destructor of block capsules: the rules above. */
static void dlbind_block_capsule_destructor(PyObject *capsule) {
    dlbind_error_kept kept;
    dlbind_error_aside(&kept);
    const char *name = PyCapsule_GetName(capsule);
    dlbind_block *b = (dlbind_block *)PyCapsule_GetPointer(capsule, name);
    if (b != NULL && b->capsule == capsule) {
        b->capsule = NULL;
        b->capsule_gone = 1;
        if (b->quarantined) dlbind_unquarantine(b); /* no capsule names it now: reused first */
        /* our names are our own strings: a pointer test settles the common case, strcmp a copy */
        const char *ours = b->versioned ? DLBIND_NAME_VERSIONED : DLBIND_NAME_LEGACY;
        int unconsumed = name == ours || (name != NULL && name[0] == ours[0] && strcmp(name, ours) == 0);
        if (b->live && unconsumed) { /* the tensor is ours to free */
            dlbind_call_deleter(b, b->versioned);
            /* at exit the deleter leaves the block: no capsule points here any more, so free it */
            if (dlbind_finalizing() && !b->pinned) {
                if (b->dims != b->inline_dims) PyMem_RawFree(b->dims);
                PyMem_RawFree(b);
            }
        }
    }
    dlbind_error_back(&kept);
}

unsigned long long dlbind_blocks_pinned(void) { return dlbind_pinned_count; }

/* Whether `capsule`, named unconsumed and pointing at `pointer`, is one of dlbind's whose tensor was released: a
 * consumer ran the deleter and left the capsule unrenamed (torch, when its import fails), so the block is pinned,
 * and may since serve another export with another capsule. Such a block is never freed, so reading it is safe. */
static int dlbind_block_stale(PyObject *capsule, void *pointer, int versioned) {
    dlbind_block *b = (dlbind_block *)pointer;
    int ours = b->m.v.deleter == dlbind_block_deleter_v || b->m.l.deleter == dlbind_block_deleter_l;
    return ours && (b->capsule != capsule || !b->live || b->versioned != versioned);
}

/* The Python owner a struct holds through manager_ctx when its deleter is one of ours (export and
 * make_capsule: one reference, dropped by the deleter), else NULL: a foreign struct's context is
 * opaque. Borrowed; for tp_traverse of the objects that own such a struct. */
PyObject *dlbind_managed_owner(void *managed, int versioned) {
    if (managed == NULL) return NULL;
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
        if (m->deleter == dlbind_block_deleter_v) return (PyObject *)m->manager_ctx;
    } else {
        DLManagedTensor *m = (DLManagedTensor *)managed;
        if (m->deleter == dlbind_block_deleter_l) return (PyObject *)m->manager_ctx;
    }
    return NULL;
}

void dlbind_call_deleter(void *managed, int versioned) {
    /* A deleter may run Python (a ctypes or cffi callback, a __del__ it triggers): an exception pending here (a
     * target's refusal being handed on) is set aside, or that Python would fail before it releases anything. */
    int python = dlbind_holds_gil();
    dlbind_error_kept kept = {NULL, NULL, NULL, 0};
    if (python) dlbind_error_aside(&kept);
    if (versioned) {
        DLManagedTensorVersioned *m = (DLManagedTensorVersioned *)managed;
        if (m->deleter) m->deleter(m);
    } else {
        DLManagedTensor *m = (DLManagedTensor *)managed;
        if (m->deleter) m->deleter(m);
    }
    if (python) dlbind_error_back(&kept);
}

/* export(keepalive, address, versioned) -> capsule: the struct the Python side laid out at address
 * is copied into a block (its deleter and context ignored); keepalive is the block's owner. */
PyObject *dlbind_py_export(PyObject *mod, PyObject *const *args, Py_ssize_t nargs) {
    (void)mod;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "export(keepalive, address, versioned)");
        return NULL;
    }
    void *address;
    int versioned;
    if (dlbind_struct_args(args[1], args[2], "export()", &address, &versioned) != 0) return NULL;
    uint64_t flags = versioned ? ((DLManagedTensorVersioned *)address)->flags : 0;
    DLTensor *t = versioned ? &((DLManagedTensorVersioned *)address)->dl_tensor : &((DLManagedTensor *)address)->dl_tensor;
    return dlbind_make_capsule(args[0], t->data, t->ndim, t->shape, t->strides, t->device, t->dtype, t->byte_offset,
                               versioned, flags);
}

PyObject *dlbind_make_capsule(PyObject *owner, void *data, int ndim, const int64_t *shape, const int64_t *strides,
                              DLDevice device, DLDataType dtype, uint64_t byte_offset, int versioned, uint64_t flags) {
    if (versioned && !DLBIND_VERSIONED_CAPSULES) { /* never reached: every caller is shut (fastpath.h) */
        PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": a DLPack 0.x copy asked for a versioned capsule");
        return NULL;
    }
    if (ndim < 0) ndim = 0;
    dlbind_block *b = dlbind_block_alloc(ndim);
    if (b == NULL) return PyErr_NoMemory();
    DLTensor *t;
    b->versioned = (unsigned char)(versioned != 0);
    if (versioned) {
        b->m.v.version.major = DLPACK_MAJOR_VERSION;
        b->m.v.version.minor = DLPACK_MINOR_VERSION;
        b->m.v.manager_ctx = owner;
        b->m.v.deleter = dlbind_block_deleter_v;
        b->m.v.flags = flags;
        t = &b->m.v.dl_tensor;
    } else {
        b->m.l.manager_ctx = owner;
        b->m.l.deleter = dlbind_block_deleter_l;
        t = &b->m.l.dl_tensor;
    }
    t->shape = ndim > 0 ? b->dims : NULL;
    t->strides = ndim > 0 ? b->dims + ndim : NULL;
    t->data = data;
    t->device = device;
    t->ndim = ndim;
    t->dtype = dtype;
    t->byte_offset = byte_offset;
    if (ndim > 0) {
        for (int i = 0; i < ndim; i++) t->shape[i] = shape[i]; /* mostly one or two: no memcpy call */
        if (strides != NULL) {
            for (int i = 0; i < ndim; i++) t->strides[i] = strides[i];
        } else { /* compact row-major (unsigned: a product past int64 wraps, never undefined) */
            uint64_t step = 1;
            for (int i = ndim - 1; i >= 0; i--) {
                t->strides[i] = (int64_t)step;
                step *= shape[i] > 0 ? (uint64_t)shape[i] : 1u;
            }
        }
    }
    Py_INCREF(owner);
    dlbind_export_count++;
    return dlbind_capsule_of(b, versioned);
}

/* A capsule handing over m, always a block's (see the rules above): one of our blocks, or a new
 * block around a foreign struct whose deleter runs once, when the block's does (a consumer that
 * deletes without renaming cannot make it run twice). Takes m (its deleter runs on failure). */
PyObject *dlbind_capsule_of(void *m, int versioned) {
    dlbind_block *b;
    if (versioned && !DLBIND_VERSIONED_CAPSULES) { /* never reached: every caller is shut (fastpath.h) */
        PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": a DLPack 0.x copy made a versioned struct");
        return NULL; /* the struct is not read as a versioned one, nor released as one */
    }
    if (versioned ? ((DLManagedTensorVersioned *)m)->deleter == dlbind_block_deleter_v
                  : ((DLManagedTensor *)m)->deleter == dlbind_block_deleter_l) {
        b = (dlbind_block *)m;
    } else { /* a foreign struct goes into a block of its own, which releases it once */
        b = dlbind_block_alloc(0);
        if (b == NULL) {
            dlbind_call_deleter(m, versioned);
            return PyErr_NoMemory();
        }
        b->versioned = (unsigned char)(versioned != 0);
        b->foreign = m;
        if (versioned) {
            DLManagedTensorVersioned *f = (DLManagedTensorVersioned *)m;
            b->m.v.version = f->version;
            b->m.v.flags = f->flags;
            b->m.v.dl_tensor = f->dl_tensor; /* shape and strides stay the foreign struct's: it lives */
            b->m.v.manager_ctx = NULL;
            b->m.v.deleter = dlbind_block_deleter_v;
        } else {
            DLManagedTensor *f = (DLManagedTensor *)m;
            b->m.l.dl_tensor = f->dl_tensor;
            b->m.l.manager_ctx = NULL;
            b->m.l.deleter = dlbind_block_deleter_l;
        }
    }
    PyObject *capsule =
        PyCapsule_New(b, versioned ? DLBIND_NAME_VERSIONED : DLBIND_NAME_LEGACY, dlbind_block_capsule_destructor);
    if (capsule == NULL) {
        if (b->capsule == NULL) b->capsule_gone = 1; /* no capsule ever pointed here: nothing to pin for */
        dlbind_call_deleter(b, versioned);
        return NULL;
    }
    if (b->capsule != NULL && !b->capsule_gone) dlbind_block_pin(b); /* an earlier capsule may still point here */
    b->capsule = capsule;
    b->capsule_gone = 0;
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
        if (!DLBIND_VERSIONED_CAPSULES) { /* left unconsumed: its destructor frees it */
            dlbind_versioned_refused();
            return NULL;
        }
        *versioned = 1;
        used = DLBIND_NAME_USED_VERSIONED;
    } else if (name != NULL && strcmp(name, DLBIND_NAME_LEGACY) == 0) {
        *versioned = 0;
        used = DLBIND_NAME_USED_LEGACY;
    } else if (name != NULL && (strcmp(name, DLBIND_NAME_USED_VERSIONED) == 0 || strcmp(name, DLBIND_NAME_USED_LEGACY) == 0)) {
        PyErr_Format(PyExc_BufferError,
                     "this DLPack capsule was already consumed (its name is '%s')" DLBIND_CONSUMED_HINT, name);
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
    if (dlbind_block_stale(capsule, pointer, *versioned)) {
        PyErr_SetString(PyExc_BufferError, DLBIND_STALE);
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

#define DLBIND_STR(x) #x
#define DLBIND_XSTR(x) DLBIND_STR(x)

PyObject *dlbind_versioned_refused(void) {
    PyErr_SetString(PyExc_BufferError,
                    DLBIND_PACKAGE " reads DLPack " DLBIND_XSTR(DLPACK_MAJOR_VERSION) "." DLBIND_XSTR(DLPACK_MINOR_VERSION)
                    " legacy 'dltensor' capsules only, not 'dltensor_versioned' (DLPack 1.0): the producer must "
                    "answer a call without max_version legacily");
    return NULL;
}

/* A tuple of two exact ints that fit in long long, read into *a and *b: 1; 0 for anything else (a list, a bool, a
 * float, an int too large); -1 with an error set. */
static int dlbind_int_pair(PyObject *value, long long *a, long long *b) {
    if (!PyTuple_CheckExact(value) || PyTuple_GET_SIZE(value) != 2 || !PyLong_CheckExact(PyTuple_GET_ITEM(value, 0)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(value, 1)))
        return 0;
    int over_a = 0, over_b = 0;
    *a = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(value, 0), &over_a);
    if (*a == -1 && PyErr_Occurred()) return -1;
    *b = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(value, 1), &over_b);
    if (*b == -1 && PyErr_Occurred()) return -1;
    return !over_a && !over_b;
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
    out->stream = NULL;
    Py_ssize_t n = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    /* a consumer calls with the same keyword-name tuple every time (numpy, torch: a constant): its keywords'
     * numbers are kept with it (a reference, so the address is never another tuple's) */
    static PyObject *known_kwnames = NULL;
    static int known_kw[DLBIND_KW_COUNT];
    int same = kwnames != NULL && kwnames == known_kwnames;
    if (!same && kwnames != NULL && n <= DLBIND_KW_COUNT) {
        int kws[DLBIND_KW_COUNT], all = 1;
        for (Py_ssize_t i = 0; i < n; i++) all = all && (kws[i] = dlbind_keyword(PyTuple_GET_ITEM(kwnames, i))) >= 0;
        if (all) {
            Py_XSETREF(known_kwnames, Py_NewRef(kwnames));
            memcpy(known_kw, kws, (size_t)n * sizeof(int));
            same = 1;
        }
    }
    int fast = 1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[i];
        int kw = same ? known_kw[i] : dlbind_keyword(key);
        if (kw == DLBIND_KW_STREAM) {
            if (value != Py_None) {
                if (out->stream_ok && PyLong_CheckExact(value))
                    out->stream = value;
                else
                    fast = 0;
            }
        } else if (kw == DLBIND_KW_MAX_VERSION) {
            if (value == Py_None) continue;
            long long major, minor; /* anything but two non-negative ints: Python says what is wrong with it */
            int pair = dlbind_int_pair(value, &major, &minor);
            if (pair < 0) return -1;
            if (pair == 0 || major < 0 || minor < 0) {
                fast = 0;
                continue;
            }
            /* a DLPack 0.x copy answers legacily whatever max_version says (dlbind.export.export_memory) */
            out->versioned = DLBIND_VERSIONED_CAPSULES && major >= DLPACK_MAJOR_VERSION;
        } else if (kw == DLBIND_KW_DL_DEVICE) {
            if (value == Py_None) continue;
            long long kind, index;
            int pair = dlbind_int_pair(value, &kind, &index);
            if (pair < 0) return -1;
            if (pair == 0 || kind != (long long)here.device_type || index != (long long)here.device_id) fast = 0;
        } else if (kw == DLBIND_KW_COPY) {
            if (value != Py_None && value != Py_False) fast = 0;
        } else {
            PyErr_Format(PyExc_TypeError, "%s.__dlpack__() got an unexpected keyword argument '%U'", owner, key);
            return -1;
        }
    }
    return fast;
}
