"""DLPack capsules: the names, making them (producer side) and taking them (consumer side).

Producer side: :func:`export` builds a ``DLManagedTensorVersioned`` (or a legacy ``DLManagedTensor``)
that keeps the data's Python owner alive, wraps it in a capsule named
``"dltensor_versioned"`` (``"dltensor"``), and frees it exactly once: from the capsule's destructor
while nobody consumed it, else from the deleter the consumer calls.

Consumer side: :func:`take` checks the name, renames the capsule to ``used_*`` (ownership moves to
us), and returns the struct pointer; :class:`Owner` calls the producer's deleter exactly once.
"""

from __future__ import annotations

import ctypes
import operator
import struct
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import dlbind._capi as _capi
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, Flags
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind.validate import PACKAGE as PACKAGE  # the package this runtime is (dlbind, or a vendored copy's)

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION = DLPACK_VERSION
#: The flags the runtime sets, as plain ints; 0 when the header has no flags (DLPack 0.x: a copy of it never
#: sets or reads one, as its capsules are legacy ones, which have no flags field).
READ_ONLY: int = int(getattr(Flags, "READ_ONLY", 0))
IS_COPIED: int = int(getattr(Flags, "IS_COPIED", 0))

VERSIONED = b"dltensor_versioned"
USED_VERSIONED = b"used_dltensor_versioned"
LEGACY = b"dltensor"
USED_LEGACY = b"used_dltensor"
#: The way out of a consumed capsule, said by both builds (``_fastpath/capsules.c`` spells it out the same).
CONSUMED_HINT = ": a capsule is consumed once; ask the producer for a new one (call its __dlpack__ again)"
#: A capsule of dlbind's whose tensor a consumer released without renaming it (both builds say it alike).
STALE = (
    "this DLPack capsule's tensor was already released: a consumer ran its deleter without renaming the capsule "
    "(torch does when its import fails)" + CONSUMED_HINT
)

# Export accounting: how many capsules were made, how many of our deleters ran (the compiled
# build counts deleter calls in C).
_COUNTS = {"exports": 0, "deleted": 0}


def stats() -> tuple[int, int]:
    """(tensors exported, deleters run): the difference is what is still alive (for leak tests)."""
    if native is not None:
        exports, deleted = native.counts()
        return int(exports), int(deleted)
    return _COUNTS["exports"], _COUNTS["deleted"]


# The pure build fills a whole struct (then shape and strides) with one struct.pack_into. The format
# is derived once, here, from cffi's layout of the loaded declarations: the fields dlbind sets, in
# offset order, with explicit pad bytes between them. struct zero-fills pad bytes, so every field
# dlbind does not set (manager_ctx, or one a newer header adds) is zero, as ffi.new would leave it.
# The values export_args passes, by field path; each struct's format takes the ones it has.
FIELDS = (
    "version.major",
    "version.minor",
    "deleter",
    "flags",
    "dl_tensor.data",
    "dl_tensor.device.device_type",
    "dl_tensor.device.device_id",
    "dl_tensor.ndim",
    "dl_tensor.dtype.code",
    "dl_tensor.dtype.bits",
    "dl_tensor.dtype.lanes",
    "dl_tensor.shape",
    "dl_tensor.strides",
    "dl_tensor.byte_offset",
)
_INTEGER_FORMATS = {1: "b", 2: "h", 4: "i", 8: "q"}
_FLOAT_FORMATS = {"float": "f", "double": "d", "_Bool": "?", "bool": "?"}


class PackedLayout(NamedTuple):
    """One struct's packing: ``struct_`` over the first ``size`` bytes (``size``: the struct's
    size rounded up to the alignment of the dimension arrays that follow it); ``order`` picks, from
    a tuple of values in :data:`FIELDS` order, the ones this struct has, in its own order (None when
    that is the tuple itself: the struct sets every field, in :data:`FIELDS` order)."""

    struct_: struct.Struct
    size: int
    order: Callable[[tuple[Any, ...]], tuple[Any, ...]] | None
    paths: tuple[str, ...]


def _scalar_format(ffi_: Any, ctype: Any) -> str | None:
    """The ``struct`` format of one C scalar in native byte order and standard size; None if none."""
    if ctype.kind in ("pointer", "function"):
        return _INTEGER_FORMATS[ffi_.sizeof("void *")].upper()
    if ctype.kind == "primitive" and ctype.cname in _FLOAT_FORMATS:
        return _FLOAT_FORMATS[ctype.cname]
    if ctype.kind in ("primitive", "enum"):
        fmt = _INTEGER_FORMATS.get(ffi_.sizeof(ctype))
        if fmt is None or ctype.cname == "char":
            return None
        return fmt if int(ffi_.cast(ctype, -1)) < 0 else fmt.upper()
    return None


def _leaves(ffi_: Any, ctype: Any, prefix: str, base: int) -> list[tuple[str, int, Any, int]]:
    """(path, offset, type, bitsize) of every non-struct field of a struct, nested structs flattened."""
    out = []
    for name, field in ctype.fields:
        path, offset = f"{prefix}{name}", base + field.offset
        if field.type.kind == "struct":
            out.extend(_leaves(ffi_, field.type, path + ".", offset))
        else:
            out.append((path, offset, field.type, field.bitsize))
    return out


def packed_layout(ffi_: Any, struct_name: str, fields: tuple[str, ...] = FIELDS) -> PackedLayout | None:
    """The packing of ``struct_name`` as ``ffi_`` lays it out, setting the fields named in ``fields``.

    None when a field can not be packed with ``struct`` (a bitfield, an unusual type), or when a
    field dlbind must set is missing: export then fills the struct field by field through cffi.
    """
    ctype = ffi_.typeof(struct_name)
    leaves = {path: (offset, leaf_type, bits) for path, offset, leaf_type, bits in _leaves(ffi_, ctype, "", 0)}
    # a path whose top-level field the struct has must be there (DLManagedTensor has no version)
    tops = {name for name, _ in ctype.fields}
    if any(path.partition(".")[0] in tops and path not in leaves for path in fields):
        return None
    used = sorted((leaves[path][0], path) for path in fields if path in leaves)
    dim_align = ffi_.alignof(dict(ffi_.typeof("DLTensor").fields)["shape"].type.item)
    size = -(-ffi_.sizeof(ctype) // dim_align) * dim_align
    parts, end = ["="], 0
    for offset, path in used:
        fmt = _scalar_format(ffi_, leaves[path][1])
        if fmt is None or leaves[path][2] >= 0 or offset < end:
            return None
        parts.append(f"{offset - end}x{fmt}" if offset > end else fmt)
        end = offset + struct.calcsize("=" + fmt)
    parts.append(f"{size - end}x" if size > end else "")
    packer = struct.Struct("".join(parts))
    paths = tuple(path for _, path in used)
    if paths == fields:
        return PackedLayout(packer, size, None, paths)
    getter = operator.itemgetter(*(fields.index(path) for path in paths))
    order: Callable[[tuple[Any, ...]], tuple[Any, ...]] = getter if len(paths) > 1 else lambda v: (getter(v),)
    return PackedLayout(packer, size, order, paths)


def _dims_format(ffi_: Any) -> str | None:
    fmt = _scalar_format(ffi_, dict(ffi_.typeof("DLTensor").fields)["shape"].type.item)
    return fmt if fmt is not None and fmt.islower() else None


# Only the pure build packs structs in Python: the compiled build does not derive the layouts at import.
_LAYOUT_V = packed_layout(ffi, "DLManagedTensorVersioned") if native is None and VERSIONED_CAPSULES else None
_LAYOUT_L = packed_layout(ffi, "DLManagedTensor") if native is None else None
_DIM = _dims_format(ffi) if native is None else None
_PACKED = (_LAYOUT_V is not None or not VERSIONED_CAPSULES) and _LAYOUT_L is not None and _DIM is not None
# what the hot path reads, as plain globals
_DIM_SIZE = struct.calcsize("=" + _DIM) if _DIM else 0
_SIZE_V = _LAYOUT_V.size if _LAYOUT_V else 0
_SIZE_L = _LAYOUT_L.size if _LAYOUT_L else 0
_ORDER_V = _LAYOUT_V.order if _LAYOUT_V else None
_ORDER_L = _LAYOUT_L.order if _LAYOUT_L else None

_PACKERS: dict[tuple[bool, int], struct.Struct] = {}
# Freed blocks by size, reused by the next export: (cdata, address, buffer, size). A block returns
# here only after its deleter ran, that is after its consumer let go (the spec's exactly-once rule).
_POOLS: dict[int, list[tuple[Any, int, Any, int]]] = {}
_POOL_MAX = 64
# Blocks whose deleter ran while their capsule may still live, named unconsumed (torch leaves it so when its import
# fails): poisoned, and not reused until the capsule dies, or a retry of it would take the next export's struct.
# Capsule address -> (block, serial), oldest first; a capsule whose destructor a consumer nulled never says it died,
# so past QUARANTINE blocks the oldest is reused (the compiled build's DLBIND_QUARANTINE_MAX, the same number).
QUARANTINE = 1024
_HELD: dict[int, tuple[Any, int]] = {}


def _packer(versioned: bool, ndim: int) -> struct.Struct:
    """The struct, then ``ndim`` shape and ``ndim`` strides entries."""
    layout = _LAYOUT_V if versioned else _LAYOUT_L
    assert layout is not None and _DIM is not None
    packer = _PACKERS[versioned, ndim] = struct.Struct(layout.struct_.format + f"{2 * ndim}{_DIM}")
    return packer


def _layout(args: tuple[Any, ...]) -> tuple[Any, Any]:
    """(struct, dims) of :func:`export_args`'s ``args`` in cffi's own objects (the pure build without packing)."""
    data, shape, strides, dtype, device, byte_offset, _, versioned, flags = args
    ndim = len(shape)
    dims = ffi.new("int64_t[]", 2 * ndim) if ndim else ffi.NULL
    if ndim:
        dims[0:ndim] = shape
        dims[ndim : 2 * ndim] = strides
    if versioned:
        managed = ffi.new("DLManagedTensorVersioned *")
        managed.version.major = DLPACK_MAJOR_VERSION
        managed.version.minor = DLPACK_MINOR_VERSION
        managed.flags = flags
    else:
        managed = ffi.new("DLManagedTensor *")
    t = managed.dl_tensor
    t.data = ffi.cast("void *", data)
    t.device.device_type, t.device.device_id = device
    t.ndim = ndim
    t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype
    t.shape = dims
    t.strides = dims + ndim if ndim else ffi.NULL
    t.byte_offset = byte_offset
    return managed, dims


def export(
    data: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: tuple[int, int, int],
    device: tuple[int, int],
    byte_offset: int,
    owner: object,
    *,
    versioned: bool,
    flags: int = 0,
) -> CapsuleType:
    """A new capsule over the described memory; ``owner`` stays alive until the deleter runs."""
    return export_args((data, shape, strides, dtype, device, byte_offset, owner, versioned, flags))


def export_args(args: tuple[Any, ...]) -> CapsuleType:
    """:func:`export` with its arguments in one tuple (what the pure build's hot path keeps ready)."""
    data, shape, strides, dtype, device, byte_offset, owner, versioned, flags = args
    serial = _COUNTS["exports"] = _COUNTS["exports"] + 1  # names this export in its entry and its capsule's
    if _PACKED:
        # one allocation, one pack: the struct, then shape and strides
        ndim = len(shape)
        head = _SIZE_V if versioned else _SIZE_L  # the struct, then shape and strides
        size = head + 2 * _DIM_SIZE * ndim
        pool = _POOLS.get(size)
        if pool:  # a block whose deleter already ran
            block = pool.pop()
        else:
            managed = ffi.new("char[]", size)
            block = (managed, int(ffi.cast("uintptr_t", managed)), ffi.buffer(managed), size)
        address = block[1]
        dims_at = address + head if ndim else 0
        strides_at = dims_at + _DIM_SIZE * ndim if ndim else 0
        packer = _PACKERS.get((versioned, ndim)) or _packer(versioned, ndim)
        if versioned and _ORDER_V is None:  # the struct's fields are FIELDS, in that order: pass them as they are
            packer.pack_into(
                block[2], 0, DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, _DELETER_V, flags, data, device[0],
                device[1], ndim, dtype[0], dtype[1], dtype[2], dims_at, strides_at, byte_offset, *shape, *strides,
            )  # fmt: skip
        else:
            order: Any = _ORDER_V if versioned else _ORDER_L
            values = order((
                DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, _DELETER_V if versioned else _DELETER_L, flags, data,
                device[0], device[1], ndim, dtype[0], dtype[1], dtype[2], dims_at, strides_at, byte_offset,
            ))  # fmt: skip
            packer.pack_into(block[2], 0, *values, *shape, *strides)
        entry = _LIVE[address] = _Export((block, owner, serial, 0))
    else:
        managed, dims = _layout(args)
        address = int(ffi.cast("uintptr_t", managed))
        if native is not None:
            exported: CapsuleType = native.export((managed, dims, owner), address, versioned)
            return exported
        pointer_type = "void (*)(DLManagedTensorVersioned *)" if versioned else "void (*)(DLManagedTensor *)"
        managed.deleter = ffi.cast(pointer_type, _DELETER_V)
        entry = _LIVE[address] = _Export(((managed, dims), owner, serial, 0))
    made: CapsuleType = _capi.capsule_new(address, VERSIONED if versioned else LEGACY, _DESTRUCTOR)
    key = entry[3] = id(made)
    _CAPSULES[key] = _Capsule((key, address, serial, versioned))
    return made


# -- the pure build's deleters and capsule destructor: Python callbacks --------------------------
# C code calls them, and may do so while an exception is pending: a consumer that refuses a capsule
# drops it with its own exception set (numpy: "Unsupported dtype"), and PyCapsule's deallocator calls
# the destructor without saving that exception (issue 8, defect 1). Python code cannot run correctly
# then: any call (a ctypes call, a method) raises or reports the pending exception, which the callback
# machinery then swallows. So the callbacks themselves only delete a dict entry (opcodes that call
# nothing and do not look at the error indicator), and the real work runs in the ``__del__`` of the
# entry they drop: CPython saves the pending exception around a finalizer and restores it afterwards,
# exactly what a C destructor does with PyErr_Fetch/PyErr_Restore. What remains: cffi still enters the
# callback with the exception set, which a debug build of CPython (Py_DEBUG) asserts against; release
# builds run these few opcodes unharmed (checked on 3.11 and 3.13; only the compiled build's C destructor
# avoids it).
# Everything they use is bound as a default, not looked up in the module: a consumer may free a tensor
# during interpreter teardown, after this module's globals were cleared (issue 8, defect 2).


# capsule address -> its _Capsule, from export until the capsule is freed.
_CAPSULES: dict[int, _Capsule] = {}


def _pool(block: Any, pools: dict[int, list[tuple[Any, int, Any, int]]], pool_max: int) -> None:
    """Keep a packed block (no capsule names it) for the next export of the same size; drop another."""
    if len(block) == 4:
        pool = pools.setdefault(block[3], [])
        if len(pool) < pool_max:
            pool.append(block)


def _poison(address: int, versioned: bool, _cast: Any = ffi.cast, _null: Any = ffi.NULL) -> None:
    """Make the struct at ``address`` one no consumer imports: a version newer than any (versioned), no data, no
    dimensions, a dtype code nothing names; its deleter stays, and does nothing (its entry is gone)."""
    if versioned:
        managed = _cast("DLManagedTensorVersioned *", address)
        managed.version.major = 0xFFFFFFFF
        t = managed.dl_tensor
    else:
        t = _cast("DLManagedTensor *", address).dl_tensor
    t.data = t.shape = t.strides = _null
    t.ndim = 0
    t.dtype.code = 0xFF
    t.dtype.bits = 0


class _Export(list):  # type: ignore[type-arg]
    """[block, owner, serial, capsule] of one export, alive until its deleter runs; ``__del__`` does the accounting.
    ``serial`` tells this export from a later one of the same block (its capsule's :class:`_Capsule` says it);
    ``capsule``: the address of the capsule made for it.

    A list, not a tuple: :func:`adopt` moves the owner out (``owner`` becomes None) when a dlbind
    Tensor takes the struct, leaving the entry only the block to release.
    """

    __slots__ = ()

    def __del__(
        self,
        _counts: dict[str, int] = _COUNTS,
        _pools: dict[int, list[tuple[Any, int, Any, int]]] = _POOLS,
        _pool_max: int = _POOL_MAX,
        _capsules: dict[int, _Capsule] = _CAPSULES,
        _held: dict[int, tuple[Any, int]] = _HELD,
        _quarantine: int = QUARANTINE,
        _pool: Callable[..., None] = _pool,
        _poison: Callable[..., None] = _poison,
    ) -> None:
        _counts["deleted"] += 1
        block, _, serial, key = self
        made = _capsules.get(key)
        if made is None or made[2] != serial:  # its capsule is gone: no retry can read the block
            if len(block) == 4:  # a packed block: kept for the next export of the same size (_pool, without a frame)
                pool = _pools.setdefault(block[3], [])
                if len(pool) < _pool_max:
                    pool.append(block)
            return
        _poison(made[1], made[3])  # a consumer that retries the capsule it left unrenamed finds nothing to import
        _held[key] = (block, serial)
        if len(_held) > _quarantine:  # the oldest, whose capsule most likely died with its destructor nulled
            oldest = next(iter(_held))
            _pool(_held.pop(oldest)[0], _pools, _pool_max)


# struct address -> its _Export, from export until the deleter runs.
_LIVE: dict[int, _Export] = {}


def adopt(address: int) -> object:
    """The owner of the struct at ``address`` if dlbind exported it (None otherwise), moved out of
    the registry: the caller, a pure-build Tensor that consumed the struct and calls its deleter,
    keeps it from now on.

    A reference the registry holds is invisible to the garbage collector, so a cycle through the
    owner (``b.t = from_dlpack(asdlpack(b))``) could never be collected; a Tensor's attribute is
    traversed (the compiled build's Tensor reports the owner from C instead). The entry keeps the
    block, which the deleter still releases exactly once: when the Tensor's Owner is freed, also
    when the collector finalizes a cycle (finalizers run before any attribute is cleared, and the
    deleter needs only the entry, never the owner). A struct a foreign consumer (numpy, torch) took
    never comes here: its entry keeps the owner until that consumer calls the deleter.
    """
    entry = _LIVE.get(address)
    if entry is None:
        return None
    owner, entry[1] = entry[1], None
    return owner


def _release(address: int, _live: dict[int, _Export] = _LIVE) -> None:
    # The deleter (a consumer may call it with an exception pending): dropping the entry runs
    # _Export.__del__, then frees the owner. `in` then `del`, not dict.pop: a method call would see the
    # pending exception. The dict is consistent before the entry is freed, and freeing the owner may
    # run another of our deleters (re-exports).
    if address in _live:
        del _live[address]  # noqa: RUF051 (dict.pop is a call: it would see the pending exception)


# The addresses of our capsule names as PyCapsule_New receives them (ctypes passes a bytes object's
# own buffer): a consumer renames the capsule to a string of its own, so comparing addresses is enough.
_NAME_ADDRESSES = frozenset(ctypes.cast(ctypes.c_char_p(n), ctypes.c_void_p).value for n in (VERSIONED, LEGACY))


class _Capsule(tuple):  # type: ignore[type-arg]
    """(capsule address, struct address, serial of its export, versioned) of one capsule we made, alive as long as
    the capsule. A consumer may run the deleter and leave the capsule unrenamed (torch, when its import fails: issue
    8, defect 16); the block then waits in ``_HELD`` until this dies, or may serve a later export once the quarantine
    is full, which the serial tells apart."""

    __slots__ = ()

    def __del__(
        self,
        _get_name: Any = _capi.capsule_get_name_raw,
        _ours: frozenset[int | None] = _NAME_ADDRESSES,
        _capsules: dict[int, _Capsule] = _CAPSULES,
        _live: dict[int, _Export] = _LIVE,
        _held: dict[int, tuple[Any, int]] = _HELD,
        _pool: Callable[..., None] = _pool,
        _pools: dict[int, list[tuple[Any, int, Any, int]]] = _POOLS,
        _pool_max: int = _POOL_MAX,
    ) -> None:
        # Runs from the capsule's destructor, with any pending exception saved by CPython. The capsule
        # is being freed: raw calls only, never revive it.
        held = _held.get(self[0])
        if held is not None and held[1] == self[2]:  # its block waited for this capsule to die: reusable now
            del _held[self[0]]
            _pool(held[0], _pools, _pool_max)
        if self[0] in _capsules:
            # Not from the destructor: a new capsule at the same address replaced this entry, so this
            # capsule died without its destructor (a consumer removed it): the consumer owns the tensor.
            return
        if _get_name(self[0]) in _ours:  # not consumed: nobody else will call the deleter
            entry = _live.get(self[1])
            if entry is not None and entry[2] == self[2]:  # still its export's (its deleter has not run)
                del _live[self[1]]


def _capsule_destructor(address: int, _capsules: dict[int, _Capsule] = _CAPSULES) -> None:
    # The capsule's destructor, maybe with an exception pending: see above.
    if address in _capsules:
        del _capsules[address]  # noqa: RUF051 (as in _release)


# The callbacks take pointers as integers (uintptr_t: the same register on every supported ABI),
# which saves a conversion per call; they are handed to C as plain function addresses. A cffi callback
# costs half a ctypes one.
_deleter_versioned = ffi.callback("void(uintptr_t)", _release)
_deleter_legacy = _deleter_versioned
_DELETER_V = _DELETER_L = int(ffi.cast("uintptr_t", _deleter_versioned))
_DESTRUCTOR_CALLBACK = ffi.callback("void(uintptr_t)", _capsule_destructor)
_DESTRUCTOR = _capi.CapsuleDestructor(int(ffi.cast("uintptr_t", _DESTRUCTOR_CALLBACK)))
# C code (capsules, consumers' tensors) keeps these function pointers for as long as the process
# lives, past the teardown of this module: one extra reference each makes them immortal (issue 8,
# defect 2: freed callbacks crashed the final collection).
for _callback in (_deleter_versioned, _DESTRUCTOR_CALLBACK, _DESTRUCTOR):
    _capi.incref(_callback)
del _callback


def take(capsule: object, owner: Owner | None = None) -> tuple[Any, bool]:
    """Consume a DLPack capsule: returns (struct pointer, versioned); the capsule is renamed ``used_*``.
    ``owner`` (pure build): the :class:`Owner` that holds the struct from before the renaming on (issue 39: so a
    signal's exception at any point leaves the struct either the capsule's or the owner's, never nobody's)."""
    if native is not None:
        address, versioned = native.take(capsule)
        return ffi.cast("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *", address), versioned
    if type(capsule) is not _capi.PyCapsuleType:
        raise TypeError(f"expected a DLPack capsule (PyCapsule), got {type(capsule).__name__}")
    # The name's check, the pointer's read and the renaming are separate calls here, between which another
    # thread may run: one lock makes them one step among dlbind's takes, so a capsule is consumed exactly once
    # (the C build's take holds the GIL throughout). Reentrant: a signal handler may import in the thread that
    # holds it (a capsule that thread is taking is refused to it, not taken twice).
    with _TAKING:
        taking = getattr(_IN_THREAD, "taking", None)
        if taking is capsule:
            raise BufferError("this DLPack capsule is being consumed already (by the code a signal interrupted)")
        try:
            _IN_THREAD.taking = capsule  # the object, not its id: one left by a signal's exception matches no other
            return _take(capsule, owner)
        finally:
            _IN_THREAD.taking = taking


_TAKING = threading.RLock()
_IN_THREAD = threading.local()  # .taking: the capsule this thread is taking (a handler's import then takes another)


def _take(capsule: object, owner: Owner | None) -> tuple[Any, bool]:
    name_at = _capi.capsule_get_name(capsule)  # its name's address (C): read here, one call fewer per import
    name = None if name_at is None else ctypes.string_at(name_at)
    if name == VERSIONED and not VERSIONED_CAPSULES:  # left unconsumed: its destructor frees it
        raise BufferError(
            f"{PACKAGE} reads DLPack {DLPACK_MAJOR_VERSION}.{DLPACK_MINOR_VERSION} legacy 'dltensor' capsules only, "
            "not 'dltensor_versioned' (DLPack 1.0): the producer must answer a call without max_version legacily"
        )
    if name == VERSIONED:
        ctype, used, versioned = "DLManagedTensorVersioned *", USED_VERSIONED, True
    elif name == LEGACY:
        ctype, used, versioned = "DLManagedTensor *", USED_LEGACY, False
    elif name in (USED_VERSIONED, USED_LEGACY):
        raise BufferError(f"this DLPack capsule was already consumed (its name is {name.decode()!r}){CONSUMED_HINT}")
    else:
        shown = "no name" if name is None else repr(name.decode(errors="replace"))
        raise BufferError(f"not a DLPack capsule: {shown}; expected 'dltensor_versioned' or 'dltensor'")
    # A consumer outside dlbind (numpy, torch) takes it in one C call: from the pointer's read to the renaming as
    # little as can be runs here, for another thread's consumer may run between two of these calls (see
    # docs/reliability.md, Limits). Renamed first, the capsule is refused by such a consumer.
    try:
        address = _capi.capsule_get_pointer(capsule, name)
    except ValueError:  # renamed meanwhile by a consumer outside dlbind (its name no longer matches)
        raise BufferError(
            f"this DLPack capsule was consumed by another consumer while {PACKAGE} read it{CONSUMED_HINT}"
        ) from None
    if not address:
        raise BufferError("the DLPack capsule holds a NULL pointer")
    managed = ffi.cast(ctype, address)
    if owner is not None:  # it knows the capsule until renamed: it deletes the struct only if the renaming happened
        owner.managed, owner.capsule = managed, capsule
    try:  # its name read again, right before the renaming: taken meanwhile, it is not taken twice
        _capi.capsule_get_pointer(capsule, name)
    except ValueError:
        if owner is not None:
            owner.managed = owner.capsule = None
        raise BufferError(
            f"this DLPack capsule was consumed by another consumer while {PACKAGE} read it{CONSUMED_HINT}"
        ) from None
    if _capi.capsule_set_name(capsule, used) != 0:  # pragma: no cover - only fails on a NULL capsule
        if owner is not None:
            owner.managed = owner.capsule = None
        raise BufferError("cannot rename the DLPack capsule")
    made = _CAPSULES.get(id(capsule))
    if made is not None and made[1] == address:  # one of ours: its export must be alive (read nothing of it first)
        entry = _LIVE.get(address)
        if entry is None or entry[2] != made[2]:  # refused as it was given: its name back, the struct not ours
            if owner is not None:
                owner.managed = owner.capsule = None
            _capi.capsule_set_name(capsule, ctypes.cast(name_at, ctypes.c_char_p))  # its own name's memory
            raise BufferError(STALE)
    if owner is not None:
        owner.capsule = None
    return managed, versioned


def take_owned(capsule: object) -> tuple[Owner, bool, object]:
    """:func:`take` for the pure build's Tensor: the struct's :class:`Owner` (the consumer owns the struct from
    the moment it took the capsule), whether it is versioned, and the owner of a struct dlbind exported moved
    out of the registry (:func:`adopt`; None for a foreign producer's), which the Tensor keeps. The pure build
    only: the compiled build's Tensor owns what ``native.take`` gives (an Owner here would run the deleter)."""
    owner = Owner(None)  # made first: from the capsule's renaming on, the struct is its (take)
    managed, versioned = take(capsule, owner)
    return owner, versioned, adopt(int(ffi.cast("uintptr_t", managed)))


# A deleter called the way the compiled build calls it: with the GIL held. A cffi call releases the GIL, and a
# deleter that is a Python callback (dlbind's own, under cffi) takes it again; a daemon thread doing that while
# the interpreter exits crashes CPython before 3.14 (python/cpython#87135: it ends such threads in take_gil).
_DELETER_CALL = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
_FOREIGN_DELETERS: dict[int, Any] = {}


def call_deleter(
    managed: Any,
    _ours: frozenset[int] = frozenset({_DELETER_V, _DELETER_L}),
    _release: Callable[[int], None] = _release,
    _foreign: dict[int, Any] = _FOREIGN_DELETERS,
) -> None:
    """Run the deleter of a consumed ``DLManagedTensor(Versioned)*`` (the caller's once), holding the GIL:
    dlbind's own deleter directly in Python, a producer's through a ctypes call that keeps the GIL (numpy's and
    torch's take it themselves, as the spec asks of a deleter that may run on any thread)."""
    deleter = int(ffi.cast("uintptr_t", managed.deleter))
    if not deleter:
        return
    address = int(ffi.cast("uintptr_t", managed))
    if deleter in _ours:
        _release(address)
        return
    call = _foreign.get(deleter)
    if call is None:
        call = _foreign[deleter] = _DELETER_CALL(deleter)
    call(address)


class Owner:
    """Owns a consumed managed tensor: calls its deleter exactly once (on :meth:`release` or when freed).
    ``capsule``: the capsule it is being taken from, until the renaming is done (:func:`take`)."""

    __slots__ = ("__weakref__", "capsule", "managed")

    def __init__(self, managed: Any, capsule: object = None) -> None:
        self.managed, self.capsule = managed, capsule

    def release(self, _call_deleter: Callable[[Any], None] = call_deleter) -> None:
        managed = capsule = None
        try:  # a signal's exception after the fields are cleared still runs the deleter (the finally clause)
            managed, capsule, self.managed, self.capsule = self.managed, self.capsule, None, None
        finally:
            # taken (no capsule left, or it was renamed before the take was interrupted): the deleter is ours;
            # else the capsule, still named a DLPack capsule, deletes the struct when it is freed
            taken = capsule is None or _capi.capsule_name(capsule) in (USED_VERSIONED, USED_LEGACY)
            if managed is not None and taken:
                _call_deleter(managed)

    def __del__(self) -> None:
        self.release()
