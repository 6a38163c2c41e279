"""The export engine: :class:`Memory` (what a DLPack export describes) and the array API's
``__dlpack__`` rules over it (:func:`export_memory`): streams, ``dl_device``, ``copy``, legacy capsules.

Below :mod:`dlbind.tensor`, which re-exports through :func:`export_view`; the producers
(:mod:`dlbind.producer`) describe their sources as :class:`Memory` and export through here.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any, NamedTuple

from dlbind import _backends, capsule
from dlbind._generated.enums import DLPACK_MAJOR_VERSION, DeviceType, Flags
from dlbind.devices import HOST_ACCESSIBLE, Device, check_stream, device_name, parse_device
from dlbind.dtypes import INT64_MAX, DType

__all__ = ["CPU", "Memory", "contiguous_strides", "copy_host", "export_memory", "export_view"]

CPU: Device = (DeviceType.kDLCPU, 0)
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


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major strides in elements (a zero dimension counts as one, so strides stay distinct).

    Only a zero-size shape can have strides past int64 (import checks every other size); no element is
    addressed there, so those strides are 0.
    """
    strides: list[int] = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
        if acc > INT64_MAX:
            acc = 0
    return tuple(reversed(strides))


def copy_host(mem: Memory) -> Memory:
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
        contiguous = contiguous_strides(mem.shape)
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
        data, mem.shape, contiguous_strides(mem.shape), mem.dtype, CPU, 0, False, out,
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
        mem = mem._replace(device=CPU) if host_view and not copy else copy_host(mem)
    elif copy:
        mem = copy_host(mem)
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
