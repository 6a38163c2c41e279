"""dlbind-cuda's device copy (``copy_on_device``) and host copy through pinned memory (``copy_to_host``), on
the recording CUDA runtime: the shared tests of ``tests/gpu_backends/gpu_copies.py`` with CUDA's names, and
what only CUDA has (managed memory, the per-thread default stream)."""

from __future__ import annotations

import numpy as np

import dlbind_cuda
from cuda_recording import Recording
from dlbind import DeviceType
from dlbind_cuda._backend import backend
from gpu_copies import CopyTests, read


class TestCudaCopies(CopyTests):
    module = dlbind_cuda
    backend = backend
    recording = Recording
    name = "cuda"
    prefix = "cuda"
    device = (DeviceType.kDLCUDA, 0)
    default_stream = 1
    stream_names = {1: "legacy", 2: "per-thread"}  # noqa: RUF012
    refused_streams = (0, -1, -5)
    pinned = "cudaHostAlloc"
    pinned_free = "cudaFreeHost"
    host_memory = ("host", DeviceType.kDLCUDAHost, "cudaMallocHost(48) -> H1 on device 0")

    def test_device_copy_of_managed_memory_stays_managed(self, rec: Recording) -> None:
        values = np.arange(12, dtype=np.float32)
        base = dlbind_cuda.asarray(values, memory="managed")
        rec.clear()
        out = backend.copy_on_device(self.view(base, values.dtype, ((4, 3), (1, 4), 0)), 2)
        assert out.device == (DeviceType.kDLCUDAManaged, 0) and out.stream == 2
        assert self.calls(rec)[0] == "cudaMallocManaged(48) -> M1 on device 0"
        assert self.calls(rec)[1] == "cudaMemcpy2DAsync(M1+0, 12, M0+0, 4, 4, 4, Default, per-thread)"
        assert np.array_equal(read(out.data, 48).view(np.float32), values.reshape(3, 4).T.reshape(-1))
