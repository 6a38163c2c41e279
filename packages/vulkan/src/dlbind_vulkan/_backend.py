"""The object dlbind-vulkan registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a kDLVulkan tensor) imports Python only; the
Vulkan loader is opened by the first :meth:`VulkanBackend.probe` or call that needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._backends import Probe
from dlbind._generated.enums import DeviceType
from dlbind.devices import Device
from dlbind.export import Memory
from dlbind_vulkan import _runtime, _tensors

__all__ = ["VulkanBackend", "backend"]


class VulkanBackend:
    """kDLVulkan through the system's Vulkan loader (see :class:`dlbind._backends.Backend`)."""

    name = "vulkan"
    device_types: tuple[int, ...] = (int(DeviceType.kDLVulkan),)

    def probe(self) -> Probe:
        return _runtime.runtime().probe

    def wait(self, producer_stream: int, consumer_stream: int | None, device: Device) -> None:
        # kDLVulkan has no DLPack streams (spec/devices.toml: None only): every buffer dlbind hands over
        # has no queued writes. The core refuses any other stream value before it gets here.
        raise BufferError("Vulkan tensors have no DLPack streams: pass stream=None")

    def copy_to_host(self, memory: Memory) -> Memory:
        _runtime.runtime().require()
        return _tensors.copy_to_host(memory)

    def copy_on_device(self, memory: Memory, stream: int) -> Memory:
        """No device copy yet: BufferError saying so (a host copy is :meth:`copy_to_host`)."""
        raise BufferError(
            "dlbind-vulkan has no device copy yet: kDLVulkan memory is copied to the host only; copy it with the "
            "array library that made it"
        )

    def device_of(self, pointer: int) -> Device:
        return _tensors.device_of(pointer)

    def empty(self, shape: Sequence[int], dtype: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.empty(shape, dtype, device_id=device_id)

    def asarray(self, host_array: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.asarray(host_array, device_id=device_id)


backend = VulkanBackend()
