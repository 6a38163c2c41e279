"""The HIP runtime: loading ``libamdhip64``, the probe, errors, the current device, allocations, stream waits.

Nothing here runs at import. :func:`runtime` loads the library on first use and keeps the answer: a
missing library, no driver or no GPU is a :class:`dlbind._backends.Probe` with the one-line reason, and
every call that needs the runtime then raises :class:`Unavailable` with it.

ROCm's DLPack streams (the array API): ``None`` and 0 are the default (NULL) stream, anything else but
-1 a ``hipStream_t``; 1 and 2 are refused by the core before they get here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from dlbind._gpu_runtime import GpuAllocation, GpuError, GpuRuntime, Loaded
from dlbind_rocm._generated import _abi
from dlbind_rocm._generated import declarations as decl

__all__ = ["DEFAULT_STREAM", "Allocation", "HipError", "Runtime", "Unavailable", "ffi", "reset", "runtime"]

#: The ABI-mode FFI of the selected declarations.
ffi: Any = _abi.ffi

DEFAULT_STREAM = 0  # the NULL stream: what DLPack's None and 0 name on ROCm
MEMORY_KINDS = ("device", "host")

# hipPointerAttribute_t's memory type, per runtime major: HIP 6 renumbered the enum (the bound header is
# HIP 5's; spec/backends/rocm.toml). "device" and "host" are DLPack's kDLROCM and kDLROCMHost.
MEMORY_TYPES = {
    5: {0: "host", 1: "device", 2: "array", 3: "managed"},
    6: {0: "unregistered", 1: "host", 2: "device", 3: "managed", 10: "array", 11: "managed"},
}


class HipError(GpuError):
    """A HIP runtime call failed: ``call``, ``code`` (the ``hipError_t``), ``name`` and the runtime's own text."""

    said_once = True


class Unavailable(BufferError):
    """The HIP runtime cannot be used here; the message is the probe's one-line reason."""


def _version(v: int) -> str:
    """HIP's encoding (10^7 * major + 10^5 * minor + patch) as "major.minor.patch"."""
    return f"{v // 10_000_000}.{v % 10_000_000 // 100_000}.{v % 100_000}"


class Runtime(GpuRuntime):
    """The loaded ``libamdhip64`` and what its probe found (the calls: :class:`dlbind._gpu_runtime.GpuRuntime`)."""

    ffi = ffi
    decl = decl
    prefix = "hip"
    runtime_name = "HIP"
    device_label = "ROCm"
    distribution = "dlbind-rocm"
    default_stream = DEFAULT_STREAM
    error_type = HipError
    unavailable = Unavailable
    out_of_memory = "ErrorOutOfMemory"
    pinned = ("HostMalloc", "hipHostMallocPortable", "HostFree")  # pinned for every device
    version = staticmethod(_version)

    def _driver_errors(self) -> tuple[int, ...]:
        return (self.lib.hipErrorInsufficientDriver,)

    def _reason(self, code: int) -> str:
        lib = self.lib
        said = f"hipGetDeviceCount: {self.said(code)}"
        if code == lib.hipSuccess or code == lib.hipErrorNoDevice:
            return f"no device: the HIP runtime finds no AMD GPU ({said if code else 'hipGetDeviceCount: 0 devices'})"
        if code == lib.hipErrorInsufficientDriver:
            return f"no driver: {said}; the amdgpu kernel driver (/dev/kfd) is missing or too old"
        return f"runtime error: {said}; HIP runtime {_version(self.runtime_version)}"

    def pointer_attributes(self, pointer: int) -> tuple[str, int] | None:
        """(``"device"``, ``"host"``, ``"managed"``, ``"array"``, device) of a pointer; None when unknown to HIP
        (HIP 5: ``hipErrorInvalidValue``, HIP 6: unregistered)."""
        attrs = self._attributes(pointer, "hipPointerAttribute_t *")
        if attrs is None:
            return None
        table = MEMORY_TYPES[min(max(self.runtime_version // 10_000_000, 5), 6)]
        kind = table.get(int(attrs.memoryType), "unknown")
        if kind == "unregistered":
            return None
        if attrs.isManaged:
            kind = "managed"
        return kind, int(attrs.device)


class Allocation(GpuAllocation):
    """Memory from ``hipMalloc`` (``"device"``) or ``hipHostMalloc`` (``"host"``, pinned), freed with this object."""

    calls: ClassVar[dict[str, tuple[str, str, str]]] = {
        "device": ("Malloc", "", "Free"),
        "host": ("HostMalloc", "hipHostMallocDefault", "HostFree"),
    }


_RUNTIME = Loaded(Runtime)
#: The process's runtime, loaded on first call (the probe's answer is kept).
runtime = _RUNTIME.get
#: Forget the loaded runtime (tests that switch ``DLBIND_ROCM_LIBRARY``): the next call loads it again.
reset = _RUNTIME.reset
