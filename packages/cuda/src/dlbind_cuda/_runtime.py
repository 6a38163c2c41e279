"""The CUDA runtime: loading ``libcudart``, the probe, errors, the current device, allocations, stream waits.

Nothing here runs at import. :func:`runtime` loads the library on first use and keeps the answer: a
missing library, a missing or too old driver, or no GPU is a :class:`dlbind._backends.Probe` with the
one-line reason, and every call that needs the runtime then raises :class:`Unavailable` with it.

DLPack stream integers are the runtime's own handle values: 1 is ``cudaStreamLegacy``, 2 is
``cudaStreamPerThread``, anything else a ``cudaStream_t``; ``None`` from a consumer means the legacy
default stream (the array API's rule). 0 is refused before it gets here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dlbind._gpu_runtime import GpuAllocation, GpuError, GpuRuntime, Loaded
from dlbind_cuda._generated import _abi
from dlbind_cuda._generated import declarations as decl

__all__ = [
    "LEGACY_STREAM", "PER_THREAD_STREAM", "Allocation", "CudaError", "Runtime", "Unavailable", "ffi", "reset",
    "runtime",
]  # fmt: skip

#: The ABI-mode FFI of the selected declarations.
ffi: Any = _abi.ffi

LEGACY_STREAM = 1  # cudaStreamLegacy: what DLPack's None and 1 name
PER_THREAD_STREAM = 2  # cudaStreamPerThread

MEMORY_KINDS = ("device", "host", "managed")


class CudaError(GpuError):
    """A CUDA runtime call failed: ``call``, ``code`` (the ``cudaError_t``), ``name`` and the runtime's own text."""


class Unavailable(BufferError):
    """The CUDA runtime cannot be used here; the message is the probe's one-line reason."""


def _version(v: int) -> str:
    """CUDA's encoding (1000 * major + 10 * minor) as "major.minor"."""
    return f"{v // 1000}.{v % 1000 // 10}"


class Runtime(GpuRuntime):
    """The loaded ``libcudart`` and what its probe found (the calls: :class:`dlbind._gpu_runtime.GpuRuntime`)."""

    ffi = ffi
    decl = decl
    prefix = "cuda"
    runtime_name = device_label = "CUDA"
    distribution = "dlbind-cuda"
    default_stream = LEGACY_STREAM
    error_type = CudaError
    unavailable = Unavailable
    out_of_memory = "ErrorMemoryAllocation"
    pinned = ("HostAlloc", "cudaHostAllocPortable", "FreeHost")  # pinned for every device's context
    version = staticmethod(_version)

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

    def pointer_attributes(self, pointer: int) -> tuple[int, int] | None:
        """``(cudaMemoryType, device)`` of a pointer; None when the runtime does not know it (before CUDA 11,
        ``cudaErrorInvalidValue`` for unregistered host memory)."""
        attrs = self._attributes(pointer, "struct cudaPointerAttributes *")
        if attrs is None or attrs.type == self.lib.cudaMemoryTypeUnregistered:
            return None
        return int(attrs.type), int(attrs.device)


class Allocation(GpuAllocation):
    """Memory from ``cudaMalloc`` (``"device"``), ``cudaMallocHost`` (``"host"``, pinned) or
    ``cudaMallocManaged`` (``"managed"``, attached globally), freed when this object is."""

    calls: ClassVar[dict[str, tuple[str, str, str]]] = {
        "device": ("Malloc", "", "Free"),
        "host": ("MallocHost", "", "FreeHost"),
        "managed": ("MallocManaged", "cudaMemAttachGlobal", "Free"),
    }


_RUNTIME = Loaded(Runtime)
#: The process's runtime, loaded on first call (the probe's answer is kept).
runtime = _RUNTIME.get
#: Forget the loaded runtime (tests that switch ``DLBIND_CUDA_LIBRARY``): the next call loads it again.
reset = _RUNTIME.reset
