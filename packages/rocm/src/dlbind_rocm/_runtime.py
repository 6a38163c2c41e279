"""The HIP runtime: loading ``libamdhip64``, the probe, errors, the current device, allocations, stream waits.

Nothing here runs at import. :func:`runtime` loads the library on first use and keeps the answer: a
missing library, no driver or no GPU is a :class:`dlbind._backends.Probe` with the one-line reason, and
every call that needs the runtime then raises :class:`Unavailable` with it.

ROCm's DLPack streams (the array API): ``None`` and 0 are the default (NULL) stream, anything else but
-1 a ``hipStream_t``; 1 and 2 are refused by the core before they get here.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Iterator
from typing import Any

from dlbind._backends import Probe, find_library
from dlbind_rocm._generated import _abi
from dlbind_rocm._generated import declarations as decl

__all__ = ["DEFAULT_STREAM", "Allocation", "HipError", "Runtime", "Unavailable", "ffi", "reset", "runtime"]

#: The ABI-mode FFI of the selected declarations.
ffi: Any = _abi.ffi

M = decl.MACROS
DEFAULT_STREAM = 0  # the NULL stream: what DLPack's None and 0 name on ROCm
MEMORY_KINDS = ("device", "host")

# hipPointerAttribute_t's memory type, per runtime major: HIP 6 renumbered the enum (the bound header is
# HIP 5's; spec/backends/rocm.toml). "device" and "host" are DLPack's kDLROCM and kDLROCMHost.
MEMORY_TYPES = {
    5: {0: "host", 1: "device", 2: "array", 3: "managed"},
    6: {0: "unregistered", 1: "host", 2: "device", 3: "managed", 10: "array", 11: "managed"},
}


class HipError(RuntimeError):
    """A HIP runtime call failed: ``call``, ``code`` (the ``hipError_t``), ``name`` and the runtime's own text."""

    def __init__(self, call: str, code: int, name: str, text: str) -> None:
        self.call, self.code, self.name = call, code, name
        said = text if text == name else f"{text} ({name})"
        super().__init__(f"{call} failed: {said}")


class Unavailable(BufferError):
    """The HIP runtime cannot be used here; the message is the probe's one-line reason."""


def _version(v: int) -> str:
    """HIP's encoding (10^7 * major + 10^5 * minor + patch) as "major.minor.patch"."""
    return f"{v // 10_000_000}.{v % 10_000_000 // 100_000}.{v % 100_000}"


def _stream(value: int) -> Any:
    return ffi.cast("hipStream_t", value)


class Runtime:
    """The loaded ``libamdhip64`` and what its probe found."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.path = ""
        self.runtime_version = 0
        self.driver_version = 0
        self.device_count = 0
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
            code = lib.hipRuntimeGetVersion(value)
        except (AttributeError, ffi.error) as exc:  # a library without the runtime's symbols
            return Probe(False, f"runtime error: {self.path} is not a HIP runtime ({exc})")
        if code:
            return Probe(False, f"runtime error: {self.error('hipRuntimeGetVersion', code)}")
        self.runtime_version = value[0]
        described = f"HIP runtime {_version(self.runtime_version)} ({self.path})"
        value[0] = 0
        lib.hipDriverGetVersion(value)
        self.driver_version = value[0]
        count = ffi.new("int *")
        code = lib.hipGetDeviceCount(count)
        if code == lib.hipSuccess and count[0] > 0:
            self.device_count = count[0]
            return Probe(True, "", described, count[0])
        no_gpu = code in (lib.hipSuccess, lib.hipErrorNoDevice, lib.hipErrorInsufficientDriver)
        return Probe(False, self._reason(code), described, 0 if no_gpu else None)

    def _reason(self, code: int) -> str:
        lib = self.lib
        said = f"hipGetDeviceCount: {self.said(code)}"
        if code == lib.hipSuccess or code == lib.hipErrorNoDevice:
            return f"no device: the HIP runtime finds no AMD GPU ({said if code else 'hipGetDeviceCount: 0 devices'})"
        if code == lib.hipErrorInsufficientDriver:
            return f"no driver: {said}; the amdgpu kernel driver (/dev/kfd) is missing or too old"
        return f"runtime error: {said}; HIP runtime {_version(self.runtime_version)}"

    # -- errors ------------------------------------------------------------------------------------------
    def name(self, code: int) -> str:
        return ffi.string(self.lib.hipGetErrorName(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def text(self, code: int) -> str:
        return ffi.string(self.lib.hipGetErrorString(code)).decode(errors="replace")  # type: ignore[no-any-return]

    def said(self, code: int) -> str:
        """The runtime's text and name of ``code`` (HIP's text is often the name itself: once then)."""
        name, text = self.name(code), self.text(code)
        return name if text == name else f"{text} ({name})"

    def error(self, call: str, code: int) -> HipError:
        return HipError(call, code, self.name(code), self.text(code))

    def check(self, code: int, call: str) -> None:
        if code == 0:
            return
        if code == self.lib.hipErrorOutOfMemory:
            raise MemoryError(f"{call} failed: {self.said(code)}")
        raise self.error(call, code)

    def require(self) -> None:
        if not self.probe.available:
            raise Unavailable(f"dlbind-rocm is unavailable: {self.probe.reason}")

    # -- devices -----------------------------------------------------------------------------------------
    def check_device(self, device_id: int) -> int:
        self.require()
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise TypeError(f"device_id must be an int, not {type(device_id).__name__}")
        if not 0 <= device_id < self.device_count:
            raise ValueError(f"no ROCm device {device_id}: this machine has {self.device_count} (ids from 0)")
        return device_id

    @contextlib.contextmanager
    def on_device(self, device_id: int) -> Iterator[None]:
        """Make ``device_id`` the calling thread's current device for the block, then restore the previous one."""
        lib = self.lib
        current = ffi.new("int *")
        self.check(lib.hipGetDevice(current), "hipGetDevice")
        previous = current[0]
        if previous != device_id:
            self.check(lib.hipSetDevice(device_id), "hipSetDevice")
        try:
            yield
        finally:
            if previous != device_id:
                lib.hipSetDevice(previous)

    # -- streams ------------------------------------------------------------------------------------------
    def wait(self, producer_stream: int, consumer_stream: int | None, device_id: int, *, host: bool) -> None:
        """Order the consumer after the work queued on ``producer_stream`` (on ``device_id``).

        ``host``: the consumer reads pinned memory on the CPU: the producer's stream is synchronised.
        Otherwise the consumer's stream (None: the default stream) waits for an event recorded on the
        producer's (nothing when they are the same stream).
        """
        lib = self.lib
        consumer = DEFAULT_STREAM if consumer_stream is None else consumer_stream
        if consumer == producer_stream and not host:
            return
        with self.on_device(device_id):
            if host:
                self.check(lib.hipStreamSynchronize(_stream(producer_stream)), "hipStreamSynchronize")
                return
            event = ffi.new("hipEvent_t *")
            self.check(lib.hipEventCreateWithFlags(event, M["hipEventDisableTiming"]), "hipEventCreateWithFlags")
            try:
                self.check(lib.hipEventRecord(event[0], _stream(producer_stream)), "hipEventRecord")
                self.check(lib.hipStreamWaitEvent(_stream(consumer), event[0], 0), "hipStreamWaitEvent")
            finally:
                lib.hipEventDestroy(event[0])

    # -- copies ---------------------------------------------------------------------------------------------
    def memcpy(self, dst: int, src: int, nbytes: int, kind: int, device_id: int) -> None:
        """A synchronous copy, then the default stream synchronised: the bytes have landed when it returns."""
        lib = self.lib
        with self.on_device(device_id):
            self.check(lib.hipMemcpy(ffi.cast("void *", dst), ffi.cast("void *", src), nbytes, kind), "hipMemcpy")
            self.check(lib.hipStreamSynchronize(_stream(DEFAULT_STREAM)), "hipStreamSynchronize")

    def pointer_attributes(self, pointer: int) -> tuple[str, int] | None:
        """(``"device"``, ``"host"``, ``"managed"``, ``"array"``, device) of a pointer; None when unknown to HIP."""
        lib = self.lib
        attrs = ffi.new("hipPointerAttribute_t *")
        code = lib.hipPointerGetAttributes(attrs, ffi.cast("void *", pointer))
        if code == lib.hipErrorInvalidValue:  # HIP 5: memory it did not allocate or register
            return None
        self.check(code, "hipPointerGetAttributes")
        table = MEMORY_TYPES[min(max(self.runtime_version // 10_000_000, 5), 6)]
        kind = table.get(int(attrs.memoryType), "unknown")
        if kind == "unregistered":
            return None
        if attrs.isManaged:
            kind = "managed"
        return kind, int(attrs.device)


class Allocation:
    """Memory from ``hipMalloc`` (``"device"``) or ``hipHostMalloc`` (``"host"``, pinned), freed with this object.

    Not freed at interpreter exit (the process's end releases it, and the runtime may be unloading).
    """

    def __init__(self, rt: Runtime, nbytes: int, memory: str, device_id: int) -> None:
        lib = rt.lib
        self.size, self.memory, self.device_id = nbytes, memory, device_id
        out = ffi.new("void **")
        with rt.on_device(device_id):
            if memory == "device":
                rt.check(lib.hipMalloc(out, nbytes), "hipMalloc")
                free = lib.hipFree
            else:
                rt.check(lib.hipHostMalloc(out, nbytes, M["hipHostMallocDefault"]), "hipHostMalloc")
                free = lib.hipHostFree
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
    switch ``DLBIND_ROCM_LIBRARY``). Memory allocated before stays with the library that allocated it."""
    global _RUNTIME
    with _RUNTIME_LOCK:
        _RUNTIME = None
