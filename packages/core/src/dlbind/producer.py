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
from typing import Any, NamedTuple

from dlbind import _backends, _capi, capsule
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_MAJOR_VERSION, DeviceType, Flags
from dlbind.devices import HOST_ACCESSIBLE, Device, check_stream, device_name, parse_device
from dlbind.dtypes import INT64_MAX, DType, byte_size, from_format, from_numpy, lookup

__all__ = ["Exporter", "asdlpack", "export_view", "from_pointer"]

CPU: Device = (DeviceType.kDLCPU, 0)
MAX_ADDRESS = 2 ** (8 * ffi.sizeof("void *")) - 1
_READ_ONLY = int(Flags.READ_ONLY)  # plain ints on the hot path: IntFlag arithmetic is slow


class Memory(NamedTuple):
    """Everything a DLPack export describes; ``owner`` keeps the memory alive."""

    data: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    dtype: DType
    device: Device
    byte_offset: int
    readonly: bool
    owner: object
    flags: int = 0
    stream: int | None = None  # the producer's stream (``__cuda_array_interface__["stream"]``), if any

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides: list[int] = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def _copy_host(mem: Memory) -> Memory:
    """A compact row-major copy of host memory, owned by a bytearray."""
    if mem.device[0] not in HOST_ACCESSIBLE:
        raise BufferError(f"copying {device_name(mem.device[0])} memory needs its dlbind backend")
    padded = bool(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
    nbytes = mem.dtype.nbytes(mem.size, padded=padded)
    out = bytearray(nbytes)
    if mem.size:
        dst = ctypes.addressof((ctypes.c_char * nbytes).from_buffer(out))
        src = mem.data + mem.byte_offset
        item = mem.dtype.itemsize
        contiguous = _contiguous_strides(mem.shape)
        if mem.strides == contiguous or mem.size == 1 or (item * 8 != mem.dtype.bits * mem.dtype.lanes and not padded):
            if mem.strides != contiguous and mem.size != 1:
                raise BufferError(f"cannot copy strided packed {mem.dtype.name} data")
            ctypes.memmove(dst, src, nbytes)
        else:
            # Copy the innermost contiguous run at a time, walking every outer index.
            ndim = len(mem.shape)
            inner = ndim
            run = 1
            while inner > 0 and mem.strides[inner - 1] == run:
                inner -= 1
                run *= mem.shape[inner]
            outer_shape = mem.shape[:inner]
            index = [0] * inner
            offset_out = 0
            for _ in range(math.prod(outer_shape)):
                offset_in = sum(i * s for i, s in zip(index, mem.strides[:inner], strict=True)) * item
                ctypes.memmove(dst + offset_out, src + offset_in, run * item)
                offset_out += run * item
                for axis in reversed(range(inner)):
                    index[axis] += 1
                    if index[axis] < outer_shape[axis]:
                        break
                    index[axis] = 0
        data = dst
    else:
        data = 0
    return Memory(
        data, mem.shape, _contiguous_strides(mem.shape), mem.dtype, CPU, 0, False, out,
        Flags.IS_COPIED | (mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED),
    )  # fmt: skip


def export_memory(
    mem: Memory,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> object:
    """The array API's ``__dlpack__`` over ``mem``."""
    plain = stream is None and dl_device is None and copy is None and mem.stream is None
    if plain and max_version is not None and max_version[0] >= DLPACK_MAJOR_VERSION:
        # the common call, straight to the capsule
        return capsule.export(
            mem.data, mem.shape, mem.strides, (mem.dtype.code, mem.dtype.bits, mem.dtype.lanes), mem.device,
            mem.byte_offset, mem.owner, versioned=True, flags=mem.flags | (_READ_ONLY if mem.readonly else 0),
        )  # fmt: skip
    check_stream(mem.device[0], stream)
    if mem.stream is not None and stream != -1:  # the producer's work may still be queued
        _backends.for_device(mem.device[0]).wait(mem.stream, stream, mem.device)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    target = mem.device if dl_device is None else parse_device(dl_device)
    if target != mem.device:
        host_view = target == CPU and mem.device[0] in HOST_ACCESSIBLE
        if copy is False and not host_view:
            raise BufferError(
                f"exporting to {device_name(target[0])}:{target[1]} needs a copy from "
                f"{device_name(mem.device[0])}:{mem.device[1]}, and copy=False forbids one"
            )
        if target != CPU:
            raise BufferError(f"dlbind exports host data only to the CPU, not to {device_name(target[0])}:{target[1]}")
        mem = mem._replace(device=CPU) if host_view and not copy else _copy_host(mem)
    elif copy:
        mem = _copy_host(mem)
    versioned = max_version is not None and max_version[0] >= DLPACK_MAJOR_VERSION
    if not versioned and mem.readonly:
        raise BufferError(
            "read-only data cannot be exported in a legacy 'dltensor' capsule (it has no read-only flag); "
            "the consumer must ask for max_version=(1, 0) or newer"
        )
    flags = mem.flags | (_READ_ONLY if mem.readonly else 0)
    return capsule.export(
        mem.data, mem.shape, mem.strides, (mem.dtype.code, mem.dtype.bits, mem.dtype.lanes), mem.device,
        mem.byte_offset, mem.owner, versioned=versioned, flags=flags,
    )  # fmt: skip


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
            if m[9] is None:
                self._fast = (m[0], m[1], m[2], m[3], m[4], m[5], m[7], True, m[8] | (_READ_ONLY if m[6] else 0))

    def __dlpack_device__(self) -> tuple[DeviceType, int]:
        if self._memory is not None:
            return self._memory.device
        dev = self._source.__dlpack_device__()
        return parse_device(tuple(dev))

    def __dlpack__(
        self,
        *,
        stream: int | None = None,
        max_version: tuple[int, int] | None = None,
        dl_device: tuple[int, int] | None = None,
        copy: bool | None = None,
    ) -> object:
        plain = stream is None and dl_device is None and copy is None
        if self._fast is not None and plain and max_version and max_version[0] >= DLPACK_MAJOR_VERSION:
            return capsule.export_args(self._fast)
        if self._memory is not None:
            return export_memory(self._memory, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        from dlbind.consumer import from_dlpack

        # import as the source can (it may not know the newer keywords), then answer them here
        tensor = from_dlpack(self._source, stream=stream)
        return export_view(tensor, max_version=max_version, dl_device=dl_device, copy=copy)

    def __repr__(self) -> str:
        if self._memory is None:
            return f"dlbind.Exporter(of {type(self._source).__name__}.__dlpack__)"
        m = self._memory
        return (
            f"dlbind.Exporter(shape={m.shape}, dtype={m.dtype.name}, device={device_name(m.device[0])}:{m.device[1]})"
        )


def export_view(
    tensor: Any,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
) -> object:
    """Re-export a :class:`dlbind.Tensor`; the new capsule keeps the Tensor (and its producer) alive."""
    mem = Memory(
        tensor.data_ptr, tensor.shape, tensor.strides, tensor.dtype, tensor.device, tensor.byte_offset,
        tensor.readonly, tensor, int(tensor.flags & Flags.IS_SUBBYTE_TYPE_PADDED),
    )  # fmt: skip
    return export_memory(mem, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


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
    if view.c_contiguous:  # cffi reads the address (and keeps the buffer) cheaply
        pointer = ffi.from_buffer(view, require_writable=False)
        return Memory(int(ffi.cast("uintptr_t", pointer)), shape, strides, dtype, CPU, 0, view.readonly, pointer)
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
        strides = _contiguous_strides(shape)
    else:
        if any(int(s) % item for s in raw_strides):
            raise BufferError(f"strides {tuple(raw_strides)} are not multiples of the item size {item}")
        strides = tuple(int(s) // item for s in raw_strides)
    # numpy (ml_dtypes) keeps fp4/fp6 one element per byte: the DLPack "padded" layout
    flags = Flags.IS_SUBBYTE_TYPE_PADDED if dtype.bits * dtype.lanes % 8 else 0
    stream = iface.get("stream")
    return Memory(ptr, shape, strides, dtype, device, 0, ro, owner, flags, None if stream is None else int(stream))


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
    ``__cuda_array_interface__`` (``device_id`` names the GPU when no CUDA backend can look it up).

    ``readonly=True`` exports the memory read-only; ``readonly=False`` requires writable memory.
    """
    try:
        view: memoryview | None = memoryview(obj)
    except (TypeError, ValueError):  # numpy refuses buffers of dtypes it cannot format (bfloat16, ...)
        view = None
        # checked only here: an Exporter has no buffer, and the ABC check costs the buffer path nothing
        if isinstance(obj, Exporter):
            return obj
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
        if device_id is None:
            raise BufferError(
                "__cuda_array_interface__ does not say which GPU holds the data: pass device_id= "
                "(or install dlbind[cuda] to look it up)"
            )
        mem = _from_interface(cai, obj, (DeviceType.kDLCUDA, int(device_id)), readonly)
        return Exporter(_readonly(mem, readonly))
    raise TypeError(
        f"cannot export {type(obj).__name__} as DLPack: it has no buffer protocol, __array_interface__, "
        "__dlpack__ or __cuda_array_interface__ (use dlbind.from_pointer for raw memory)"
    )


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
    strides_t = _contiguous_strides(shape_t) if strides is None else tuple(int(s) for s in strides)
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
