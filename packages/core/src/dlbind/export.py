"""The export engine: :class:`Memory` (what a DLPack export describes) and the array API's
``__dlpack__`` rules over it (:func:`export_memory`): streams, ``dl_device``, ``copy``, legacy capsules.

Below :mod:`dlbind.tensor`, which re-exports through :func:`export_view`; the producers
(:mod:`dlbind.producer`) describe their sources as :class:`Memory` and export through here.
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
from typing import TYPE_CHECKING, Any, NamedTuple

import dlbind._backends as _backends
import dlbind.capsule as capsule
from dlbind._ffi import ffi, native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind.devices import (
    HOST_ACCESSIBLE,
    STREAM_FREE,
    DevicePair,
    check_stream,
    default_stream,
    device_name,
    parse_device,
)
from dlbind.devices import MEMBERS as _MEMBERS
from dlbind.dtypes import SUBBYTE_PADDED, DType
from dlbind.validate import INT64_MAX, contiguous_strides

if TYPE_CHECKING:  # the type of capsules (types.CapsuleType from Python 3.13); mypy always has this stub
    from typing_extensions import CapsuleType

__all__ = [
    "CPU", "Memory", "byte_span", "byte_strides", "copy_device", "copy_host", "copy_pinned", "export_memory",
    "export_view", "host_ready", "versioned_asked", "wait_for",
]  # fmt: skip

CPU: DevicePair = (DeviceType.kDLCPU, 0)
_READ_ONLY = capsule.READ_ONLY  # plain ints on the hot path: IntFlag arithmetic is slow
_PACKAGE = capsule.PACKAGE


def versioned_asked(max_version: Any) -> bool:
    """Whether ``__dlpack__(max_version=...)`` asks for a ``"dltensor_versioned"`` capsule: ``max_version`` is None
    (a legacy one) or ``(major, minor)``, two non-negative ints (``TypeError`` or ``ValueError`` naming it
    otherwise); major 1 or more asks for a versioned one, unless this copy's header predates them (DLPack 0.x
    answers legacily whatever it says)."""
    if max_version is None:
        return False
    if type(max_version) is tuple and len(max_version) == 2:
        major, minor = max_version
        whole = isinstance(major, int) and isinstance(minor, int)  # numpy's integers too
        if whole and type(major) is not bool and type(minor) is not bool:
            if major < 0 or minor < 0:
                raise ValueError(f"max_version must be a (major, minor) version, not {max_version!r}")
            return VERSIONED_CAPSULES and major >= DLPACK_VERSION[0]
    raise TypeError(f"max_version must be None or a (major, minor) tuple of two ints, not {max_version!r}")


class Memory(NamedTuple):
    """Everything a DLPack export describes; ``owner`` keeps the memory alive."""

    data: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements
    dtype: DType
    device: DevicePair
    byte_offset: int
    readonly: bool
    owner: object
    flags: int = 0
    stream: int | None = None  # the producer's stream (``__cuda_array_interface__["stream"]``), if any

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def copy_host(mem: Memory) -> Memory:
    """A compact row-major host copy, in a buffer dlbind allocates (not zero-filled first).

    Device memory is copied by the device's backend (``Backend.copy_to_host``); BufferError names the
    distribution to install, or why the installed one cannot serve.
    """
    if mem.device[0] not in HOST_ACCESSIBLE:
        need = f"copying {device_name(mem.device[0])} memory to the host"
        copied: Memory = _backends.for_device(mem.device[0], need).copy_to_host(mem)
        return copied
    padded = bool(mem.flags & SUBBYTE_PADDED)
    nbytes = mem.dtype.nbytes(mem.size, padded=padded)
    out, address = _allocate(nbytes)
    data = 0
    if mem.size:
        data = address
        src = mem.data + mem.byte_offset
        item = mem.dtype.itemsize
        if mem.size == 1 or _compact(mem.shape, mem.strides):
            ctypes.memmove(data, src, nbytes)
        elif item * 8 != mem.dtype.bits * mem.dtype.lanes and not padded:
            raise BufferError(f"cannot copy strided packed {mem.dtype.name} data")
        else:
            # a dimension of one never moves the pointer, whatever its stride says (2**63 included)
            strides = tuple(s if d != 1 else 0 for d, s in zip(mem.shape, mem.strides, strict=True))
            _copy_strided(data, src, mem.shape, byte_strides(strides, item), item)
    return Memory(
        data, mem.shape, contiguous_strides(mem.shape, saturate=not mem.size), mem.dtype, CPU, 0, False, out,
        capsule.IS_COPIED | (mem.flags & SUBBYTE_PADDED),
    )  # fmt: skip


def waits(ready: int | None, stream: int | None, device_type: int) -> bool:
    """Whether a consumer asking on ``stream`` (None: the device rule's default; -1: no ordering) waits for data
    ready on stream ``ready`` (None: on none) through the device's backend (:func:`wait_for`): where it asks on
    another stream, and a host reader of managed memory (``stream=None``), which synchronises ``ready``. What
    ``dlbind.explain`` asks too, before the exchange (``dlbind.conversion._backend_missing``)."""
    if ready is None or stream == -1:
        return False
    consumer = stream if stream is not None else default_stream(device_type)
    return consumer != ready or (stream is None and device_type in HOST_ACCESSIBLE)


def wait_for(ready: int, stream: int | None, device: DevicePair) -> None:
    """Order a consumer asking on ``stream`` after data ready on stream ``ready`` where it :func:`waits`: the
    device's backend records an event on ``ready`` and makes the consumer's stream wait (a host reader of managed
    memory, ``stream=None``, synchronises ``ready``); nothing when it is the same stream."""
    if waits(ready, stream, device[0]):
        _backends.for_device(device[0]).wait(ready, stream, device)


def copy_pinned(mem: Memory) -> Memory:
    """A compact row-major copy of pinned memory (a GPU's host memory no stream orders: ``kDLCUDAHost``,
    ``kDLROCMHost``) in new pinned memory of the same device, as ``copy=True`` without a device asks (the array
    API: the same device): made by the device's backend (``Backend.copy_on_device``) on its device's default
    stream, which is then synchronised, so that the copy, like its source, is ready when returned. Without a
    backend, the BufferError that names it (``device="cpu"`` copies to the host without one)."""
    where = f"{device_name(mem.device[0])}:{mem.device[1]}"
    backend = _backends.for_device(mem.device[0], f"copying {where} memory")
    stream = next((s for s in map(default_stream, backend.device_types) if s is not None), None)
    if stream is None:
        raise BufferError(f"copying {where} memory: the {backend.name} backend has no stream to copy it on")
    copied: Memory = backend.copy_on_device(mem, stream)
    backend.wait(stream, None, mem.device)  # a host reader of the copy: that stream synchronised
    return copied._replace(stream=None)


def host_ready(tensor: Any) -> None:
    """Make a host-accessible tensor's data readable by the CPU now, before a host view of it is handed out
    (``numpy.asarray``, ``__array__``, the buffer protocol of both builds): where a stream orders it (managed memory
    imported on a stream: ``Tensor.stream``), the device's backend synchronises that stream, as an export to a host
    reader (``stream=None``) does (:func:`wait_for`); without a backend, the BufferError ``__dlpack__`` raises. Memory
    no stream orders (the CPU's, pinned memory imported with none): nothing."""
    ready, kind = tensor._stream, tensor._device_type
    if ready is not None and kind != DeviceType.kDLCPU:
        wait_for(ready, None, (_MEMBERS.get(kind, kind), tensor._device_id))


def copy_device(mem: Memory, stream: int | None) -> Memory:
    """A compact row-major copy of device memory on its own device, made by the device's backend and
    enqueued on ``stream`` (the consumer's; None: the device rule's default; -1: the stream ``mem`` is
    ready on), so that the consumer reads it in order without a trip through the host. The copy is
    ready on that stream (``Memory.stream``)."""
    where = f"{device_name(mem.device[0])}:{mem.device[1]}"
    backend = _backends.for_device(mem.device[0], f"copying {where} memory on the device")
    on = stream if stream is not None and stream != -1 else (mem.stream if stream == -1 else None)
    if on is None:
        on = default_stream(mem.device[0])
    # export_memory ordered the consumer's stream after mem's already: the copy on it needs no second wait
    copied: Memory = backend.copy_on_device(mem._replace(stream=None) if stream != -1 else mem, on)
    return copied


def byte_span(shape: tuple[int, ...], byte_strides: tuple[int, ...], item: int) -> tuple[int, int]:
    """Bytes (lowest, one past highest) a non-empty tensor's elements reach, relative to its first element."""
    low = sum(s * (d - 1) for d, s in zip(shape, byte_strides, strict=True) if s < 0)
    high = sum(s * (d - 1) for d, s in zip(shape, byte_strides, strict=True) if s > 0) + item
    return low, high


def byte_strides(strides: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Element strides in bytes; BufferError past int64 (the C buffer protocol's check and message)."""
    out = tuple(s * itemsize for s in strides)
    for s in out:
        if not -INT64_MAX - 1 <= s <= INT64_MAX:
            raise BufferError(f"stride {s // itemsize} of {itemsize}-byte items does not fit in int64 bytes")
    return out


_uncleared = ffi.new_allocator(should_clear_after_alloc=False)
_HUGE = 4 << 20  # from here on: 2 MiB-aligned memory the kernel may back with huge pages (as numpy does)


class _HostBlock:
    """Memory from ``posix_memalign``, freed with the object: large copies, not zero-filled first."""

    __slots__ = ("__weakref__", "address")

    def __init__(self, nbytes: int) -> None:
        self.address: int = 0  # what __del__ frees: nothing, when the allocation below fails
        libc = _libc()
        p = ctypes.c_void_p()
        if libc.posix_memalign(ctypes.byref(p), 2 << 20, nbytes) != 0 or not p.value:
            raise MemoryError(f"cannot allocate {nbytes} bytes for a copy")
        self.address = p.value
        if sys.platform.startswith("linux"):
            libc.madvise(p, nbytes, 14)  # MADV_HUGEPAGE: a page fault per 2 MiB, not per 4 KiB

    def __del__(self) -> None:
        if self.address:
            _libc().free(self.address)


_LIBC: list[ctypes.CDLL] = []  # the C library once loaded (_libc)


def _libc() -> Any:
    """The C library, with the argument types of the calls made here, loaded on first use (a plain function, not
    functools.cache's wrapper, whose type takes any arguments)."""
    if not _LIBC:
        libc = ctypes.CDLL(None)
        libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.free.argtypes = [ctypes.c_void_p]
        _LIBC.append(libc)
    return _LIBC[0]


def _allocate(nbytes: int) -> tuple[object, int]:
    """``(owner, address)`` of ``nbytes`` of uninitialised host memory that lives as long as ``owner``."""
    if nbytes >= _HUGE and os.name == "posix":
        block = _HostBlock(nbytes)
        return block, block.address
    buf = _uncleared("char[]", max(nbytes, 1))
    return buf, int(ffi.cast("uintptr_t", buf))


def _compact(shape: tuple[int, ...], strides: tuple[int, ...]) -> bool:
    """Row-major without gaps (dimensions of one may have any stride)."""
    expected = 1
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def _copy_strided_numpy(dst: int, src: int, shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> None:
    """The pure build's strided copy: numpy's, over the raw memory (numpy is imported only here)."""
    try:
        import numpy as np
    except ImportError:
        _copy_strided_python(dst, src, shape, strides, item)
        return
    low, high = byte_span(shape, strides, item)
    dtype = np.dtype({1: "u1", 2: "u2", 4: "u4", 8: "u8"}.get(item, f"V{item}"))
    source_memory = memoryview((ctypes.c_char * (high - low)).from_address(src + low)).cast("B")
    target_memory = memoryview((ctypes.c_char * (math.prod(shape) * item)).from_address(dst)).cast("B")
    source = np.ndarray(shape, dtype, buffer=source_memory, offset=-low, strides=strides)
    target = np.ndarray(shape, dtype, buffer=target_memory)
    np.copyto(target, source, casting="no")


def _copy_strided_python(dst: int, src: int, shape: tuple[int, ...], strides: tuple[int, ...], item: int) -> None:
    """Without numpy or the compiled build: the innermost contiguous run at a time (slow for small runs)."""
    inner, run = len(shape), item
    while inner > 0 and strides[inner - 1] == run:
        inner -= 1
        run *= shape[inner]
    outer_shape = shape[:inner]
    index = [0] * inner
    offset_out = 0
    for _ in range(math.prod(outer_shape)):
        offset_in = sum(i * s for i, s in zip(index, strides[:inner], strict=True))
        ctypes.memmove(dst + offset_out, src + offset_in, run)
        offset_out += run
        for axis in reversed(range(inner)):
            index[axis] += 1
            if index[axis] < outer_shape[axis]:
                break
            index[axis] = 0


_copy_strided = native.copy_strided if native is not None else _copy_strided_numpy


def export_memory(
    mem: Memory,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
    own: bool = False,
) -> CapsuleType:
    """The array API's ``__dlpack__`` over ``mem`` (``own``: the runtime's own copy, not a consumer's request)."""
    plain = stream is None and dl_device is None and copy is None and mem.stream is None
    if not VERSIONED_CAPSULES and not own:
        _legacy_keywords(mem, dl_device, copy)
    versioned = versioned_asked(max_version)
    if versioned and plain:  # the common call, straight to the capsule
        return capsule.export(
            mem.data, mem.shape, mem.strides, (mem.dtype.code, mem.dtype.bits, mem.dtype.lanes), mem.device,
            mem.byte_offset, mem.owner, versioned=True, flags=mem.flags | (_READ_ONLY if mem.readonly else 0),
        )  # fmt: skip
    target = mem.device if dl_device is None else parse_device(dl_device)
    if stream is not None:  # None is every device's (devices.check_stream); a stream is the device exported to's
        _check_stream_to(mem.device, target, stream)
    if mem.stream is not None:  # the producer's work may still be queued on mem.stream
        wait_for(mem.stream, stream, mem.device)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    if target != mem.device:
        host_view = target == CPU and mem.device[0] in HOST_ACCESSIBLE
        if copy is False and not host_view:
            raise BufferError(
                f"exporting to {device_name(target[0])}:{target[1]} needs a copy from "
                f"{device_name(mem.device[0])}:{mem.device[1]}, and copy=False forbids one"
            )
        if target != CPU:
            raise BufferError(
                f"{_PACKAGE} exports host data only to the CPU, not to {device_name(target[0])}:{target[1]}"
            )
        # the data's stream was waited for above: the host copy (queued on the default stream) waits no more
        mem = mem._replace(device=CPU) if host_view and not copy else copy_host(mem._replace(stream=None))
    elif copy:
        mem = _copy_here(mem, stream)
    if not versioned and mem.readonly:
        raise BufferError(
            "read-only data cannot be exported in a legacy 'dltensor' capsule (it has no read-only flag); "
            + ("the consumer must ask for max_version=(1, 0) or newer" if VERSIONED_CAPSULES else
               f"DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]} (this copy's header) has no other")
        )  # fmt: skip
    if not versioned:
        why = mem.dtype.legacy_refusal(padded=bool(mem.flags & SUBBYTE_PADDED))
        if why is not None:
            raise BufferError(why)
    flags = mem.flags | (_READ_ONLY if mem.readonly else 0)
    return capsule.export(
        mem.data, mem.shape, mem.strides, (mem.dtype.code, mem.dtype.bits, mem.dtype.lanes), mem.device,
        mem.byte_offset, mem.owner, versioned=versioned, flags=flags,
    )  # fmt: skip


def _copy_here(mem: Memory, stream: int | None) -> Memory:
    """``copy=True`` on ``mem``'s own device (the array API's ``dl_device=None``), for a consumer on ``stream``."""
    if mem.device[0] == DeviceType.kDLCPU:
        return copy_host(mem)  # the CPU's memory: copied by the CPU
    if mem.device[0] in HOST_ACCESSIBLE and mem.device[0] in STREAM_FREE:
        return copy_pinned(mem)  # pinned memory stays pinned, on its device
    mem = copy_device(mem, stream)  # on the consumer's stream (managed memory stays managed: a stream orders it)
    if mem.stream is not None:  # a CPU reader of managed memory (stream=None): the copy's stream synchronised
        wait_for(mem.stream, stream, mem.device)
    return mem


def _check_stream_to(here: DevicePair, target: DevicePair, stream: object) -> None:
    """Refuse ``stream`` for an export from ``here`` to ``target``: the array API's ``__dlpack__`` takes a stream of
    the device exported to, so an export to a device without streams (the CPU) takes None only (and synchronises
    the data's own work itself)."""
    if target[0] != here[0] and target[0] in STREAM_FREE:
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(f"stream must be None or an int, not {type(stream).__name__}")
        raise BufferError(
            f"stream must be None for an export to {device_name(target[0])} (got {stream}): a stream names where "
            f"the consumer uses the data, and {device_name(target[0])} has none"
        )
    check_stream(here[0], stream)


def _legacy_keywords(mem: Memory, dl_device: Any, copy: bool | None) -> None:
    """A DLPack 0.x producer (a vendored copy of a 0.x header) answers with a legacy capsule, which cannot say
    it is a copy (no IS_COPIED flag): it takes the array API's keywords, but refuses what it cannot honour
    with a view, as the spec lets a producer refuse (BufferError); ``copy=None``/``False`` and a ``dl_device``
    the memory already is on (or the CPU, for host-accessible memory) are served."""
    if copy:
        raise BufferError(
            f"{_PACKAGE} (DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]}) exports legacy capsules, which cannot mark "
            "a copy: copy=True is refused; import the view and copy it"
        )
    if dl_device is not None:
        target = parse_device(dl_device)
        if target != mem.device and not (target == CPU and mem.device[0] in HOST_ACCESSIBLE):
            raise BufferError(
                f"{_PACKAGE} (DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]}) exports "
                f"{device_name(mem.device[0])}:{mem.device[1]} memory where it is: it cannot move it to "
                f"{device_name(target[0])}:{target[1]}"
            )


def export_view(
    tensor: Any,
    *,
    stream: int | None = None,
    max_version: tuple[int, int] | None = None,
    dl_device: Any = None,
    copy: bool | None = None,
    own: bool = False,
    copied: bool = False,
) -> CapsuleType:
    """Re-export a :class:`dlbind.Tensor`; the new capsule keeps the Tensor (and its producer) alive. A consumer
    asking on another stream than the one the Tensor is ready on waits for it (``Tensor.stream``). ``copied``:
    the Tensor is a copy made for this consumer (a bridge's), which the capsule says (``IS_COPIED``)."""
    bits = tensor._flags
    flags = int(bits & SUBBYTE_PADDED) | (capsule.IS_COPIED if copied else 0)
    kind = tensor._device_type  # read from the Tensor's fields, as its dtype, device and readonly properties do
    mem = Memory(
        tensor.data_ptr, tensor.shape, tensor.strides, DType(tensor._code, tensor._bits, tensor._lanes),
        (_MEMBERS.get(kind, kind), tensor._device_id), tensor.byte_offset, bool(bits & capsule.READ_ONLY), tensor,
        flags, tensor._stream,
    )  # fmt: skip
    return export_memory(mem, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy, own=own)
