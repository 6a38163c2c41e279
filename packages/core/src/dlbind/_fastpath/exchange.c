/* The DLPack 1.3 C exchange API (__dlpack_c_exchange_api__), the consumer side, and the per-type cache.
 *
 * Consumer: exchange_import(obj) (tensor.c's) and from_dlpack/convert use the table on type(obj) (cached per
 * type, with what dlbind knows of the type) to get an owned DLManagedTensorVersioned without the
 * __dlpack__ round trip. dlbind's own table (the producer side) is table.c's. */
#include "fastpath.h"

/* The exchange table of each type, cached without keeping any type alive (a class made, used once
 * and dropped must be collectable). The key is the type's version tag: CPython gives a type a tag
 * when its attributes are looked up, drops it when the type or one of its bases changes, and never
 * hands the same tag to two types (a counter; 3.10 alone wraps it, after 2**32 assignments), so a
 * tag names one type in one state for the life of the process. A freed type's address may be
 * reused by a new type, but never with its tag: an entry of a dead type is never matched again.
 * A type without a valid tag (0) is looked up every time.
 *
 * Two levels: the last few types seen (pointer and tag tests, the hot path), then a dict tag ->
 * entry, emptied when it reaches DLBIND_TAGS_MAX entries, so neither grows without bound. An entry
 * is (capsule or None, compiled export guards, bits, ExportPlan): the capsule keeps the table's memory
 * alive while cached; the guards and bits are read once from the type's dlbind.sources.ExportPlan (the
 * plan the Python code follows, made from spec/adapters.toml once per type); the legacy-call bit is
 * learned when the type's __dlpack__ refused max_version and the older call worked (the plan keeps it
 * too). The compiled guards hold the type's descriptors, so a type stays alive while its entry is cached
 * (at most DLBIND_TAGS_MAX entries and the recent ones). */
#define DLBIND_RECENT_TYPES 8
#define DLBIND_TAGS_MAX 1024
static struct {
    PyTypeObject *type; /* compared, never dereferenced: it may be dead */
    unsigned int tag;   /* 0: empty */
    PyObject *entry;    /* strong: the (capsule or None, guards, bits, plan, direct) tuple of the type */
    dlbind_type_info info;
} dlbind_recent[DLBIND_RECENT_TYPES];
static unsigned dlbind_recent_next = 0;
static PyObject *dlbind_tags = NULL; /* tag (int) -> (capsule or None, guards, bits, plan, direct) */
static PyObject *dlbind_str_exchange_api = NULL;
static PyObject *dlbind_uncached = NULL; /* the entry of the last type without a tag */

void dlbind_exchange_clear(void) {
    Py_CLEAR(dlbind_tags);
    Py_CLEAR(dlbind_uncached);
    for (int i = 0; i < DLBIND_RECENT_TYPES; i++) {
        PyObject *entry = dlbind_recent[i].entry;
        dlbind_recent[i].type = NULL;
        dlbind_recent[i].tag = 0;
        dlbind_recent[i].entry = NULL;
        dlbind_recent[i].info.api = NULL;
        dlbind_recent[i].info.guards = NULL;
        dlbind_recent[i].info.guard_list = NULL;
        dlbind_recent[i].info.plan = NULL;
        dlbind_recent[i].info.direct = NULL;
        dlbind_recent[i].info.bits = 0;
        Py_XDECREF(entry);
    }
}

/* The type's valid version tag, or 0. */
static unsigned int dlbind_type_tag(PyTypeObject *type) {
#if PY_VERSION_HEX >= 0x030C0000
    return type->tp_version_tag; /* 0 when not valid */
#else
    return PyType_HasFeature(type, Py_TPFLAGS_VALID_VERSION_TAG) ? type->tp_version_tag : 0;
#endif
}

/* The type's valid version tag, given one first if it has none (0 when it cannot have one). */
static unsigned int dlbind_type_tag_assigned(PyTypeObject *type) {
    unsigned int tag = dlbind_type_tag(type);
    if (tag != 0) return tag;
#if PY_VERSION_HEX >= 0x030C0000
    (void)PyUnstable_Type_AssignVersionTag(type);
#else
    (void)_PyType_Lookup(type, dlbind_cfg.str_dlpack); /* a cached lookup assigns one (borrowed, no error) */
#endif
    return dlbind_type_tag(type);
}

static const dlbind_exchange_api *dlbind_table_resolve(PyObject *cap) {
#if !DLBIND_HEADER_HAS_EXCHANGE_API
    (void)cap; /* a header without the exchange API uses no table */
    return NULL;
#else
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
#endif
}

/* Whether a class of the type's MRO before the one that holds its exchange table defines __dlpack__ or
 * __dlpack_device__: a subclass exporting its own way (refusing, other data, another device), which its inherited
 * table would bypass; it is asked through its __dlpack__, as the pure build asks every producer. 1, 0, or -1 with
 * an error set. */
static int dlbind_overrides_dlpack(PyTypeObject *type) {
    PyObject *mro = type->tp_mro;
    for (Py_ssize_t i = 0; mro != NULL && PyTuple_Check(mro) && i < PyTuple_GET_SIZE(mro); i++) {
        PyObject *dict = ((PyTypeObject *)PyTuple_GET_ITEM(mro, i))->tp_dict; /* NULL: a core builtin (3.12+) */
        int found = dict != NULL ? PyDict_Contains(dict, dlbind_str_exchange_api) : 0;
        if (found != 0) return found < 0 ? -1 : 0; /* the table's own class: its __dlpack__ is the table's */
        found = dict != NULL ? PyDict_Contains(dict, dlbind_cfg.str_dlpack) : 0;
        if (found == 0 && dict != NULL && dlbind_cfg.str_dlpack_device != NULL)
            found = PyDict_Contains(dict, dlbind_cfg.str_dlpack_device);
        if (found != 0) return found;
    }
    return 0;
}

/* Whether cap is a capsule of dlbind's own exchange table, which a class other than dlbind.Tensor may hold (a class
 * reusing it): that table asks the object's __dlpack__ for the struct, so the class is asked through its
 * __dlpack__ directly, once, as the pure build asks every producer (the table's failure, a refusal or a legacy
 * capsule, asked it a second time). */
static int dlbind_is_own_table(PyObject *cap) {
    const void *own = dlbind_cfg.own_table;
    if (own == NULL || !PyCapsule_IsValid(cap, "dlpack_exchange_api")) return 0;
    return PyCapsule_GetPointer(cap, "dlpack_exchange_api") == own;
}

/* type.__dlpack_c_exchange_api__ (a new reference; None when absent, dlbind's own table, or bypassing a __dlpack__
 * of a subclass), or NULL on error. */
static PyObject *dlbind_table_attr(PyObject *type) {
    if (dlbind_str_exchange_api == NULL &&
        (dlbind_str_exchange_api = PyUnicode_InternFromString("__dlpack_c_exchange_api__")) == NULL)
        return NULL;
    PyObject *cap = PyObject_GetAttr(type, dlbind_str_exchange_api);
    if (cap == NULL) {
        PyErr_Clear();
        return Py_NewRef(Py_None);
    }
    if (dlbind_is_own_table(cap)) Py_SETREF(cap, Py_NewRef(Py_None));
    int own = cap != Py_None && dlbind_cfg.str_dlpack != NULL ? dlbind_overrides_dlpack((PyTypeObject *)type) : 0;
    if (own != 0) Py_SETREF(cap, own < 0 ? NULL : Py_NewRef(Py_None));
    return cap;
}

/* An attribute of a plan as a truth value: 1, 0, or -1 with an error set. */
static int dlbind_plan_flag(PyObject *plan, PyObject *name) {
    PyObject *value = PyObject_GetAttr(plan, name);
    if (value == NULL) return -1;
    int truth = PyObject_IsTrue(value);
    Py_DECREF(value);
    return truth;
}

int dlbind_plan_finish_bits(PyObject *plan) {
    int immutable = dlbind_plan_flag(plan, dlbind_cfg.attr_immutable);
    int python = immutable < 0 ? -1 : dlbind_plan_flag(plan, dlbind_cfg.attr_python);
    if (python < 0) return -1;
    return (immutable ? DLBIND_TYPE_IMMUTABLE : 0) | (python ? DLBIND_TYPE_PYTHON : 0);
}

int dlbind_plan_call_bits(PyObject *plan) {
    PyObject *style = PyObject_GetAttr(plan, dlbind_cfg.attr_call_style);
    if (style == NULL) {
        PyErr_Clear();
        return 0;
    }
    long value = PyLong_AsLong(style);
    Py_DECREF(style);
    if (value == -1 && PyErr_Occurred()) PyErr_Clear();
    return value == 1 ? DLBIND_TYPE_LEGACY_CALL : value == 2 ? (DLBIND_TYPE_LEGACY_CALL | DLBIND_TYPE_BARE_CALL) : 0;
}

/* How a compiled guard is read: by name (the type has no C descriptor of that name), by a METH_NOARGS
 * method's or a getset's C function, or through another descriptor of the type. */
enum { DLBIND_GUARD_BY_NAME, DLBIND_GUARD_NOARGS, DLBIND_GUARD_GETTER, DLBIND_GUARD_DESCR };

typedef struct {
    PyObject *name;  /* owned */
    PyObject *descr; /* owned: the type's descriptor of that name, or NULL */
    void *fn;        /* DLBIND_GUARD_NOARGS: the PyCFunction; DLBIND_GUARD_GETTER: the getter */
    void *closure;   /* the getter's closure */
    unsigned char kind, method, complex_only, negated; /* negated: the guard holds when the value is falsy */
} dlbind_guard;

struct dlbind_guards {
    Py_ssize_t n;
    dlbind_guard g[];
};

static const char dlbind_guards_name[] = DLBIND_MODULE ".guards";

static void dlbind_guards_free(PyObject *capsule) {
    dlbind_guards *list = (dlbind_guards *)PyCapsule_GetPointer(capsule, dlbind_guards_name);
    if (list == NULL) {
        PyErr_Clear();
        return;
    }
    for (Py_ssize_t i = 0; i < list->n; i++) {
        Py_XDECREF(list->g[i].name);
        Py_XDECREF(list->g[i].descr);
    }
    PyMem_Free(list);
}

/* The guards ((name, is a method, negated) triples) of a type compiled once, when its cache entry is made: the type's
 * own C descriptor of each name where it has one (a C method, or a getset/member attribute, found along the
 * type's MRO), read through its C function without looking the name up on every exchange; and whether only a
 * complex array can make it truthy (ExportPlan.complex_guards: read after the table said the dtype, for
 * complex exports only). The entry that holds them is used only while the type's version tag is unchanged
 * (dlbind_info_of_type), so a later change to the type is never missed, and every object they are read from
 * is an instance of the type, so of each descriptor's class. An instance attribute of the same name would
 * shadow a method only for Python's own lookup: guards name library methods, which no instance overrides.
 * A capsule holding the list; NULL on error. */
static PyObject *dlbind_guards_compiled(PyObject *type, PyObject *guards, PyObject *complex_only) {
    Py_ssize_t n = PyTuple_GET_SIZE(guards);
    dlbind_guards *list = (dlbind_guards *)PyMem_Calloc(1, sizeof(dlbind_guards) + (size_t)n * sizeof(dlbind_guard));
    if (list == NULL) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(list, dlbind_guards_name, dlbind_guards_free);
    if (capsule == NULL) {
        PyMem_Free(list);
        return NULL;
    }
    PyObject *mro = ((PyTypeObject *)type)->tp_mro;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyTuple_GET_ITEM(guards, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 3) {
            Py_DECREF(capsule);
            PyErr_SetString(PyExc_SystemError,
                            DLBIND_MODULE ": an export guard must be a (name, is a method, negated) triple");
            return NULL;
        }
        PyObject *name = PyTuple_GET_ITEM(pair, 0), *found = NULL;
        for (Py_ssize_t k = 0; mro != NULL && k < PyTuple_GET_SIZE(mro) && found == NULL; k++) {
            PyObject *dict = ((PyTypeObject *)PyTuple_GET_ITEM(mro, k))->tp_dict;
            if (dict != NULL && (found = PyDict_GetItemWithError(dict, name)) == NULL && PyErr_Occurred()) {
                Py_DECREF(capsule);
                return NULL;
            }
        }
        int complex = PySequence_Contains(complex_only, name);
        if (complex < 0) {
            Py_DECREF(capsule);
            return NULL;
        }
        dlbind_guard *g = &list->g[i];
        g->method = PyTuple_GET_ITEM(pair, 1) == Py_True;
        g->negated = PyTuple_GET_ITEM(pair, 2) == Py_True;
        g->complex_only = (unsigned char)complex;
        g->name = Py_NewRef(name);
        list->n = i + 1; /* freed with the capsule from here on */
        g->kind = DLBIND_GUARD_BY_NAME;
        if (found == NULL) continue;
        if (g->method && Py_IS_TYPE(found, &PyMethodDescr_Type)) {
            PyMethodDef *def = ((PyMethodDescrObject *)found)->d_method;
            int kinds = METH_VARARGS | METH_KEYWORDS | METH_NOARGS | METH_O | METH_FASTCALL | METH_METHOD;
            g->kind = (def->ml_flags & kinds) == METH_NOARGS ? DLBIND_GUARD_NOARGS : DLBIND_GUARD_DESCR;
            if (g->kind == DLBIND_GUARD_NOARGS) g->fn = (void *)def->ml_meth;
        } else if (!g->method && Py_IS_TYPE(found, &PyGetSetDescr_Type)) {
            PyGetSetDef *def = ((PyGetSetDescrObject *)found)->d_getset;
            g->kind = def->get != NULL ? DLBIND_GUARD_GETTER : DLBIND_GUARD_DESCR;
            g->fn = (void *)def->get;
            g->closure = def->closure;
        } else if (!g->method && Py_IS_TYPE(found, &PyMemberDescr_Type)) {
            g->kind = DLBIND_GUARD_DESCR;
        } else {
            continue;
        }
        g->descr = Py_NewRef(found);
    }
    return capsule;
}

/* The dlbind.sources.ExportPlan that Python made for the type (configure's plans: the dict of the types that live
 * as long as the process, then the weak mapping of the others), a new reference; None where Python has made none
 * yet (the call is then Python's, which makes it); NULL on error. Read, never called: no Python code decides
 * here (but a weak mapping's lookup). */
static PyObject *dlbind_plan_made(PyObject *type) {
    if (dlbind_cfg.plans == NULL) Py_RETURN_NONE;
    PyObject *lasting = PyObject_GetAttr(dlbind_cfg.plans, dlbind_cfg.attr_lasting);
    if (lasting == NULL) return NULL;
    PyObject *plan = PyDict_Check(lasting) ? Py_XNewRef(PyDict_GetItemWithError(lasting, type)) : NULL;
    if (!PyDict_Check(lasting)) PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": the plans' lasting must be a dict");
    Py_DECREF(lasting);
    if (plan != NULL || PyErr_Occurred()) return plan;
    if (!PyType_HasFeature((PyTypeObject *)type, Py_TPFLAGS_HEAPTYPE)) Py_RETURN_NONE; /* a static type lasts */
    PyObject *passing = PyObject_GetAttr(dlbind_cfg.plans, dlbind_cfg.attr_passing);
    plan = passing != NULL ? PyObject_GetItem(passing, type) : NULL;
    Py_XDECREF(passing);
    if (plan == NULL && passing != NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return plan;
}

/* A new (capsule or None, guards, bits, plan, direct) entry for the type: its table attribute and its
 * dlbind.sources.ExportPlan (the same object the Python code follows: export guards, immutable, the
 * bool reading, host-only, how an older __dlpack__ is called, the direct hand-overs decided: the plan's
 * own dict, which dlbind.routes.decide fills); plan None where Python has made none yet (a target's type:
 * its table only). NULL on error. */
static PyObject *dlbind_entry_new(PyObject *type) {
    PyObject *cap;
    if (dlbind_cfg.tensor_type != NULL && PyType_IsSubtype((PyTypeObject *)type, dlbind_cfg.tensor_type))
        cap = Py_NewRef(Py_None); /* dlbind's own Tensor: its __dlpack__ (C) is faster than its table, and says
                                     the stream the tensor is ready on, which the table's per-device stream cannot */
    else
        cap = dlbind_table_attr(type);
    if (cap == NULL) return NULL;
    PyObject *plan = dlbind_plan_made(type);
    if (plan == Py_None) return Py_BuildValue("(NNiNO)", cap, PyTuple_New(0), 0, plan, Py_None);
    PyObject *guards = plan != NULL ? PyObject_GetAttr(plan, dlbind_cfg.attr_guards) : NULL;
    if (guards == NULL || !PyTuple_Check(guards)) {
        if (guards != NULL) PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": an ExportPlan's guards must be a tuple");
        Py_XDECREF(guards);
        Py_XDECREF(plan);
        Py_DECREF(cap);
        return NULL;
    }
    int finish = dlbind_plan_finish_bits(plan); /* as take_wrap reads a plan it is given */
    int host_only = finish < 0 ? -1 : dlbind_plan_flag(plan, dlbind_cfg.attr_host_only);
    if (host_only < 0) {
        Py_DECREF(guards);
        Py_DECREF(plan);
        Py_DECREF(cap);
        return NULL;
    }
    int bits = finish | (host_only ? DLBIND_TYPE_HOST_ONLY : 0) | dlbind_plan_call_bits(plan);
    PyObject *complex_only = PyObject_GetAttr(plan, dlbind_cfg.attr_complex_guards);
    Py_SETREF(guards, complex_only == NULL ? NULL : dlbind_guards_compiled(type, guards, complex_only));
    Py_XDECREF(complex_only);
    PyObject *direct = guards != NULL ? PyObject_GetAttr(plan, dlbind_cfg.attr_direct) : NULL;
    if (direct != NULL && !PyDict_Check(direct)) {
        PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": an ExportPlan's direct must be a dict");
        Py_CLEAR(direct);
    }
    if (direct == NULL) {
        Py_XDECREF(guards);
        Py_DECREF(plan);
        Py_DECREF(cap);
        return NULL;
    }
    return Py_BuildValue("(NNiNN)", cap, guards, bits, plan, direct);
}

static void dlbind_entry_info(PyObject *entry, dlbind_type_info *info) {
    info->api = dlbind_table_resolve(PyTuple_GET_ITEM(entry, 0));
    info->guards = PyTuple_GET_ITEM(entry, 1);
    info->guard_list = PyCapsule_CheckExact(info->guards)
                           ? (const dlbind_guards *)PyCapsule_GetPointer(info->guards, dlbind_guards_name)
                           : NULL;
    info->bits = (int)PyLong_AsLong(PyTuple_GET_ITEM(entry, 2));
    info->plan = PyTuple_GET_ITEM(entry, 3);
    info->direct = PyTuple_GET_ITEM(entry, 4);
}

/* The recent entry of type at version tag (a pointer and tag compare), or NULL. */
static dlbind_type_info *dlbind_recent_info(PyTypeObject *type, unsigned int tag) {
    if (tag != 0)
        for (int i = 0; i < DLBIND_RECENT_TYPES; i++)
            if (dlbind_recent[i].type == type && dlbind_recent[i].tag == tag) return &dlbind_recent[i].info;
    return NULL;
}

static const dlbind_type_info dlbind_no_info = {NULL, NULL, NULL, NULL, NULL, 0};

/* The cached info of a type (a pointer valid until the next lookup), or NULL with an error set. */
static const dlbind_type_info *dlbind_info_of_type(PyObject *type_obj) {
    PyTypeObject *type = (PyTypeObject *)type_obj;
    dlbind_type_info *recent = dlbind_recent_info(type, dlbind_type_tag(type));
    if (recent != NULL) return recent;
    unsigned int tag = dlbind_type_tag_assigned(type); /* the version the entry is made from */
    PyObject *key = NULL, *entry = NULL;
    if (tag != 0) {
        if (dlbind_tags == NULL && (dlbind_tags = PyDict_New()) == NULL) return NULL;
        if ((key = PyLong_FromUnsignedLong(tag)) == NULL) return NULL;
        entry = Py_XNewRef(PyDict_GetItemWithError(dlbind_tags, key));
        if (entry == NULL && PyErr_Occurred()) {
            Py_DECREF(key);
            return NULL;
        }
    }
    int changed = 0;
    if (entry == NULL) {
        entry = dlbind_entry_new(type_obj);
        if (entry == NULL) {
            Py_XDECREF(key);
            return NULL;
        }
        /* Python code ran: a type changed meanwhile (its tag dropped) may have given bits of either version */
        changed = tag != 0 && dlbind_type_tag(type) != tag;
        if (key != NULL && !changed) {
            if (PyDict_GET_SIZE(dlbind_tags) >= DLBIND_TAGS_MAX) PyDict_Clear(dlbind_tags);
            if (PyDict_SetItem(dlbind_tags, key, entry) != 0) {
                Py_DECREF(key);
                Py_DECREF(entry);
                return NULL;
            }
        }
    }
    Py_XDECREF(key);
    static dlbind_type_info uncached_info;
    if (tag == 0 || changed) { /* not cacheable: held until the next such lookup, so the table outlives this call */
        Py_XSETREF(dlbind_uncached, entry);
        dlbind_entry_info(entry, &uncached_info);
        if (changed) uncached_info.bits &= ~(DLBIND_TYPE_LEGACY_CALL | DLBIND_TYPE_BARE_CALL); /* asked anew */
        return &uncached_info;
    }
    unsigned slot = dlbind_recent_next++ % DLBIND_RECENT_TYPES;
    PyObject *old = dlbind_recent[slot].entry;
    dlbind_recent[slot].type = type;
    dlbind_recent[slot].tag = tag;
    dlbind_recent[slot].entry = entry; /* the reference we hold */
    dlbind_entry_info(entry, &dlbind_recent[slot].info);
    Py_XDECREF(old);
    return &dlbind_recent[slot].info;
}

const dlbind_exchange_api *dlbind_table_of_type(PyObject *type) {
    const dlbind_type_info *info = dlbind_info_of_type(type);
    return info == NULL ? NULL : info->api;
}

const dlbind_exchange_api *dlbind_table_of(PyObject *obj) { return dlbind_table_of_type((PyObject *)Py_TYPE(obj)); }

/* Forget the type's cached entry (made before Python made its plan). */
static void dlbind_type_forget(PyTypeObject *type) {
    unsigned int tag = dlbind_type_tag(type);
    for (int i = 0; i < DLBIND_RECENT_TYPES; i++)
        if (dlbind_recent[i].type == type) {
            dlbind_recent[i].type = NULL;
            dlbind_recent[i].tag = 0;
        }
    PyObject *key = tag != 0 && dlbind_tags != NULL ? PyLong_FromUnsignedLong(tag) : NULL;
    if (key != NULL && PyDict_DelItem(dlbind_tags, key) != 0) PyErr_Clear();
    Py_XDECREF(key);
}

/* forget_type(type): the type's cached entry dropped, made again from its plan at the next lookup (Python learned
 * how its __dlpack__ takes an older call: the C fast path asks it that way too). */
PyObject *dlbind_py_forget_type(PyObject *mod, PyObject *type) {
    (void)mod;
    if (!PyType_Check(type)) {
        PyErr_SetString(PyExc_TypeError, "forget_type(type)");
        return NULL;
    }
    dlbind_type_forget((PyTypeObject *)type);
    Py_RETURN_NONE;
}

/* The info of a producer's type. An entry made before Python made the type's plan (the type seen as a target
 * first) is made again once Python has made it; until then info->plan is None: the call is Python's. */
int dlbind_type_info_of(PyObject *obj, dlbind_type_info *info) {
    PyObject *type = (PyObject *)Py_TYPE(obj);
    const dlbind_type_info *found = dlbind_info_of_type(type);
    if (found != NULL && found->plan == Py_None) {
        PyObject *plan = dlbind_plan_made(type);
        if (plan == NULL) return -1;
        if (plan != Py_None) {
            dlbind_type_forget((PyTypeObject *)type);
            found = dlbind_info_of_type(type);
        }
        Py_DECREF(plan);
    }
    *info = found == NULL ? dlbind_no_info : *found;
    return found == NULL ? -1 : 0;
}

int dlbind_type_bits_now(PyObject *obj) {
    const dlbind_type_info *recent = dlbind_recent_info(Py_TYPE(obj), dlbind_type_tag(Py_TYPE(obj)));
    return recent != NULL ? recent->bits : -1;
}

void dlbind_type_learn(PyObject *obj) {
    PyTypeObject *type = Py_TYPE(obj);
    unsigned int tag = dlbind_type_tag_assigned(type);
    dlbind_type_info info;
    if (tag == 0 || dlbind_type_info_of(obj, &info) != 0 || info.plan == NULL || info.plan == Py_None) {
        PyErr_Clear();
        return;
    }
    int bits = dlbind_plan_call_bits(info.plan); /* Python code: the plan checks the method the class holds */
    if (bits == 0 || dlbind_type_tag(type) != tag) return; /* nothing learned, or the class changed meanwhile */
    dlbind_type_info *recent = dlbind_recent_info(type, tag);
    if (recent != NULL) recent->bits |= bits;
    if (dlbind_tags == NULL) return;
    PyObject *key = PyLong_FromUnsignedLong(tag);
    PyObject *entry = key ? PyDict_GetItemWithError(dlbind_tags, key) : NULL;
    if (entry != NULL) {
        PyObject *marked = Py_BuildValue("(OOlOO)", PyTuple_GET_ITEM(entry, 0), PyTuple_GET_ITEM(entry, 1),
                                         PyLong_AsLong(PyTuple_GET_ITEM(entry, 2)) | bits, PyTuple_GET_ITEM(entry, 3),
                                         PyTuple_GET_ITEM(entry, 4));
        if (marked == NULL || PyDict_SetItem(dlbind_tags, key, marked) != 0) PyErr_Clear();
        Py_XDECREF(marked);
    }
    Py_XDECREF(key);
    if (PyErr_Occurred()) PyErr_Clear(); /* a cache that cannot learn only costs a call */
}

/* A guard's value: through its compiled C function as CPython's descriptor calls run it after the checks
 * that dlbind_guards_compiled settled, or its descriptor, or by name. */
static PyObject *dlbind_guard_value(PyObject *obj, const dlbind_guard *g) {
    switch (g->kind) {
    case DLBIND_GUARD_NOARGS:
        return ((PyCFunction)(void (*)(void))g->fn)(obj, NULL);
    case DLBIND_GUARD_GETTER:
        return ((getter)(void (*)(void))g->fn)(obj, g->closure);
    case DLBIND_GUARD_DESCR:
        return g->method ? PyObject_Vectorcall(g->descr, &obj, 1, NULL)
                         : Py_TYPE(g->descr)->tp_descr_get(g->descr, obj, (PyObject *)Py_TYPE(obj));
    default:
        return g->method ? PyObject_VectorcallMethod(g->name, &obj, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                         : PyObject_GetAttr(obj, g->name);
    }
}

/* obj's first truthy export guard among those `which` names, NULL when none is (*failed: an error is set).
 * A guard the object lacks (an older release of its library) does not apply. */
static const dlbind_guard *dlbind_truthy_guard(PyObject *obj, const dlbind_guards *list, int which, int *failed) {
    for (Py_ssize_t i = 0; i < list->n; i++) {
        const dlbind_guard *g = &list->g[i];
        if (!(which & (g->complex_only ? DLBIND_GUARDS_COMPLEX : DLBIND_GUARDS_ANY))) continue;
        PyObject *value = dlbind_guard_value(obj, g);
        if (value == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                *failed = 1;
                return NULL;
            }
            PyErr_Clear();
            continue;
        }
        int truthy = value == Py_True ? 1 : value == Py_False || value == Py_None ? 0 : PyObject_IsTrue(value);
        Py_DECREF(value);
        if (truthy < 0) {
            *failed = 1;
            return NULL;
        }
        if (truthy != g->negated) return g;
    }
    return NULL;
}

int dlbind_guards_pass(PyObject *obj, const dlbind_type_info *info, int which) {
    const dlbind_guards *list = info->guard_list;
    if (list == NULL || list->n == 0) return 0;
    /* a guard runs Python code, which may evict the cache entry that lends these */
    PyObject *holder = Py_NewRef(info->guards), *plan = Py_NewRef(info->plan);
    int failed = 0;
    const dlbind_guard *g = dlbind_truthy_guard(obj, list, which, &failed);
    if (g != NULL) { /* the library's own refusal, or dlbind's: never exported */
        PyObject *res = PyObject_CallMethodObjArgs(plan, dlbind_cfg.attr_refuse, obj, g->name,
                                                   g->method ? Py_True : Py_False, g->negated ? Py_True : Py_False,
                                                   NULL); /* the type's plan raises the refusal */
        Py_XDECREF(res);
        if (res != NULL) PyErr_SetString(PyExc_SystemError, DLBIND_MODULE ": ExportPlan.refuse returned");
        failed = 1;
    }
    Py_DECREF(plan);
    Py_DECREF(holder);
    return failed ? -1 : 0;
}

int dlbind_table_take(PyObject *obj, const dlbind_type_info *info, DLManagedTensorVersioned **out) {
    *out = NULL;
#if !DLBIND_HEADER_HAS_EXCHANGE_API
    return dlbind_guards_pass(obj, info, DLBIND_GUARDS_ALL); /* no table: __dlpack__ answers */
#else
    const dlbind_exchange_api *api = info->api;
    if (api == NULL || (info->bits & DLBIND_TYPE_PYTHON)) return dlbind_guards_pass(obj, info, DLBIND_GUARDS_ALL);
    /* the complex-only guards wait for the dtype the table says: most exports are not complex */
    if (dlbind_guards_pass(obj, info, DLBIND_GUARDS_ANY) != 0) return -1;
    DLManagedTensorVersioned *m = NULL;
    if (api->managed_tensor_from_py_object_no_sync(obj, &m) != 0 || m == NULL) {
        /* the table refused (torch: sparse, quantized), or failed without saying why (cuda.core 1.2: bfloat16):
         * __dlpack__ exports it or says why in its own words, as the pure build's import does (a table that would
         * call __dlpack__ itself, dlbind's own, is not used for another class: dlbind_is_own_table) */
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_Exception)) return -1;
            PyErr_Clear();
        }
        return dlbind_guards_pass(obj, info, DLBIND_GUARDS_COMPLEX);
    }
    if (m->dl_tensor.dtype.code == kDLComplex && dlbind_guards_pass(obj, info, DLBIND_GUARDS_COMPLEX) != 0) {
        dlbind_call_deleter(m, 1);
        return -1;
    }
    if (info->bits & DLBIND_TYPE_IMMUTABLE) m->flags |= DLBIND_FLAG_READ_ONLY;
    *out = m;
    return 1;
#endif
}

int dlbind_table_order(const dlbind_type_info *info, DLManagedTensorVersioned *m, long long consumer) {
    if (consumer == -1) return 0;
    DLDevice dev = m->dl_tensor.device;
    long long producer = dlbind_device_default_stream(dev.device_type);
#if DLBIND_HEADER_HAS_EXCHANGE_API
    const dlbind_exchange_api *api = info->api;
    if (api != NULL && api->current_work_stream != NULL) {
        void *current = NULL;
        if (api->current_work_stream((DLDeviceType)dev.device_type, dev.device_id, &current) != 0) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_BufferError, "the producer's exchange table could not name its current stream on "
                             "device type %d", (int)dev.device_type);
            return -1;
        }
        if (current != NULL) producer = (long long)(intptr_t)current; /* NULL: its default stream */
    }
#else
    (void)info;
#endif
    if (producer == consumer) return 0; /* one stream: its work is ordered already */
    PyObject *res = PyObject_CallFunction(dlbind_cfg.order, "LLii", producer, consumer, (int)dev.device_type, (int)dev.device_id);
    Py_XDECREF(res);
    return res == NULL ? -1 : 0;
}
