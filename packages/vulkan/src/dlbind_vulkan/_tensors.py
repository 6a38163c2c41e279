"""kDLVulkan tensors: ``empty``, ``asarray``, ``wrap``, ``buffer_info`` and the host copy the core asks for.

A kDLVulkan tensor's ``data`` is a ``VkBuffer`` handle, ``byte_offset`` the offset of its first element
inside that buffer, ``device_id`` the index of the physical device in the order the Vulkan loader
enumerates them (docs/backends.md). The tensors are ordinary :class:`dlbind.Tensor` objects made through
the core's producer (``dlbind.from_pointer``) with the buffer's owner attached, so the core's export
engine, capsules and deleters serve them unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._device_tensors import as_dtype, as_shape, extent, from_span, host_source, owned_tensor
from dlbind._generated.enums import DeviceType, Flags
from dlbind.devices import DevicePair
from dlbind.dtypes import DType
from dlbind.export import Memory
from dlbind.validate import byte_size, contiguous_strides
from dlbind_vulkan._runtime import BufferInfo, VulkanError, _address, ffi, known, register, runtime
from dlbind_vulkan._runtime import lookup as lookup_record

__all__ = ["asarray", "buffer_info", "copy_to_host", "device_of", "empty", "wrap"]

VULKAN = DeviceType.kDLVulkan
_uncleared = ffi.new_allocator(should_clear_after_alloc=False)


def _new(shape: tuple[int, ...], dt: DType, device_id: int, *, padded: bool = False) -> tuple[dlbind.Tensor, Any]:
    """A tensor owning a new buffer on ``device_id`` (no buffer at all for zero elements), and its allocation;
    sub-byte data one element per byte when ``padded``. BufferError before allocating beyond int64 bytes."""
    ctx = runtime().context(device_id)
    nbytes = byte_size(shape, dt, padded=padded)
    if not nbytes:
        return owned_tensor(0, shape, dt, (VULKAN, device_id), None, padded=padded), None
    allocation = ctx.allocate(nbytes, staging=False)
    info = BufferInfo(
        device_id=device_id, buffer=allocation.handle, memory=int(ffi.cast("uintptr_t", allocation.memory)),
        memory_offset=0, size=nbytes, device=int(ffi.cast("uintptr_t", ctx.device)),
        physical_device=int(ffi.cast("uintptr_t", ctx.physical.handle)),
        instance=int(ffi.cast("uintptr_t", ctx.rt.instance)), queue_family_index=ctx.queue_family, owned=True,
    )  # fmt: skip
    record = register(ctx, info, allocation)
    return owned_tensor(allocation.handle, shape, dt, (VULKAN, device_id), record, padded=padded), allocation


def empty(shape: Sequence[int] | int, dtype: Any = "float32", *, device_id: int = 0) -> dlbind.Tensor:
    """A new row-major tensor on ``(kDLVulkan, device_id)``, its contents undefined.

    ``dtype``: a :class:`dlbind.DType`, a DLPack name (``"float32"``) or anything ``numpy.dtype`` takes.
    The tensor owns a ``VkBuffer`` of its own (freed when the last user lets go).
    """
    tensor, _ = _new(as_shape(shape), as_dtype(dtype), device_id)
    return tensor


def asarray(host_array: Any, *, device_id: int = 0) -> dlbind.Tensor:
    """Upload a host array (anything ``dlbind.from_dlpack`` imports) to a new tensor on ``(kDLVulkan, device_id)``.

    The result is row-major and writable, and owns its buffer; sub-byte data stored one element per byte
    (``IS_SUBBYTE_TYPE_PADDED``) stays so. Device tensors (a kDLVulkan tensor included) are first copied to
    the host through their backend.
    """
    src = host_source(host_array)
    padded = bool(src.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
    tensor, allocation = _new(src.shape, src.dtype, device_id, padded=padded)
    if allocation is not None:
        allocation.ctx.upload(allocation, src.data_ptr + src.byte_offset, src.dtype.nbytes(src.size, padded=padded))
    return tensor


def wrap(
    buffer: Any,
    shape: Sequence[int] | int,
    dtype: Any,
    *,
    device: Any,
    physical_device: Any,
    queue_family_index: int,
    memory: Any = 0,
    memory_offset: int = 0,
    size: int | None = None,
    strides: Sequence[int] | None = None,
    byte_offset: int = 0,
    instance: Any = 0,
    readonly: bool = False,
    owner: object = None,
) -> dlbind.Tensor:
    """Describe a ``VkBuffer`` made by other code (the ``vulkan`` package, a renderer) as a kDLVulkan tensor.

    Handles may be ints or cffi pointers of any binding. ``device``/``physical_device`` are the buffer's
    ``VkDevice`` and its ``VkPhysicalDevice``; ``queue_family_index`` names a queue family of that device
    whose queue 0 dlbind may use for copies (not concurrently with other threads: Vulkan queues are
    externally synchronised). ``size`` is the buffer's size in bytes (checked against the tensor's
    extent when given). ``owner`` is kept alive while any tensor uses the buffer; dlbind never frees it.
    The buffer must have been created with ``VK_BUFFER_USAGE_TRANSFER_SRC_BIT`` for host copies. A buffer
    dlbind already knows (a view of it) keeps its own record (:func:`buffer_info`); on dlbind's own
    ``VkDevice`` the copies use dlbind's own queue. ValueError naming the argument for a NULL ``device`` or
    ``physical_device`` and a ``queue_family_index`` the physical device does not have.
    """
    dt, shape_t = as_dtype(dtype), as_shape(shape)
    handle = _address(buffer)
    elements: int = math.prod(shape_t)
    if not handle and elements:
        raise ValueError("a VK_NULL_HANDLE buffer can only describe an empty tensor")
    strides_t = contiguous_strides(shape_t) if strides is None else tuple(int(s) for s in strides)
    if len(strides_t) != len(shape_t):
        raise ValueError(f"strides {strides_t} do not match shape {shape_t}")
    if byte_offset < 0:
        raise ValueError("byte_offset must be >= 0")
    low, high = extent(shape_t, strides_t, dt)
    if byte_offset + low < 0:
        raise ValueError(f"the strides reach {-(byte_offset + low)} bytes before the buffer's start")
    if size is not None and byte_offset + high > size:
        raise ValueError(f"the tensor reaches byte {byte_offset + high} of a {size}-byte buffer")
    ctx = runtime().foreign_context(physical_device, device, queue_family_index)
    info = BufferInfo(
        device_id=ctx.physical.index, buffer=handle, memory=_address(memory), memory_offset=memory_offset,
        size=size if size is not None else byte_offset + high, device=_address(device),
        physical_device=_address(physical_device), instance=_address(instance),
        queue_family_index=queue_family_index, owned=False,
    )  # fmt: skip
    record = register(ctx, info, owner)
    exporter = dlbind.from_pointer(
        handle, shape_t, dt, strides=strides_t, byte_offset=byte_offset, device=(VULKAN, ctx.physical.index),
        readonly=readonly, owner=record,
    )  # fmt: skip
    return dlbind.from_dlpack(exporter)


def buffer_info(x: Any) -> BufferInfo:
    """The :class:`BufferInfo` of a kDLVulkan tensor (any DLPack producer) or of a ``VkBuffer`` handle."""
    if isinstance(x, int):
        return lookup_record(x).info
    t = x if isinstance(x, dlbind.Tensor) else dlbind.from_dlpack(x)
    if t.device[0] != VULKAN:
        raise BufferError(f"buffer_info needs a kDLVulkan tensor, not one on {t.device[0].name}")
    return lookup_record(t.data_ptr).info


def device_of(pointer: int) -> DevicePair:
    """``(kDLVulkan, device_id)`` of a ``VkBuffer`` handle dlbind-vulkan knows."""
    if isinstance(pointer, bool) or not isinstance(pointer, int):
        raise TypeError(f"a VkBuffer handle is an int, not {type(pointer).__name__}")
    return VULKAN, lookup_record(pointer).info.device_id


def copy_to_host(mem: Memory) -> Memory:
    """The core's ``copy_to_host``: kDLVulkan memory -> a compact row-major host copy (IS_COPIED)."""
    low, high = extent(mem.shape, mem.strides, mem.dtype, padded=bool(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED))
    span = high - low
    host = _uncleared("char[]", max(span, 1))
    address = int(ffi.cast("uintptr_t", host))
    if span:  # no element: no buffer to know (another producer's handle, or none)
        record, size = known(mem.data)
        start = mem.byte_offset + low
        if start < 0 or start + span > size:
            raise BufferError(f"the tensor reaches bytes {start}..{start + span} of a {size}-byte VkBuffer")
        try:
            record.ctx.download(ffi.cast("VkBuffer", mem.data), start, span, address)
        except VulkanError as exc:
            raise BufferError(f"copying vulkan:{mem.device[1]} memory to the host failed: {exc}") from exc
    return from_span(mem, address, host, low, span)
