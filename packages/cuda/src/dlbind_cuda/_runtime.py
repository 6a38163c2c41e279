"""The CUDA runtime: loading ``libcudart``, the probe, errors, the current device, allocations, stream waits.

Nothing here runs at import. :func:`runtime` loads the library on first use and keeps the answer: a
missing library, a missing or too old driver, or no GPU is a :class:`dlbind._backends.Probe` with the
one-line reason, and every call that needs the runtime then raises :class:`Unavailable` with it.

DLPack stream integers are the runtime's own handle values: 1 is ``cudaStreamLegacy``, 2 is
``cudaStreamPerThread``, anything else a ``cudaStream_t``; ``None`` from a consumer means the legacy
default stream (the array API's rule). 0 is refused before it gets here.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from dlbind._backends import Probe, find_library
from dlbind_cuda._generated import _abi
from dlbind_cuda._generated import declarations as decl

__all__ = ["LEGACY_STREAM", "PER_THREAD_STREAM", "Allocation", "CudaError", "Runtime", "Unavailable", "ffi", "runtime"]

#: The ABI-mode FFI of the selected declarations.
ffi: Any = _abi.ffi

M = decl.MACROS
LEGACY_STREAM = 1  # cudaStreamLegacy: what DLPack's None and 1 name
PER_THREAD_STREAM = 2  # cudaStreamPerThread

MEMORY_KINDS = ("device", "host", "managed")


class CudaError(RuntimeError):
    """A CUDA runtime call failed: ``call``, ``code`` (the ``cudaError_t``), ``name`` and the runtime's own text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        self.call, self.code, self.name = call, code, name
        super().__init__(f"{call} failed: {text} ({name})")


class Unavailable(BufferError):
    """The CUDA runtime cannot be used here; the message is the probe's one-line reason."""


def _version(v: int) -> str:
    """CUDA's encoding (1000 * major + 10 * minor) as "major.minor"."""
    return f"{v // 1000}.{v % 1000 // 10}"


def _stream(value: int) -> Any:
    return ffi.cast("cudaStream_t", value)


class Runtime:
    """The loaded ``libcudart`` and what its probe found."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.path = ""
        self.runtime_version = 0
        self.driver_version = 0
        self.device_count = 0
        self._lock = threading.Lock()
        self.probe = self._load()

    # -- loading ---------------------------------------------------------------------------------------
    def _load(self) -> Probe:
        try:
            self.lib, self.path = find_library(decl.LIBRARY_ENV, decl.LIBRARY_WHEELS, decl.LIBRARY_NAMES, ffi.dlopen)
        except OSError as exc:
            return Probe(False, str(exc))
        lib = self.lib
        value = ffi.new("int *")
        try:
            code = lib.cudaRuntimeGetVersion(value)
        except (AttributeError, ffi.error) as exc:  # a library without the runtime's symbols
            return Probe(False, f"runtime error: {self.path} is not a CUDA runtime ({exc})")
        if code:
            return Probe(False, f"runtime error: {self.error('cudaRuntimeGetVersion', code)}")
        self.runtime_version = value[0]
        described = f"CUDA runtime {_version(self.runtime_version)} ({self.path})"
        value[0] = 0
        lib.cudaDriverGetVersion(value)  # 0 (and cudaSuccess) when no driver is installed
        self.driver_version = value[0]
        count = ffi.new("int *")
        code = lib.cudaGetDeviceCount(count)
        if code == lib.cudaSuccess and count[0] > 0:
            self.device_count = count[0]
            return Probe(True, "", described, count[0])
        no_gpu = code in (lib.cudaSuccess, lib.cudaErrorNoDevice, *self._driver_errors())
        return Probe(False, self._reason(code), described, 0 if no_gpu else None)

    def _driver_errors(self) -> tuple[int, ...]:
        lib = self.lib
        return lib.cudaErrorInsufficientDriver, lib.cudaErrorStubLibrary, lib.cudaErrorSystemDriverMismatch

    def _reason(self, code: int) -> str:
        """The one line for a ``cudaGetDeviceCount`` that found no usable GPU."""
        lib = self.lib
        said = f"cudaGetDeviceCount: {self.text(code)} ({self.name(code)})"
        runtime_says = f"CUDA runtime {_version(self.runtime_version)}"
        if code == lib.cudaSuccess or code == lib.cudaErrorNoDevice:
            return f"no device: the CUDA driver finds no GPU ({said if code else 'cudaGetDeviceCount: 0 devices'})"
        if code in self._driver_errors():
            if not self.driver_version:
                no_driver = "no NVIDIA driver is loaded (cudaDriverGetVersion: 0)"
                return f"no driver: {said}; {no_driver}, {runtime_says} needs one"
            return (
                f"no driver: {said}; the NVIDIA driver supports CUDA {_version(self.driver_version)}, older than "
                f"the {runtime_says}: update the driver or use a runtime of its version"
            )
        return f"runtime error: {said}; {runtime_says}"

    # -- errors ------------------------------------------------------------------------------------------
    def name(self, code: int) -> str:
        return ffi.string(self.lib.cudaGetErrorName(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def text(self, code: int) -> str:
        return ffi.string(self.lib.cudaGetErrorString(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def error(self, call: str, code: int) -> CudaError:
        return CudaError(call, code, self.name(code), self.text(code))

    def check(self, code: int, call: str) -> None:
        if code == 0:
            return
        if code == self.lib.cudaErrorMemoryAllocation:
            raise MemoryError(f"{call} failed: {self.text(code)} (cudaErrorMemoryAllocation)")
        raise self.error(call, code)

    def require(self) -> None:
        if not self.probe.available:
            raise Unavailable(f"dlbind-cuda is unavailable: {self.probe.reason}")

    # -- devices -----------------------------------------------------------------------------------------
    def check_device(self, device_id: int) -> int:
        self.require()
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise TypeError(f"device_id must be an int, not {type(device_id).__name__}")
        if not 0 <= device_id < self.device_count:
            raise ValueError(f"no CUDA device {device_id}: this machine has {self.device_count} (ids from 0)")
        return device_id

    @contextlib.contextmanager
    def on_device(self, device_id: int) -> Iterator[None]:
        """Make ``device_id`` the calling thread's current device for the block, then restore the previous one."""
        lib = self.lib
        current = ffi.new("int *")
        self.check(lib.cudaGetDevice(current), "cudaGetDevice")
        previous = current[0]
        if previous != device_id:
            self.check(lib.cudaSetDevice(device_id), "cudaSetDevice")
        try:
            yield
        finally:
            if previous != device_id:
                lib.cudaSetDevice(previous)

    # -- streams ------------------------------------------------------------------------------------------
    def wait(self, producer_stream: int, consumer_stream: int | None, device_id: int, *, host: bool) -> None:
        """Order the consumer after the work queued on ``producer_stream`` (on ``device_id``).

        ``host``: the consumer reads on the CPU (pinned or managed memory with ``stream=None``): the
        producer's stream is synchronised. Otherwise an event recorded on the producer's stream is waited
        for by the consumer's (nothing when they are the same stream).
        """
        lib = self.lib
        consumer = LEGACY_STREAM if consumer_stream is None else consumer_stream
        if consumer == producer_stream and not host:
            return  # one stream: its work is ordered already
        with self.on_device(device_id):
            if host:
                self.check(lib.cudaStreamSynchronize(_stream(producer_stream)), "cudaStreamSynchronize")
                return
            event = ffi.new("cudaEvent_t *")
            self.check(lib.cudaEventCreateWithFlags(event, M["cudaEventDisableTiming"]), "cudaEventCreateWithFlags")
            try:
                self.check(lib.cudaEventRecord(event[0], _stream(producer_stream)), "cudaEventRecord")
                self.check(lib.cudaStreamWaitEvent(_stream(consumer), event[0], 0), "cudaStreamWaitEvent")
            finally:
                lib.cudaEventDestroy(event[0])  # released once the wait is satisfied

    # -- copies ---------------------------------------------------------------------------------------------
    def memcpy(self, dst: int, src: int, nbytes: int, kind: int, device_id: int) -> None:
        """A synchronous copy; the legacy default stream is synchronised after it, so the bytes have landed.

        (``cudaMemcpy`` from pageable memory may return before its DMA finishes: a consumer on a
        non-blocking stream would otherwise race it.)
        """
        lib = self.lib
        with self.on_device(device_id):
            self.check(lib.cudaMemcpy(ffi.cast("void *", dst), ffi.cast("void *", src), nbytes, kind), "cudaMemcpy")
            self.check(lib.cudaStreamSynchronize(_stream(LEGACY_STREAM)), "cudaStreamSynchronize")

    def pointer_attributes(self, pointer: int) -> tuple[int, int] | None:
        """``(cudaMemoryType, device)`` of a pointer; None when the runtime does not know it."""
        lib = self.lib
        attrs = ffi.new("struct cudaPointerAttributes *")
        code = lib.cudaPointerGetAttributes(attrs, ffi.cast("void *", pointer))
        if code == lib.cudaErrorInvalidValue:  # before CUDA 11: unregistered host memory
            return None
        self.check(code, "cudaPointerGetAttributes")
        if attrs.type == lib.cudaMemoryTypeUnregistered:
            return None
        return int(attrs.type), int(attrs.device)


class Allocation:
    """Memory from ``cudaMalloc`` (``"device"``), ``cudaMallocHost`` (``"host"``, pinned) or
    ``cudaMallocManaged`` (``"managed"``), freed when this object is.

    Not freed at interpreter exit (the process's end releases it, and the runtime may be unloading).
    """

    def __init__(self, rt: Runtime, nbytes: int, memory: str, device_id: int) -> None:
        lib = rt.lib
        self.size, self.memory, self.device_id = nbytes, memory, device_id
        out = ffi.new("void **")
        with rt.on_device(device_id):
            if memory == "device":
                rt.check(lib.cudaMalloc(out, nbytes), "cudaMalloc")
                free = lib.cudaFree
            elif memory == "host":
                rt.check(lib.cudaMallocHost(out, nbytes), "cudaMallocHost")
                free = lib.cudaFreeHost
            else:
                rt.check(lib.cudaMallocManaged(out, nbytes, M["cudaMemAttachGlobal"]), "cudaMallocManaged")
                free = lib.cudaFree
        self.address = int(ffi.cast("uintptr_t", out[0]))
        finalizer = weakref.finalize(self, free, out[0])
        finalizer.atexit = False


_RUNTIME: Runtime | None = None
_RUNTIME_LOCK = threading.Lock()


def runtime() -> Runtime:
    """The process's runtime, loaded on first call (the probe's answer is kept)."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        if _RUNTIME is None:
            _RUNTIME = Runtime()
        return _RUNTIME


def reset() -> None:
    """Forget the loaded runtime: the next call loads it again, the library search included (for tests that
    switch ``DLBIND_CUDA_LIBRARY``). Memory allocated before stays with the library that allocated it."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        _RUNTIME = None
