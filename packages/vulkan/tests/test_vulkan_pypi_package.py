"""A buffer made with the ``vulkan`` package (cffi bindings of Vulkan on PyPI), used as its users do.

The package's handles are cffi pointers of its own FFI; dlbind_vulkan.wrap takes them as they are.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_vulkan

vk = pytest.importorskip("vulkan", reason="needs the `vulkan` package from PyPI (pip install vulkan)")
pytestmark = pytest.mark.vulkan


class Setup:
    """An instance, a device with one compute queue, and helpers for host-visible buffers, in the
    package's own style (keyword-constructed structs, lists for arrays, exceptions for errors)."""

    def __init__(self) -> None:
        app = vk.VkApplicationInfo(
            sType=vk.VK_STRUCTURE_TYPE_APPLICATION_INFO, pApplicationName="dlbind test", applicationVersion=1,
            pEngineName="none", engineVersion=1, apiVersion=vk.VK_API_VERSION_1_0,
        )  # fmt: skip
        info = vk.VkInstanceCreateInfo(sType=vk.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO, pApplicationInfo=app)
        self.instance = vk.vkCreateInstance(info, None)
        self.physical = vk.vkEnumeratePhysicalDevices(self.instance)[0]
        families = vk.vkGetPhysicalDeviceQueueFamilyProperties(self.physical)
        self.family = next(i for i, f in enumerate(families) if f.queueFlags & vk.VK_QUEUE_COMPUTE_BIT)
        queue = vk.VkDeviceQueueCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, queueFamilyIndex=self.family, queueCount=1,
            pQueuePriorities=[1.0],
        )  # fmt: skip
        create = vk.VkDeviceCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, queueCreateInfoCount=1, pQueueCreateInfos=[queue]
        )
        self.device = vk.vkCreateDevice(self.physical, create, None)
        self.owned: list[tuple[Any, Any]] = []

    def buffer_with(self, data: np.ndarray) -> tuple[Any, Any]:
        usage = vk.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | vk.VK_BUFFER_USAGE_TRANSFER_SRC_BIT
        info = vk.VkBufferCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, size=data.nbytes, usage=usage,
            sharingMode=vk.VK_SHARING_MODE_EXCLUSIVE,
        )  # fmt: skip
        buffer = vk.vkCreateBuffer(self.device, info, None)
        needs = vk.vkGetBufferMemoryRequirements(self.device, buffer)
        props = vk.vkGetPhysicalDeviceMemoryProperties(self.physical)
        want = vk.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | vk.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        index = next(
            i for i in range(props.memoryTypeCount)
            if needs.memoryTypeBits >> i & 1 and props.memoryTypes[i].propertyFlags & want == want
        )  # fmt: skip
        alloc = vk.VkMemoryAllocateInfo(
            sType=vk.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, allocationSize=needs.size, memoryTypeIndex=index
        )
        memory = vk.vkAllocateMemory(self.device, alloc, None)
        vk.vkBindBufferMemory(self.device, buffer, memory, 0)
        mapped = vk.vkMapMemory(self.device, memory, 0, data.nbytes, 0)
        vk.ffi.memmove(mapped, data.tobytes(), data.nbytes)
        vk.vkUnmapMemory(self.device, memory)
        self.owned.append((buffer, memory))
        return buffer, memory

    def close(self) -> None:
        vk.vkDeviceWaitIdle(self.device)
        for buffer, memory in self.owned:
            vk.vkDestroyBuffer(self.device, buffer, None)
            vk.vkFreeMemory(self.device, memory, None)
        vk.vkDestroyDevice(self.device, None)
        vk.vkDestroyInstance(self.instance, None)


@pytest.fixture(scope="module")
def setup() -> Iterator[Setup]:
    s = Setup()
    yield s
    s.close()


def test_wrap_a_buffer_of_the_vulkan_package(setup: Setup) -> None:
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    buffer, memory = setup.buffer_with(a)
    t = dlbind_vulkan.wrap(
        buffer, a.shape, a.dtype, device=setup.device, physical_device=setup.physical,
        queue_family_index=setup.family, memory=memory, size=a.nbytes, instance=setup.instance, owner=setup,
    )  # fmt: skip
    assert t.device == (dlbind.DeviceType.kDLVulkan, 0)  # the same physical device as dlbind's own
    info = dlbind_vulkan.buffer_info(t)
    assert not info.owned and info.device == int(vk.ffi.cast("uintptr_t", setup.device))
    assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), a)
    again = dlbind.from_dlpack(t)  # a second object, zero-copy
    assert again.data_ptr == int(vk.ffi.cast("uintptr_t", buffer))
    # and onto dlbind's own device: download through the package's device, upload through dlbind's
    ours = dlbind_vulkan.asarray(again)
    assert dlbind_vulkan.buffer_info(ours).owned
    assert np.array_equal(np.from_dlpack(ours, device="cpu", copy=True), a)


def test_wrap_a_transposed_view(setup: Setup) -> None:
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    buffer, _ = setup.buffer_with(a)
    t = dlbind_vulkan.wrap(
        buffer, (4, 3), "int32", strides=(1, 4), device=setup.device, physical_device=setup.physical,
        queue_family_index=setup.family, size=a.nbytes,
    )  # fmt: skip
    assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), a.T)
