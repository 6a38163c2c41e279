"""For backends: tensors that own device memory, and the steps every backend's tensors share.

Every backend makes its tensors through the core's producer (``dlbind.from_pointer``, in
:func:`owned_tensor`) with its allocation attached as owner, so the core's export engine, capsules and deleters
serve them unchanged. The helpers (:func:`as_dtype`, :func:`as_shape`, :func:`one_of`, :func:`host_source`,
:func:`extent`, :func:`from_span`) are the argument rules and the host-copy steps of all of them (Vulkan and Metal
included); :func:`copy_plan` decomposes a strided copy into the runtime's 2-D copies (pure, unit-tested);
:class:`GpuTensors` is the whole of ``empty``, ``asarray``, ``device_of``, ``copy_to_host`` (through pinned
memory) and ``copy_on_device`` over a :class:`dlbind._gpu_runtime.GpuRuntime` (CUDA, ROCm).

The core never imports this module: backends do.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import math
import operator
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import dlbind
from dlbind._generated.enums import DeviceType, Flags
from dlbind._gpu_runtime import GpuAllocation, GpuRuntime, PinnedBlock
from dlbind.described import Exporter
from dlbind.devices import HOST_ACCESSIBLE, DevicePair
from dlbind.dtypes import DType, from_numpy, lookup
from dlbind.export import CPU, Memory, byte_span, copy_host
from dlbind.validate import byte_size, contiguous_strides

__all__ = [
    "MAX_COPIES", "Copy2D", "DeviceCopy", "GpuTensors", "as_dtype", "as_shape", "byte_layout", "copy_plan", "extent",
    "from_span", "host_id", "host_source", "one_of", "owned_tensor", "row_major", "run_plan",
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
    tensors of any backend are copied to the host through their backend, host-accessible memory of a device
    (pinned, managed) imported for the CPU (the stream it is ready on synchronised, as for any host reader), strided
    ones compacted."""
    src = dlbind.from_dlpack(array)
    if src.device[0] not in HOST_ACCESSIBLE:
        src = dlbind.from_dlpack(src, device="cpu", copy=True)
    elif src.device[0] != DeviceType.kDLCPU:
        src = dlbind.from_dlpack(src, device="cpu")
    if not src.is_contiguous():
        src = src.copy()
    return src


def host_id(device_type: int, device_id: int) -> int:
    """The DLPack device id of memory of ``device_type`` that GPU ``device_id`` allocated or holds: 0 for memory the
    host reads (pinned, managed), as dlpack.h says ("For vanilla CPU memory, pinned memory, or managed memory, this
    is set to 0"), else ``device_id``."""
    return 0 if device_type in HOST_ACCESSIBLE else device_id


def extent(shape: tuple[int, ...], strides: tuple[int, ...], dt: DType, *, padded: bool = False) -> tuple[int, int]:
    """Bytes (lowest, one past highest) the elements reach, relative to the first element; sub-byte data is
    packed below a byte unless ``padded`` (``IS_SUBBYTE_TYPE_PADDED``: one element per byte)."""
    if not math.prod(shape):
        return 0, 0
    if dt.is_subbyte and not padded:
        if not row_major(shape, strides):  # dimensions of one may have any stride
            raise BufferError(f"strided {dt.name} tensors (packed below a byte) cannot be copied")
        return 0, dt.nbytes(math.prod(shape))
    item = dt.itemsize
    return byte_span(shape, tuple(s * item for s in strides), item)


def row_major(shape: tuple[int, ...], strides: tuple[int, ...], item: int = 1) -> bool:
    """Compact row-major, with strides in elements (or in bytes of ``item``-byte elements; dimensions of one
    may have any stride, and a shape with a 0 in it any strides: no element, as ``Tensor.is_contiguous`` says)."""
    if 0 in shape:
        return True
    expected = item
    for d, s in zip(reversed(shape), reversed(strides), strict=True):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def byte_layout(mem: Memory) -> tuple[tuple[int, ...], tuple[int, ...], int, int]:
    """``(shape, byte strides, item, nbytes)`` of what a copy of ``mem`` moves: its own layout in bytes
    (dimensions of one at stride 0), or, for sub-byte data packed below a byte, one run of ``nbytes`` bytes
    (BufferError when such data is strided: its elements share bytes)."""
    dt, padded = mem.dtype, bool(mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
    nbytes = dt.nbytes(mem.size, padded=padded)
    if dt.bits * dt.lanes % 8 and not padded:
        if mem.size and not row_major(mem.shape, mem.strides):
            raise BufferError(
                f"a strided {dt.name} tensor (packed below a byte, shape {mem.shape}, strides {mem.strides}) "
                "cannot be copied: its elements share bytes"
            )
        return (nbytes,), (1,), 1, nbytes
    item = dt.itemsize
    strides = tuple(s * item if d != 1 else 0 for d, s in zip(mem.shape, mem.strides, strict=True))
    return mem.shape, strides, item, nbytes


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
    dims = _dimensions(shape, byte_strides, item)
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
    return plan + [copy for repeat in repeats for copy in _doubled(*repeat)]


def _doubled(n: int, ds: int, rows: tuple[int, int], rest: list[tuple[int, int, int]]) -> Iterator[Copy2D]:
    """The copies that fill a broadcast dimension of ``n`` (destination stride ``ds``) from its index 0 by
    doubling what is written (1, 2, 4, ... slices), for each offset of the dimensions outside it."""
    height, pitch = rows
    done = 1
    while done < n:
        more = min(done, n - done)
        yield from (Copy2D(off, off + done * ds, more * ds, height, pitch, pitch, True) for off, _ in _offsets(rest))
        done += more


def _dimensions(shape: tuple[int, ...], byte_strides: tuple[int, ...], item: int) -> list[tuple[int, int, int]]:
    """(elements, source stride, destination stride) of each dimension that moves, outermost first: dimensions
    of one dropped, and neighbours that address memory as one dimension would merged."""
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
    return dims


def run_plan(rt: GpuRuntime, plan: Sequence[Copy2D], dst: int, src: int, kind: Any, within: Any, stream: int) -> None:
    """Queue ``plan`` on ``stream`` (on the current device): from the address ``src`` of the source's first
    element to ``dst`` with the copy kind ``kind``, and ``within`` the destination with the kind ``within``."""
    for c in plan:
        base, k = (dst, within) if c.within else (src, kind)
        if c.height == 1:
            rt.memcpy_async(dst + c.dst, base + c.src, c.width, k, stream)
        else:
            rt.memcpy_2d_async(dst + c.dst, c.dpitch, base + c.src, c.spitch, c.width, c.height, k, stream)


def _settle(rt: GpuRuntime, stream: int) -> None:
    """After a failed copy: let what was queued on ``stream`` land before its pinned blocks go back to the pool
    (errors are the failure's own, already being raised)."""
    with contextlib.suppress(rt.error_type):
        rt.synchronize(stream)


class DeviceCopy:
    """The owner of a device copy: its allocation, and the source's owner, kept alive as long as the copy.

    The copies were queued, not finished, when the copy was handed out: the source's memory must not be
    freed or reused (by a caching allocator, on another stream) before they ran. Freeing the allocation
    (``cudaFree``, ``hipFree``) waits for the device, so the source is let go after it (slots are cleared in
    order).
    """

    __slots__ = ("allocation", "source")

    def __init__(self, allocation: GpuAllocation, source: object) -> None:
        self.allocation, self.source = allocation, source


def owned_tensor(
    address: int, shape: tuple[int, ...], dt: DType, device: DevicePair, owner: object, *, padded: bool = False
) -> dlbind.Tensor:
    """A row-major tensor over new memory at ``address`` (0 for no bytes) that ``owner`` keeps alive, with
    ``IS_SUBBYTE_TYPE_PADDED`` when ``padded`` (sub-byte data stored one element per byte)."""
    exporter = dlbind.from_pointer(address, shape, dt, device=device, owner=owner)
    if padded:
        described = exporter._described()
        exporter = Exporter(described._replace(flags=described.flags | int(Flags.IS_SUBBYTE_TYPE_PADDED)))
    return dlbind.from_dlpack(exporter)


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
    """``empty``, ``asarray``, ``device_of``, ``copy_to_host`` and ``copy_on_device`` of one GPU runtime.

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

    def new(
        self, shape: tuple[int, ...], dt: DType, device_id: int, memory: str, *, padded: bool = False
    ) -> tuple[dlbind.Tensor, Any]:
        """A tensor owning new ``memory`` on ``device_id`` (none for zero bytes), and its allocation; sub-byte
        data one element per byte when ``padded``. BufferError before allocating when the size is beyond int64.
        Pinned and managed memory is allocated by ``device_id`` but says device id 0, as dlpack.h says of them."""
        rt = self.runtime()
        rt.check_device(device_id)
        device = (self.device_types[memory], host_id(self.device_types[memory], device_id))
        nbytes = byte_size(shape, dt, padded=padded)
        if not nbytes:
            return owned_tensor(0, shape, dt, device, None, padded=padded), None
        allocation = self.allocation(rt, nbytes, memory, device_id)
        return owned_tensor(allocation.address, shape, dt, device, allocation, padded=padded), allocation

    def empty(self, shape: Sequence[int] | int, dtype: Any, device_id: int, memory: str) -> dlbind.Tensor:
        tensor, _ = self.new(as_shape(shape), as_dtype(dtype), device_id, self.memory(memory))
        return tensor

    def asarray(self, host_array: Any, *, device_id: int = 0, memory: str = "device") -> dlbind.Tensor:
        """Copy an array (anything ``dlbind.from_dlpack`` imports) to a new tensor on this backend's device
        ``device_id``.

        The result is row-major and writable, and owns its memory (``memory``: a kind the backend's ``empty``
        takes). Device tensors of any backend are first copied to the host through their backend.
        """
        memory = self.memory(memory)
        self.runtime().check_device(device_id)
        src = host_source(host_array)
        padded = bool(src.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
        tensor, allocation = self.new(src.shape, src.dtype, device_id, memory, padded=padded)
        if allocation is not None:
            rt = self.runtime()
            kind = rt.sym("MemcpyHostToDevice" if memory == "device" else "MemcpyDefault")
            nbytes = src.dtype.nbytes(src.size, padded=padded)
            rt.memcpy(allocation.address, src.data_ptr + src.byte_offset, nbytes, kind, device_id)
        return tensor

    def device_of(self, pointer: int) -> DevicePair:
        """``(device type, device id)`` of a pointer the backend's runtime knows (its pointer-attributes call).

        The kind of memory says the device type (the backend's ``pointer_device_types``), and the device id is the
        GPU's for device memory, 0 for pinned and managed memory (dlpack.h); memory the runtime does not know (plain
        host memory) is a ``BufferError``.
        """
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
        return kinds[kind], host_id(kinds[kind], device)

    # -- copies ------------------------------------------------------------------------------------------------
    #: Host copies smaller than this land in pageable memory (copied out of a pinned block, which goes back to
    #: the pool at once); larger ones are returned in the pinned block itself.
    HOLD_MIN = 1 << 20
    #: The chunk of the double-buffered staging (when no pinned block can hold the whole copy).
    STAGE_CHUNK = 8 << 20
    #: The most 2-D copies a host copy of a strided layout takes before it copies the span instead.
    HOST_PLAN_LIMIT = 64
    #: The narrowest rows a host copy moves with 2-D copies unless the span is much larger than the data.
    HOST_PLAN_ROW = 512

    def memory_of(self, device_type: int, what: str) -> str:
        """The kind of memory (``"device"``, ``"host"``, ...) of a device type this backend serves."""
        for memory, dtype in self.device_types.items():
            if dtype == device_type:
                return memory
        raise BufferError(f"{what}: device type {device_type} is not {self.name} memory")

    def copy_on_device(self, mem: Memory, stream: int) -> Memory:
        """A compact row-major copy of ``mem`` in a new allocation of the same kind on the same device,
        queued on ``stream`` (a DLPack stream integer of the device's rule, checked by the backend), with no
        host synchronisation.

        Any strides (positive, zero, negative, gaps, transposed) and ``byte_offset``; sub-byte data packed
        below a byte only when row-major. The copies are :func:`copy_plan`'s (``MemcpyAsync`` and
        ``Memcpy2DAsync``; BufferError beyond :data:`MAX_COPIES`); when the data is ready on another stream
        (``mem.stream``), ``stream`` first waits for it (an event). The result has ``IS_COPIED`` (and
        ``IS_SUBBYTE_TYPE_PADDED`` when ``mem`` has it), is writable, has byte_offset 0 and ``stream`` set to
        ``stream``: its consumers on other streams wait for the copy through ``Backend.wait``. Its owner
        frees the allocation with it (never at interpreter exit) and keeps ``mem``'s owner alive as long.
        """
        rt = self.runtime()
        rt.require()
        where = f"{self.name}:{mem.device[1]}"
        memory = self.memory_of(mem.device[0], f"copying {where} memory on the device")
        shape, strides, item, nbytes = byte_layout(mem)
        plan = copy_plan(shape, strides, item)
        flags = Flags.IS_COPIED | (mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED)
        compact = contiguous_strides(mem.shape, saturate=not nbytes)
        if not nbytes:
            return Memory(0, mem.shape, compact, mem.dtype, mem.device, 0, False, None, flags, stream)
        device_id = mem.device[1]
        allocation = self.allocation(rt, nbytes, memory, device_id)
        kind = rt.sym("MemcpyDeviceToDevice" if memory == "device" else "MemcpyDefault")
        try:
            if mem.stream is not None and mem.stream != stream:
                rt.wait(mem.stream, stream, device_id, host=False)
            with rt.on_device(device_id):
                run_plan(rt, plan, allocation.address, mem.data + mem.byte_offset, kind, kind, stream)
        except rt.error_type as exc:
            raise BufferError(f"copying {where} memory on the device failed: {exc}") from exc
        owner = DeviceCopy(allocation, mem.owner)
        return Memory(allocation.address, mem.shape, compact, mem.dtype, mem.device, 0, False, owner, flags, stream)

    def copy_to_host(self, mem: Memory, stream: int | None = None) -> Memory:
        """A compact row-major host copy of device ``mem`` (kDLCPU, ``IS_COPIED``), ready when returned.

        ``stream``: the stream the data is ready on (None: the device's default stream; when ``mem.stream``
        is another, ``stream`` first waits for it). The bytes cross the bus once, by DMA into pinned memory
        from the runtime's :class:`dlbind._gpu_runtime.PinnedPool`, queued on ``stream``, which is then
        synchronised: row-major data with one ``MemcpyAsync``, sparse strided data (rows of at least
        :attr:`HOST_PLAN_ROW` bytes, or a span four times the data) with the few ``Memcpy2DAsync`` of
        :func:`copy_plan`, other strided data (transposed, reversed, broadcast) as the span of bytes its
        elements reach, compacted on the host. A copy of :attr:`HOLD_MIN` bytes or more is returned in its
        pinned block (back to the pool when the copy's last user lets go); smaller ones and compacted spans
        are copied out to pageable memory and the block goes back at once.

        When no pinned block can hold the copy (the runtime cannot pin more, or the pool is at its bound)
        the span is staged through two pinned blocks of :attr:`STAGE_CHUNK` bytes, double-buffered (the DMA
        of one chunk runs while the CPU copies the last); when even those cannot be had, one pageable
        ``Memcpy``.
        """
        rt = self.runtime()
        rt.require()
        device_id = mem.device[1]
        on = rt.default_stream if stream is None else stream
        shape, strides, item, nbytes = byte_layout(mem)
        if not nbytes:
            host = rt.ffi.new("char[]", 1)
            return from_span(mem, int(rt.ffi.cast("uintptr_t", host)), host, 0, 0)
        low, high = byte_span(shape, strides, item)
        kind = rt.sym("MemcpyDeviceToHost" if mem.device[0] == self.device_types["device"] else "MemcpyDefault")
        try:
            if mem.stream is not None and mem.stream != on:
                rt.wait(mem.stream, on, device_id, host=False)
            with rt.on_device(device_id):
                return self._pinned_copy(rt, mem, (shape, strides, item, nbytes), (low, high), kind, on)
        except rt.error_type as exc:
            raise BufferError(f"copying {self.name}:{device_id} memory to the host failed: {exc}") from exc

    def _host_plan(self, layout: tuple[tuple[int, ...], tuple[int, ...], int, int], span: int) -> list[Copy2D] | None:
        """The 2-D copies of a sparse strided layout into compact memory, or None where the span is better."""
        shape, strides, item, nbytes = layout
        try:
            plan = copy_plan(shape, strides, item, limit=self.HOST_PLAN_LIMIT)
        except BufferError:
            return None
        if any(c.within for c in plan) or not (min(c.width for c in plan) >= self.HOST_PLAN_ROW or span > 4 * nbytes):
            return None
        return plan

    def _pinned_copy(
        self,
        rt: GpuRuntime,
        mem: Memory,
        layout: tuple[tuple[int, ...], tuple[int, ...], int, int],
        reach: tuple[int, int],
        kind: Any,
        on: int,
    ) -> Memory:
        shape, strides, item, nbytes = layout
        low, high = reach
        src = mem.data + mem.byte_offset
        compact = row_major(shape, strides, item)
        plan = None if compact else self._host_plan(layout, high - low)
        moved = nbytes if compact or plan is not None else high - low
        try:
            block = rt.pinned_pool().take(moved)
        except (MemoryError, rt.error_type):
            return self._staged_copy(rt, mem, src, reach, kind, on)
        try:
            if compact:
                rt.memcpy_async(block.address, src, nbytes, kind, on)
            elif plan is not None:
                run_plan(rt, plan, block.address, src, kind, kind, on)
            else:
                rt.memcpy_async(block.address, src + low, high - low, kind, on)
            rt.synchronize(on)
        except BaseException:
            _settle(rt, on)
            block.release()
            raise
        padded = mem.flags & Flags.IS_SUBBYTE_TYPE_PADDED
        if compact or plan is not None:
            pinned = Memory(
                block.address, mem.shape, contiguous_strides(mem.shape), mem.dtype, CPU, 0, False, block,
                Flags.IS_COPIED | padded,
            )  # fmt: skip
            if nbytes >= self.HOLD_MIN:
                return pinned
            copied = copy_host(pinned._replace(flags=padded))  # to pageable memory
        else:
            copied = from_span(mem, block.address, block, low, high - low)
        if copied.owner is not block:
            block.release()
        return copied

    def _staged_copy(self, rt: GpuRuntime, mem: Memory, src: int, reach: tuple[int, int], kind: Any, on: int) -> Memory:
        """The span through two pinned chunks, double-buffered, into pageable memory; else one pageable copy."""
        low, high = reach
        span = high - low
        host = rt.ffi.new_allocator(should_clear_after_alloc=False)("char[]", span)
        address = int(rt.ffi.cast("uintptr_t", host))
        chunk = self.STAGE_CHUNK
        count = -(-span // chunk)
        pool = rt.pinned_pool()
        blocks: list[PinnedBlock] = []
        try:
            for _ in range(min(count, 2)):
                blocks.append(pool.take(min(chunk, span), over_bound=True))
        except (MemoryError, rt.error_type):
            for block in blocks:
                block.release()
            if on != rt.default_stream:  # the pageable copy runs on the default stream
                rt.synchronize(on)
            rt.memcpy(address, src + low, span, rt.sym("MemcpyDeviceToHost"), mem.device[1])
            return from_span(mem, address, host, low, span)
        events: list[Any] = []
        done = False
        try:
            for _ in blocks:  # one at a time: those made before a failure are destroyed below
                events.append(rt.new_event())

            def enqueue(i: int) -> None:
                size = min(chunk, span - i * chunk)
                rt.memcpy_async(blocks[i % 2].address, src + low + i * chunk, size, kind, on)
                rt.record_event(events[i % 2], on)

            for i in range(len(blocks)):
                enqueue(i)
            for i in range(count):
                rt.wait_event(events[i % 2])
                ctypes.memmove(address + i * chunk, blocks[i % 2].address, min(chunk, span - i * chunk))
                if i + 2 < count:
                    enqueue(i + 2)
            done = True
        finally:
            if not done:
                _settle(rt, on)
            for event in events:
                rt.destroy_event(event)
            for block in blocks:
                block.release()
        return from_span(mem, address, host, low, span)
