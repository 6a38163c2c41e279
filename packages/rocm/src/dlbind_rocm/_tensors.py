"""ROCm tensors: ``empty``, ``asarray``, ``device_of`` and the host copy the core asks for.

The tensors are ordinary :class:`dlbind.Tensor` objects made through the core's producer
(``dlbind.from_pointer``) with the allocation attached as owner, so the core's export engine, capsules
and deleters serve them unchanged. Their memory has no queued work when they are returned (copies end
with the default stream synchronised).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._generated.enums import DeviceType, Flags
from dlbind.devices import HOST_ACCESSIBLE, Device
from dlbind.dtypes import DType, from_numpy, lookup
from dlbind.export import CPU, Memory, contiguous_strides, copy_host
from dlbind_rocm._runtime import MEMORY_KINDS, Allocation, HipError, ffi, runtime

__all__ = ["asarray", "copy_to_host", "device_of", "empty"]

DEVICE_TYPES = {"device": DeviceType.kDLROCM, "host": DeviceType.kDLROCMHost}
# what hipPointerGetAttributes says -> DLPack (managed memory is the GPU's: DLPack has no ROCm managed type)
POINTER_DEVICE_TYPES = {"device": DeviceType.kDLROCM, "managed": DeviceType.kDLROCM, "host": DeviceType.kDLROCMHost}
_uncleared = ffi.new_allocator(should_clear_after_alloc=False)


def _dtype(dtype: Any) -> DType:
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return lookup(dtype)
    return from_numpy(dtype)


def _shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of ints, not {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


def _memory(memory: str) -> str:
    if memory not in MEMORY_KINDS:
        raise ValueError(f"memory must be one of {', '.join(map(repr, MEMORY_KINDS))}, not {memory!r}")
    return memory


def _new(shape: tuple[int, ...], dt: DType, device_id: int, memory: str) -> tuple[dlbind.Tensor, Allocation | None]:
    rt = runtime()
    rt.check_device(device_id)
    device = (DEVICE_TYPES[memory], device_id)
    nbytes = dt.nbytes(math.prod(shape))
    if not nbytes:
        return dlbind.from_dlpack(dlbind.from_pointer(0, shape, dt, device=device)), None
    allocation = Allocation(rt, nbytes, memory, device_id)
    exporter = dlbind.from_pointer(allocation.address, shape, dt, device=device, owner=allocation)
    return dlbind.from_dlpack(exporter), allocation


def empty(
    shape: Sequence[int] | int, dtype: Any = "float32", *, device_id: int = 0, memory: str = "device"
) -> dlbind.Tensor:
    """A new row-major tensor on ROCm device ``device_id``, its contents undefined.

    ``memory``: ``"device"`` (``hipMalloc``, on ``kDLROCM``) or ``"host"`` (pinned, ``hipHostMalloc``,
    on ``kDLROCMHost``). ``dtype``: a
    :class:`dlbind.DType`, a DLPack name (``"float32"``) or anything ``numpy.dtype`` takes. The tensor
    owns its memory (freed when the last user lets go).
    """
    tensor, _ = _new(_shape(shape), _dtype(dtype), device_id, _memory(memory))
    return tensor


def asarray(host_array: Any, *, device_id: int = 0, memory: str = "device") -> dlbind.Tensor:
    """Copy an array (anything ``dlbind.from_dlpack`` imports) to a new tensor on ROCm device ``device_id``.

    The result is row-major and writable, and owns its memory (``memory`` as in :func:`empty`). Device
    tensors of any backend are first copied to the host through their backend.
    """
    memory = _memory(memory)
    runtime().check_device(device_id)
    src = dlbind.from_dlpack(host_array)
    if src.device[0] not in HOST_ACCESSIBLE:
        src = dlbind.from_dlpack(src, device="cpu", copy=True)
    if not src.is_contiguous():
        src = src.copy()
    tensor, allocation = _new(src.shape, src.dtype, device_id, memory)
    if allocation is not None:
        lib = runtime().lib
        kind = lib.hipMemcpyHostToDevice if memory == "device" else lib.hipMemcpyDefault
        padded = bool(src.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
        nbytes = src.dtype.nbytes(src.size, padded=padded)
        runtime().memcpy(allocation.address, src.data_ptr + src.byte_offset, nbytes, kind, device_id)
    return tensor


def device_of(pointer: int) -> Device:
    """``(device type, device id)`` of a pointer the HIP runtime knows (``hipPointerGetAttributes``).

    Device and managed memory is ``kDLROCM``, pinned host memory ``kDLROCMHost``; memory the runtime does
    not know (plain host memory) is a ``BufferError``.
    """
    rt = runtime()
    rt.require()
    if isinstance(pointer, bool) or not isinstance(pointer, int):
        raise TypeError(f"a pointer is an int, not {type(pointer).__name__}")
    try:
        found = rt.pointer_attributes(pointer)
    except HipError as exc:
        raise BufferError(f"cannot tell which ROCm device holds {pointer:#x}: {exc}") from exc
    if found is None:
        raise BufferError(f"{pointer:#x} is not memory the HIP runtime knows (plain host memory, or freed)")
    kind, device = found
    if kind not in POINTER_DEVICE_TYPES:
        raise BufferError(f"{pointer:#x} is HIP memory of a kind DLPack has no device type for ({kind})")
    return POINTER_DEVICE_TYPES[kind], device


def _extent(shape: tuple[int, ...], strides: tuple[int, ...], dt: DType) -> tuple[int, int]:
    """Bytes (lowest, one past highest) the elements reach, relative to the first element."""
    if not math.prod(shape):
        return 0, 0
    if dt.is_subbyte:
        if strides != contiguous_strides(shape):
            raise BufferError(f"strided {dt.name} tensors (packed below a byte) cannot be copied")
        return 0, dt.nbytes(math.prod(shape))
    item = dt.itemsize
    low = sum(s * (d - 1) for d, s in zip(shape, strides, strict=True) if s < 0 and d > 1) * item
    high = sum(s * (d - 1) for d, s in zip(shape, strides, strict=True) if s > 0 and d > 1) * item + item
    return low, high


def copy_to_host(mem: Memory) -> Memory:
    """The core's ``copy_to_host``: device memory -> a compact row-major host copy (IS_COPIED).

    The span of bytes the elements reach (strides may be negative, zero or leave gaps) is copied with
    one ``hipMemcpy``, then compacted on the host when it is not row-major already.
    """
    rt = runtime()
    rt.require()
    low, high = _extent(mem.shape, mem.strides, mem.dtype)
    span = high - low
    host = _uncleared("char[]", max(span, 1))
    address = int(ffi.cast("uintptr_t", host))
    if span:
        start = mem.data + mem.byte_offset + low
        try:
            rt.memcpy(address, start, span, rt.lib.hipMemcpyDeviceToHost, mem.device[1])
        except HipError as exc:
            raise BufferError(f"copying rocm:{mem.device[1]} memory to the host failed: {exc}") from exc
    staged = Memory(
        address, mem.shape, mem.strides, mem.dtype, CPU, -low, mem.readonly, host,
        int(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED),
    )  # fmt: skip
    compact = contiguous_strides(mem.shape, saturate=not span)
    if all(s == c or d == 1 for d, s, c in zip(mem.shape, mem.strides, compact, strict=True)):
        return staged._replace(strides=compact, readonly=False, flags=staged.flags | Flags.IS_COPIED)
    return copy_host(staged)
