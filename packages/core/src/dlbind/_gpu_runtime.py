"""For backends: a GPU runtime with devices, streams and events (CUDA's ``libcudart``, HIP's ``libamdhip64``).

The two runtimes have the same shape under different prefixes (``cudaMalloc``, ``hipMalloc``): a backend
subclasses :class:`GpuRuntime` with its prefix, its cffi ``ffi`` and generated declarations, its names for
messages and its default stream, and overrides only what differs (version encoding, the probe's reasons,
pointer attributes). :class:`GpuAllocation` is memory one runtime allocated, freed with the object;
:class:`PinnedPool` keeps the pinned host blocks that host copies land in (:class:`PinnedBlock`, back to the
pool when its last user lets go); :class:`Loaded` keeps the process's runtime; :class:`GpuBackend` is the
object registered under ``dlbind.backends`` (streams checked by the device's rule, the rest handed to the
backend's tensors).

Nothing here loads a library at import, and the core never imports a backend: backends import this (dlbind-metal
and dlbind-vulkan too, for :class:`Loaded`, :func:`checked_device` and :func:`require_available`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Generic, TypeVar

from dlbind._backends import OwnBackend, PassedOver, Probe, find_library
from dlbind.devices import HOST_ACCESSIBLE, DevicePair, device_name

__all__ = [
    "POOL_ENV", "GpuAllocation", "GpuBackend", "GpuError", "GpuRuntime", "Loaded", "PinnedBlock", "PinnedPool",
    "checked_device", "pool_bound", "require_available",
]  # fmt: skip

#: The environment variable that bounds the pinned host memory one runtime's :class:`PinnedPool` holds.
POOL_ENV = "DLBIND_PINNED_POOL_BYTES"
#: Its default: 1 GiB.
DEFAULT_POOL_BYTES = 1 << 30


class GpuError(RuntimeError):
    """A runtime call failed: ``call``, ``code`` (the runtime's error enum), ``name`` and the runtime's own text."""

    #: Say the text once when it is the name itself (HIP's habit).
    said_once: ClassVar[bool] = False

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        self.call, self.code, self.name = call, code, name
        super().__init__(f"{call} failed: {_said(name, text, self.said_once)}")


def _said(name: str, text: str, once: bool) -> str:
    return name if once and text == name else f"{text} ({name})"


def require_available(probe: Probe, distribution: str, unavailable: type[BufferError]) -> None:
    """Raise ``unavailable`` with the probe's reason when a backend's runtime cannot be used (every runtime's,
    Metal's and Vulkan's included): "dlbind-cuda is unavailable: no device: ..."."""
    if not probe.available:
        raise unavailable(f"{distribution} is unavailable: {probe.reason}")


def checked_device(device_id: int, count: int, label: str) -> int:
    """``device_id`` when it is one of the ``count`` devices (ids from 0); TypeError for what is not an int,
    ValueError naming the ``label``'s devices ("no CUDA device 2: this machine has 1 (ids from 0)")."""
    if isinstance(device_id, bool) or not isinstance(device_id, int):
        raise TypeError(f"device_id must be an int, not {type(device_id).__name__}")
    if not 0 <= device_id < count:
        raise ValueError(f"no {label} device {device_id}: this machine has {count} (ids from 0)")
    return device_id


class GpuRuntime:
    """A loaded GPU runtime and what its probe found; subclasses say which runtime.

    The runtime's symbols are ``prefix + name`` (``cudaGetDevice``); ``decl`` is the backend's generated
    declarations (``LIBRARY_ENV``, ``LIBRARY_WHEELS``, ``LIBRARY_NAMES``, ``MACROS``).
    """

    ffi: ClassVar[Any]
    decl: Any  # the generated declarations module
    prefix: ClassVar[str]  # "cuda": the symbols' prefix
    runtime_name: ClassVar[str]  # "CUDA": as in "CUDA runtime 13.0"
    device_label: ClassVar[str]  # "CUDA": as in "no CUDA device 2"
    distribution: ClassVar[str]  # "dlbind-cuda"
    default_stream: ClassVar[int]  # the stream a consumer's None names
    error_type: ClassVar[type[GpuError]] = GpuError
    unavailable: ClassVar[type[BufferError]] = BufferError  # raised, with the probe's reason, when unusable
    out_of_memory: ClassVar[str]  # the error enum's name for a failed allocation, without the prefix
    #: How :meth:`GpuRuntime.host_alloc` pins: (allocating call, its flags' macro, freeing call), the calls without the
    #: prefix: ``("HostAlloc", "cudaHostAllocPortable", "FreeHost")``.
    pinned: ClassVar[tuple[str, str, str]]

    def __init__(self) -> None:
        self.lib: Any = None
        self.path = ""
        self.runtime_version = 0
        self.driver_version = 0
        self.device_count = 0
        self._pool: PinnedPool | None = None
        self._pool_lock = threading.Lock()
        self.probe = self._load()

    def sym(self, name: str) -> Any:
        """The runtime's ``prefix + name`` (a function or an enum value)."""
        return getattr(self.lib, self.prefix + name)

    def _stream(self, value: int) -> Any:
        return self.ffi.cast(f"{self.prefix}Stream_t", value)

    # -- what subclasses say -----------------------------------------------------------------------------
    @staticmethod
    def version(v: int) -> str:
        """The runtime's version integer as text."""
        raise NotImplementedError

    def _driver_errors(self) -> tuple[int, ...]:
        """The codes of ``GetDeviceCount`` that mean a missing or too old driver."""
        raise NotImplementedError

    def _reason(self, code: int) -> str:
        """The one line for a ``GetDeviceCount`` that found no usable GPU."""
        raise NotImplementedError

    # -- loading ---------------------------------------------------------------------------------------
    def _load(self) -> Probe:
        ffi, decl = self.ffi, self.decl
        try:
            self.lib, self.path = find_library(decl.LIBRARY_ENV, decl.LIBRARY_WHEELS, decl.LIBRARY_NAMES, self._open)
        except OSError as exc:
            return Probe(False, str(exc))
        try:  # every function the declarations bind, found now: a library without one (a stub, a wrong build) is
            for name in dir(self.lib):  # no runtime, said once and kept, not a cffi error at the first call
                if name.startswith(self.prefix):
                    getattr(self.lib, name)
        except (AttributeError, ffi.error) as exc:
            return Probe(False, f"runtime error: {self.path} is not a {self.runtime_name} runtime ({exc})")
        value = ffi.new("int *")
        code = self.sym("RuntimeGetVersion")(value)
        if code:
            return Probe(False, f"runtime error: {self.error(self.prefix + 'RuntimeGetVersion', code)}")
        self.runtime_version = value[0]
        described = f"{self.runtime_name} runtime {self.version(self.runtime_version)} ({self.path})"
        value[0] = 0
        self.sym("DriverGetVersion")(value)  # 0 (and success) when no driver is installed
        self.driver_version = value[0]
        count = ffi.new("int *")
        code = self.sym("GetDeviceCount")(count)
        if code == self.sym("Success") and count[0] > 0:
            self.device_count = count[0]
            return Probe(True, "", described, count[0])
        no_gpu = code in (self.sym("Success"), self.sym("ErrorNoDevice"), *self._driver_errors())
        return Probe(False, self._reason(code), described, 0 if no_gpu else None)

    def _open(self, path: str) -> Any:
        """``ffi.dlopen(path)``; :class:`dlbind._backends.PassedOver` where its runtime is older than the oldest the
        binding serves (``LIBRARY_OLDEST``, spec/backends/*.toml): the search goes on (an old libcudart, found
        by its bare name, before a newer one later in the list)."""
        lib = self.ffi.dlopen(path)
        oldest = self.decl.LIBRARY_OLDEST
        try:
            ask = getattr(lib, self.prefix + "RuntimeGetVersion")
        except (AttributeError, self.ffi.error):
            return lib  # no runtime at all: said by _load, which finds every function
        value = self.ffi.new("int *")
        if oldest is not None and ask(value) == 0 and value[0] < oldest:
            raise PassedOver(
                f"{self.runtime_name} runtime {self.version(value[0])}, older than {self.version(oldest)}, the "
                f"oldest {self.distribution} binds"
            )
        return lib

    # -- errors ------------------------------------------------------------------------------------------
    def name(self, code: int) -> str:
        return self.ffi.string(self.sym("GetErrorName")(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def text(self, code: int) -> str:
        return self.ffi.string(self.sym("GetErrorString")(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def said(self, code: int) -> str:
        """The runtime's text and name of ``code`` (said once where the text is the name and the runtime does so)."""
        return _said(self.name(code), self.text(code), self.error_type.said_once)

    def error(self, call: str, code: int) -> GpuError:
        return self.error_type(call, code, self.name(code), self.text(code))

    def check(self, code: int, call: str) -> None:
        if code == 0:
            return
        if code == self.sym(self.out_of_memory):
            raise MemoryError(f"{call} failed: {self.said(code)}")
        raise self.error(call, code)

    def require(self) -> None:
        require_available(self.probe, self.distribution, self.unavailable)

    # -- devices -----------------------------------------------------------------------------------------
    def check_device(self, device_id: int) -> int:
        self.require()
        return checked_device(device_id, self.device_count, self.device_label)

    @contextlib.contextmanager
    def on_device(self, device_id: int) -> Iterator[None]:
        """Make ``device_id`` the calling thread's current device for the block, then restore the previous one."""
        p = self.prefix
        current = self.ffi.new("int *")
        self.check(self.sym("GetDevice")(current), p + "GetDevice")
        previous = current[0]
        if previous != device_id:
            self.check(self.sym("SetDevice")(device_id), p + "SetDevice")
        try:
            yield
        finally:
            if previous != device_id:
                self.sym("SetDevice")(previous)

    # -- streams ------------------------------------------------------------------------------------------
    def wait(self, producer_stream: int, consumer_stream: int | None, device_id: int, *, host: bool) -> None:
        """Order the consumer after the work queued on ``producer_stream`` (on ``device_id``).

        ``host``: the consumer reads on the CPU (pinned or managed memory with ``stream=None``): the
        producer's stream is synchronised. Otherwise the consumer's stream (None: the default stream)
        waits for an event recorded on the producer's (nothing when they are the same stream).
        """
        ffi, p = self.ffi, self.prefix
        consumer = self.default_stream if consumer_stream is None else consumer_stream
        if consumer == producer_stream and not host:
            return  # one stream: its work is ordered already
        with self.on_device(device_id):
            if host:
                self.check(self.sym("StreamSynchronize")(self._stream(producer_stream)), p + "StreamSynchronize")
                return
            event = ffi.new(f"{p}Event_t *")
            flags = self.decl.MACROS[p + "EventDisableTiming"]
            self.check(self.sym("EventCreateWithFlags")(event, flags), p + "EventCreateWithFlags")
            try:
                self.check(self.sym("EventRecord")(event[0], self._stream(producer_stream)), p + "EventRecord")
                self.check(self.sym("StreamWaitEvent")(self._stream(consumer), event[0], 0), p + "StreamWaitEvent")
            finally:
                self.sym("EventDestroy")(event[0])  # released once the wait is satisfied

    # -- copies ---------------------------------------------------------------------------------------------
    def memcpy(self, dst: int, src: int, nbytes: int, kind: int, device_id: int) -> None:
        """A synchronous copy; the default stream is synchronised after it, so the bytes have landed.

        (``cudaMemcpy`` from pageable memory may return before its DMA finishes: a consumer on a
        non-blocking stream would otherwise race it.)
        """
        ffi, p = self.ffi, self.prefix
        with self.on_device(device_id):
            code = self.sym("Memcpy")(ffi.cast("void *", dst), ffi.cast("void *", src), nbytes, kind)
            self.check(code, p + "Memcpy")
            self.check(self.sym("StreamSynchronize")(self._stream(self.default_stream)), p + "StreamSynchronize")

    def memcpy_async(self, dst: int, src: int, nbytes: int, kind: int, stream: int) -> None:
        """``MemcpyAsync`` on ``stream`` (a DLPack stream integer of the device's rule), on the current device."""
        ffi = self.ffi
        code = self.sym("MemcpyAsync")(ffi.cast("void *", dst), ffi.cast("void *", src), nbytes, kind,
                                       self._stream(stream))  # fmt: skip
        self.check(code, self.prefix + "MemcpyAsync")

    def memcpy_2d_async(
        self, dst: int, dpitch: int, src: int, spitch: int, width: int, height: int, kind: int, stream: int
    ) -> None:
        """``Memcpy2DAsync``: ``height`` rows of ``width`` bytes, ``spitch`` apart in ``src``, ``dpitch`` in ``dst``."""
        ffi = self.ffi
        code = self.sym("Memcpy2DAsync")(ffi.cast("void *", dst), dpitch, ffi.cast("void *", src), spitch, width,
                                         height, kind, self._stream(stream))  # fmt: skip
        self.check(code, self.prefix + "Memcpy2DAsync")

    def synchronize(self, stream: int) -> None:
        """Wait on the host until the work queued on ``stream`` has finished."""
        self.check(self.sym("StreamSynchronize")(self._stream(stream)), self.prefix + "StreamSynchronize")

    def new_event(self) -> Any:
        """An event without timing (destroy it with :meth:`destroy_event`)."""
        p = self.prefix
        event = self.ffi.new(f"{p}Event_t *")
        self.check(self.sym("EventCreateWithFlags")(event, self.decl.MACROS[p + "EventDisableTiming"]),
                   p + "EventCreateWithFlags")  # fmt: skip
        return event[0]

    def record_event(self, event: Any, stream: int) -> None:
        self.check(self.sym("EventRecord")(event, self._stream(stream)), self.prefix + "EventRecord")

    def wait_event(self, event: Any) -> None:
        """Wait on the host until the work recorded in ``event`` has finished."""
        self.check(self.sym("EventSynchronize")(event), self.prefix + "EventSynchronize")

    def destroy_event(self, event: Any) -> None:
        self.sym("EventDestroy")(event)

    def pointer_attributes(self, pointer: int) -> tuple[Any, int] | None:
        """``(memory kind, device)`` of a pointer; None when the runtime does not know it."""
        raise NotImplementedError

    def _attributes(self, pointer: int, struct: str) -> Any:
        """``PointerGetAttributes`` of ``pointer`` into a new ``struct``; None where the runtime refuses the
        pointer as an invalid value (memory it does not know: CUDA before 11, HIP 5)."""
        ffi = self.ffi
        attrs = ffi.new(struct)
        code = self.sym("PointerGetAttributes")(attrs, ffi.cast("void *", pointer))
        if code == self.sym("ErrorInvalidValue"):
            return None
        self.check(code, self.prefix + "PointerGetAttributes")
        return attrs

    # -- pinned host memory --------------------------------------------------------------------------------
    def host_alloc(self, nbytes: int) -> tuple[int, Callable[[Any], Any]]:
        """``nbytes`` of pinned (page-locked) host memory, portable to every device, on the current device's
        context (the runtime's :attr:`pinned` calls): ``(address, what frees it)``; MemoryError when the
        runtime has none left."""
        ffi, (call, flags, free) = self.ffi, self.pinned
        out = ffi.new("void **")
        self.check(self.sym(call)(out, nbytes, self.decl.MACROS[flags]), self.prefix + call)
        release = self.sym(free)
        return int(ffi.cast("uintptr_t", out[0])), lambda address: release(ffi.cast("void *", address))

    def pinned_pool(self) -> PinnedPool:
        """The pool of pinned blocks host copies land in (one per loaded runtime), bounded by
        ``$DLBIND_PINNED_POOL_BYTES`` as it was when the pool was first needed."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = PinnedPool(self.host_alloc, pool_bound())
            return self._pool


class GpuAllocation:
    """Memory one runtime allocated on ``device_id``, freed when this object is.

    Not freed at interpreter exit (the process's end releases it, and the runtime may be unloading).
    Subclasses say how each kind of ``memory`` is allocated in :attr:`calls` (or override :meth:`_allocate`).
    """

    #: memory kind -> (allocating call, its flags' macro or "" for a call without flags, freeing call), the
    #: calls without the runtime's prefix: ``{"device": ("Malloc", "", "Free"), ...}``.
    calls: ClassVar[dict[str, tuple[str, str, str]]] = {}

    def __init__(self, rt: GpuRuntime, nbytes: int, memory: str, device_id: int) -> None:
        self.size, self.memory, self.device_id = nbytes, memory, device_id
        out = rt.ffi.new("void **")
        with rt.on_device(device_id):
            free = self._allocate(rt, out, nbytes, memory)
        self.address = int(rt.ffi.cast("uintptr_t", out[0]))
        finalizer = weakref.finalize(self, free, out[0])
        finalizer.atexit = False

    def _allocate(self, rt: GpuRuntime, out: Any, nbytes: int, memory: str) -> Callable[[Any], Any]:
        """Allocate ``nbytes`` of ``memory`` into ``out[0]`` (on the current device); return what frees it."""
        call, flags, free = self.calls[memory]
        args = (out, nbytes, rt.decl.MACROS[flags]) if flags else (out, nbytes)
        rt.check(rt.sym(call)(*args), rt.prefix + call)
        return rt.sym(free)  # type: ignore[no-any-return]


def pool_bound() -> int:
    """``$DLBIND_PINNED_POOL_BYTES`` (bytes; a ``K``, ``M`` or ``G`` suffix is binary), or 1 GiB when unset."""
    text = os.environ.get(POOL_ENV, "").strip()
    if not text:
        return DEFAULT_POOL_BYTES
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1].upper(), 1)
    number = text[:-1] if scale != 1 else text
    try:
        value = int(number) * scale
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{POOL_ENV}={text!r} is not a number of bytes (such as 1073741824, 512M or 2G)")
    return value


class PinnedBlock:
    """Pinned host memory leased from a :class:`PinnedPool`: ``address`` and ``size`` (its size class, at
    least what was asked). The block goes back to the pool when this object dies or :meth:`release` is called
    (not at interpreter exit: the process's end frees it)."""

    __slots__ = ("__weakref__", "_finalizer", "address", "size")

    def __init__(self, pool: PinnedPool, address: int, size: int, free: Callable[[Any], Any]) -> None:
        self.address, self.size = address, size
        self._finalizer = weakref.finalize(self, pool._give_back, address, size, free)
        self._finalizer.atexit = False

    def release(self) -> None:
        """Give the block back now (it must not be used after)."""
        self._finalizer()


class PoolFull(MemoryError):
    """The pool's bound leaves no room for a block: its pinned blocks are all in use."""


class PinnedPool:
    """Pinned host blocks for host copies, reused: the bytes cross the bus once, at the DMA engine's speed.

    ``allocate(nbytes)`` pins new memory (``(address, free)``, MemoryError when it cannot). Blocks come in
    size classes (powers of two split in quarters, from :attr:`MIN_BLOCK`), so a copy of a similar size reuses
    an idle block. ``bound`` caps the pinned bytes the pool has out (leased and idle together): idle blocks
    are freed, largest first, to make room for a new one; a request that does not fit beside the leased ones
    is :class:`PoolFull` (callers then stage through small blocks, ``over_bound=True``); a block given back
    when the pool holds more than the bound is freed. Thread-safe (a re-entrant lock: a block may be given
    back by the garbage collector in the middle of a lease).
    """

    MIN_BLOCK = 1 << 20

    def __init__(self, allocate: Callable[[int], tuple[int, Callable[[Any], Any]]], bound: int) -> None:
        self.allocate, self.bound = allocate, bound
        self._lock = threading.RLock()
        self._idle: dict[int, list[tuple[int, Callable[[Any], Any]]]] = {}  # size -> [(address, free)]
        self.leased = 0  # bytes
        self.idle = 0  # bytes

    @classmethod
    def size_class(cls, nbytes: int) -> int:
        """The block size that serves ``nbytes``: at least :attr:`MIN_BLOCK`, at most 25 % more than asked."""
        if nbytes <= cls.MIN_BLOCK:
            return cls.MIN_BLOCK
        step = 1 << max((nbytes - 1).bit_length() - 3, 0)
        return -(-nbytes // step) * step

    def take(self, nbytes: int, *, over_bound: bool = False) -> PinnedBlock:
        """A block of at least ``nbytes``: an idle one of its size class, else newly pinned memory.

        PoolFull when it would take the pool past its bound (unless ``over_bound``: small staging blocks);
        MemoryError when the runtime cannot pin more.
        """
        size = self.size_class(nbytes)
        evicted: list[tuple[int, Callable[[Any], Any]]] = []
        with self._lock:
            idle = self._idle.get(size)
            if idle:
                address, free = idle.pop()
                self.idle -= size
                self.leased += size
                return PinnedBlock(self, address, size, free)
            if not over_bound and self.leased + size > self.bound:
                raise PoolFull(
                    f"the pinned pool is full: {self.leased} of its {self.bound} bytes are in use and a copy needs "
                    f"{size} more (raise {POOL_ENV})"
                )
            for other in sorted(self._idle, reverse=True):
                while self._idle[other] and self.leased + self.idle + size > self.bound:
                    evicted.append(self._idle[other].pop())
                    self.idle -= other
            self.leased += size  # reserved while it is being pinned
        for address, free in evicted:
            free(address)
        try:
            address, free = self.allocate(size)
        except BaseException:
            with self._lock:
                self.leased -= size
            raise
        return PinnedBlock(self, address, size, free)

    def _give_back(self, address: int, size: int, free: Callable[[Any], Any]) -> None:
        with self._lock:
            self.leased -= size
            if self.leased + self.idle + size <= self.bound:
                self._idle.setdefault(size, []).append((address, free))
                self.idle += size
                return
        free(address)

    def trim(self) -> None:
        """Free every idle block now."""
        with self._lock:
            idle = [block for blocks in self._idle.values() for block in blocks]
            self._idle.clear()
            self.idle = 0
        for address, free in idle:
            free(address)


R = TypeVar("R")


class Loaded(Generic[R]):
    """The process's runtime: made on first :meth:`get` (the probe's answer is kept), forgotten by :meth:`reset`.

    A backend's ``_runtime`` module binds the two as its ``runtime`` and ``reset`` (GPU runtimes, Metal,
    Vulkan alike).
    """

    def __init__(self, make: Callable[[], R]) -> None:
        self._make = make
        self._value: R | None = None
        self._lock = threading.Lock()

    def get(self) -> R:
        """The process's runtime, loaded on first call (the probe's answer is kept)."""
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value

    def reset(self) -> None:
        """Forget the loaded runtime: the next :meth:`get` loads it again, the library search included (for
        tests that switch ``DLBIND_<NAME>_LIBRARY``). Memory allocated before stays with the library that
        allocated it."""
        with self._lock:
            self._value = None


class GpuBackend(OwnBackend):
    """The object a GPU backend registers under ``dlbind.backends`` (see :class:`dlbind._backends.Backend`).

    Subclasses give ``name``, ``device_types``, ``runtime`` (the backend's loader, a staticmethod),
    ``tensors`` (the module with ``copy_to_host``, ``device_of``, ``empty``, ``asarray``) and the device's
    rule for a producer's stream (:meth:`refuses`, :meth:`refusal`).
    """

    @staticmethod
    def runtime() -> GpuRuntime:
        raise NotImplementedError

    def refuses(self, producer_stream: int) -> bool:
        """True when ``producer_stream`` is no stream of the device's rule."""
        raise NotImplementedError

    def refusal(self, producer_stream: int) -> str:
        """The message of a refused producer's stream."""
        raise NotImplementedError

    def wait(self, producer_stream: int, consumer_stream: int | None, device: DevicePair) -> None:
        rt = self.runtime()
        rt.require()
        if isinstance(producer_stream, bool) or not isinstance(producer_stream, int):
            raise TypeError(f"the producer's stream must be an int, not {type(producer_stream).__name__}")
        if self.refuses(producer_stream):
            raise BufferError(self.refusal(producer_stream))
        host = consumer_stream is None and device[0] in HOST_ACCESSIBLE
        try:
            rt.wait(producer_stream, consumer_stream, device[1], host=host)
        except rt.error_type as exc:
            where = f"{device_name(device[0])}:{device[1]}"
            raise BufferError(f"synchronising {where} streams failed: {exc}") from exc

    def check_stream(self, stream: Any, what: str) -> int:
        """``stream`` as an int of the device's rule; TypeError for other types, BufferError for values the
        rule refuses (``what`` names the stream: "the copy's stream")."""
        if isinstance(stream, bool) or not isinstance(stream, int):
            raise TypeError(f"{what} must be an int, not {type(stream).__name__}")
        if self.refuses(stream):
            raise BufferError(self.refusal(stream).replace("the producer's stream", what, 1))
        return stream

    def copy_to_host(self, memory: Any, stream: int | None = None) -> Any:
        """A compact row-major host copy of device ``memory`` (kDLCPU, ``IS_COPIED``), ready when returned.

        ``stream``: the stream the data is ready on (None: the device's default stream); the copy is queued
        on it, then the stream is synchronised. See ``GpuTensors.copy_to_host``.
        """
        if stream is not None:
            self.check_stream(stream, "the host copy's stream")
        return self.tensors.copy_to_host(memory, stream)

    def copy_on_device(self, memory: Any, stream: int) -> Any:
        """A compact row-major copy of ``memory`` in a new allocation on its device, queued on ``stream``
        (a DLPack stream integer, never None here), with no host synchronisation. See
        ``GpuTensors.copy_on_device``."""
        return self.tensors.copy_on_device(memory, self.check_stream(stream, "the copy's stream"))
