"""Memory an object describes (its buffer, ``__array_interface__`` or ``__cuda_array_interface__``), checked by
the validator (:mod:`dlbind.validate`) before anything reads it, and :class:`Exporter`, the DLPack producer of
such memory.

Below the consumer: :func:`dlbind.from_dlpack` exports a host array through here where its ``__dlpack__``
refuses (:func:`export_host`), or an object that has none (:func:`describe`). :mod:`dlbind.producer` adds what
needs the consumer: :func:`dlbind.asdlpack` of an object with ``__dlpack__`` re-exports what it imports.
"""

from __future__ import annotations

import ctypes
import operator
import sys
from abc import ABCMeta
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import dlbind._backends as _backends
import dlbind._capi as _capi
import dlbind.capsule as capsule
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME, VERSIONED_CAPSULES
from dlbind.devices import STREAM_MAX, DevicePair, device_name
from dlbind.dtypes import SUBBYTE_PADDED, DType, from_format, from_numpy, lookup
from dlbind.export import CPU, Memory, export_memory, versioned_asked
from dlbind.validate import check_byte_strides, check_description, contiguous_strides

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

__all__ = ["Exporter", "describe", "export_host", "through_interface"]

_READ_ONLY = capsule.READ_ONLY  # plain ints on the hot path: IntFlag arithmetic is slow
_PACKAGE = capsule.PACKAGE
_CUDA = DeviceType(DEVICE_BY_NAME["cuda"])  # kDLCUDA (kDLGPU in DLPack 0.4)
MAX_ADDRESS = 2 ** (8 * ffi.sizeof("void *")) - 1

_BUFFER_EXPORTER: Any = native.BufferExporter if native is not None else None


class Exporter(metaclass=ABCMeta):
    """What :func:`dlbind.asdlpack` returns: a DLPack producer for one piece of memory (or, made by
    :func:`dlbind.asdlpack`, for an object's ``__dlpack__``, re-negotiated on every export).

    The compiled build registers its C exporter of buffers as one (``isinstance`` holds in both builds).
    """

    __slots__ = ("_fast", "_memory")

    _fast: tuple[Any, ...] | None
    _memory: Memory | None

    def __init__(self, memory: Memory) -> None:
        self._memory = memory
        # capsule.export_args's arguments for the common call (versioned, no stream/device/copy)
        self._fast = _export_args(memory)

    def _described(self) -> Memory:
        """The memory this exporter describes, made from the kept export arguments when
        :func:`dlbind.asdlpack` made the exporter with those only."""
        if self._memory is None:
            self._memory = _memory_of(self._fast)  # type: ignore[arg-type]
        return self._memory

    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        dev = self._fast[4] if self._fast is not None else self._described().device
        return dev if type(dev) is tuple else (dev[0], dev[1])  # the protocol's plain pair, not a dlbind.Device

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> CapsuleType:
        plain = stream is None and dl_device is None and copy is None
        if self._fast is not None and plain and versioned_asked(max_version):
            return capsule.export_args(self._fast)
        return self._export(stream, max_version, dl_device, copy)

    def _export(
        self, stream: int | None, max_version: tuple[int, int] | None, dl_device: tuple[int, int] | None,
        copy: bool | None,
    ) -> CapsuleType:  # fmt: skip
        """The capsule of this exporter's memory, as the keywords of ``__dlpack__`` ask (the export engine's
        rules: :func:`dlbind.export.export_memory`)."""
        memory = self._described()
        return export_memory(memory, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Neither pickled nor copied by the ``copy`` module (an exporter holds its source's memory, which a copy
        would share unseen), as the compiled build's exporter of buffers, and as ``dlbind.Tensor``."""
        raise TypeError(f"cannot pickle '{type(self).__name__}' object")

    def __repr__(self) -> str:
        m = self._described()
        return (
            f"{_PACKAGE}.Exporter(shape={m.shape}, dtype={m.dtype.name}, "
            f"device={device_name(m.device[0])}:{m.device[1]})"
        )


# An exporter keeps capsule.export_args's arguments for the common call (versioned, no stream, device or
# copy): data, shape, strides, dtype, device, byte_offset, owner, versioned, flags (READ_ONLY included).
# A DType is itself (code, bits, lanes). Memory with a stream has none (every export waits on it), nor
# has any when the header has no versioned capsules.


def _export_args(memory: Memory) -> tuple[Any, ...] | None:
    """The export arguments of the common call over ``memory`` (tuple indexing: faster than the fields)."""
    m = memory
    if m[9] is not None or not VERSIONED_CAPSULES:
        return None
    return (m[0], m[1], m[2], m[3], m[4], m[5], m[7], True, m[8] | (_READ_ONLY if m[6] else 0))


def _memory_of(args: tuple[Any, ...]) -> Memory:
    """The memory that :func:`_export_args` made ``args`` of."""
    data, shape, strides, dtype, device, byte_offset, owner, _, flags = args
    readonly = bool(flags & _READ_ONLY)
    return Memory(data, shape, strides, dtype, device, byte_offset, readonly, owner, flags & ~_READ_ONLY)


# -- sources -----------------------------------------------------------------------------------
# Each way an object describes its memory is read first (a _Way: what it says, nothing checked), then checked
# in one place (_checked: its dtype, then the validator) before anything reads it.


class _Way(NamedTuple):
    """What one way of an object (its buffer, ``__array_interface__``, ``__cuda_array_interface__``) says of its
    memory, read but not yet checked."""

    what: str  # the way and the object's type, for messages
    obj: Any  # the object (its numpy ``dtype`` says the typestr's exact dtype)
    data: int  # the address of element 0 (the offset added)
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in elements (a buffer's); None: from byte_strides and the dtype
    byte_strides: tuple[int, ...] | None  # None with strides None: row-major
    kind: Any  # the buffer's format (a str), or the interface's typestr (anything: checked with the dtype)
    itemsize: int  # the buffer's item size (0: an interface's, from its dtype)
    device: DevicePair
    readonly: bool  # as the way says
    asked: bool | None  # readonly= as the caller asked (None: as the way says)
    owner: object
    stream: int | None
    buffer: tuple[int, int] | None  # (base, length) of a buffer that must hold every element described
    trusted: bool  # a C-contiguous buffer: CPython made its length of its shape (nothing for the validator)
    first: bool  # the buffer, tried first: where it is refused, the interface (or __dlpack__) may serve
    located: bool = True  # False: the GPU holding data is asked of the CUDA backend once the rest is checked


def _buffer_way(obj: Any, view: memoryview, readonly: bool | None) -> _Way:
    """What ``obj``'s buffer says. A C-contiguous buffer's layout is its shape (CPython made its length of it)."""
    if view.suboffsets:
        raise BufferError("buffers with suboffsets (PIL-style indirect arrays) cannot be exported as DLPack")
    contiguous = view.c_contiguous
    shape, byte_strides, itemsize = view.shape or (), view.strides or (), view.itemsize
    if itemsize == 0:  # an empty struct's format ('T{}'): no DLPack dtype has no bytes
        raise BufferError(f"buffer format {view.format!r} has items of 0 bytes: DLPack has no such dtype")
    if not contiguous and any(s % itemsize for s in byte_strides):
        raise BufferError(f"byte strides {byte_strides} are not multiples of the item size {itemsize}")
    if contiguous:
        data = _address(view)
    else:
        info = _capi.Py_buffer()
        if _capi.get_buffer(view, ctypes.byref(info), _capi.PyBUF_RECORDS_RO) != 0:  # pragma: no cover
            raise BufferError("the buffer refused a second request")
        data = info.buf or 0
        _capi.release_buffer(ctypes.byref(info))
    strides = _element_strides(byte_strides, itemsize)
    what = f"the buffer of {type(obj).__name__}"
    return _Way(what, obj, data, tuple(shape), strides, None, view.format, itemsize, CPU, view.readonly,
                readonly, view, None, None, contiguous, True)  # fmt: skip


def _contiguous_buffer(obj: Any, what: str) -> tuple[int, int, bool, memoryview]:
    """``(address, length, read-only, view)`` of the C-contiguous buffer ``obj`` that holds described memory."""
    try:
        view = memoryview(obj)
    except TypeError:
        kind = type(obj).__name__
        raise TypeError(f"{what}: data is not a buffer nor a (pointer, read_only) tuple: {kind}") from None
    if not view.c_contiguous:
        raise BufferError(f"{what}: its data buffer is not contiguous")
    return _address(view), view.nbytes, view.readonly, view


def _field(iface: dict[str, Any], key: str, what: str) -> Any:
    """``iface[key]``, which the interface requires; BufferError naming it when it is missing."""
    try:
        return iface[key]
    except KeyError:
        raise BufferError(f"{what} has no {key!r}: it cannot describe memory without one") from None


def _integer(value: Any, what: str, name: str) -> int:
    """``value`` as an int (anything with ``__index__``, not a bool); TypeError naming the field otherwise."""
    if isinstance(value, bool):
        raise TypeError(f"{what} {name} must be an int, not bool")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} {name} must be an int, not {type(value).__name__}") from None


def _integers(value: Any, what: str, name: str) -> tuple[int, ...]:
    """``value`` (a tuple or list of ints) as a tuple of ints; TypeError naming the field otherwise."""
    if not isinstance(value, tuple | list):
        raise TypeError(f"{what} {name} must be a tuple of ints, not {type(value).__name__}")
    return tuple(_integer(v, what, name) for v in value)


# What asdlpack's buffer route reads by dict lookup, not by a call: the DType of each buffer format it has
# exported, and the element strides of byte strides (by byte strides and item size; a few shapes recur).
_BUFFER_DTYPES: dict[str, DType] = {}
_ELEMENT_STRIDES: dict[tuple[tuple[int, ...], int], tuple[int, ...]] = {}
_ELEMENT_STRIDES_MAX = 256
# What it calls, bound once: looking them up on the ffi object costs about a thousand instructions per
# exchange (callgrind), as much as a Python frame.
_UINTPTR = ffi.typeof("uintptr_t")
_cast, _address_of = ffi.cast, ffi.from_buffer
_new_exporter = object.__new__


def _element_strides(byte_strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Byte strides in items (floored: a C-contiguous buffer's strides of extent-1 dimensions are free),
    remembered for the buffer route (at most a few hundred; forgotten all at once beyond)."""
    key = (byte_strides, itemsize)
    strides = _ELEMENT_STRIDES.get(key)
    if strides is None:
        if len(_ELEMENT_STRIDES) >= _ELEMENT_STRIDES_MAX:
            _ELEMENT_STRIDES.clear()
        strides = _ELEMENT_STRIDES[key] = tuple([s // itemsize for s in byte_strides])
    return strides


def _address(view: memoryview) -> int:
    """The address of a C-contiguous buffer.

    cffi reads it cheaply; the memoryview itself is the owner, never cffi's pointer. The pointer holds a
    buffer export *of the memoryview*, and a memoryview cleared by the garbage collector while exported
    loses its managed buffer, then crashes when freed (CPython gh-77894, fixed in 3.12.7 and 3.13.1 only):
    the owner sits in collectable cycles (b.t = from_dlpack(asdlpack(b))), where the collector may clear
    the memoryview first. The memoryview keeps the object's buffer (and so the address) until it is freed,
    with no export.
    """
    return int(_cast(_UINTPTR, _address_of(view, require_writable=False)))


_TYPESTR_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}
_TYPESTR_ORDERS = frozenset("<>|=")  # little, big, not applicable, native


def _interface_way(
    iface: dict[str, Any], obj: Any, device: DevicePair, readonly: bool | None, what: str = "__array_interface__",
    stream: int | None = None,
) -> _Way:  # fmt: skip
    """What ``iface`` (``__array_interface__`` v3, or the CUDA one) says: a tuple's pointer, trusted once the
    validator finds its description consistent; or a buffer given as ``data`` (``obj``'s own, when ``data`` is
    None), which must hold every element described. ``stream``: the CUDA one's, checked (:func:`_cuda_way`); the
    host interface has none (a ``"stream"`` key there is not read, as numpy reads none)."""
    if iface.get("mask") is not None:
        raise BufferError(f"{what} with a mask (a masked array) cannot be exported as DLPack")
    shape = _integers(_field(iface, "shape", what), what, "shape")
    typestr = _field(iface, "typestr", what)
    data = iface.get("data")
    offset = _integer(iface.get("offset", 0), what, "offset")
    owner: object = obj
    buffer = None
    if isinstance(data, tuple):
        if len(data) != 2:
            raise BufferError(f"{what} data must be (pointer, read_only), not a {len(data)}-tuple")
        if offset:  # numpy reads the pointer and drops the offset: no reading of both would be the same
            raise BufferError(
                f"{what} gives offset {offset} with a pointer in data: the interface offsets a buffer only (numpy "
                "ignores it here); give the pointer with the offset added"
            )
        ptr, ro = _integer(data[0], what, "data pointer"), _truth(data[1], what)
    else:  # a buffer object, or (None) the object's own buffer
        base, length, ro, view = _contiguous_buffer(obj if data is None else data, what)
        buffer, owner = (base, length), (view if data is None else (obj, view))
        ptr = base + offset
    raw_strides = iface.get("strides")
    byte_strides = None if raw_strides is None else _integers(raw_strides, what, "strides")
    return _Way(f"{what} of {type(obj).__name__}", obj, ptr, shape, None, byte_strides, typestr, 0, device,
                ro, readonly, owner, stream, buffer, False, False)  # fmt: skip


def _truth(value: Any, what: str) -> bool:
    """The read-only flag of an interface's ``(pointer, read_only)``, read as numpy reads it (its truth); TypeError
    naming it where it has none (a numpy array of several elements)."""
    try:
        return bool(value)
    except Exception:
        raise TypeError(f"{what} data read_only must be a bool, not {type(value).__name__}") from None


def _cuda_way(cai: dict[str, Any], obj: Any, device_id: int | None, readonly: bool | None = None) -> _Way:
    """What ``__cuda_array_interface__`` (v3) says: its ``stream`` is kept for the export's synchronisation, the
    device is ``device_id`` when given, else the CUDA backend's answer for the pointer (never assumed 0)."""
    what = "__cuda_array_interface__"
    data = _field(cai, "data", what)
    if not isinstance(data, tuple):  # as __array_interface__'s data that is no buffer
        raise TypeError(f"{what} data must be (pointer, read_only), not {type(data).__name__}")
    if len(data) != 2:
        raise BufferError(f"{what} data must be (pointer, read_only), not a {len(data)}-tuple")
    stream = cai.get("stream")
    no_int = isinstance(stream, bool) or not isinstance(stream, int)
    if stream is not None and (no_int or not 0 < stream <= STREAM_MAX):  # past STREAM_MAX: no handle (a truncation)
        raise BufferError(
            f"__cuda_array_interface__ stream {stream!r} is not valid: None (no synchronisation), 1 (legacy default), "
            "2 (per-thread default) or a cudaStream_t; 0 is disallowed (ambiguous)"
        )
    pointer = _integer(data[0], what, "data pointer")
    device = (_CUDA, 0 if device_id is None else int(device_id))
    way = _interface_way(cai, obj, device, readonly, what, stream)
    # the GPU holding memory is asked once its description is found valid (what is wrong with it is said first)
    return way if device_id is not None or not 0 < pointer <= MAX_ADDRESS else way._replace(located=False)


def _checked(way: _Way) -> Memory:
    """The memory ``way`` describes, checked before anything reads it: its dtype (a buffer's format, an
    interface's typestr), strides in whole elements, then the validator (:mod:`dlbind.validate`: the extent in
    the address space, and in the buffer that must hold it), and the read-only asked for."""
    dtype = _dtype_of(way)
    strides = way.strides
    if strides is None:
        item = dtype.itemsize
        if way.byte_strides is None:  # row-major; past int64 (a huge zero-size shape) refused, as the import refuses
            strides = contiguous_strides(way.shape)
        else:
            check_byte_strides(way.what, way.byte_strides)
            if any(s % item for s in way.byte_strides):
                raise BufferError(f"{way.what}: strides {way.byte_strides} are not multiples of the item size {item}")
            strides = tuple(s // item for s in way.byte_strides)
    # numpy (ml_dtypes) keeps fp4/fp6 one element per byte: the DLPack "padded" layout
    flags = SUBBYTE_PADDED if dtype.bits * dtype.lanes % 8 else 0
    if dtype.bits * dtype.lanes % 8 and not SUBBYTE_PADDED:
        raise BufferError(
            f"{dtype.name} data stored one element per byte needs the IS_SUBBYTE_TYPE_PADDED flag of DLPack 1.2, "
            f"which DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]} (this runtime's header) lacks"
        )
    if not way.trusted:
        check_description(
            way.what, way.data, way.shape, strides, dtype, padded=bool(flags), buffer=way.buffer, device=way.device
        )
    readonly = way.readonly
    if way.asked is not None and way.asked != readonly:
        if not way.asked:
            raise BufferError("readonly=False asked for, but the memory is read-only")
        readonly = True
    device = way.device
    if not way.located:  # the CUDA device holding it, as the CUDA backend answers (never assumed 0)
        need = "finding which GPU holds __cuda_array_interface__ data"
        try:
            device = _backends.for_device(_CUDA, need).device_of(way.data)
        except BufferError as exc:
            raise BufferError(f"{exc} (or pass device_id= to say which GPU holds it)") from None
    return Memory(way.data, way.shape, strides, dtype, device, 0, readonly, way.owner, flags, way.stream)


def _dtype_of(way: _Way) -> DType:
    """The DType of what ``way`` says: a buffer's format (:func:`dlbind.dtypes.from_format`, remembered for the
    buffer route), or an interface's typestr (the exact dtype of a numpy array, whose typestr cannot tell
    ml_dtypes' kinds apart)."""
    if way.itemsize:
        dtype = _BUFFER_DTYPES[way.kind] = from_format(way.kind)
        if dtype.bits != 8 * way.itemsize:
            raise BufferError(f"buffer format {way.kind!r} has itemsize {way.itemsize}, expected {dtype.bits // 8}")
        return dtype
    typestr = way.kind
    if not isinstance(typestr, str):
        raise TypeError(f"typestr must be a str such as '<f8', not {type(typestr).__name__}")
    order, kind, size = typestr[:1], typestr[1:2], typestr[2:]
    if order not in _TYPESTR_ORDERS or not (size.isascii() and size.isdigit()) or int(size) < 1:
        raise BufferError(f"typestr {typestr!r} is not one: a byte order of <>|=, a kind and a size in bytes")
    if order == (">" if sys.byteorder == "little" else "<") and size != "1":  # one byte has no order (numpy's '|')
        raise BufferError(f"typestr {typestr!r} is not native-endian: DLPack data must be native-endian")
    dt = getattr(way.obj, "dtype", None)
    # the exact dtype where the typestr is its own (ml_dtypes' kinds, all '<V2'), never one the typestr contradicts
    if dt is not None and type(dt).__module__.startswith("numpy") and getattr(dt, "str", None) == typestr:
        return from_numpy(dt)
    name = _TYPESTR_KINDS.get(kind)
    if name is None or (name == "bool" and size != "1"):
        raise BufferError(f"typestr {typestr!r} has no DLPack dtype")
    try:
        return lookup("bool" if name == "bool" else f"{name}{int(size) * 8}")
    except (KeyError, ValueError):
        raise BufferError(f"typestr {typestr!r} has no DLPack dtype") from None


def buffer_view(obj: Any) -> memoryview | None:
    """``memoryview(obj)``, or None for an object without a buffer (or one of a dtype its library cannot format:
    numpy and jax refuse those)."""
    try:
        return memoryview(obj)
    except (TypeError, ValueError, BufferError):
        return None


def _ways(
    obj: Any, view: memoryview | None, readonly: bool | None, device_id: int | None,
    source: Callable[[Any], Exporter] | None, host: bool,
) -> Iterator[_Way | Exporter | BufferError]:  # fmt: skip
    """Each way ``obj`` describes its memory, in :func:`dlbind.asdlpack`'s order, read as the caller asks for it:
    its buffer (``view``; where it cannot be read, its BufferError, and the next way only where ``obj`` has
    ``__array_interface__`` or ``__dlpack__``), ``__array_interface__``, then (not ``host``) its ``__dlpack__``
    (``source(obj)``, an Exporter: :mod:`dlbind.producer`'s re-export; TypeError without one) and
    ``__cuda_array_interface__``. TypeError where it has none of them."""
    if view is not None:
        try:
            yield _buffer_way(obj, view, readonly)
        except BufferError as exc:
            yield exc
        if not hasattr(obj, "__array_interface__") and (host or not hasattr(obj, "__dlpack__")):
            return
    iface = getattr(obj, "__array_interface__", None)
    if isinstance(iface, dict):
        yield _interface_way(iface, obj, CPU, readonly)
        return
    if host:
        if view is None:
            raise TypeError(f"{type(obj).__name__} has no buffer protocol or __array_interface__")
        return
    if hasattr(obj, "__dlpack__"):
        if readonly is not None:
            raise TypeError("readonly= is decided by the producer for objects exported through __dlpack__")
        if source is None:
            raise TypeError(f"{type(obj).__name__} has __dlpack__: ask it, or {_PACKAGE}.asdlpack it")
        yield source(obj)
        return
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        yield _cuda_way(cai, obj, device_id, readonly)
    elif view is None:
        raise TypeError(
            f"cannot export {type(obj).__name__} as DLPack: it has no buffer protocol, __array_interface__, "
            f"__dlpack__ or __cuda_array_interface__ ({_way_out(obj)})"
        )


def _exporter(ways: Iterator[_Way | Exporter | BufferError]) -> Exporter:
    """The exporter of the first of ``ways`` that passes its checks; the buffer's refusal where no later way
    serves."""
    refused: BufferError | None = None
    for way in ways:
        if isinstance(way, BufferError):
            refused = way
        elif not isinstance(way, _Way):
            return way  # source(obj): the re-export of its __dlpack__
        else:
            try:
                return Exporter(_checked(way))
            except BufferError as exc:
                if not way.first:
                    raise
                refused = exc
    if refused is None:  # pragma: no cover (every way ends in an exporter, a refusal or a TypeError)
        raise TypeError("no way of describing memory was found")
    try:
        raise refused
    finally:
        del refused  # no cycle: the traceback holds this frame


def describe(
    obj: Any,
    view: memoryview | None,
    readonly: bool | None = None,
    device_id: int | None = None,
    source: Callable[[Any], Exporter] | None = None,
) -> Exporter:
    """The exporter of what ``obj`` describes, tried in :func:`dlbind.asdlpack`'s order: its buffer (``view``),
    ``__array_interface__``, its ``__dlpack__`` (``source(obj)``: :mod:`dlbind.producer`'s re-export; TypeError
    without one), ``__cuda_array_interface__``. An Exporter is itself."""
    if view is None:
        # checked only here: an Exporter has no buffer, and the check costs the buffer path nothing (by
        # type, not the ABC's isinstance: a virtual subclass is wrapped as any other producer)
        kind = type(obj)
        if kind is _BUFFER_EXPORTER or Exporter in kind.__mro__:
            return obj  # type: ignore[no-any-return]
    ways = _ways(obj, view, readonly, device_id, source, False)  # read lazily, each checked before the next
    return _exporter(ways)


#: Python values that hold no array memory: the way out is an array made of them.
_VALUES = (list, tuple, int, float, complex, bool, range)


def _way_out(obj: Any) -> str:
    """What to do instead of exporting ``obj``: a list or a scalar becomes an array of the target library
    (its ``asarray``); anything else may be raw memory, which :func:`from_pointer` describes."""
    if isinstance(obj, _VALUES):
        return (
            f"a {type(obj).__name__} holds Python objects, not array memory: make an array of it with the target "
            "library's asarray, e.g. numpy.asarray(obj) or torch.asarray(obj)"
        )
    return f"use {_PACKAGE}.from_pointer for raw memory"


def through_interface(obj: Any, interface: str) -> Exporter:
    """``obj`` exported through the interface its row names instead of its ``__dlpack__`` (``export.interface``:
    ``"__cuda_array_interface__"``, which carries signed byte strides and the stream its data is ready on)."""
    if interface != "__cuda_array_interface__":
        raise ValueError(f"{_PACKAGE} exports through __cuda_array_interface__ only, not {interface!r}")
    cai = getattr(obj, interface, None)
    if not isinstance(cai, dict):
        raise TypeError(f"{type(obj).__name__} has no {interface}")
    return Exporter(_checked(_cuda_way(cai, obj, None)))


def export_host(obj: Any) -> Exporter:
    """``obj`` through its buffer protocol or ``__array_interface__`` only (never its ``__dlpack__``).

    What :func:`dlbind.from_dlpack` falls back to when a host producer's ``__dlpack__`` refuses an
    array its buffer protocol carries. TypeError when ``obj`` has neither.
    """
    ways = _ways(obj, buffer_view(obj), None, None, None, True)
    return _exporter(ways)
