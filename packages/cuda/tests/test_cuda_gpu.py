"""dlbind-cuda on a real GPU: allocation, host copies, exchange with torch and CuPy both ways, stream
ordering checked with real work on two streams, and the device and pinned host copies
(``tests/gpu_backends/gpu_hardware_copies.py``).

Every test here is marked ``cuda_gpu``: without a GPU and its driver they are skipped with the reason the
CUDA runtime gives (conftest.py). torch and CuPy are used where installed with CUDA support.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_cuda
from dlbind import DeviceType
from dlbind.export import Memory
from dlbind.producer import Exporter
from dlbind_cuda._backend import backend
from dlbind_cuda._runtime import ffi, runtime
from gpu_hardware_copies import HardwareCopyTests, non_blocking_streams

pytestmark = pytest.mark.cuda_gpu


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


def torch_cuda() -> Any:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip(f"torch {torch.__version__} has no CUDA support here")
    return torch


def cupy() -> Any:
    cp = pytest.importorskip("cupy")
    try:
        cp.cuda.runtime.getDeviceCount()
    except Exception as exc:  # a CuPy build for another CUDA
        pytest.skip(f"CuPy cannot use the GPU: {exc}")
    return cp


class CudaArray:
    def __init__(self, interface: dict[str, Any], keep: object) -> None:
        self.__cuda_array_interface__ = interface
        self.keep = keep


@pytest.fixture
def streams() -> Iterator[tuple[int, int]]:
    """Two non-blocking streams of the runtime dlbind-cuda loaded."""
    yield from non_blocking_streams(runtime())


# -- allocation and host copies -------------------------------------------------------------------------------


@pytest.mark.parametrize("memory", ["device", "host", "managed"])
def test_allocation_on_every_device(memory: str) -> None:
    count = dlbind.backends()["cuda"].device_count
    assert count and count >= 1
    kind = {"device": DeviceType.kDLCUDA, "host": DeviceType.kDLCUDAHost, "managed": DeviceType.kDLCUDAManaged}
    for device_id in range(count):
        a = np.arange(1000, dtype=np.float32) * (device_id + 1)
        t = dlbind_cuda.asarray(a, device_id=device_id, memory=memory)
        said = device_id if memory == "device" else 0  # pinned and managed memory: 0 (dlpack.h)
        assert t.device == (kind[memory], said)
        assert dlbind_cuda.device_of(t.data_ptr) == (kind[memory], said)
        assert np.array_equal(host(t), a)


def test_memory_is_freed_with_the_last_user() -> None:
    free_before = _free_bytes()
    t = dlbind_cuda.empty((64 << 20,), "uint8")  # 64 MiB
    assert _free_bytes() < free_before
    u = dlbind.from_dlpack(t)
    del t
    gc.collect()
    del u
    gc.collect()
    assert _free_bytes() >= free_before - (8 << 20)


def _free_bytes() -> int:
    torch = torch_cuda()
    return int(torch.cuda.mem_get_info()[0])


# -- torch ------------------------------------------------------------------------------------------------------


def test_torch_imports_dlbind_tensors() -> None:
    torch = torch_cuda()
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dlbind_cuda.asarray(a)
    x = torch.from_dlpack(t)  # torch passes its current stream
    assert x.is_cuda and x.data_ptr() == t.data_ptr
    assert np.array_equal(x.cpu().numpy(), a)
    y = torch.as_tensor(CudaArray(t.__cuda_array_interface__, t), device="cuda")  # through the CAI
    assert y.data_ptr() == t.data_ptr


def test_dlbind_imports_torch_tensors() -> None:
    torch = torch_cuda()
    x = torch.arange(10, device="cuda", dtype=torch.int64).reshape(2, 5)
    t = dlbind.from_dlpack(x, stream=torch.cuda.current_stream().cuda_stream or 1)
    assert t.device == (DeviceType.kDLCUDA, x.device.index) and t.data_ptr == x.data_ptr()
    assert np.array_equal(host(t), x.cpu().numpy())
    cai = dlbind.from_dlpack(CudaArray(x.__cuda_array_interface__, x))
    assert cai.data_ptr == x.data_ptr() and cai.device == t.device


# -- CuPy -------------------------------------------------------------------------------------------------------


def test_cupy_both_ways() -> None:
    cp = cupy()
    a = np.linspace(0, 1, 17)
    t = dlbind_cuda.asarray(a)
    c = cp.from_dlpack(t)
    assert c.data.ptr == t.data_ptr and np.array_equal(cp.asnumpy(c), a)
    via_cai = cp.asarray(t)  # CuPy reads __cuda_array_interface__
    assert via_cai.data.ptr == t.data_ptr
    back = dlbind.from_dlpack(cp.arange(6, dtype=cp.int16))
    assert back.device[0] == DeviceType.kDLCUDA and np.array_equal(host(back), np.arange(6, dtype=np.int16))
    cai = dlbind.from_dlpack(CudaArray(c.__cuda_array_interface__, c))
    assert cai.data_ptr == c.data.ptr


# -- stream ordering ---------------------------------------------------------------------------------------------


def test_torch_stream_to_dlbind_consumer_stream(streams: tuple[int, int]) -> None:
    torch = torch_cuda()
    producer, consumer = streams
    s = torch.cuda.ExternalStream(producer)
    with torch.cuda.stream(s):
        x = torch.zeros(1 << 22, device="cuda", dtype=torch.float32)
        for _ in range(8):
            x = x + 1
    t = dlbind.from_dlpack(x, stream=consumer)  # torch records on its stream, ours waits
    rt = runtime()
    rt.check(rt.lib.cudaStreamSynchronize(ffi.cast("cudaStream_t", consumer)), "cudaStreamSynchronize")
    assert (host(t) == 8).all()


# -- the device copy and the pinned host copy ------------------------------------------------------------------


class TestCudaCopies(HardwareCopyTests):
    module = dlbind_cuda
    backend = backend
    runtime = staticmethod(runtime)
    default_stream = 1
    memories = ("host", "managed")

    def imported(self, tensor: Any, producer: int, consumer: int) -> Any:
        """Through ``__cuda_array_interface__``, its ``stream`` the producer's."""
        interface = {**tensor.__cuda_array_interface__, "stream": producer}
        return dlbind.from_dlpack(CudaArray(interface, tensor), stream=consumer)


def test_a_device_copy_of_a_torch_view_is_a_torch_tensor() -> None:
    """jax -> torch style: a transposed torch view copied on the device by dlbind-cuda, on torch's stream,
    and handed to torch: torch's values, compact, not aliasing the source."""
    torch = torch_cuda()
    x = torch.arange(12.0, device="cuda").reshape(3, 4).t()
    t = dlbind.from_dlpack(x)
    mem = Memory(t.data_ptr, t.shape, t.strides, t.dtype, t.device, t.byte_offset, t.readonly, t)
    stream = torch.cuda.current_stream().cuda_stream or 1  # the default stream is the legacy one: 1
    out = backend.copy_on_device(mem, stream)
    y = torch.from_dlpack(Exporter(out))
    assert y.is_cuda and y.is_contiguous() and y.data_ptr() != x.data_ptr()
    assert torch.equal(y, x.contiguous())
