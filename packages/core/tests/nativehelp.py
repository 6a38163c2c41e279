"""A tiny C helper for the reliability tests: a producer whose deleters count their calls in C.

It is built once per source text with cffi (API mode, the system C compiler) into ``.cache/testhelp``
(or ``$DLBIND_TESTHELP_DIR``) and imported from there. It knows nothing of dlbind: it is a foreign
producer, as numpy or torch would be, so the tests see dlbind only through its public API.

* ``deleter_v`` / ``deleter_l``: the deleters of a ``DLManagedTensorVersioned`` / legacy
  ``DLManagedTensor``; each adds one to the ``int64_t`` its ``manager_ctx`` points at (NULL: none)
  and to a global total.
* ``capsule_destructor``: the producer's capsule destructor. It calls the deleter only when the
  capsule still carries the name it was made with (pointer comparison): a consumer that took the
  tensor renamed it, and then the consumer owns the deleter call. The capsule's context says
  which layout it holds (1 versioned, 2 legacy).
* ``call_deleter_on_new_thread``: runs ``managed->deleter(managed)`` on a pthread Python never saw
  (the GIL is released around the call by cffi, so the deleter must take it itself).
* ``exchange_table``: a foreign producer's DLPack 1.3 exchange table, whose ``from_py`` hands over a new
  ``DLManagedTensorVersioned`` (3 float32 on cpu:0) whatever it is given; ``table_made`` counts them,
  ``table_alive`` those whose deleter has not run (:func:`table_capsule` wraps the table for a type's
  ``__dlpack_c_exchange_api__``).
* ``allocate_and_release``: an exchange table's allocator called as a C consumer that releases what it
  got at once (no consumer code of its own between, where a signal could land).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

CDEF = """
void deleter_v(void *self);
void deleter_l(void *self);
void capsule_destructor(void *capsule);
int64_t total_calls(void);
int64_t calls_without_gil(void);
int call_deleter_on_new_thread(void *managed, int versioned);
int allocate_as_a_python_consumer(void *allocator, void *prototype, void **out, char *pending, size_t size);
int allocate_and_release(void *allocator, void *prototype);
void *exchange_table(void);
int64_t table_alive(void);
int64_t table_made(void);
void *calloc(size_t n, size_t size);
void free(void *p);
"""

SOURCE = r"""
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int64_t g_total, g_without_gil;

/* x86-64 / LP64 offsets (checked in Python against dlbind's cffi layout). */
#define V_CTX 8
#define V_DELETER 16
#define L_CTX 48
#define L_DELETER 56

/* this thread holds the GIL (its thread state is attached): the full C API (_CFFI_NO_LIMITED_API, else cffi builds
 * for the limited API, which has no such question); PyGILState_Check would say yes for every thread once a
 * subinterpreter was made */
static int holds_gil(void) {
#if PY_VERSION_HEX >= 0x030D0000
    return PyThreadState_GetUnchecked() != NULL;
#else
    return _PyThreadState_UncheckedGet() != NULL;
#endif
}

static void count(void *self, size_t ctx_offset) {
    int64_t *slot = *(int64_t **)((char *)self + ctx_offset);
    if (slot) __atomic_add_fetch(slot, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_total, 1, __ATOMIC_SEQ_CST);
    if (!holds_gil()) __atomic_add_fetch(&g_without_gil, 1, __ATOMIC_SEQ_CST);
}
void deleter_v(void *self) { count(self, V_CTX); }
void deleter_l(void *self) { count(self, L_CTX); }
int64_t total_calls(void) { return __atomic_load_n(&g_total, __ATOMIC_SEQ_CST); }
int64_t calls_without_gil(void) { return __atomic_load_n(&g_without_gil, __ATOMIC_SEQ_CST); }

typedef void (*deleter_fn)(void *);

void capsule_destructor(void *capsule_) {
    PyObject *capsule = (PyObject *)capsule_;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    const char *name = PyCapsule_GetName(capsule);
    const char *original = (const char *)PyCapsule_GetContext(capsule);
    if (name == original) {  /* not renamed: nobody consumed it */
        void *managed = PyCapsule_GetPointer(capsule, name);
        if (managed) {
            /* the layout is stored right before the name: 'V' versioned, 'L' legacy */
            char layout = original ? original[-1] : 'V';
            size_t at = layout == 'L' ? L_DELETER : V_DELETER;
            deleter_fn fn = *(deleter_fn *)((char *)managed + at);
            if (fn) fn(managed);
        }
    }
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
}

struct job { void *managed; size_t at; };

static void *run_job(void *arg) {
    struct job *j = (struct job *)arg;
    deleter_fn fn = *(deleter_fn *)((char *)j->managed + j->at);
    if (fn) fn(j->managed);
    return NULL;
}

int call_deleter_on_new_thread(void *managed, int versioned) {
    struct job j = { managed, versioned ? V_DELETER : L_DELETER };
    pthread_t t;
    if (pthread_create(&t, NULL, run_job, &j) != 0) return -1;
    return pthread_join(t, NULL);
}

/* A consumer's SetError as dlpack.h has it: it takes the GIL and sets a Python error. */
static void set_python_error(void *ctx, const char *kind, const char *message) {
    (void)ctx;
    PyGILState_STATE state = PyGILState_Ensure();
    PyErr_Format(PyExc_RuntimeError, "SetError(%s): %s", kind, message);
    PyGILState_Release(state);
}

typedef int (*allocator_fn)(void *, void **, void *, void (*)(void *, const char *, const char *));

/* An exchange table's allocator called as a consumer written in C for Python calls it (the GIL held), with
 * set_python_error: its return code; `pending` receives the Python error pending after it ("" for none),
 * which is then cleared. */
int allocate_as_a_python_consumer(void *allocator, void *prototype, void **out, char *pending, size_t size) {
    PyGILState_STATE state = PyGILState_Ensure();
    int rc = ((allocator_fn)allocator)(prototype, out, NULL, set_python_error);
    pending[0] = 0;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyObject *text = value != NULL ? PyObject_Str(value) : NULL;
    const char *said = text != NULL ? PyUnicode_AsUTF8(text) : NULL;
    if (type != NULL) snprintf(pending, size, "%s: %s", ((PyTypeObject *)type)->tp_name, said ? said : "");
    Py_XDECREF(text);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Clear();
    PyGILState_Release(state);
    return rc;
}

/* The allocator called as above (any error it leaves cleared), and what it allocated released at once: 0 allocated
 * and released, -1 refused. */
int allocate_and_release(void *allocator, void *prototype) {
    void *out = NULL;
    char pending[256];
    int rc = allocate_as_a_python_consumer(allocator, prototype, &out, pending, sizeof pending);
    if (rc == 0 && out != NULL) {
        deleter_fn fn = *(deleter_fn *)((char *)out + V_DELETER);
        PyGILState_STATE state = PyGILState_Ensure();
        if (fn) fn(out);
        PyGILState_Release(state);
    }
    return rc;
}

/* A foreign exchange table (x86-64 offsets, as above): a header {version {1, 3}, prev_api NULL}, then the
 * allocator, from_py, to_py, dltensor_from_py and current_work_stream; only from_py is offered. */
static int64_t g_table_alive, g_table_made;
static float g_table_data[3];
static int64_t g_table_shape[1] = {3};

static void table_deleter(void *self) {
    __atomic_sub_fetch(&g_table_alive, 1, __ATOMIC_SEQ_CST);
    free(self);
}

static int table_from_py(void *py_object, void **out) {
    (void)py_object;
    char *m = (char *)calloc(1, 80);
    *out = m;
    if (m == NULL) return -1;
    ((uint32_t *)m)[0] = 1;                                 /* version.major */
    *(deleter_fn *)(m + V_DELETER) = table_deleter;
    *(void **)(m + 32) = g_table_data;                       /* dl_tensor.data */
    ((int32_t *)(m + 40))[0] = 1;                            /* device: cpu:0 */
    *(int32_t *)(m + 48) = 1;                                /* ndim */
    m[52] = 2;                                               /* dtype: float32 x1 */
    m[53] = 32;
    *(uint16_t *)(m + 54) = 1;
    *(int64_t **)(m + 56) = g_table_shape;                   /* shape; strides NULL: compact */
    __atomic_add_fetch(&g_table_alive, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&g_table_made, 1, __ATOMIC_SEQ_CST);
    return 0;
}

static void *g_table[7];

void *exchange_table(void) {
    ((uint32_t *)g_table)[0] = 1;
    ((uint32_t *)g_table)[1] = 3;
    g_table[3] = (void *)table_from_py;
    return g_table;
}

int64_t table_alive(void) { return __atomic_load_n(&g_table_alive, __ATOMIC_SEQ_CST); }
int64_t table_made(void) { return __atomic_load_n(&g_table_made, __ATOMIC_SEQ_CST); }
"""


def _cache_dir() -> Path:
    env = os.environ.get("DLBIND_TESTHELP_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[3] / ".cache" / "testhelp"


def _build() -> Any:
    from cffi import FFI

    tag = hashlib.sha256((CDEF + SOURCE + sys.version).encode()).hexdigest()[:12]
    name = f"_dlbind_testhelp_{tag}"
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    found = sorted(cache.glob(f"{name}.*.so")) + sorted(cache.glob(f"{name}.so"))
    if not found:
        ffi = FFI()
        ffi.cdef(CDEF)
        full_api = [("_CFFI_NO_LIMITED_API", None)]  # holds_gil() asks what the limited API cannot
        ffi.set_source(name, SOURCE, extra_compile_args=["-O1"], libraries=["pthread"], define_macros=full_api)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:
            built = Path(ffi.compile(tmpdir=tmp, verbose=False))
            target = cache / built.name
            os.replace(built, target)  # atomic: concurrent builders agree on one file
        found = [target]
    spec = importlib.util.spec_from_file_location(name, found[0])
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_module = _build()
ffi: Any = _module.ffi
lib: Any = _module.lib

DELETER_V = int(ffi.cast("uintptr_t", ffi.addressof(lib, "deleter_v")))
DELETER_L = int(ffi.cast("uintptr_t", ffi.addressof(lib, "deleter_l")))
DESTRUCTOR = int(ffi.cast("uintptr_t", ffi.addressof(lib, "capsule_destructor")))

_api = ctypes.pythonapi
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
_api.PyCapsule_SetContext.restype = ctypes.c_int
_api.PyCapsule_SetContext.argtypes = [ctypes.py_object, ctypes.c_void_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]

_TABLE_NAME = ctypes.c_char_p(b"dlpack_exchange_api")  # a capsule keeps its name's pointer: alive for good
_USED = {True: ctypes.c_char_p(b"used_dltensor_versioned"), False: ctypes.c_char_p(b"used_dltensor")}


def raw_alloc(size: int) -> Any:
    """Zeroed C memory that is never freed by Python: the harness frees it (``lib.free``) only after the
    deleter ran, so a tensor that outlives its test (a traceback, interpreter exit) never sees freed memory."""
    block = ffi.cast("char *", lib.calloc(1, size))
    if block == ffi.NULL:
        raise MemoryError(size)
    return block


def name_block(name: bytes | None, versioned: bool) -> Any:
    """C memory holding the layout byte then the NUL-terminated name; lives as long as the struct."""
    raw = (b"V" if versioned else b"L") + (name or b"") + b"\0"
    block = raw_alloc(len(raw))
    ffi.memmove(block, raw, len(raw))
    return block


def new_capsule(managed: int, block: Any, has_name: bool = True) -> object:
    """A PyCapsule around the struct at ``managed``, destroyed by :func:`capsule_destructor`."""
    name_ptr = int(ffi.cast("uintptr_t", block)) + 1 if has_name else 0
    capsule = _api.PyCapsule_New(managed, name_ptr or None, DESTRUCTOR)
    if name_ptr:
        _api.PyCapsule_SetContext(capsule, name_ptr)
    else:
        # context NULL == name NULL: the destructor reads layout 'V' (a nameless capsule is never
        # consumed, so only the versioned layout is used with it).
        pass
    return capsule


def consume(capsule: object, versioned: bool) -> int:
    """Take a dlbind-made capsule as a consumer would: the struct's address; the capsule is renamed."""
    name = b"dltensor_versioned" if versioned else b"dltensor"
    address = _api.PyCapsule_GetPointer(capsule, name)
    if not address:
        raise BufferError("not a DLPack capsule")
    if _api.PyCapsule_SetName(capsule, _USED[versioned]) != 0:
        raise BufferError("cannot rename")
    return int(address)


def total_calls() -> int:
    return int(lib.total_calls())


def calls_without_gil() -> int:
    """How many deleter calls ran on a thread that did not hold the GIL."""
    return int(lib.calls_without_gil())


def table_capsule() -> object:
    """The ``"dlpack_exchange_api"`` capsule of the foreign table (``lib.exchange_table``), for a producer type's
    ``__dlpack_c_exchange_api__``; the table is static, so the capsule has no destructor."""
    return _api.PyCapsule_New(int(ffi.cast("uintptr_t", lib.exchange_table())), _TABLE_NAME, None)
