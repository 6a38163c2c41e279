/* Internal header of the C extension dlbind._fastpath (the compiled build's hot paths).
 *
 * Files, one concern each, from the bottom (a file uses the names of the files above it in this list only):
 *   common.c    the configuration (dlbind_cfg), counters, keyword lookup: what every file uses
 *   policy.c    the generated policy tables (devices, stream rules, dtypes, buffer formats), the
 *               checked element/byte arithmetic, and what a consumed tensor must satisfy (dlbind_valid)
 *   copy.c      strided copies between host buffers
 *   capsules.c  export/take, the deleters and the capsule destructor
 *   exporter.c  BufferExporter (what asdlpack returns for buffers) and asdlpack
 *   exchange.c  the per-type cache and the DLPack 1.3 exchange tables of other producers (consumer side)
 *   tensor.c    TensorCore (the C base of dlbind.Tensor), its buffer protocol, wrap, from_dlpack, exchange_import
 *   table.c     dlbind's own DLPack 1.3 exchange table (producer side)
 *   convert.c   convert's C routes: a target's exchange table, or a hand-over to its importer
 *   module.c    module init, configure(**named pieces), counts()
 *
 * The C code handles the common exchange only; every unusual case goes to the Python code that
 * configure() hands over, which owns the rules and the error messages (dlbind's specification). */
#ifndef DLBIND_FASTPATH_H
#define DLBIND_FASTPATH_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "../_generated/dlpack_types.h" /* the generated declarations, beside this folder */

/* The package the extension belongs to: a vendored copy builds with -DDLBIND_PACKAGE='"mypkg._dlpack"'. */
#ifndef DLBIND_PACKAGE
#define DLBIND_PACKAGE "dlbind"
#endif
#define DLBIND_MODULE DLBIND_PACKAGE "._fastpath"

/* Built against an older header (a vendored copy's, DLPack 1.0 or 1.1) the code keeps compiling:
 * - without the sub-byte padding flag (DLPack 1.2), sub-byte data is packed, as those headers have it;
 * - without the C exchange API, no table is offered or used: dlbind_exchange_api is then an incomplete
 *   type that is never dereferenced (every pointer to it is NULL). */
#ifdef DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
#define DLBIND_FLAG_SUBBYTE_PADDED DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED
#else
#define DLBIND_FLAG_SUBBYTE_PADDED 0
#endif
/* Built against a DLPack 0.x header (a vendored copy's: DLBIND_VERSIONED_CAPSULES 0), as the Python code
 * with tables.VERSIONED_CAPSULES false: no flags (0, as dlbind.capsule.READ_ONLY and IS_COPIED are), and
 * legacy "dltensor" capsules only. The code keeps compiling against the C-private DLManagedTensorVersioned
 * of the generated header, but no versioned struct ever enters or leaves: each entry point shuts its
 * versioned path (a constant test the compiler folds away in dlbind itself):
 *   - export (capsules.c): __dlpack__ is never versioned whatever max_version says; export() and
 *     dlbind_capsule_of refuse to make a versioned capsule; read-only data goes to Python, which refuses it;
 *   - import: take refuses a "dltensor_versioned" capsule unconsumed (its destructor frees it), wrap a
 *     versioned struct; from_dlpack hands producers to Python (the 0.x call __dlpack__(stream=...));
 *   - no exchange table (the header has none) and no C route of convert (convert_to: NotImplemented). */
#ifndef DLBIND_VERSIONED_CAPSULES
#error "the generated dlpack_types.h must say DLBIND_VERSIONED_CAPSULES: regenerate it"
#endif
#if DLBIND_VERSIONED_CAPSULES
#define DLBIND_FLAG_READ_ONLY DLPACK_FLAG_BITMASK_READ_ONLY
#define DLBIND_FLAG_IS_COPIED DLPACK_FLAG_BITMASK_IS_COPIED
#else
#define DLBIND_FLAG_READ_ONLY 0
#define DLBIND_FLAG_IS_COPIED 0
#endif
#if DLBIND_HEADER_HAS_EXCHANGE_API
typedef DLPackExchangeAPI dlbind_exchange_api;
#else
typedef struct dlbind_exchange_api dlbind_exchange_api;
#endif

/* ---- checked int64 arithmetic: 1 on overflow (then *out is unspecified), 0 otherwise ---------- */
#if defined(__GNUC__) || defined(__clang__)
#define dlbind_mul_overflow(a, b, out) __builtin_mul_overflow((int64_t)(a), (int64_t)(b), (out))
#define dlbind_add_overflow(a, b, out) __builtin_add_overflow((int64_t)(a), (int64_t)(b), (out))
#else /* MSVC: the same checks by division */
static inline int dlbind_mul_overflow(int64_t a, int64_t b, int64_t *out) {
    if (a > 0 ? (b > 0 ? a > INT64_MAX / b : b < INT64_MIN / a)
              : (b > 0 ? a < INT64_MIN / b : (a != 0 && b < INT64_MAX / a)))
        return 1;
    *out = a * b;
    return 0;
}
static inline int dlbind_add_overflow(int64_t a, int64_t b, int64_t *out) {
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) return 1;
    *out = a + b;
    return 0;
}
#endif

/* Compact row-major strides in elements for a NULL-strides tensor, as dlbind.validate.contiguous_strides(shape,
 * saturate=True): a dimension of 0 counts as 1; a product past int64 (a zero-size tensor's) gives 0. */
static inline void dlbind_compact_strides(int ndim, const int64_t *shape, int64_t *out) {
    int64_t acc = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        out[i] = acc;
        if (acc != 0 && shape[i] > 1 && dlbind_mul_overflow(acc, shape[i], &acc)) acc = 0;
    }
}

/* ---- configuration (module.c) -------------------------------------------------------------- */
typedef struct {
    PyTypeObject *tensor_type;   /* dlbind.Tensor (a Python subclass of TensorCore) */
    PyObject *cpu_device;        /* (DeviceType.kDLCPU, 0) */
    PyObject *asdlpack;          /* dlbind.producer.asdlpack */
    PyObject *from_dlpack;       /* dlbind.consumer.resume(refused, *args, **kwargs): from_dlpack's one fall-back */
    PyObject *check_managed;     /* dlbind.validate.check_managed(m, versioned, allow_vector, producer): raises the
                                    precise BufferError (naming the producer where its extent is the fault) */
    PyObject *export_view;       /* dlbind.export.export_view */
    PyObject *allocate;          /* dlbind.exchange.allocate: the exchange table's allocator (host memory) */
    PyObject *convert;           /* dlbind.conversion.resume(failed, *args, **kwargs): convert's one fall-back */
    PyObject *routes;            /* dlbind.routes.ROUTES: to -> its Route record (made by route_to), whose
                                    fields convert.c reads by their places in Route._fields */
    PyObject *plans;             /* dlbind.sources' ExportPlan of each producer type Python has asked (a TypeCache:
                                    its lasting dict, its passing weak mapping), read once per type, never called */
    PyObject *order;             /* dlbind.exchange.order(producer_stream, consumer_stream, device_type, device_id):
                                    the consumer's stream waits for the producer's (through the device's backend) */
    /* made once, at module init */
    PyObject *max_version;       /* (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION) */
    const void *own_table;       /* dlbind's own exchange table (table.c's), NULL without the API: a type other
                                    than dlbind.Tensor holding it is asked through its __dlpack__ (exchange.c) */
    PyObject *str_dlpack;        /* "__dlpack__", interned */
    PyObject *kwnames_dlpack;    /* ("stream", "max_version"): the plain call of a producer (stream=None said
                                    explicitly: some producers default to another stream) */
    PyObject *kwnames_max_version; /* ("max_version",): the call of the exchange table's from_py (no stream) */
    PyObject *kw[9];             /* the keyword names below, interned (indexed by dlbind_keyword) */
    PyObject *str_dlpack_device; /* "__dlpack_device__", interned */
    PyObject *attr_guards, *attr_immutable, *attr_python, *attr_host_only, *attr_call_style; /* ExportPlan's */
    PyObject *attr_complex_guards;
    PyObject *attr_direct;       /* ExportPlan.direct: target name -> {device type: watch_stream} of its plain
                                    DIRECT decisions */
    PyObject *attr_refused_streams; /* ExportPlan.refused_streams: the (device type, stream) pairs it refuses */
    PyObject *attr_lasting, *attr_passing; /* the plans' two maps (TypeCache) */
    PyObject *attr_refuse;       /* ExportPlan.refuse(x, name, is_method, negated): raises x's BufferError (a guard holds) */
    PyObject *attr_uint8_read_as; /* ExportPlan.uint8_read_as(x): the dtype code a uint8 import of x is read as, or -1 */
} dlbind_config;

extern dlbind_config dlbind_cfg;
/* 0 with a RuntimeError set when configure() has not run yet. */
int dlbind_configured(void);
extern PyObject *dlbind_loader; /* dlbind._load.ensure (module.c's set_loader): loads the runtime */
int dlbind_intern_all(void);     /* the interned names of dlbind_cfg, made once by configure() */

/* Every keyword the C entry points read. A call's keyword names are interned strings (the compiler
 * interns them, and so do numpy and torch for the names they pass), so one pointer test each finds
 * them; a name built at run time is found by value. */
enum {
    DLBIND_KW_STREAM,
    DLBIND_KW_MAX_VERSION,
    DLBIND_KW_DL_DEVICE,
    DLBIND_KW_COPY,
    DLBIND_KW_DEVICE,
    DLBIND_KW_ALLOW_VECTOR,
    DLBIND_KW_READONLY,
    DLBIND_KW_DEVICE_ID,
    DLBIND_KW_TO,
    DLBIND_KW_COUNT
};
/* The DLBIND_KW_* of a keyword name, or -1 (no error set) when it is none of them. */
int dlbind_keyword(PyObject *key);
/* Whether this thread holds the GIL (its thread state is the current one). */
int dlbind_holds_gil(void);

/* An exception pending around code that must neither see nor clear it (a deleter, a destructor, a release
 * that may run __del__): set aside only when there is one, the common call having none; put back by
 * dlbind_error_back, which drops whatever the code itself left behind. */
typedef struct {
    PyObject *type, *value, *traceback;
    int pending;
} dlbind_error_kept;

static inline void dlbind_error_aside(dlbind_error_kept *kept) {
    kept->pending = PyErr_Occurred() != NULL;
    if (kept->pending) PyErr_Fetch(&kept->type, &kept->value, &kept->traceback);
}

static inline void dlbind_error_back(dlbind_error_kept *kept) {
    if (PyErr_Occurred()) PyErr_Clear();
    if (kept->pending) PyErr_Restore(kept->type, kept->value, kept->traceback);
}

/* The DLTensor of a DLManagedTensorVersioned (versioned) or DLManagedTensor. */
static inline DLTensor *dlbind_dl_tensor(void *managed, int versioned) {
    return versioned ? &((DLManagedTensorVersioned *)managed)->dl_tensor : &((DLManagedTensor *)managed)->dl_tensor;
}

/* A free list of one garbage-collected object type (GIL-protected, like every Python object): a dealloc keeps
 * up to `max` objects, untracked by the collector; the next new reuses one before allocating. */
typedef struct {
    PyObject **items;
    int count, max;
} dlbind_free_list;

/* An object of `type`, reused from `list` or newly allocated (NULL and MemoryError), untracked. */
static inline PyObject *dlbind_free_list_new(dlbind_free_list *list, PyTypeObject *type) {
    if (list->count == 0) return (PyObject *)PyObject_GC_New(PyObject, type);
    PyObject *self = list->items[--list->count];
    (void)PyObject_Init(self, type);
    return self;
}

/* The end of a dealloc, once the object is untracked and cleared: kept for reuse, or freed. */
static inline void dlbind_free_list_keep(dlbind_free_list *list, PyObject *self) {
    if (list->count < list->max)
        list->items[list->count++] = self;
    else
        PyObject_GC_Del(self);
}

/* The method-table entry of a type's __dlpack__ (a METH_FASTCALL | METH_KEYWORDS function). Its docstring opens with
 * the text signature inspect.signature() reads ("name($self, /, ...)\n--\n\n"), the pure build's parameters. */
#define DLBIND_DLPACK_METHOD(function)                                                                       \
    {"__dlpack__", (PyCFunction)(void (*)(void))(function), METH_FASTCALL | METH_KEYWORDS,                 \
     "__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)\n--\n\n"             \
     "The array API's __dlpack__: a DLPack capsule of the data (\"dltensor_versioned\" when max_version asks)."}

/* How many tensors we exported and how many of our deleters ran (read by the leak tests). */
extern unsigned long long dlbind_deleter_count;
extern unsigned long long dlbind_export_count;

/* ---- policy.c: the generated tables, and checked arithmetic --------------------------------- */
void dlbind_policy_init(void);                       /* once, at module init */
const char *dlbind_device_name(int64_t device_type); /* NULL: not a DLPack device type */
int dlbind_device_known(int64_t device_type);
int dlbind_device_host(int64_t device_type);          /* the CPU reads its memory directly */
int dlbind_device_stream_free(int64_t device_type);   /* its stream rule: stream must be None */
/* The stream a consumer's None names on the device (its rule's default); -1 for stream-free devices. */
long long dlbind_device_default_stream(int64_t device_type);
/* The largest stream int, as dlbind.devices.STREAM_MAX: a stream handle is a pointer, held in a long long. */
#define DLBIND_STREAM_MAX (UINTPTR_MAX < LLONG_MAX ? (long long)UINTPTR_MAX : LLONG_MAX)
/* 1 when stream (an int) is one the device's rule accepts (never for stream-free devices), else 0. */
int dlbind_device_stream_accepted(int64_t device_type, long long stream);
int dlbind_dtype_code_known(int64_t code);
int dlbind_dtype_width_accepted(int code, int bits);
int dlbind_legacy_reading(DLDataType *dt);
const char *dlbind_dtype_name(int code, int bits);    /* NULL: no name */
const char *dlbind_dtype_format(int code, int bits);  /* NULL: the buffer protocol cannot name it */
/* buffer format (byte-order prefix included) -> (code, bits); 0 when the table has no entry or
 * the byte order is not native (Python explains which). */
int dlbind_format_dtype(const char *format, DLDataType *out);
/* Quick validity check of a consumed struct (the checks of dlbind.validate.check_managed, without the
 * messages); 0: Python's check_managed raises the precise error. */
int dlbind_valid(void *managed, int versioned, int allow_vector);
/* 1 where a host description the exporter reads itself (a buffer, an ndarray) passes dlbind.validate's checks
 * (at most DLBIND_MAX_NDIM dimensions; count, bytes and the elements' reach within int64 and the address space);
 * 0: Python reads it, and the validator says what is wrong. */
int dlbind_description_ok(void *data, int ndim, int64_t *shape, int64_t *strides, DLDataType dtype);
/* Elements of shape[0..ndim): 0 on success, -1 when the count does not fit in int64. */
int dlbind_count(const int64_t *shape, int ndim, int64_t *out);
/* Bytes that count elements of dtype take (sub-byte types packed unless padded); -1 on overflow. */
int dlbind_nbytes(int64_t count, DLDataType dtype, int padded, int64_t *out);

/* type(obj).__name__, as the Python side's messages show it (a new reference, NULL on error). */
PyObject *dlbind_type_name(PyObject *obj);
PyObject *dlbind_resume(PyObject *fn, PyObject *state, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* export()'s and wrap()'s struct address and versioned flag, checked; -1 with the exception set. */
int dlbind_struct_args(PyObject *address_arg, PyObject *versioned_arg, const char *what, void **address,
                       int *versioned);
/* x.__dlpack_device__() as (device type, id) of ints: 1 with *out set, 0 (no error set) when it says something
 * else (Python's producer_device reads it, or says what is wrong), -1 on an error that must propagate. */
int dlbind_producer_device(PyObject *x, DLDevice *out);
/* The DLBIND_TYPE_* bits of how an ExportPlan's type accepted __dlpack__ once max_version was refused. */
int dlbind_plan_call_bits(PyObject *plan);
int dlbind_plan_finish_bits(PyObject *plan); /* the plan's IMMUTABLE and PYTHON bits; -1 on error */

/* ---- capsules.c ----------------------------------------------------------------------------- */
extern const char DLBIND_NAME_VERSIONED[], DLBIND_NAME_USED_VERSIONED[], DLBIND_NAME_LEGACY[], DLBIND_NAME_USED_LEGACY[];
PyObject *dlbind_py_export(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlbind_py_take(PyObject *mod, PyObject *capsule);
PyObject *dlbind_py_forget_type(PyObject *mod, PyObject *type);
/* take without the tuple: the struct pointer (NULL with take's error set) and *versioned. */
void *dlbind_take(PyObject *capsule, int *versioned);
/* __dlpack__ the way an older producer accepted it (tensor.c); NULL with no error: its class replaced the method
 * since, Python asks it */
PyObject *dlbind_older_call(PyObject *x, int bits);
/* compact copy of strided host memory (copy.c) */
void dlbind_copy_strided(char *dst, const char *src, int ndim, const int64_t *shape, const int64_t *byte_strides,
                         int64_t item);
void dlbind_call_deleter(void *managed, int versioned);
/* The owner our deleter will drop (borrowed), or NULL when the struct is not ours (for tp_traverse). */
PyObject *dlbind_managed_owner(void *managed, int versioned);
/* A capsule handing over m (ours or foreign, see capsules.c); takes m: its deleter runs on failure. */
PyObject *dlbind_capsule_of(void *m, int versioned);
/* How many export blocks were ever pinned (a consumer deleted while the capsule lived). */
unsigned long long dlbind_blocks_pinned(void);
/* A capsule over memory described by the arguments; owner gets one reference until the deleter. */
PyObject *dlbind_make_capsule(PyObject *owner, void *data, int ndim, const int64_t *shape, const int64_t *strides,
                              DLDevice device, DLDataType dtype, uint64_t byte_offset, int versioned, uint64_t flags);
PyObject *dlbind_readonly_legacy_error(void);
/* The BufferError of a "dltensor_versioned" capsule offered to a DLPack 0.x copy (NULL); as dlbind.capsule.take's. */
PyObject *dlbind_versioned_refused(void);

/* Export blocks (and BufferExporter's dimension arrays) hold this many dimensions inline. */
#define DLBIND_INLINE_NDIM 4
/* Export blocks deleted while their capsule may still live, kept from reuse at most (capsules.c; the pure build's
 * dlbind.capsule.QUARANTINE, the same number: the module's QUARANTINE, compared by a test). */
#define DLBIND_QUARANTINE_MAX 1024

/* The keywords of __dlpack__: 1 for the fast case, 0 for "ask Python", -1 on error. A stream that is not None
 * makes the call "ask Python" unless stream_ok (then *stream is its value, borrowed, and the caller decides). */
typedef struct {
    int versioned;
    int stream_ok;     /* in: the caller takes an int stream itself */
    PyObject *stream;  /* out: the stream= value when stream_ok (NULL: absent or None) */
} dlbind_dlpack_args;
int dlbind_parse_dlpack(const char *owner, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                        DLDevice here, dlbind_dlpack_args *out);

/* ---- exporter.c ----------------------------------------------------------------------------- */
extern PyTypeObject dlbind_exporter_type;
PyObject *dlbind_py_ndarray_struct(PyObject *mod, PyObject *unused);
PyObject *dlbind_py_asdlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames);

/* ---- tensor.c ------------------------------------------------------------------------------- */
extern PyTypeObject dlbind_tensor_core_type;
/* Wrap a consumed struct in a new dlbind.Tensor; the deleter runs on failure, and the error names producer (the
 * object whose __dlpack__ gave it; NULL: none known) where the struct's extent is the fault (check_managed). */
PyObject *dlbind_tensor_wrap(void *managed, int versioned, int allow_vector, PyObject *producer);
PyObject *dlbind_consume_capsule(PyObject *capsule, PyObject *producer);
/* The plain import of x whose __dlpack__ call raised the pending TypeError or BufferError, continued by Python
 * (dlbind.consumer.resume) without asking x again (older: the call its type accepted, refused this time; ready:
 * (device type, stream) where it was asked on a device's default stream, else NULL). */
PyObject *dlbind_after_refusal(PyObject *x, int older, PyObject *ready);
/* NULL, with the TypeError of x.__dlpack__ returning result (released), not a capsule. */
PyObject *dlbind_not_capsule(PyObject *x, PyObject *result);
PyObject *dlbind_py_wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlbind_py_take_wrap(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlbind_py_from_dlpack(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames);
/* Mark a Tensor read-only (its library's arrays are immutable; a legacy capsule cannot say so). */
void dlbind_tensor_seal(PyObject *tensor);
/* Record the stream a Tensor's data is ready on (a DLPack stream int; -1: none). */
int dlbind_tensor_set_stream(PyObject *tensor, long long stream);

/* ---- exchange.c, table.c -------------------------------------------------------------------- */
/* The usable exchange table of a type (cached), or NULL (an error is set only on failure). */
const dlbind_exchange_api *dlbind_table_of_type(PyObject *type);
const dlbind_exchange_api *dlbind_table_of(PyObject *obj);
/* What dlbind knows of a producer's type, cached per type with its table (exchange.c). */
#define DLBIND_MAX_NDIM 64 /* as dlbind.validate.MAX_NDIM */
#define DLBIND_TYPE_IMMUTABLE 1   /* its library never writes its arrays: imports are read-only */
#define DLBIND_TYPE_LEGACY_CALL 2 /* its __dlpack__ refused max_version: Python calls it as it accepts */
#define DLBIND_TYPE_PYTHON 4      /* its uint8 may be bool (export.bool = "uint8"): its plan says (uint8_read_as) */
#define DLBIND_TYPE_BARE_CALL 8   /* with LEGACY_CALL: its __dlpack__ takes no keywords at all (else stream= only) */
#define DLBIND_TYPE_HOST_ONLY 16  /* its arrays live in stream-free host memory only: no device to ask */
typedef struct dlbind_guards dlbind_guards;
typedef struct {
    const dlbind_exchange_api *api; /* its usable exchange table, or NULL */
    PyObject *guards;             /* borrowed: the capsule of guard_list */
    const dlbind_guards *guard_list; /* the type's export guards, compiled (exchange.c), or NULL */
    PyObject *plan;               /* borrowed: the type's dlbind.sources.ExportPlan (None: Python made none yet) */
    PyObject *direct;             /* borrowed: its plan's direct (a dict), or None */
    int bits;                     /* DLBIND_TYPE_* */
} dlbind_type_info;
/* Fills *info for type(obj); 0, or -1 with an error set. */
int dlbind_type_info_of(PyObject *obj, dlbind_type_info *info);
/* tensor.c: a uint8 struct of a type whose uint8 may be bool (DLBIND_TYPE_PYTHON) read as its plan says
 * (ExportPlan.uint8_read_as(x)), in place, as dlbind.tensor._made reads it: 0, or -1 with an error set (Python code
 * runs: info's plan must be held by the caller, and info is not read after it). */
int dlbind_uint8_reading(const dlbind_type_info *info, PyObject *x, DLTensor *t);
/* Which guards a pass reads: those any array can make truthy, the complex-only ones, or all. */
enum { DLBIND_GUARDS_ANY = 1, DLBIND_GUARDS_COMPLEX = 2, DLBIND_GUARDS_ALL = 3 };
/* 0 when none of the export guards `which` names is truthy for obj; else -1 with its refusal (the library's
 * own BufferError, or dlbind's, raised by its plan's refuse) or another error set. Runs Python code: info's
 * guards and plan must be held by the caller where its cache entry may go meanwhile. */
int dlbind_guards_pass(PyObject *obj, const dlbind_type_info *info, int which);
/* The call type(obj)'s __dlpack__ took (its ExportPlan's call_style), kept on the cached entry of the type's
 * version the plan read it at (no error: a type not cached, or changed meanwhile, stays unmarked). */
void dlbind_type_learn(PyObject *obj);
/* The bits cached for type(obj) at its current version (the last few types looked up), -1 when none: a class
 * changed since its bits were read has another version (CPython drops a type's tag when it or a base changes). */
int dlbind_type_bits_now(PyObject *obj);
/* obj through its type's exchange table: 1 with *out (an owned struct), 0 when the table does not
 * apply (none, or the table raised an Exception: __dlpack__ then answers, with the producer's own
 * checks), -1 on error. An object whose export guard is truthy is refused (-1, BufferError) whether
 * its type has a table or not: its library's own refusal, or dlbind's when __dlpack__ has none. */
int dlbind_table_take(PyObject *obj, const dlbind_type_info *info, DLManagedTensorVersioned **out);
/* Orders the consumer's stream after the producer's work on m's device, as __dlpack__(stream=consumer) would:
 * the producer's table names its current stream; dlbind.exchange.order makes the consumer's stream wait
 * when the two differ. consumer: a DLPack stream int (-1: no ordering). 0, or -1 with an error set. */
int dlbind_table_order(const dlbind_type_info *info, DLManagedTensorVersioned *m, long long consumer);
PyObject *dlbind_py_exchange_import(PyObject *mod, PyObject *obj);
PyObject *dlbind_py_exchange_table(PyObject *mod, PyObject *unused);
/* dlbind's own exchange table, NULL without the API (dlbind_cfg.own_table, set at module init) */
const void *dlbind_own_exchange_table(void);
PyObject *dlbind_py_convert_to(PyObject *mod, PyObject *const *args, Py_ssize_t nargs); /* (x, route) */

/* ---- copy.c ---- */
PyObject *dlbind_py_copy_strided(PyObject *mod, PyObject *const *args, Py_ssize_t nargs);
PyObject *dlbind_py_convert(PyObject *mod, PyObject *const *args, size_t nargsf, PyObject *kwnames);
void dlbind_exchange_clear(void);
int dlbind_convert_init(void); /* convert.c: once, at module init (the Handover type) */

#endif
