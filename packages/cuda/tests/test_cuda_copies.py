"""dlbind-cuda's host copy through pinned memory (``copy_to_host``), on the recording CUDA runtime: the shared
tests of ``tests/gpu_backends/gpu_copies.py`` with CUDA's names."""

from __future__ import annotations

import dlbind_cuda
from cuda_recording import Recording
from dlbind import DeviceType
from dlbind_cuda._backend import backend
from gpu_copies import CopyTests


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

