"""The Vulkan runtime: the loader, one instance, a device context per physical device, buffers and copies.

Nothing here runs at import. :func:`runtime` loads the library and creates the instance on first use and
remembers the answer (a missing loader or driver is an :class:`Unavailable` with the one-line reason).
Every copy is synchronous: recorded in a command buffer, submitted with a fence, waited for. That is the
synchronisation convention of ``kDLVulkan`` in dlbind (docs/backends.md): when a buffer is handed over,
no queued work writes it.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import weakref
from dataclasses import dataclass
from typing import Any

from dlbind._backends import Probe, find_library
from dlbind._gpu_runtime import Loaded, checked_device, require_available
from dlbind_vulkan._generated import _abi
from dlbind_vulkan._generated import declarations as decl

__all__ = ["BufferInfo", "Context", "Runtime", "Unavailable", "VulkanError", "ffi", "known", "lookup", "runtime"]

#: The ABI-mode FFI of the selected declarations (typed loosely: its structs are Vulkan's).
ffi: Any = _abi.ffi

M = decl.MACROS
_TIMEOUT_NS = 60 * 10**9  # a copy that takes a minute is a hung device


class VulkanError(RuntimeError):
    """A Vulkan call failed; ``result`` is the ``VkResult`` code."""

    def __init__(self, call: str, result: int) -> None:
        self.result = result
        try:
            name = ffi.string(ffi.cast("VkResult", result))
        except Exception:  # an unknown code
            name = str(result)
        super().__init__(f"{call} failed: {name}")


class Unavailable(BufferError):
    """The Vulkan runtime cannot be used here; the message is the probe's one-line reason."""


def _check(result: int, call: str) -> None:
    if result < 0:
        if result in (-1, -2):  # VK_ERROR_OUT_OF_HOST_MEMORY, VK_ERROR_OUT_OF_DEVICE_MEMORY
            raise MemoryError(f"{call} failed: out of {'host' if result == -1 else 'device'} memory")
        raise VulkanError(call, result)


def _address(handle: Any) -> int:
    """A handle as an int: cffi pointers of any FFI (this one's, the ``vulkan`` package's) or an int."""
    if isinstance(handle, int):
        return handle
    if isinstance(handle, ffi.CData):
        return int(ffi.cast("uintptr_t", handle))
    raise TypeError(f"a Vulkan handle is an int or a cffi pointer, not {type(handle).__name__}")


def _version(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


@dataclass(frozen=True)
class PhysicalDevice:
    index: int  # the device_id of kDLVulkan tensors
    handle: Any
    name: str
    api_version: str
    vendor_id: int
    device_id: int
    identity: bytes  # vendor, device, driver version and pipeline-cache UUID: matches across instances


def _identity(props: Any) -> bytes:
    return b"|".join(
        [
            str((props.vendorID, props.deviceID, props.driverVersion)).encode(),
            bytes(ffi.buffer(props.pipelineCacheUUID)),
            ffi.string(props.deviceName),
        ]
    )


class Runtime:
    """The loaded library and dlbind's own ``VkInstance`` (one per process, never destroyed)."""

    def __init__(self) -> None:
        self.lib: Any = None
        self.path = ""
        self.loader_version = ""
        self.instance: Any = None
        self.devices: list[PhysicalDevice] = []
        self.probe = self._load()
        self._contexts: dict[int, Context] = {}  # dlbind's own devices, by device_id: never destroyed
        # contexts on other code's devices (wrap), by VkDevice: alive while a wrapped buffer uses them, so a
        # later device at the same address never meets a stale command pool
        self._foreign: weakref.WeakValueDictionary[int, Context] = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    def _load(self) -> Probe:
        try:
            self.lib, self.path = find_library(decl.LIBRARY_ENV, decl.LIBRARY_WHEELS, decl.LIBRARY_NAMES, ffi.dlopen)
        except OSError as exc:
            return Probe(False, str(exc))
        lib = self.lib
        try:
            version = ffi.new("uint32_t *")
            _check(lib.vkEnumerateInstanceVersion(version), "vkEnumerateInstanceVersion")
            self.loader_version = _version(version[0])
        except AttributeError:  # a Vulkan 1.0 loader has no vkEnumerateInstanceVersion
            self.loader_version = "1.0"
        runtime_version = f"Vulkan loader {self.loader_version} ({self.path})"
        app = ffi.new("VkApplicationInfo *")
        app.sType = lib.VK_STRUCTURE_TYPE_APPLICATION_INFO
        name = ffi.new("char[]", b"dlbind")
        app.pApplicationName = app.pEngineName = name
        app.apiVersion = M["VK_API_VERSION_1_0"]
        info = ffi.new("VkInstanceCreateInfo *")
        info.sType = lib.VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO
        info.pApplicationInfo = app
        instance = ffi.new("VkInstance *")
        result = lib.vkCreateInstance(info, ffi.NULL, instance)
        if result == lib.VK_ERROR_INCOMPATIBLE_DRIVER:
            reason = (
                "no driver: the Vulkan loader found no driver (VK_ERROR_INCOMPATIBLE_DRIVER); install one "
                "(Mesa's lavapipe: apt-get install mesa-vulkan-drivers)"
            )
            return Probe(False, reason, runtime_version, 0)
        if result < 0:
            return Probe(False, f"runtime error: {VulkanError('vkCreateInstance', result)}", runtime_version, None)
        self.instance = instance[0]
        count = ffi.new("uint32_t *")
        result = lib.vkEnumeratePhysicalDevices(self.instance, count, ffi.NULL)
        handles = ffi.new("VkPhysicalDevice[]", max(count[0], 1))
        if result >= 0:
            result = lib.vkEnumeratePhysicalDevices(self.instance, count, handles)
        if result < 0:
            return Probe(
                False, f"runtime error: {VulkanError('vkEnumeratePhysicalDevices', result)}", runtime_version, None
            )
        props = ffi.new("VkPhysicalDeviceProperties *")
        for i in range(count[0]):
            lib.vkGetPhysicalDeviceProperties(handles[i], props)
            self.devices.append(
                PhysicalDevice(
                    i, handles[i], ffi.string(props.deviceName).decode(errors="replace"), _version(props.apiVersion),
                    props.vendorID, props.deviceID, _identity(props),
                )
            )  # fmt: skip
        if not self.devices:
            return Probe(False, "no device: the Vulkan drivers found no device", runtime_version, 0)
        return Probe(True, "", runtime_version, len(self.devices))

    def require(self) -> None:
        require_available(self.probe, "dlbind-vulkan", Unavailable)

    def context(self, device_id: int) -> Context:
        """dlbind's own ``VkDevice`` on physical device ``device_id`` (created on first use)."""
        self.require()
        checked_device(device_id, len(self.devices), "Vulkan")
        with self._lock:
            ctx = self._contexts.get(device_id)
            if ctx is None:
                ctx = self._contexts[device_id] = Context.create(self, self.devices[device_id])
            return ctx

    def foreign_context(self, physical_device: Any, device: Any, queue_family_index: int) -> Context:
        """A context on someone else's ``VkDevice`` (dlbind_vulkan.wrap): our command pool on their queue; on
        dlbind's own ``VkDevice``, its own context (one queue, one lock). ValueError naming the argument for a
        NULL handle or a queue family the physical device does not have."""
        self.require()
        key, phys = _address(device), _address(physical_device)
        if not key:
            raise ValueError("device must be a VkDevice, not VK_NULL_HANDLE")
        if not phys:
            raise ValueError("physical_device must be a VkPhysicalDevice, not VK_NULL_HANDLE")
        _check_family(self.lib, ffi.cast("VkPhysicalDevice", phys), queue_family_index)
        with self._lock:
            ctx = next((c for c in self._contexts.values() if _address(c.device) == key), None)
            if ctx is not None and _address(ctx.physical.handle) != phys:
                raise ValueError("physical_device is not the VkPhysicalDevice of this VkDevice (dlbind's own)")
            if ctx is None:
                ctx = self._foreign.get(key)
            if ctx is None:
                pd = self._physical(ffi.cast("VkPhysicalDevice", phys))
                ctx = Context(self, pd, ffi.cast("VkDevice", key), queue_family_index, owned=False)
                self._foreign[key] = ctx
            elif ctx.queue_family != queue_family_index:
                whose = "dlbind's own VkDevice uses" if ctx.owned else "this VkDevice was wrapped with"
                raise ValueError(f"{whose} queue family {ctx.queue_family}, not {queue_family_index}")
            return ctx

    def _physical(self, phys: Any) -> PhysicalDevice:
        """Another instance's ``VkPhysicalDevice`` as the device of this process's loader it is (its identity)."""
        props = ffi.new("VkPhysicalDeviceProperties *")
        self.lib.vkGetPhysicalDeviceProperties(phys, props)
        ident = _identity(props)
        match = next((d for d in self.devices if d.identity == ident), None)
        if match is None:
            raise ValueError(
                f"the VkPhysicalDevice given ({ffi.string(props.deviceName).decode(errors='replace')}) is "
                "not one this process's Vulkan loader enumerates"
            )
        return PhysicalDevice(match.index, phys, match.name, match.api_version, match.vendor_id, match.device_id, ident)


def _queue_families(lib: Any, phys: Any) -> Any:
    """The ``VkQueueFamilyProperties`` of a physical device (a cffi array; its length is the count)."""
    count = ffi.new("uint32_t *")
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, ffi.NULL)
    families = ffi.new("VkQueueFamilyProperties[]", count[0])
    lib.vkGetPhysicalDeviceQueueFamilyProperties(phys, count, families)
    return families


def _check_family(lib: Any, phys: Any, index: object) -> None:
    """TypeError unless ``index`` is an int, ValueError unless it names a queue family of ``phys``."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"queue_family_index must be an int, not {type(index).__name__}")
    count = len(_queue_families(lib, phys))
    if not 0 <= index < count:
        raise ValueError(
            f"queue_family_index {index} is not a queue family of this VkPhysicalDevice "
            f"(it has {count}: 0..{count - 1})"
        )


#: The lock of each ``VkQueue`` (by handle), shared by every context that submits to it: Vulkan requires
#: queue access to be externally synchronised.
_QUEUE_LOCKS: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
_QUEUE_LOCKS_LOCK = threading.Lock()


def _queue_lock(queue: Any) -> Any:
    """The lock of ``queue`` (made on first use; alive while a context holds it)."""
    with _QUEUE_LOCKS_LOCK:
        key = _address(queue)
        lock = _QUEUE_LOCKS.get(key)
        if lock is None:
            lock = _QUEUE_LOCKS[key] = threading.Lock()
        return lock


class Context:
    """A ``VkDevice`` with one queue, a command pool, one command buffer and a fence; copies run here.

    ``owned``: dlbind created the device. A foreign device (``wrap``) is used, never destroyed; its queue
    must not be used by another thread while dlbind copies on it (Vulkan requires queue access to be
    externally synchronised). ``lock`` is the queue's: every context on one ``VkQueue`` shares it.
    """

    def __init__(self, rt: Runtime, physical: PhysicalDevice, device: Any, queue_family: int, *, owned: bool) -> None:
        lib = rt.lib
        self.rt, self.lib, self.physical, self.device = rt, lib, physical, device
        self.queue_family, self.owned = queue_family, owned
        queue = ffi.new("VkQueue *")
        lib.vkGetDeviceQueue(device, queue_family, 0, queue)
        self.queue = queue[0]
        self.lock = _queue_lock(self.queue)  # held while this context's command buffer is recorded and submitted
        memory = ffi.new("VkPhysicalDeviceMemoryProperties *")
        lib.vkGetPhysicalDeviceMemoryProperties(physical.handle, memory)
        self.memory_types = [int(memory.memoryTypes[i].propertyFlags) for i in range(memory.memoryTypeCount)]
        pool_info = ffi.new("VkCommandPoolCreateInfo *")
        pool_info.sType = lib.VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO
        pool_info.flags = lib.VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT
        pool_info.queueFamilyIndex = queue_family
        pool = ffi.new("VkCommandPool *")
        _check(lib.vkCreateCommandPool(device, pool_info, ffi.NULL, pool), "vkCreateCommandPool")
        self.pool = pool[0]
        alloc = ffi.new("VkCommandBufferAllocateInfo *")
        alloc.sType = lib.VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO
        alloc.commandPool = self.pool
        alloc.level = lib.VK_COMMAND_BUFFER_LEVEL_PRIMARY
        alloc.commandBufferCount = 1
        cmd = ffi.new("VkCommandBuffer *")
        _check(lib.vkAllocateCommandBuffers(device, alloc, cmd), "vkAllocateCommandBuffers")
        self.cmd = cmd[0]
        fence_info = ffi.new("VkFenceCreateInfo *")
        fence_info.sType = lib.VK_STRUCTURE_TYPE_FENCE_CREATE_INFO
        fence = ffi.new("VkFence *")
        _check(lib.vkCreateFence(device, fence_info, ffi.NULL, fence), "vkCreateFence")
        self.fence = fence[0]
        if not owned:  # our objects on their device go with the last buffer that uses them
            weakref.finalize(self, _destroy_objects, lib, device, self.pool, self.fence)

    @classmethod
    def create(cls, rt: Runtime, physical: PhysicalDevice) -> Context:
        lib = rt.lib
        families = _queue_families(lib, physical.handle)
        # Transfers are allowed on every graphics or compute queue; prefer compute (where consumers work).
        wanted = [lib.VK_QUEUE_COMPUTE_BIT, lib.VK_QUEUE_GRAPHICS_BIT, lib.VK_QUEUE_TRANSFER_BIT]
        family = next(
            (i for bit in wanted for i, f in enumerate(families) if f.queueFlags & bit and f.queueCount), None
        )
        if family is None:
            raise Unavailable(f"Vulkan device {physical.index} ({physical.name}) has no queue that can copy")
        priority = ffi.new("float *", 1.0)
        queue_info = ffi.new("VkDeviceQueueCreateInfo *")
        queue_info.sType = lib.VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO
        queue_info.queueFamilyIndex = family
        queue_info.queueCount = 1
        queue_info.pQueuePriorities = priority
        info = ffi.new("VkDeviceCreateInfo *")
        info.sType = lib.VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO
        info.queueCreateInfoCount = 1
        info.pQueueCreateInfos = queue_info
        device = ffi.new("VkDevice *")
        _check(lib.vkCreateDevice(physical.handle, info, ffi.NULL, device), "vkCreateDevice")
        return cls(rt, physical, device[0], family, owned=True)

    # -- memory ------------------------------------------------------------------------------------------
    def memory_type(self, type_bits: int, wanted: int, preferred: int = 0) -> int:
        """The first memory type allowed by ``type_bits`` with all of ``wanted`` (and ``preferred`` if any)."""
        candidates = [i for i, flags in enumerate(self.memory_types) if type_bits >> i & 1 and flags & wanted == wanted]
        best = [i for i in candidates if self.memory_types[i] & preferred == preferred]
        if not (best or candidates):
            raise MemoryError(f"Vulkan device {self.physical.index} has no memory type with flags {wanted:#x}")
        return (best or candidates)[0]

    def allocate(self, nbytes: int, *, staging: bool) -> Allocation:
        return Allocation(self, nbytes, staging=staging)

    # -- commands ------------------------------------------------------------------------------------------
    def submit_copy(self, src: Any, dst: Any, regions: list[tuple[int, int, int]], *, to_host: bool) -> None:
        """``vkCmdCopyBuffer`` of ``regions`` (src offset, dst offset, size), then a barrier, then wait.

        The barrier makes the transfer's writes visible to the host (a download) or to any later device
        access (an upload), so the buffer is complete when this returns.
        """
        lib = self.lib
        copies = ffi.new("VkBufferCopy[]", len(regions))
        for i, (s, d, n) in enumerate(regions):
            copies[i].srcOffset, copies[i].dstOffset, copies[i].size = s, d, n
        barrier = ffi.new("VkMemoryBarrier *")
        barrier.sType = lib.VK_STRUCTURE_TYPE_MEMORY_BARRIER
        barrier.srcAccessMask = lib.VK_ACCESS_TRANSFER_WRITE_BIT
        if to_host:
            barrier.dstAccessMask = lib.VK_ACCESS_HOST_READ_BIT
            dst_stage = lib.VK_PIPELINE_STAGE_HOST_BIT
        else:
            barrier.dstAccessMask = lib.VK_ACCESS_MEMORY_READ_BIT | lib.VK_ACCESS_MEMORY_WRITE_BIT
            dst_stage = lib.VK_PIPELINE_STAGE_ALL_COMMANDS_BIT
        begin = ffi.new("VkCommandBufferBeginInfo *")
        begin.sType = lib.VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO
        begin.flags = lib.VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT
        submit = ffi.new("VkSubmitInfo *")
        submit.sType = lib.VK_STRUCTURE_TYPE_SUBMIT_INFO
        submit.commandBufferCount = 1
        cmd = ffi.new("VkCommandBuffer *", self.cmd)
        submit.pCommandBuffers = cmd
        fence = ffi.new("VkFence *", self.fence)
        with self.lock:
            _check(lib.vkResetCommandBuffer(self.cmd, 0), "vkResetCommandBuffer")
            _check(lib.vkBeginCommandBuffer(self.cmd, begin), "vkBeginCommandBuffer")
            lib.vkCmdCopyBuffer(self.cmd, src, dst, len(regions), copies)
            lib.vkCmdPipelineBarrier(
                self.cmd, lib.VK_PIPELINE_STAGE_TRANSFER_BIT, dst_stage, 0, 1, barrier, 0, ffi.NULL, 0, ffi.NULL
            )
            _check(lib.vkEndCommandBuffer(self.cmd), "vkEndCommandBuffer")
            _check(lib.vkQueueSubmit(self.queue, 1, submit, self.fence), "vkQueueSubmit")
            try:
                waited = lib.vkWaitForFences(self.device, 1, fence, M["VK_TRUE"], _TIMEOUT_NS)
                _check(waited, "vkWaitForFences")
                if waited != lib.VK_SUCCESS:  # VK_TIMEOUT: the device did not finish in a minute
                    raise VulkanError("vkWaitForFences", waited)
            finally:
                lib.vkResetFences(self.device, 1, fence)

    def upload(self, target: Allocation, source: int, nbytes: int) -> None:
        """Host bytes at ``source`` into ``target`` (through a host-visible staging buffer)."""
        if not nbytes:
            return
        staging = self.allocate(nbytes, staging=True)
        with staging.mapped() as address:
            ctypes.memmove(address, source, nbytes)
        self.submit_copy(staging.buffer, target.buffer, [(0, 0, nbytes)], to_host=False)

    def download(self, buffer: Any, offset: int, nbytes: int, destination: int) -> None:
        """``nbytes`` of ``buffer`` from ``offset`` to host memory at ``destination``."""
        if not nbytes:
            return
        staging = self.allocate(nbytes, staging=True)
        self.submit_copy(buffer, staging.buffer, [(offset, 0, nbytes)], to_host=True)
        with staging.mapped() as address:
            ctypes.memmove(destination, address, nbytes)


class _Mapped:
    def __init__(self, allocation: Allocation) -> None:
        self.allocation = allocation

    def __enter__(self) -> int:
        a = self.allocation
        out = ffi.new("void **")
        _check(a.ctx.lib.vkMapMemory(a.ctx.device, a.memory, 0, M["VK_WHOLE_SIZE"], 0, out), "vkMapMemory")
        return int(ffi.cast("uintptr_t", out[0]))

    def __exit__(self, *exc: object) -> None:
        a = self.allocation
        a.ctx.lib.vkUnmapMemory(a.ctx.device, a.memory)


class Allocation:
    """A ``VkBuffer`` bound to its own ``VkDeviceMemory``; both are freed with this object.

    Device buffers prefer ``DEVICE_LOCAL`` memory and may be used for storage and transfers; staging
    buffers are ``HOST_VISIBLE | HOST_COHERENT`` (which every Vulkan device offers).
    """

    def __init__(self, ctx: Context, nbytes: int, *, staging: bool) -> None:
        lib = ctx.lib
        self.ctx, self.size = ctx, nbytes
        info = ffi.new("VkBufferCreateInfo *")
        info.sType = lib.VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO
        info.size = nbytes
        info.usage = lib.VK_BUFFER_USAGE_TRANSFER_SRC_BIT | lib.VK_BUFFER_USAGE_TRANSFER_DST_BIT
        if not staging:
            info.usage |= lib.VK_BUFFER_USAGE_STORAGE_BUFFER_BIT
        info.sharingMode = lib.VK_SHARING_MODE_EXCLUSIVE
        buffer = ffi.new("VkBuffer *")
        _check(lib.vkCreateBuffer(ctx.device, info, ffi.NULL, buffer), "vkCreateBuffer")
        self.buffer = buffer[0]
        self.memory: Any = None
        self._finalizer = weakref.finalize(self, _free, lib, ctx.device, self.buffer, None)
        needs = ffi.new("VkMemoryRequirements *")
        lib.vkGetBufferMemoryRequirements(ctx.device, self.buffer, needs)
        coherent = lib.VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | lib.VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
        if staging:
            type_index = ctx.memory_type(needs.memoryTypeBits, coherent)
        else:
            type_index = ctx.memory_type(needs.memoryTypeBits, 0, lib.VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)
        alloc = ffi.new("VkMemoryAllocateInfo *")
        alloc.sType = lib.VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO
        alloc.allocationSize = needs.size
        alloc.memoryTypeIndex = type_index
        memory = ffi.new("VkDeviceMemory *")
        _check(lib.vkAllocateMemory(ctx.device, alloc, ffi.NULL, memory), "vkAllocateMemory")
        self.memory = memory[0]
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _free, lib, ctx.device, self.buffer, self.memory)
        _check(lib.vkBindBufferMemory(ctx.device, self.buffer, self.memory, 0), "vkBindBufferMemory")

    @property
    def handle(self) -> int:
        return int(ffi.cast("uintptr_t", self.buffer))

    def mapped(self) -> _Mapped:
        return _Mapped(self)


def _destroy_objects(lib: Any, device: Any, pool: Any, fence: Any) -> None:
    lib.vkDestroyFence(device, fence, ffi.NULL)
    lib.vkDestroyCommandPool(device, pool, ffi.NULL)  # frees its command buffer


def _free(lib: Any, device: Any, buffer: Any, memory: Any) -> None:
    lib.vkDestroyBuffer(device, buffer, ffi.NULL)
    if memory is not None:
        lib.vkFreeMemory(device, memory, ffi.NULL)


# -- what a kDLVulkan data pointer is ----------------------------------------------------------------------


@dataclass(frozen=True)
class BufferInfo:
    """What a consumer needs to use the ``VkBuffer`` a kDLVulkan tensor's ``data`` is (docs/backends.md).

    Handles are integers (cast them to your binding's types). ``size`` is the buffer's size in bytes;
    the tensor's elements start ``byte_offset`` bytes into the buffer. ``owned``: dlbind allocated the
    buffer (False for buffers given to :func:`dlbind_vulkan.wrap`).
    """

    device_id: int
    buffer: int
    memory: int
    memory_offset: int
    size: int
    device: int  # VkDevice
    physical_device: int  # VkPhysicalDevice
    instance: int  # VkInstance of the physical device (0 when the wrapper did not say)
    queue_family_index: int
    owned: bool


class _Record:
    """A registered buffer: its info and the context copies use; alive as long as the memory."""

    __slots__ = ("__weakref__", "ctx", "info", "keep")

    def __init__(self, ctx: Context, info: BufferInfo, keep: object) -> None:
        self.ctx, self.info, self.keep = ctx, info, keep


# Every live record of each buffer handle, oldest first: a buffer's own record (its allocation, or its first
# wrap) and those of the views wrapped over it later. buffer_info and copies use the base one (dlbind's own
# allocation, else the oldest wrap), so a view never replaces the record of the buffer it views, and the
# handle is known while any of them lives.
_REGISTRY: dict[int, list[weakref.ref[_Record]]] = {}
_REGISTRY_LOCK = threading.Lock()
# records that died, removed from _REGISTRY under the lock by the next register or lookup: a record dies in a
# garbage collection, which may run while this thread holds the lock (an allocation in register)
_DEAD: list[tuple[int, weakref.ref[_Record]]] = []


def register(ctx: Context, info: BufferInfo, keep: object) -> _Record:
    """Record ``info`` under its buffer handle while the returned record (the tensors' owner) lives."""
    record = _Record(ctx, info, keep)
    handle = info.buffer
    with _REGISTRY_LOCK:
        _sweep()
        records = _REGISTRY.setdefault(handle, [])
        live = _live(records)
        if any(r.info.device != info.device for r in live):
            raise ValueError(f"VkBuffer {handle:#x} is registered already, on another VkDevice")
        records.append(weakref.ref(record, functools.partial(_forget, handle)))
    return record


def _live(records: list[weakref.ref[_Record]]) -> list[_Record]:
    """The records of ``records`` still alive, oldest first (under the registry's lock)."""
    return [r for r in (ref() for ref in records) if r is not None]


def _forget(handle: int, ref: weakref.ref[_Record]) -> None:
    """A record of ``handle`` died: noted, without the lock (this thread may hold it: see :data:`_DEAD`)."""
    _DEAD.append((handle, ref))


def _sweep() -> None:
    """Remove the records that died from the registry (under its lock)."""
    while _DEAD:  # a collection here may add to it: popped one at a time
        handle, ref = _DEAD.pop()
        records = _REGISTRY.get(handle)
        if records is not None and ref in records:
            records.remove(ref)
            if not records:
                del _REGISTRY[handle]


def lookup(handle: int) -> _Record:
    """The record of a buffer handle (the buffer's own, not a view's); BufferError when dlbind_vulkan does not
    know it."""
    return known(handle)[0]


def known(handle: int) -> tuple[_Record, int]:
    """The record of a buffer handle (:func:`lookup`) and the bytes of the buffer copies may read: its
    allocation's size (dlbind's own buffer), else the most any live wrap of it says."""
    with _REGISTRY_LOCK:
        _sweep()
        records = _live(_REGISTRY.get(handle, []))
    if not records:
        raise BufferError(
            f"VkBuffer {handle:#x} is not one dlbind-vulkan knows: allocate with dlbind_vulkan.empty/asarray, "
            "or describe your buffer with dlbind_vulkan.wrap"
        )
    own = next((r for r in records if r.info.owned), None)
    if own is not None:
        return own, own.info.size
    return records[0], max(r.info.size for r in records)


_RUNTIME = Loaded(Runtime)
#: The process's runtime, loaded on first call (the probe's answer is kept).
runtime = _RUNTIME.get
