"""The object dlbind-vulkan registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a kDLVulkan tensor) imports Python only; the
Vulkan loader is opened by the first :meth:`VulkanBackend.probe` or call that needs it.
"""

from __future__ import annotations

from dlbind._backends import StreamFreeBackend
from dlbind._generated.enums import DeviceType
from dlbind.export import Memory
from dlbind_vulkan import _runtime, _tensors

__all__ = ["VulkanBackend", "backend"]


class VulkanBackend(StreamFreeBackend):
    """kDLVulkan through the system's Vulkan loader (see :class:`dlbind._backends.Backend`): no DLPack stream,
    no device copy yet (:class:`dlbind._backends.StreamFreeBackend`)."""

    name = "vulkan"
    device_types: tuple[int, ...] = (int(DeviceType.kDLVulkan),)
    runtime = staticmethod(_runtime.runtime)
    tensors = _tensors

    def copy_to_host(self, memory: Memory) -> Memory:
        self.runtime().require()  # the loader's reason, where it has none, before any buffer is read
        return _tensors.copy_to_host(memory)


backend = VulkanBackend()
