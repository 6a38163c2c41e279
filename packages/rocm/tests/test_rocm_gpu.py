"""dlbind-rocm on a real AMD GPU: allocation, host copies, exchange with torch (ROCm build) both ways,
stream ordering checked with real work on two streams, and the device and pinned host copies
(``tests/gpu_backends/gpu_hardware_copies.py``).

Every test here is marked ``rocm_gpu``: without a GPU they are skipped with the reason the HIP runtime
gives (conftest.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_rocm
from dlbind import DeviceType, Flags
from dlbind_rocm._backend import backend
from dlbind_rocm._runtime import ffi, runtime
from gpu_hardware_copies import HardwareCopyTests

pytestmark = pytest.mark.rocm_gpu
ROCM = (DeviceType.kDLROCM, 0)


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


def torch_rocm() -> Any:
    torch = pytest.importorskip("torch")
    if not (getattr(torch.version, "hip", None) and torch.cuda.is_available()):
        pytest.skip(f"torch {torch.__version__} is not a ROCm build with a GPU here")
    return torch


@pytest.fixture
def streams() -> Iterator[tuple[int, int]]:
    rt = runtime()
    made = []
    for _ in range(2):
        out = ffi.new("hipStream_t *")
        rt.check(rt.lib.hipStreamCreateWithFlags(out, rt.lib.hipStreamNonBlocking), "hipStreamCreateWithFlags")
        made.append(out[0])
    yield int(ffi.cast("uintptr_t", made[0])), int(ffi.cast("uintptr_t", made[1]))
    for s in made:
        rt.lib.hipStreamSynchronize(s)
        rt.lib.hipStreamDestroy(s)


@pytest.mark.parametrize("memory", ["device", "host"])
def test_allocation_on_every_device(memory: str) -> None:
    count = dlbind.backends()["rocm"].device_count
    assert count and count >= 1
    kind = {"device": DeviceType.kDLROCM, "host": DeviceType.kDLROCMHost}[memory]
    for device_id in range(count):
        a = np.arange(1000, dtype=np.float32) * (device_id + 1)
        t = dlbind_rocm.asarray(a, device_id=device_id, memory=memory)
        assert t.device == (kind, device_id)
        assert dlbind_rocm.device_of(t.data_ptr)[0] == kind
        assert np.array_equal(host(t), a)


def test_host_copy_of_strided_device_memory() -> None:
    a = np.arange(24, dtype=np.float64)
    base = dlbind_rocm.asarray(a)
    view = dlbind.from_dlpack(
        dlbind.from_pointer(base.data_ptr, (6, 4), "float64", strides=(-1, 6), byte_offset=5 * 8, device=ROCM,
                            owner=base)
    )  # fmt: skip
    c = dlbind.from_dlpack(view, device="cpu", copy=True)
    assert c.flags & Flags.IS_COPIED
    assert np.array_equal(np.asarray(c), a.reshape(4, 6).T[::-1])


def test_torch_both_ways() -> None:
    torch = torch_rocm()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbind_rocm.asarray(a)
    x = torch.from_dlpack(t)
    assert x.is_cuda and x.data_ptr() == t.data_ptr and np.array_equal(x.cpu().numpy(), a)
    y = torch.arange(10, device="cuda", dtype=torch.int64)
    u = dlbind.from_dlpack(y, stream=0)
    assert u.device[0] == DeviceType.kDLROCM and u.data_ptr == y.data_ptr()
    assert np.array_equal(host(u), np.arange(10))


def test_the_consumer_stream_waits_for_the_producer_stream(streams: tuple[int, int]) -> None:
    """A slow producer on one stream, a copy on another: the copy sees the producer's last write
    (see dlbind-cuda's test of the same name)."""
    from dlbind.export import Memory
    from dlbind.producer import Exporter

    rt = runtime()
    lib = rt.lib
    producer, consumer = streams
    n = 1 << 20
    shared = dlbind_rocm.asarray(np.zeros(n, dtype=np.uint8))
    scratch = dlbind_rocm.empty((256 << 20,), "uint8")
    out = dlbind_rocm.empty((n,), "uint8", memory="host")
    p = ffi.cast("hipStream_t", producer)
    for i in range(16):
        rt.check(lib.hipMemsetAsync(ffi.cast("void *", scratch.data_ptr), i, 256 << 20, p), "hipMemsetAsync")
    rt.check(lib.hipMemsetAsync(ffi.cast("void *", shared.data_ptr), 7, n, p), "hipMemsetAsync")
    memory = Memory(shared.data_ptr, shared.shape, shared.strides, shared.dtype, shared.device, 0, False, shared,
                    0, producer)  # fmt: skip
    imported = dlbind.from_dlpack(Exporter(memory), stream=consumer)
    c = ffi.cast("hipStream_t", consumer)
    rt.check(
        lib.hipMemcpyAsync(ffi.cast("void *", out.data_ptr), ffi.cast("void *", imported.data_ptr), n,
                           lib.hipMemcpyDeviceToHost, c),
        "hipMemcpyAsync",
    )  # fmt: skip
    rt.check(lib.hipStreamSynchronize(c), "hipStreamSynchronize")
    assert (np.from_dlpack(out) == 7).all()


# -- the device copy and the pinned host copy ------------------------------------------------------------------


class TestRocmCopies(HardwareCopyTests):
    module = dlbind_rocm
    backend = backend
    runtime = staticmethod(runtime)
    default_stream = 0
    memories = ("host",)
