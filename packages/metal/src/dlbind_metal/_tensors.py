"""Metal tensors: ``empty``, ``asarray``, ``device_of``, ``wrap`` and the host copy the core asks for.

kDLMetal's ``data`` is an ``id<MTLBuffer>``, never an address: offsets live only in ``byte_offset``. The
tensors are ordinary :class:`dlbind.Tensor` objects made through the core's producer
(``dlbind.from_pointer``) with the :class:`~dlbind_metal._runtime.Buffer` attached as owner.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._device_tensors import as_dtype, as_shape, extent, host_source, one_of, owned_tensor
from dlbind._generated.enums import DeviceType, Flags
from dlbind.devices import DevicePair
from dlbind.dtypes import DType
from dlbind.export import CPU, Memory, copy_host
from dlbind.validate import byte_size
from dlbind_metal._runtime import WORD, Buffer, MetalError, runtime

__all__ = ["asarray", "copy_to_host", "device_of", "empty", "extent"]

METAL = DeviceType.kDLMetal
STORAGES = ("shared", "private")  # what empty/asarray make (managed is an Intel-Mac mode; memoryless no buffer)


def _storage(storage: str) -> str:
    return one_of("storage", storage, STORAGES)


def _tensor(
    buffer: Buffer | None, shape: tuple[int, ...], dt: DType, device_id: int, *, padded: bool = False
) -> dlbind.Tensor:
    """A row-major tensor in ``buffer`` (None: no bytes), padded sub-byte data where ``padded``."""
    handle = buffer.handle if buffer is not None else 0
    return owned_tensor(handle, shape, dt, (METAL, device_id), buffer, padded=padded)


def empty(
    shape: Sequence[int] | int, dtype: Any = "float32", *, device_id: int = 0, storage: str = "shared"
) -> dlbind.Tensor:
    """A new row-major tensor in a new ``MTLBuffer`` on Metal device ``device_id`` (``newBufferWithLength:``).

    ``storage``: ``"shared"`` (CPU and GPU see the same memory; the default) or ``"private"`` (GPU only;
    host copies go through a blit). The tensor owns its buffer (released when the last user lets go).
    """
    shape_t, dt, storage = as_shape(shape), as_dtype(dtype), _storage(storage)
    rt = runtime()
    rt.check_device(device_id)
    nbytes = byte_size(shape_t, dt)  # BufferError before allocating beyond int64 bytes
    return _tensor(Buffer(rt, nbytes, storage, device_id) if nbytes else None, shape_t, dt, device_id)


def asarray(host_array: Any, *, device_id: int = 0, storage: str = "shared") -> dlbind.Tensor:
    """Copy an array (anything ``dlbind.from_dlpack`` imports) into a new ``MTLBuffer`` on device ``device_id``.

    Shared buffers are made with ``newBufferWithBytes:length:options:``; private ones are filled by a blit
    from a shared one. Device tensors of any backend are first copied to the host through their backend.
    """
    storage = _storage(storage)
    rt = runtime()
    rt.check_device(device_id)
    src = host_source(host_array)
    padded = bool(src.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
    nbytes = src.dtype.nbytes(src.size, padded=padded)
    if not nbytes:
        return _tensor(None, src.shape, src.dtype, device_id, padded=padded)
    shared = Buffer(rt, nbytes, "shared", device_id, source=src.data_ptr + src.byte_offset)
    if storage == "shared":
        return _tensor(shared, src.shape, src.dtype, device_id, padded=padded)
    private = Buffer(rt, nbytes, storage, device_id)
    rt.blit(device_id, shared.handle, 0, private.handle, 0, nbytes + -nbytes % WORD)  # both buffers: whole words
    return _tensor(private, src.shape, src.dtype, device_id, padded=padded)


def device_of(buffer: int) -> DevicePair:
    """``(kDLMetal, device_id)`` of an ``id<MTLBuffer>`` (its ``device``, matched among the process's devices).

    ``buffer`` must be an ``id<MTLBuffer>`` (a kDLMetal tensor's ``data_ptr``): Metal cannot check it.
    """
    rt = runtime()
    rt.require()
    if isinstance(buffer, bool) or not isinstance(buffer, int):
        raise TypeError(f"an id<MTLBuffer> is an int, not {type(buffer).__name__}")
    if not buffer:
        raise BufferError("a nil MTLBuffer is on no device")
    return METAL, rt.device_index(buffer)


def copy_to_host(mem: Memory) -> Memory:
    """The core's ``copy_to_host``: a kDLMetal tensor -> a compact row-major host copy (IS_COPIED).

    ``mem.data`` is the ``id<MTLBuffer>``, ``mem.byte_offset`` the first element's offset in it. Shared
    (and managed) buffers are read through ``contents`` + ``byte_offset``; private ones are first blitted
    into a shared staging buffer. The elements' span must lie inside the buffer's ``length``.
    """
    rt = runtime()
    rt.require()
    low, high = extent(mem.shape, mem.strides, mem.dtype, padded=bool(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED))
    if high == low:  # no element: nothing to read, the buffer may be nil
        staged = Memory(0, mem.shape, mem.strides, mem.dtype, CPU, 0, mem.readonly, None, mem.flags)
        return copy_host(staged)
    if not mem.data:
        raise BufferError("a kDLMetal tensor with elements has a nil MTLBuffer")
    contents, length, storage = rt.describe(mem.data)
    start, end = mem.byte_offset + low, mem.byte_offset + high
    if start < 0 or end > length:
        raise BufferError(
            f"the tensor reaches bytes [{start}, {end}) of an MTLBuffer of {length} bytes (byte_offset "
            f"{mem.byte_offset}): not inside it"
        )
    if storage == "managed" and contents:  # the GPU's writes made visible to the CPU first
        rt.synchronize(rt.device_index(mem.data), mem.data)
    if storage in ("shared", "managed") and contents:
        staged = Memory(contents, mem.shape, mem.strides, mem.dtype, CPU, mem.byte_offset, True, mem.owner,
                        int(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED))  # fmt: skip
        return copy_host(staged)
    if storage != "private":
        raise BufferError(f"cannot copy a {storage} MTLBuffer to the host")
    first, last = start - start % WORD, min(end + -end % WORD, length)  # whole words: what macOS blits
    if (last - first) % WORD:
        raise BufferError(
            f"the tensor reaches the last {length % WORD} bytes of an MTLBuffer of {length} bytes, which a blit "
            f"cannot read (Metal on macOS blits whole {WORD}-byte words); copy it with a Metal kernel of your own"
        )
    device_id = rt.device_index(mem.data)
    staging = Buffer(rt, last - first, "shared", device_id)
    try:
        rt.blit(device_id, mem.data, first, staging.handle, 0, last - first)
    except MetalError as exc:
        raise BufferError(f"copying metal:{device_id} memory to the host failed: {exc}") from exc
    address, _, _ = rt.describe(staging.handle)
    staged = Memory(address, mem.shape, mem.strides, mem.dtype, CPU, start - first - low, True, staging,
                    int(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED))  # fmt: skip
    return copy_host(staged)
