"""Producer side: export anything as DLPack.

:func:`asdlpack` wraps an object with the buffer protocol, ``__array_interface__``,
``__cuda_array_interface__`` or an older/newer ``__dlpack__``; :func:`from_pointer` wraps raw memory.
The result answers every keyword of the array API's ``__dlpack__`` by the spec's rules.
"""

from __future__ import annotations

import ctypes
import math
import sys
from abc import ABCMeta
from typing import Any

from dlbind import _backends, _capi, capsule
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME, VERSIONED_CAPSULES
from dlbind.consumer import from_dlpack
from dlbind.devices import Device, device_name, parse_device, producer_device
from dlbind.dtypes import INT64_MAX, SUBBYTE_PADDED, DType, byte_size, from_format, from_numpy, lookup
from dlbind.export import CPU, Memory, contiguous_strides, export_memory, export_view

__all__ = ["Exporter", "asdlpack", "from_pointer", "through_interface"]

_READ_ONLY = capsule.READ_ONLY  # plain ints on the hot path: IntFlag arithmetic is slow
_PACKAGE = capsule.PACKAGE
_CUDA = DeviceType(DEVICE_BY_NAME["cuda"])  # kDLCUDA (kDLGPU in DLPack 0.4)
MAX_ADDRESS = 2 ** (8 * ffi.sizeof("void *")) - 1


_BUFFER_EXPORTER: Any = native.BufferExporter if native is not None else None


def _import_plain(x: Any) -> Any:
    """``from_dlpack(x)``: in C in the compiled build (configured by the time anything is exported)."""
    return native.from_dlpack(x) if native is not None else from_dlpack(x)


class Exporter(metaclass=ABCMeta):
    """What :func:`asdlpack` returns: a DLPack producer for one piece of memory.

    The compiled build registers its C exporter of buffers as one (``isinstance`` holds in both builds).
    """

    __slots__ = ("_fast", "_memory", "_source")

    _memory: Memory | None
    _source: Any

    def __init__(self, memory: Memory | None, source: Any = None) -> None:
        self._memory = memory
        self._source = source  # an object with __dlpack__, re-negotiated on every export
        # capsule.export's arguments for the common call (versioned, no stream/device/copy)
        self._fast = None
        if memory is not None:
            # tuple indexing (faster than the named fields): data, shape, strides, dtype, device,
            # byte_offset, readonly, owner, flags, stream; a DType is itself (code, bits, lanes)
            m = memory
            if m[9] is None and VERSIONED_CAPSULES:
                self._fast = (m[0], m[1], m[2], m[3], m[4], m[5], m[7], True, m[8] | (_READ_ONLY if m[6] else 0))

    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        if self._memory is not None:
            return self._memory.device
        return producer_device(self._source)

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        plain = stream is None and dl_device is None and copy is None
        if self._fast is not None and plain and max_version and max_version[0] >= DLPACK_VERSION[0]:
            return capsule.export_args(self._fast)
        if self._memory is not None:
            return export_memory(self._memory, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        # import as the source can (it may not know the newer keywords), then answer them here
        if plain:  # the Tensor's own export (C in the compiled build) answers max_version
            return _import_plain(self._source).__dlpack__(max_version=max_version)
        tensor = from_dlpack(self._source, stream=stream)  # ready on the consumer's stream: no wait below
        return export_view(tensor, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __repr__(self) -> str:
        if self._memory is None:
            return f"{_PACKAGE}.Exporter(of {type(self._source).__name__}.__dlpack__)"
        m = self._memory
        return (
            f"{_PACKAGE}.Exporter(shape={m.shape}, dtype={m.dtype.name}, "
            f"device={device_name(m.device[0])}:{m.device[1]})"
        )


# -- sources -----------------------------------------------------------------------------------


def _from_buffer(obj: Any, view: memoryview | None = None) -> Memory:
    view = memoryview(obj) if view is None else view
    if view.suboffsets:
        raise BufferError("buffers with suboffsets (PIL-style indirect arrays) cannot be exported as DLPack")
    dtype = from_format(view.format)
    shape, byte_strides, itemsize = view.shape or (), view.strides or (), view.itemsize
    if dtype.bits != 8 * itemsize:
        raise BufferError(f"buffer format {view.format!r} has itemsize {itemsize}, expected {dtype.bits // 8}")
    strides = tuple([s // itemsize for s in byte_strides])
    if not view.c_contiguous and any(s % itemsize for s in byte_strides):
        raise BufferError(f"byte strides {byte_strides} are not multiples of the item size {itemsize}")
    if view.c_contiguous:
        # cffi reads the address cheaply; the memoryview itself is the owner, never cffi's pointer. The
        # pointer holds a buffer export *of the memoryview*, and a memoryview cleared by the garbage
        # collector while exported loses its managed buffer, then crashes when freed (CPython
        # gh-77894, fixed in 3.12.7 and 3.13.1 only): the owner sits in collectable cycles
        # (b.t = from_dlpack(asdlpack(b))), where the collector may clear the memoryview first. The
        # memoryview keeps the object's buffer (and so the address) until it is freed, with no export.
        address = int(ffi.cast("uintptr_t", ffi.from_buffer(view, require_writable=False)))
        return Memory(address, shape, strides, dtype, CPU, 0, view.readonly, view)
    info = _capi.Py_buffer()
    if _capi.get_buffer(view, ctypes.byref(info), _capi.PyBUF_RECORDS_RO) != 0:  # pragma: no cover
        raise BufferError("the buffer refused a second request")
    data = info.buf or 0
    _capi.release_buffer(ctypes.byref(info))
    return Memory(data, tuple(shape), tuple(strides), dtype, CPU, 0, view.readonly, view)


_TYPESTR_KINDS = {"b": "bool", "i": "int", "u": "uint", "f": "float", "c": "complex"}


def _typestr_dtype(typestr: str, obj: Any) -> DType:
    dt = getattr(obj, "dtype", None)
    if dt is not None and type(dt).__module__.startswith("numpy"):
        return from_numpy(dt)
    order, kind, size = typestr[0], typestr[1], typestr[2:]
    if order == (">" if sys.byteorder == "little" else "<"):
        raise BufferError(f"typestr {typestr!r} is not native-endian: DLPack data must be native-endian")
    name = _TYPESTR_KINDS.get(kind)
    if name is None or not size.isdigit():
        raise BufferError(f"typestr {typestr!r} has no DLPack dtype")
    return lookup("bool" if name == "bool" else f"{name}{int(size) * 8}")


def _from_interface(iface: dict[str, Any], obj: Any, device: Device, readonly: bool | None) -> Memory:
    if iface.get("mask") is not None:
        raise BufferError("__array_interface__ with a mask (a masked array) cannot be exported as DLPack")
    shape = tuple(int(d) for d in iface["shape"])
    dtype = _typestr_dtype(iface["typestr"], obj)
    item = dtype.itemsize
    data = iface.get("data")
    owner: object = obj
    ro = False
    if data is None:  # the object itself exposes the buffer
        mem = _from_buffer(obj)
        ptr, ro, owner = mem.data, mem.readonly, mem.owner
    elif isinstance(data, tuple):
        ptr, ro = int(data[0]), bool(data[1])
    else:  # a buffer object
        mem = _from_buffer(data)
        ptr, ro, owner = mem.data, mem.readonly, (obj, mem.owner)
    ptr += int(iface.get("offset", 0))
    raw_strides = iface.get("strides")
    if raw_strides is None:
        strides = contiguous_strides(shape)
    else:
        if any(int(s) % item for s in raw_strides):
            raise BufferError(f"strides {tuple(raw_strides)} are not multiples of the item size {item}")
        strides = tuple(int(s) // item for s in raw_strides)
    # numpy (ml_dtypes) keeps fp4/fp6 one element per byte: the DLPack "padded" layout
    flags = SUBBYTE_PADDED if dtype.bits * dtype.lanes % 8 else 0
    if dtype.bits * dtype.lanes % 8 and not SUBBYTE_PADDED:
        raise BufferError(
            f"{dtype.name} data stored one element per byte needs the IS_SUBBYTE_TYPE_PADDED flag of DLPack 1.2, "
            f"which DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]} (this runtime's header) lacks"
        )
    stream = iface.get("stream")
    return Memory(ptr, shape, strides, dtype, device, 0, ro, owner, flags, None if stream is None else int(stream))


def _from_cuda_interface(cai: dict[str, Any], obj: Any, device_id: int | None) -> Memory:
    """``__cuda_array_interface__`` (v3): its ``stream`` is kept for the export's synchronisation, the device
    is ``device_id`` when given, else the CUDA backend's answer for the pointer (never assumed 0)."""
    data = cai.get("data")
    if not (isinstance(data, tuple) and len(data) == 2):
        raise BufferError(f"__cuda_array_interface__ data must be (pointer, read_only), not {data!r}")
    stream = cai.get("stream")
    if stream is not None and (isinstance(stream, bool) or not isinstance(stream, int) or stream <= 0):
        raise BufferError(
            f"__cuda_array_interface__ stream {stream!r} is not valid: None (no synchronisation), 1 (legacy default), "
            "2 (per-thread default) or a cudaStream_t; 0 is disallowed (ambiguous)"
        )
    pointer = int(data[0]) + int(cai.get("offset", 0))
    device: Device
    if device_id is not None:
        device = (_CUDA, int(device_id))
    elif not pointer:  # a zero-size array: no memory, nothing to look up
        device = (_CUDA, 0)
    else:
        need = "finding which GPU holds __cuda_array_interface__ data"
        try:
            device = _backends.for_device(_CUDA, need).device_of(pointer)
        except BufferError as exc:
            raise BufferError(f"{exc} (or pass device_id= to say which GPU holds it)") from None
    return _from_interface(cai, obj, device, None)


def _readonly(mem: Memory, readonly: bool | None) -> Memory:
    if readonly is None or readonly == mem.readonly:
        return mem
    if readonly is False:
        raise BufferError("readonly=False asked for, but the memory is read-only")
    return mem._replace(readonly=True)


def asdlpack(obj: Any, *, readonly: bool | None = None, device_id: int | None = None) -> Exporter:
    """Wrap ``obj`` as a DLPack producer (an object with ``__dlpack__`` and ``__dlpack_device__``).

    Accepted, in this order: the buffer protocol (bytes, bytearray, memoryview, array.array, mmap,
    ctypes arrays, numpy), ``__array_interface__`` (v3), an object with ``__dlpack__`` (any version:
    re-negotiated on every export so that a legacy producer serves a versioned consumer and back),
    ``__cuda_array_interface__`` (v3: its ``stream`` honoured on export; the GPU found from the pointer by
    dlbind-cuda, or named by ``device_id``).

    ``readonly=True`` exports the memory read-only; ``readonly=False`` requires writable memory.
    ``device_id`` names the GPU of a ``__cuda_array_interface__`` export; on any other route it must be the
    device id the memory already has (ValueError otherwise: dlbind never moves memory to honour it).
    """
    exporter = _asdlpack(obj, readonly, device_id)
    if device_id is not None:
        kind, index = exporter.__dlpack_device__()
        if index != device_id:
            raise ValueError(
                f"asdlpack(device_id={device_id!r}): this {type(obj).__name__} is on {device_name(kind)}:{index}; "
                "device_id names the GPU of a __cuda_array_interface__ export, it does not move memory "
                "(copy it there with its own library first)"
            )
    return exporter


def _asdlpack(obj: Any, readonly: bool | None, device_id: int | None) -> Exporter:
    try:
        view: memoryview | None = memoryview(obj)
    except (TypeError, ValueError, BufferError):  # numpy and jax refuse buffers of dtypes they cannot format
        view = None
        # checked only here: an Exporter has no buffer, and the check costs the buffer path nothing (by
        # type, not the ABC's isinstance: a virtual subclass is wrapped as any other producer)
        kind = type(obj)
        if kind is _BUFFER_EXPORTER or Exporter in kind.__mro__:
            return obj  # type: ignore[no-any-return]
    if view is not None:
        try:
            return Exporter(_readonly(_from_buffer(obj, view), readonly))
        except BufferError:
            if not hasattr(obj, "__array_interface__") and not hasattr(obj, "__dlpack__"):
                raise
    iface = getattr(obj, "__array_interface__", None)
    if isinstance(iface, dict):
        return Exporter(_readonly(_from_interface(iface, obj, CPU, readonly), readonly))
    if hasattr(obj, "__dlpack__"):
        if readonly is not None:
            raise TypeError("readonly= is decided by the producer for objects exported through __dlpack__")
        return Exporter(None, obj)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if isinstance(cai, dict):
        return Exporter(_readonly(_from_cuda_interface(cai, obj, device_id), readonly))
    raise TypeError(
        f"cannot export {type(obj).__name__} as DLPack: it has no buffer protocol, __array_interface__, "
        f"__dlpack__ or __cuda_array_interface__ (use {_PACKAGE}.from_pointer for raw memory)"
    )


def through_interface(obj: Any, interface: str) -> Exporter:
    """``obj`` exported through the interface its row names instead of its ``__dlpack__`` (``export.interface``:
    ``"__cuda_array_interface__"``, which carries signed byte strides and the stream its data is ready on)."""
    if interface != "__cuda_array_interface__":
        raise ValueError(f"dlbind exports through __cuda_array_interface__ only, not {interface!r}")
    cai = getattr(obj, interface, None)
    if not isinstance(cai, dict):
        raise TypeError(f"{type(obj).__name__} has no {interface}")
    return Exporter(_from_cuda_interface(cai, obj, None))


def export_host(obj: Any) -> Exporter:
    """``obj`` through its buffer protocol or ``__array_interface__`` only (never its ``__dlpack__``).

    What :func:`dlbind.from_dlpack` falls back to when a host producer's ``__dlpack__`` refuses an
    array its buffer protocol carries. TypeError when ``obj`` has neither.
    """
    try:
        view: memoryview | None = memoryview(obj)
    except (TypeError, ValueError, BufferError):
        view = None
    if view is not None:
        try:
            return Exporter(_from_buffer(obj, view))
        except BufferError:
            if not hasattr(obj, "__array_interface__"):
                raise
    iface = getattr(obj, "__array_interface__", None)
    if isinstance(iface, dict):
        return Exporter(_from_interface(iface, obj, CPU, None))
    raise TypeError(f"{type(obj).__name__} has no buffer protocol or __array_interface__")


def from_pointer(
    ptr: int,
    shape: tuple[int, ...] | list[int],
    dtype: DType | str | Any,
    *,
    strides: tuple[int, ...] | list[int] | None = None,
    byte_offset: int = 0,
    device: Any = "cpu",
    readonly: bool = False,
    owner: object = None,
) -> Exporter:
    """Describe raw memory as a DLPack producer. ``strides`` are in elements (None: row-major).

    ``owner`` is kept alive as long as any exported tensor uses the memory. dlbind cannot check the
    pointer: the caller vouches for it.
    """
    shape_t = tuple(int(d) for d in shape)
    if any(d < 0 for d in shape_t):
        raise ValueError(f"negative dimension in shape {shape_t}")
    if isinstance(dtype, DType):
        dt = dtype
    elif isinstance(dtype, str):
        dt = lookup(dtype)
    else:
        dt = from_numpy(dtype)
    strides_t = contiguous_strides(shape_t) if strides is None else tuple(int(s) for s in strides)
    if len(strides_t) != len(shape_t):
        raise ValueError(f"strides {strides_t} do not match shape {shape_t}")
    if byte_offset < 0:
        raise ValueError("byte_offset must be >= 0")
    byte_size(shape_t, dt)  # BufferError beyond int64
    if any(not -INT64_MAX - 1 <= s <= INT64_MAX for s in strides_t):
        raise BufferError(f"strides {strides_t} do not fit in int64")
    if not ptr and math.prod(shape_t) != 0:
        raise ValueError("a NULL pointer can only describe an empty tensor")
    if not 0 <= int(ptr) + byte_offset <= MAX_ADDRESS:
        raise BufferError(f"byte_offset {byte_offset} overflows the data pointer")
    return Exporter(Memory(int(ptr), shape_t, strides_t, dt, parse_device(device), byte_offset, readonly, owner))
