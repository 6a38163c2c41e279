"""dlbind-vulkan: DLPack tensors on ``kDLVulkan`` devices, in ``VkBuffer``s (docs/backends.md).

``empty`` and ``asarray`` make :class:`dlbind.Tensor` objects that own a buffer on a Vulkan device;
``wrap`` describes a buffer made by other code; ``buffer_info`` tells a consumer how to use the buffer
behind a tensor (its ``VkDevice``, memory, queue family). Importing this module loads no Vulkan library:
the loader is opened on first use, and :func:`probe` says whether Vulkan is usable here.
"""

from __future__ import annotations

from dlbind import __version__  # the core's: each backend is released at its core's version (docs/releasing.md)
from dlbind._backends import Probe
from dlbind_vulkan._generated.declarations import HEADER_VERSION
from dlbind_vulkan._runtime import BufferInfo, Unavailable, VulkanError
from dlbind_vulkan._tensors import asarray, buffer_info, device_of, empty, wrap

__all__ = [
    "HEADER_VERSION",
    "BufferInfo",
    "Unavailable",
    "VulkanError",
    "__version__",
    "asarray",
    "buffer_info",
    "device_of",
    "empty",
    "probe",
    "wrap",
]


def probe() -> Probe:
    """Load the Vulkan runtime (once) and say whether it is usable: see :func:`dlbind.backends`."""
    from dlbind_vulkan._runtime import runtime

    return runtime().probe
