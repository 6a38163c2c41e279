"""kDLVulkan tensors on a real Vulkan device: allocate, upload, export, import zero-copy, copy to host."""

from __future__ import annotations

import ctypes
import gc
import threading
import weakref

import numpy as np
import pytest

import dlbind
import dlbind_vulkan
from dlbind import DeviceType, Flags
from dlbind._backends import Backend
from dlbind.described import Exporter
from dlbind.export import CPU, Memory
from dlbind_vulkan import _runtime
from dlbind_vulkan._backend import backend

pytestmark = pytest.mark.vulkan
VULKAN = (DeviceType.kDLVulkan, 0)


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


def test_backend_is_listed_available() -> None:
    status = dlbind.backends()["vulkan"]
    assert status.available, status.reason
    assert status.distribution == "dlbind-vulkan" and status.version == dlbind_vulkan.__version__
    assert status.device_types == ("vulkan",)
    assert status.runtime_version.startswith("Vulkan loader 1.") and status.device_count >= 1
    assert str(status).startswith("vulkan: available (Vulkan loader")
    assert isinstance(backend, Backend)


@pytest.mark.parametrize(
    "a",
    [
        np.arange(12.0).reshape(3, 4),
        np.arange(-5, 5, dtype=np.int8),
        np.array([True, False, True]),
        np.linspace(0, 1, 7, dtype=np.float16),
        (np.arange(6) + 1j * np.arange(6)).astype(np.complex64).reshape(2, 3),
        np.array(3.5),  # 0-d
        np.zeros((0, 4), dtype=np.float32),  # no elements: no buffer
        np.arange(60, dtype=np.uint16).reshape(3, 4, 5)[:, ::2, ::-1],  # strided source
    ],
    ids=["float64", "int8", "bool", "float16", "complex64", "0-d", "empty", "strided-source"],
)
def test_asarray_round_trip(a: np.ndarray) -> None:
    t = dlbind_vulkan.asarray(a)
    assert t.device == VULKAN and t.shape == a.shape and t.is_contiguous()
    assert t.dtype == dlbind.dtypes.from_numpy(a.dtype)
    back = host(t)
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_the_acceptance_example() -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = dlbind_vulkan.asarray(a)
    assert t.device == VULKAN
    assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), a)
    with pytest.raises(RuntimeError, match="Unsupported device"):  # numpy's own refusal of device memory
        np.from_dlpack(t)
    with pytest.raises(BufferError, match="numpy needs host memory; this tensor is on vulkan"):
        np.asarray(t)  # dlbind's host routes refuse it as a BufferError
    u = dlbind.from_dlpack(t)
    assert u.data_ptr == t.data_ptr and u.device == VULKAN and not u.flags & Flags.IS_COPIED
    assert np.array_equal(host(u), a)  # still usable after numpy's refusal


def test_host_copy_is_flagged_copied_and_writable() -> None:
    a = np.arange(6, dtype=np.int32)
    t = dlbind_vulkan.asarray(a)
    c = dlbind.from_dlpack(t, device="cpu")  # copy=None: the copy is allowed
    assert c.device == (DeviceType.kDLCPU, 0) and c.flags & Flags.IS_COPIED and not c.readonly
    view = np.asarray(c)
    view[0] = 99  # the host copy is the consumer's; the device buffer keeps its values
    assert host(t).tolist() == a.tolist()


def test_copy_false_to_the_host_is_refused() -> None:
    t = dlbind_vulkan.asarray(np.ones(3))
    with pytest.raises(BufferError, match=r"exporting to cpu:0 needs a copy from vulkan:0, and copy=False forbids"):
        t.__dlpack__(max_version=(1, 3), dl_device=(DeviceType.kDLCPU, 0), copy=False)
    with pytest.raises(BufferError, match="to the host only"):
        t.__dlpack__(max_version=(1, 3), copy=True)  # a copy on the device itself is not offered


def test_streams_are_none_only() -> None:
    t = dlbind_vulkan.asarray(np.ones(3))
    with pytest.raises(BufferError, match=r"stream must be None for vulkan tensors \(got 1\)"):
        t.__dlpack__(max_version=(1, 3), stream=1)
    with pytest.raises(BufferError, match="stream must be None"):
        dlbind.from_dlpack(t, stream=0)


def test_legacy_capsule_and_second_object_are_zero_copy() -> None:
    a = np.arange(8.0)
    t = dlbind_vulkan.asarray(a)
    legacy = dlbind.from_dlpack(t.__dlpack__())  # max_version None: "dltensor"
    assert legacy.version is None and legacy.data_ptr == t.data_ptr
    second = dlbind.from_dlpack(t)
    info = dlbind_vulkan.buffer_info(second)
    assert info.buffer == t.data_ptr and info.owned and info.size == a.nbytes and info.device_id == 0
    assert dlbind_vulkan.device_of(t.data_ptr) == VULKAN
    del t, legacy
    gc.collect()
    assert np.array_equal(host(second), a)  # the second object keeps the buffer alive


def test_buffer_is_freed_with_its_last_user() -> None:
    t = dlbind_vulkan.empty((1024,), "float32")
    handle = t.data_ptr
    record = weakref.ref(_runtime.lookup(handle))
    u = dlbind.from_dlpack(t)
    del t
    gc.collect()
    assert record() is not None
    del u
    gc.collect()
    assert record() is None
    with pytest.raises(BufferError, match="is not one dlbind-vulkan knows"):
        dlbind_vulkan.buffer_info(handle)


def test_many_allocations_do_not_grow_the_registry() -> None:
    before = len(_runtime._REGISTRY)
    for _ in range(200):
        host(dlbind_vulkan.asarray(np.ones(1000)))
    gc.collect()
    with _runtime._REGISTRY_LOCK:
        _runtime._sweep()  # what the next register or lookup does first
    assert len(_runtime._REGISTRY) == before and not _runtime._DEAD


def test_a_record_dying_while_the_registry_is_locked_does_not_deadlock() -> None:
    """A record dies in a garbage collection, which may run while its thread holds the registry's lock (an
    allocation inside register): its callback must not take that lock again (it waited for itself forever)."""
    t = dlbind_vulkan.empty((4,))
    handle = dlbind_vulkan.buffer_info(t).buffer
    ref = _runtime._REGISTRY[handle][0]

    def dies_under_the_lock() -> None:
        with _runtime._REGISTRY_LOCK:
            _runtime._forget(handle, ref)  # as a collection inside register would call it

    thread = threading.Thread(target=dies_under_the_lock, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "the registry's lock was taken twice by one thread"
    _runtime._DEAD.clear()  # the record is alive: nothing to remove


@pytest.mark.parametrize(
    ("strides", "offset_elems", "view"),
    [
        ((1, 6), 0, lambda a: a.reshape(4, 6).T),  # transposed
        ((6, -1), 5, lambda a: a.reshape(4, 6)[:, ::-1]),  # negative stride from byte_offset
        ((12, 2), 1, lambda a: a.reshape(4, 6)[::2, 1::2]),  # gaps
    ],
    ids=["transposed", "negative", "gaps"],
)
def test_strided_views_of_a_buffer_copy_to_host(strides: tuple[int, int], offset_elems: int, view: object) -> None:
    a = np.arange(24, dtype=np.float32)
    base = dlbind_vulkan.asarray(a)
    info = dlbind_vulkan.buffer_info(base)
    expected = view(a)  # type: ignore[operator]
    t = dlbind_vulkan.wrap(
        info.buffer, expected.shape, "float32", strides=strides, byte_offset=offset_elems * 4, device=info.device,
        physical_device=info.physical_device, queue_family_index=info.queue_family_index, size=info.size, owner=base,
    )  # fmt: skip
    assert not t.is_contiguous() and t.device == VULKAN
    assert np.array_equal(host(t), expected)


def test_wrap_checks_the_extent() -> None:
    base = dlbind_vulkan.asarray(np.zeros(4, dtype=np.float32))
    info = dlbind_vulkan.buffer_info(base)
    common = {"device": info.device, "physical_device": info.physical_device, "queue_family_index": 0}
    with pytest.raises(ValueError, match="reaches byte 20 of a 16-byte buffer"):
        dlbind_vulkan.wrap(info.buffer, (5,), "float32", size=16, **common)
    with pytest.raises(ValueError, match="before the buffer's start"):
        dlbind_vulkan.wrap(info.buffer, (2,), "float32", strides=(-1,), size=16, **common)
    with pytest.raises(ValueError, match="VK_NULL_HANDLE"):
        dlbind_vulkan.wrap(0, (2,), "float32", **common)


def wrap_like(base: dlbind.Tensor, shape: object, dtype: object = "float32", **keywords: object) -> dlbind.Tensor:
    """A wrap of ``base``'s buffer with its device, physical device and queue family (``keywords`` override)."""
    info = dlbind_vulkan.buffer_info(base)
    handles = {"device": info.device, "physical_device": info.physical_device,
               "queue_family_index": info.queue_family_index}  # fmt: skip
    return dlbind_vulkan.wrap(info.buffer, shape, dtype, **{**handles, **keywords})  # type: ignore[arg-type]


def test_wrap_refuses_null_handles_and_queue_families_the_device_lacks() -> None:
    base = dlbind_vulkan.asarray(np.zeros(4, dtype=np.float32))
    rt, found = _runtime.runtime(), _runtime.ffi.new("uint32_t *")
    rt.lib.vkGetPhysicalDeviceQueueFamilyProperties(rt.devices[0].handle, found, _runtime.ffi.NULL)
    count = found[0]
    with pytest.raises(ValueError, match=rf"queue_family_index {count} is not a queue family of this "
                       rf"VkPhysicalDevice \(it has {count}: 0..{count - 1}\)"):  # fmt: skip
        wrap_like(base, 4, queue_family_index=count)
    with pytest.raises(ValueError, match="queue_family_index -1 is not a queue family"):
        wrap_like(base, 4, queue_family_index=-1)
    with pytest.raises(TypeError, match="queue_family_index must be an int, not str"):
        wrap_like(base, 4, queue_family_index="0")
    with pytest.raises(ValueError, match="physical_device must be a VkPhysicalDevice, not VK_NULL_HANDLE"):
        wrap_like(base, 4, physical_device=0)
    with pytest.raises(ValueError, match="device must be a VkDevice, not VK_NULL_HANDLE"):
        wrap_like(base, 4, device=0)
    assert np.array_equal(host(base), np.zeros(4))  # nothing was submitted to a queue that does not exist


def test_a_view_leaves_the_record_of_its_buffer() -> None:
    a = np.arange(8, dtype=np.float32)
    t = dlbind_vulkan.asarray(a)
    view = wrap_like(t, (2,), byte_offset=8, size=16)  # a window, described as a buffer of its own
    info = dlbind_vulkan.buffer_info(t)
    assert info.owned and info.size == 32 and dlbind_vulkan.buffer_info(view) == info
    assert np.array_equal(host(t), a) and np.array_equal(host(view), a[2:4])
    del view
    gc.collect()
    assert dlbind_vulkan.buffer_info(t) == info and np.array_equal(host(t), a)
    del t
    gc.collect()
    with pytest.raises(BufferError, match="is not one dlbind-vulkan knows"):
        dlbind_vulkan.buffer_info(info.buffer)


def test_wraps_of_parts_of_one_buffer_each_copy() -> None:
    ctx = _runtime.runtime().context(0)
    buffer = ctx.allocate(32, staging=False)  # a VkBuffer dlbind-vulkan does not know
    a = np.arange(8, dtype=np.float32)
    ctx.upload(buffer, a.ctypes.data, 32)
    address = lambda handle: int(_runtime.ffi.cast("uintptr_t", handle))  # noqa: E731
    common = {"device": address(ctx.device), "physical_device": address(ctx.physical.handle),
              "queue_family_index": ctx.queue_family, "owner": buffer}  # fmt: skip
    first = dlbind_vulkan.wrap(buffer.handle, (4,), "float32", **common)  # its size: the 16 bytes it reaches
    second = dlbind_vulkan.wrap(buffer.handle, (4,), "float32", byte_offset=16, **common)  # 32
    assert np.array_equal(host(first), a[:4]) and np.array_equal(host(second), a[4:])
    assert dlbind_vulkan.buffer_info(second).size == 16  # the first wrap's record is the buffer's


def test_a_wrap_of_dlbinds_own_device_uses_its_context() -> None:
    base = dlbind_vulkan.asarray(np.arange(4, dtype=np.float32))
    info = dlbind_vulkan.buffer_info(base)
    rt = _runtime.runtime()
    own = rt.context(0)
    assert rt.foreign_context(info.physical_device, info.device, info.queue_family_index) is own
    view = wrap_like(base, (2,), owner=base)
    assert _runtime._REGISTRY[info.buffer][-1]().ctx is own  # type: ignore[union-attr]
    assert host(view).tolist() == [0.0, 1.0]
    second = _runtime.Context(rt, own.physical, own.device, own.queue_family, owned=False)
    assert second.queue == own.queue and second.lock is own.lock  # one lock per VkQueue


def test_empty_arguments() -> None:
    t = dlbind_vulkan.empty((2, 3), np.int16)
    assert t.shape == (2, 3) and t.dtype.name == "int16" and t.device == VULKAN
    assert dlbind_vulkan.empty(5, "uint8").shape == (5,)
    assert dlbind_vulkan.empty((0,)).data_ptr == 0
    with pytest.raises(ValueError, match="negative dimension"):
        dlbind_vulkan.empty((-1,))
    with pytest.raises(ValueError, match=r"no Vulkan device 7: this machine has \d+"):
        dlbind_vulkan.empty((1,), device_id=7)
    with pytest.raises(TypeError, match="device_id must be an int"):
        dlbind_vulkan.empty((1,), device_id="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown DLPack dtype name"):
        dlbind_vulkan.empty((1,), "float31")
    with pytest.raises(BufferError, match=r"shape \(1099511627776, 1099511627776\) has \d+ elements: more than int64"):
        dlbind_vulkan.empty((2**40, 2**40))  # refused before anything is allocated
    with pytest.raises(BufferError, match="4611686018427387904 elements of float64 do not fit in int64 bytes"):
        dlbind_vulkan.empty(2**62, "float64")
    with pytest.raises(TypeError, match="a VkBuffer handle is an int, not str"):
        dlbind_vulkan.device_of("0x10")  # type: ignore[arg-type]


def test_padded_sub_byte_data_round_trips_padded() -> None:
    stored = np.arange(4096, dtype=np.uint8) % 16  # fp4 values, one per byte (IS_SUBBYTE_TYPE_PADDED)
    fp4, padded = dlbind.dtypes.lookup("float4_e2m1fn"), Flags.IS_SUBBYTE_TYPE_PADDED
    src = Exporter(Memory(stored.ctypes.data, (4096,), (1,), fp4, CPU, 0, False, stored, int(padded)))
    t = dlbind_vulkan.asarray(src)
    assert t.flags & padded and t.nbytes == dlbind_vulkan.buffer_info(t).size == 4096
    back = dlbind.from_dlpack(t, device="cpu", copy=True)
    assert back.flags & padded and back.nbytes == 4096
    assert ctypes.string_at(back.data_ptr + back.byte_offset, 4096) == stored.tobytes()


def test_host_copy_of_a_padded_view_reads_a_byte_per_element() -> None:
    stored = (np.arange(1 << 16) % 8).astype(np.uint8)
    base = dlbind_vulkan.asarray(stored)  # a buffer of 65536 bytes
    fp4, padded = dlbind.dtypes.lookup("float4_e2m1fn"), Flags.IS_SUBBYTE_TYPE_PADDED
    mem = Memory(base.data_ptr, (1 << 16,), (1,), fp4, VULKAN, 0, False, base, int(padded))
    back = dlbind.from_dlpack(Exporter(mem), device="cpu", copy=True)
    assert back.flags & padded and back.nbytes == 1 << 16
    assert ctypes.string_at(back.data_ptr + back.byte_offset, 1 << 16) == stored.tobytes()
    with pytest.raises(BufferError, match=r"reaches bytes 1..65537 of a 65536-byte VkBuffer"):
        backend.copy_to_host(mem._replace(byte_offset=1))  # checked against the buffer at one byte each


def test_packed_sub_byte_views_ignore_the_strides_of_unit_dimensions() -> None:
    raw = np.arange(8, dtype=np.uint8)
    base = dlbind_vulkan.asarray(raw)
    v = wrap_like(base, (1, 8), "float4_e2m1fn", strides=(99, 1), size=8, owner=base)
    assert v.is_contiguous()
    back = dlbind.from_dlpack(v, device="cpu", copy=True)
    assert back.nbytes == 4 and ctypes.string_at(back.data_ptr + back.byte_offset, 4) == raw[:4].tobytes()


def test_an_empty_tensor_of_another_producer_copies_without_its_buffer() -> None:
    mem = Memory(0xDEAD0, (0, 3), (3, 1), dlbind.dtypes.lookup("float32"), VULKAN, 0, False, None)
    assert host(Exporter(mem)).shape == (0, 3)  # a handle dlbind-vulkan does not know: no element to read


def test_empty_then_fill_through_asarray_of_a_device_tensor() -> None:
    a = np.arange(5, dtype=np.int64)
    t = dlbind_vulkan.asarray(dlbind_vulkan.asarray(a))  # device -> host -> new device buffer
    assert np.array_equal(host(t), a)


def test_buffer_info_refuses_host_tensors() -> None:
    with pytest.raises(BufferError, match="needs a kDLVulkan tensor"):
        dlbind_vulkan.buffer_info(np.ones(2))


def test_backend_object_serves_the_protocol() -> None:
    t = backend.asarray(np.arange(3.0))
    assert host(backend.empty((2,), "float64")).shape == (2,)
    assert backend.device_of(t.data_ptr) == VULKAN
    with pytest.raises(BufferError, match="kDLVulkan has no DLPack stream"):
        backend.wait(1, None, VULKAN)


def test_no_device_copy_yet() -> None:
    t = dlbind_vulkan.asarray(np.arange(4.0))
    mem = dlbind.export.Memory(t.data_ptr, t.shape, t.strides, t.dtype, t.device, 0, False, t)
    with pytest.raises(BufferError, match="dlbind-vulkan has no device copy yet: kDLVulkan memory is copied to the "
                       "host only"):  # fmt: skip
        backend.copy_on_device(mem, 0)
