"""For backends: tensors that own device memory, and the steps every backend's tensors share.

Every backend makes its tensors through the core's producer (``dlbind.from_pointer``) with its allocation
attached as owner, so the core's export engine, capsules and deleters serve them unchanged. The helpers
(:func:`as_dtype`, :func:`as_shape`, :func:`one_of`, :func:`host_source`, :func:`extent`,
:func:`from_span`) are the argument rules and the host-copy steps of all of them (Vulkan and Metal
included); :func:`copy_plan` decomposes a strided copy into the runtime's 2-D copies (pure, unit-tested);
:class:`GpuTensors` is the whole of ``empty``, ``asarray``, ``device_of`` and ``copy_to_host``
over a :class:`dlbind._gpu_runtime.GpuRuntime` (CUDA, ROCm).

The core never imports this module: backends do.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import dlbind
from dlbind._generated.enums import DeviceType, Flags
from dlbind._gpu_runtime import GpuAllocation, GpuRuntime
from dlbind.devices import HOST_ACCESSIBLE, Device
from dlbind.dtypes import DType, from_numpy, lookup
from dlbind.export import CPU, Memory, byte_span, contiguous_strides, copy_host

__all__ = [
    "MAX_COPIES", "Copy2D", "GpuTensors", "as_dtype", "as_shape", "copy_plan", "extent", "from_span", "host_source",
    "one_of",
]  # fmt: skip


def as_dtype(dtype: Any) -> DType:
    """A :class:`DType`, a DLPack name (``"float32"``) or anything ``numpy.dtype`` takes, as a DType."""
    if isinstance(dtype, DType):
        return dtype
    if isinstance(dtype, str):
        return lookup(dtype)
    return from_numpy(dtype)


def as_shape(shape: Sequence[int] | int) -> tuple[int, ...]:
    """An int or a sequence of ints, none negative, as a tuple."""
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(operator.index(d) for d in shape)
    except TypeError:
        raise TypeError(f"shape must be a sequence of ints, not {shape!r}") from None
    if any(d < 0 for d in out):
        raise ValueError(f"negative dimension in shape {out}")
    return out


def one_of(what: str, value: str, options: Sequence[str]) -> str:
    """``value`` when it is one of ``options``; ValueError naming ``what`` and the options otherwise."""
    if value not in options:
        raise ValueError(f"{what} must be one of {', '.join(map(repr, options))}, not {value!r}")
    return value


def host_source(array: Any) -> dlbind.Tensor:
    """``array`` (anything ``dlbind.from_dlpack`` imports) readable on the host and row-major: device
    tensors of any backend are copied to the host through their backend, strided ones compacted."""
    src = dlbind.from_dlpack(array)
    if src.device[0] not in HOST_ACCESSIBLE:
        src = dlbind.from_dlpack(src, device="cpu", copy=True)
    if not src.is_contiguous():
        src = src.copy()
    return src


def extent(shape: tuple[int, ...], strides: tuple[int, ...], dt: DType) -> tuple[int, int]:
    """Bytes (lowest, one past highest) the elements reach, relative to the first element."""
    if not math.prod(shape):
        return 0, 0
    if dt.is_subbyte:
        if strides != contiguous_strides(shape):
            raise BufferError(f"strided {dt.name} tensors (packed below a byte) cannot be copied")
        return 0, dt.nbytes(math.prod(shape))
    item = dt.itemsize
    return byte_span(shape, tuple(s * item for s in strides), item)


class Copy2D(NamedTuple):
    """One copy of a :func:`copy_plan` (``Memcpy2DAsync``; ``MemcpyAsync`` when ``height`` is 1): ``height``
    rows of ``width`` bytes, row ``r`` read at byte ``src + r * spitch`` and written at byte
    ``dst + r * dpitch`` of the compact destination. ``src`` counts from the source's first element (it may be
    negative: negative strides), or, when ``within``, from the destination's start: a copy that repeats what
    earlier copies of the plan wrote (a broadcast dimension, stride 0), so it must run after them."""

    src: int
    dst: int
    width: int
    height: int
    spitch: int
    dpitch: int
    within: bool = False


#: The most runtime calls one device copy may take (:func:`copy_plan`): beyond it, a layout is refused.
MAX_COPIES = 65536
#: The largest pitch a 2-D copy is given: CUDA's ``cudaDeviceProp::memPitch`` and HIP's on the GPUs of
#: today (2**31 - 1). A dimension with a larger stride is looped over instead.
MAX_PITCH = (1 << 31) - 1


def _rows(dims: list[tuple[int, int, int]], width: int, max_pitch: int) -> int | None:
    """The dimension a 2-D copy takes as its rows: the most elements among those whose source and
    destination strides are at least ``width`` and at most ``max_pitch`` (innermost on a tie), or None."""
    fits = [i for i, (_, s, ds) in enumerate(dims) if width <= s <= max_pitch and ds <= max_pitch]
    return max(reversed(fits), key=lambda i: dims[i][0], default=None)


def _offsets(loops: list[tuple[int, int, int]]) -> Iterator[tuple[int, int]]:
    """(source, destination) byte offsets of every index of the dimensions a plan loops over."""
    for index in itertools.product(*(range(n) for n, _, _ in loops)):
        yield (sum(i * s for i, (_, s, _) in zip(index, loops, strict=True)),
               sum(i * ds for i, (_, _, ds) in zip(index, loops, strict=True)))  # fmt: skip


def copy_plan(
    shape: tuple[int, ...],
    byte_strides: tuple[int, ...],
    item: int,
    *,
    limit: int = MAX_COPIES,
    max_pitch: int = MAX_PITCH,
) -> list[Copy2D]:
    """The 2-D copies that write the elements of a strided tensor to compact row-major memory, in order.

    ``byte_strides`` may be positive, zero or negative, leave gaps, overlap or be transposed; ``item`` is the
    element's size in bytes. Dimensions of one are dropped and neighbours that address memory as one
    dimension would are merged. The elements at index 0 of every broadcast dimension (stride 0) are copied
    first: the contiguous innermost run (one element when the innermost stride is not the item size:
    negative, gapped, or a broadcast inside it) is each copy's ``width``; the dimension with the most
    elements whose stride is positive, at least the width and at most ``max_pitch`` is its rows; the copies
    loop over the rest, any sign. Then each broadcast dimension, innermost first, is filled by doubling
    what is written (``within`` copies: 1, 2, 4, ... slices), so a broadcast of ``n`` takes about
    ``log2(n)`` copies, not ``n``. BufferError when that takes more than ``limit`` copies, naming the layout
    and why. An empty tensor needs none.
    """
    if not math.prod(shape):
        return []
    # (elements, source stride, destination stride) of each dimension that moves, outermost first
    dims: list[tuple[int, int, int]] = []
    dst_stride = item
    for d, s in zip(reversed(shape), reversed(byte_strides), strict=True):
        if d != 1:
            if dims and s == dims[0][1] * dims[0][0]:  # addresses continue the inner one's: one dimension
                n, inner_s, inner_ds = dims[0]
                dims[0] = (n * d, inner_s, inner_ds)
            else:
                dims.insert(0, (d, s, dst_stride))
        dst_stride *= d
    # the first copies: every dimension but the broadcast ones (their index 0)
    moving = [dim for dim in dims if dim[1]]
    width = item
    if moving and moving[-1][1] == item and moving[-1][2] == item:  # a contiguous run
        width = moving.pop()[0] * item
    h = _rows(moving, width, max_pitch)
    height, spitch, dpitch = (moving[h][0], moving[h][1], moving[h][2]) if h is not None else (1, width, width)
    loops = [dim for i, dim in enumerate(moving) if i != h]
    count = math.prod(n for n, _, _ in loops)
    # then each broadcast dimension, innermost first: doubling copies over the dimensions outside it
    repeats = []
    for at in reversed(range(len(dims))):
        n, s, ds = dims[at]
        if s:
            continue
        # the dimensions outside it (outer broadcasts are still at index 0), read and written in the destination
        outer = [(m, dst, dst) for m, src, dst in dims[:at] if src]
        r = _rows(outer, 0, max_pitch)
        rows = (outer[r][0], outer[r][2]) if r is not None else (1, n * ds)
        rest = [dim for i, dim in enumerate(outer) if i != r]
        repeats.append((n, ds, rows, rest))
        count += (n - 1).bit_length() * math.prod(m for m, _, _ in rest)
    if count > limit:
        why = ("run backwards" if any(s < 0 for _, s, _ in loops) else "are scattered") if loops else "repeat"
        raise BufferError(
            f"a device copy of shape {shape} with byte strides {byte_strides} ({item}-byte items) takes {count} "
            f"copies, more than {limit}: its elements {why} in memory; copy it to the host, or with the array "
            "library's own copy"
        )
    plan = [Copy2D(src, dst, width, height, spitch, dpitch) for src, dst in _offsets(loops)]
    for n, ds, (height, pitch), rest in repeats:
        done = 1
        while done < n:
            more = min(done, n - done)
            copies = (Copy2D(off, off + done * ds, more * ds, height, pitch, pitch, True) for off, _ in _offsets(rest))
            plan.extend(copies)
            done += more
    return plan


def from_span(mem: Memory, address: int, owner: object, low: int, span: int) -> Memory:
    """The host copy of device ``mem`` whose :func:`extent` (``low``, ``low + span``) was copied to
    ``address`` (kept alive by ``owner``): compact row-major host memory with ``IS_COPIED``."""
    staged = Memory(
        address, mem.shape, mem.strides, mem.dtype, CPU, -low, mem.readonly, owner,
        int(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED),
    )  # fmt: skip
    compact = contiguous_strides(mem.shape, saturate=not span)
    if all(s == c or d == 1 for d, s, c in zip(mem.shape, mem.strides, compact, strict=True)):
        # already row-major: the staged bytes are the copy
        return staged._replace(strides=compact, readonly=False, flags=staged.flags | Flags.IS_COPIED)
    return copy_host(staged)


class GpuTensors:
    """``empty``, ``asarray``, ``device_of`` and ``copy_to_host`` of one GPU runtime.

    ``runtime`` loads the backend's runtime, ``allocation`` allocates its memory; ``device_types`` maps each
    kind of memory ``empty`` makes (``"device"``, ``"host"``, ...) to its DLPack device type;
    ``pointer_device_types(rt)`` maps what the runtime's pointer attributes say to DLPack device types, and
    ``kind_text`` says a kind DLPack has none for. ``name`` is the backend's (``"cuda"``).
    """

    def __init__(
        self,
        name: str,
        runtime: Callable[[], GpuRuntime],
        allocation: type[GpuAllocation],
        device_types: Mapping[str, DeviceType],
        pointer_device_types: Callable[[GpuRuntime], Mapping[Any, DeviceType]],
        kind_text: Callable[[Any], str],
    ) -> None:
        self.name, self.runtime, self.allocation = name, runtime, allocation
        self.device_types, self.pointer_device_types, self.kind_text = device_types, pointer_device_types, kind_text

    def memory(self, memory: str) -> str:
        return one_of("memory", memory, tuple(self.device_types))

    def new(self, shape: tuple[int, ...], dt: DType, device_id: int, memory: str) -> tuple[dlbind.Tensor, Any]:
        """A tensor owning new ``memory`` on ``device_id`` (none for zero bytes), and its allocation."""
        rt = self.runtime()
        rt.check_device(device_id)
        device = (self.device_types[memory], device_id)
        nbytes = dt.nbytes(math.prod(shape))
        if not nbytes:
            return dlbind.from_dlpack(dlbind.from_pointer(0, shape, dt, device=device)), None
        allocation = self.allocation(rt, nbytes, memory, device_id)
        exporter = dlbind.from_pointer(allocation.address, shape, dt, device=device, owner=allocation)
        return dlbind.from_dlpack(exporter), allocation

    def empty(self, shape: Sequence[int] | int, dtype: Any, device_id: int, memory: str) -> dlbind.Tensor:
        tensor, _ = self.new(as_shape(shape), as_dtype(dtype), device_id, self.memory(memory))
        return tensor

    def asarray(self, host_array: Any, device_id: int, memory: str) -> dlbind.Tensor:
        memory = self.memory(memory)
        self.runtime().check_device(device_id)
        src = host_source(host_array)
        tensor, allocation = self.new(src.shape, src.dtype, device_id, memory)
        if allocation is not None:
            rt = self.runtime()
            kind = rt.sym("MemcpyHostToDevice" if memory == "device" else "MemcpyDefault")
            padded = bool(src.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
            nbytes = src.dtype.nbytes(src.size, padded=padded)
            rt.memcpy(allocation.address, src.data_ptr + src.byte_offset, nbytes, kind, device_id)
        return tensor

    def device_of(self, pointer: int) -> Device:
        rt = self.runtime()
        rt.require()
        if isinstance(pointer, bool) or not isinstance(pointer, int):
            raise TypeError(f"a pointer is an int, not {type(pointer).__name__}")
        kinds = self.pointer_device_types(rt)
        try:
            found = rt.pointer_attributes(pointer)
        except rt.error_type as exc:
            raise BufferError(f"cannot tell which {rt.device_label} device holds {pointer:#x}: {exc}") from exc
        if found is None:
            raise BufferError(
                f"{pointer:#x} is not memory the {rt.runtime_name} runtime knows (plain host memory, or freed)"
            )
        kind, device = found
        if kind not in kinds:
            raise BufferError(
                f"{pointer:#x} is {rt.runtime_name} memory of a kind DLPack has no device type for "
                f"({self.kind_text(kind)})"
            )
        return kinds[kind], device

    def copy_to_host(self, mem: Memory) -> Memory:
        rt = self.runtime()
        rt.require()
        low, high = extent(mem.shape, mem.strides, mem.dtype)
        span = high - low
        host = rt.ffi.new_allocator(should_clear_after_alloc=False)("char[]", max(span, 1))
        address = int(rt.ffi.cast("uintptr_t", host))
        if span:
            start = mem.data + mem.byte_offset + low
            try:
                rt.memcpy(address, start, span, rt.sym("MemcpyDeviceToHost"), mem.device[1])
            except rt.error_type as exc:
                raise BufferError(f"copying {self.name}:{mem.device[1]} memory to the host failed: {exc}") from exc
        return from_span(mem, address, host, low, span)
