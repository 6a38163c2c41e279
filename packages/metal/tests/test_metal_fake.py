"""dlbind-metal's code paths that talk to Metal, run on the fake of the Objective-C runtime and Metal.

The fake (``fake_objc_metal.c``) is no Metal: it answers the messages dlbind-metal sends from host
memory and records them. What it checks is dlbind-metal's side: which messages, with which lengths,
options and offsets, that ``contents`` + ``byte_offset`` is where a host copy reads, that private buffers
go through a blit, that buffers are released. The ``metal_gpu`` tests check the same on a real device.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest

import dlbind
import dlbind_metal
from dlbind._generated.enums import DeviceType, Flags
from metal_fake import Fake

METAL = DeviceType.kDLMetal


def test_probe_names_the_device(fake: Fake) -> None:
    probe = dlbind_metal.probe()
    assert probe.available and probe.device_count == 1
    assert probe.runtime_version == f"Metal, Fake GPU 0 ({fake.path})"
    status = dlbind.backends()["metal"]
    assert status.available and str(status) == f"metal: available (Metal, Fake GPU 0 ({fake.path}), 1 device(s))"


def test_no_device_is_a_reason(fake_unloaded: Fake) -> None:
    fake_unloaded.set("devices", 0)
    fake_unloaded.load()
    probe = dlbind_metal.probe()
    assert not probe.available and probe.device_count == 0
    assert probe.reason == "no device: MTLCreateSystemDefaultDevice returned nil (no Metal GPU)"
    with pytest.raises(dlbind_metal.Unavailable, match="dlbind-metal is unavailable: no device"):
        dlbind_metal.empty((2,))


def test_asarray_shared_and_back(fake: Fake) -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = dlbind_metal.asarray(a)
    assert t.device == (METAL, 0) and t.byte_offset == 0 and t.shape == (3, 4)
    assert fake.calls() == ["newBufferWithBytes:length:96 options:0 on Fake GPU 0"]
    same = dlbind.from_dlpack(t)  # zero-copy: the same buffer
    assert same.data_ptr == t.data_ptr
    back = np.from_dlpack(t, device="cpu", copy=True)
    assert (back == a).all() and back.flags.writeable
    assert dlbind.from_dlpack(t, device="cpu", copy=True).flags & Flags.IS_COPIED
    assert dlbind_metal.device_of(t.data_ptr) == (METAL, 0)


def test_private_storage_goes_through_blits(fake: Fake) -> None:
    a = np.arange(6, dtype=np.int32)
    t = dlbind_metal.asarray(a, storage="private")
    assert fake.calls() == [
        "newBufferWithBytes:length:24 options:0 on Fake GPU 0",
        "newBufferWithLength:24 options:32 on Fake GPU 0",  # MTLResourceStorageModePrivate: 2 << 4
        "blit 24 bytes from offset 0 to offset 0", "commit", "waitUntilCompleted",
        "release buffer",  # the shared buffer it was filled from
    ]  # fmt: skip
    fake.clear()
    view = dlbind.from_dlpack(dlbind.from_pointer(t.data_ptr, (2,), "int32", strides=(2,), byte_offset=8,
                                                  device=(METAL, 0), owner=t))  # fmt: skip
    assert (np.from_dlpack(view, device="cpu", copy=True) == [2, 4]).all()
    assert "blit 12 bytes from offset 8 to offset 0" in fake.calls()  # the span only: elements 2..4


def test_blits_copy_whole_words(fake: Fake) -> None:
    # macOS blits whole 4-byte words (the fake fails any other blit, as Metal's validation does): a buffer of 7
    # bytes is made of 8, and a span of bytes 1..4 is read as the word 0..4
    t = dlbind_metal.asarray(np.arange(7, dtype=np.uint8), storage="private")
    calls = fake.calls()
    assert "newBufferWithLength:8 options:32 on Fake GPU 0" in calls  # private, 8 bytes
    assert "blit 8 bytes from offset 0 to offset 0" in calls
    assert (np.from_dlpack(t, device="cpu", copy=True) == np.arange(7)).all()
    fake.clear()
    view = dlbind.from_pointer(t.data_ptr, (3,), "uint8", byte_offset=1, device=(METAL, 0), owner=t)
    assert (np.from_dlpack(dlbind.from_dlpack(view), device="cpu", copy=True) == [1, 2, 3]).all()
    assert "blit 4 bytes from offset 0 to offset 0" in fake.calls()


def test_the_tail_of_a_buffer_no_word_holds_is_refused(fake: Fake) -> None:
    rt = fake.load()
    odd = rt.send("id_uint_uint", rt.devices[0], "newBufferWithLength:options:", 7, 2 << 4)  # private, 7 bytes
    try:
        t = dlbind.from_pointer(odd, (7,), "uint8", device=(METAL, 0))
        with pytest.raises(BufferError, match="last 3 bytes of an MTLBuffer of 7 bytes"):
            np.from_dlpack(t, device="cpu", copy=True)
        head = dlbind.from_pointer(odd, (4,), "uint8", device=(METAL, 0))  # whole words: read
        assert np.from_dlpack(head, device="cpu", copy=True).shape == (4,)
    finally:
        rt.release(odd)


def test_a_managed_buffer_is_synchronized_before_the_cpu_reads_it(fake: Fake) -> None:
    rt = fake.load()
    managed = rt.send("id_uint_uint", rt.devices[0], "newBufferWithLength:options:", 16, 1 << 4)  # storage: managed
    try:
        t = dlbind.from_pointer(managed, (4,), "float32", device=(METAL, 0))
        fake.clear()
        assert (np.from_dlpack(t, device="cpu", copy=True) == 0).all()
        assert fake.calls()[:3] == ["synchronizeResource: a buffer of 16 bytes", "commit", "waitUntilCompleted"]
    finally:
        rt.release(managed)


def test_host_copy_reads_contents_plus_byte_offset(fake: Fake) -> None:
    t = dlbind_metal.asarray(np.arange(10, dtype=np.float32))
    for shape, strides, offset, expected in (
        ((3,), (1,), 8, [2, 3, 4]),
        ((2, 2), (2, 1), 4, [[1, 2], [3, 4]]),
        ((3,), (-2,), 32, [8, 6, 4]),  # negative strides: the span lies below the first element
        ((2, 3), (0, 1), 28, [[7, 8, 9], [7, 8, 9]]),
    ):
        view = dlbind.from_dlpack(dlbind.from_pointer(t.data_ptr, shape, "float32", strides=strides,
                                                      byte_offset=offset, device=(METAL, 0), owner=t))  # fmt: skip
        assert view.data_ptr == t.data_ptr and view.byte_offset == offset
        assert (np.from_dlpack(view, device="cpu", copy=True) == expected).all(), (shape, strides, offset)
    assert not [c for c in fake.calls() if c.startswith("blit")]  # shared: read in place


@pytest.mark.parametrize(("shape", "strides", "offset"), [((11,), (1,), 0), ((3,), (1,), 32), ((3,), (-1,), 4)])
def test_a_view_outside_its_buffer_is_refused(fake: Fake, shape: tuple[int], strides: tuple[int], offset: int) -> None:
    t = dlbind_metal.asarray(np.arange(10, dtype=np.float32))
    view = dlbind.from_dlpack(dlbind.from_pointer(t.data_ptr, shape, "float32", strides=strides,
                                                  byte_offset=offset, device=(METAL, 0), owner=t))  # fmt: skip
    with pytest.raises(BufferError, match=r"of an MTLBuffer of 40 bytes .* not inside it"):
        np.from_dlpack(view, device="cpu", copy=True)


def test_empty_and_zero_size(fake: Fake) -> None:
    t = dlbind_metal.empty((4, 2), "int16")
    assert (
        t.shape == (4, 2)
        and t.dtype.name == "int16"
        and fake.calls() == ["newBufferWithLength:16 options:0 on Fake GPU 0"]
    )
    z = dlbind_metal.empty((0, 3))
    assert z.size == 0 and z.data_ptr == 0
    assert np.from_dlpack(z, device="cpu", copy=True).shape == (0, 3)
    assert dlbind_metal.asarray(np.ones((2, 0))).shape == (2, 0)


def test_buffers_are_released_with_their_last_user(fake: Fake) -> None:
    t = dlbind_metal.asarray(np.ones(4))
    p = dlbind_metal.empty((4,), storage="private")
    np.from_dlpack(p, device="cpu", copy=True)  # a staging buffer, released too
    capsule = dlbind.from_dlpack(t)
    del t, p
    gc.collect()
    assert fake.live_buffers() == 1  # the capsule's import keeps its buffer
    del capsule
    gc.collect()
    assert fake.live_buffers() == 0
    assert fake.calls().count("release buffer") == 3


def test_a_second_device(fake_unloaded: Fake) -> None:
    fake_unloaded.set("devices", 2)
    fake_unloaded.load()
    assert dlbind_metal.probe().device_count == 2
    t = dlbind_metal.asarray(np.ones(3), device_id=1)
    assert t.device == (METAL, 1) and dlbind_metal.device_of(t.data_ptr) == (METAL, 1)
    assert fake_unloaded.calls() == ["newBufferWithBytes:length:24 options:0 on Fake GPU 1"]


def test_a_failed_blit_is_a_buffer_error(fake: Fake) -> None:
    p = dlbind_metal.empty((4,), storage="private")
    fake.set("fail_blit", 1)
    with pytest.raises(BufferError, match="copying metal:0 memory to the host failed: a blit of 16 bytes ended"):
        np.from_dlpack(p, device="cpu", copy=True)


def test_asarray_of_another_metal_tensor(fake: Fake) -> None:
    a = np.arange(4.0)
    t = dlbind_metal.asarray(dlbind_metal.asarray(a, storage="private"))
    assert (np.from_dlpack(t, device="cpu", copy=True) == a).all()


def test_padded_sub_byte_data_keeps_its_layout(fake: Fake) -> None:
    """fp4 stored a byte per element (IS_SUBBYTE_TYPE_PADDED) goes to Metal as it is and stays padded: its host
    copy reads a byte per element (it read half of them, packed, and said they were padded)."""
    from dlbind.described import Exporter
    from dlbind.export import CPU, Memory

    stored = (np.arange(64) % 16).astype(np.uint8)
    fp4, padded = dlbind.dtypes.lookup("float4_e2m1fn"), Flags.IS_SUBBYTE_TYPE_PADDED
    src = Exporter(Memory(stored.ctypes.data, (64,), (1,), fp4, CPU, 0, False, stored, int(padded)))
    for storage in ("shared", "private"):
        t = dlbind_metal.asarray(src, storage=storage)
        assert t.flags & padded and t.nbytes == 64
        back = dlbind.from_dlpack(t, device="cpu", copy=True)
        assert back.flags & padded and back.nbytes == 64
        assert ctypes.string_at(back.data_ptr + back.byte_offset, 64) == stored.tobytes()


def test_empty_refuses_a_size_beyond_int64_before_allocating(fake: Fake) -> None:
    with pytest.raises(BufferError, match="more than int64"):
        dlbind_metal.empty((2**40, 2**40))
    assert fake.calls() == []
