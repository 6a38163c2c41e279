"""dlbind-rocm's device copy (``copy_on_device``) and host copy through pinned memory (``copy_to_host``), on
the recording HIP runtime: the shared tests of ``tests/gpu_backends/gpu_copies.py`` with HIP's names."""

from __future__ import annotations

import dlbind_rocm
from dlbind import DeviceType
from dlbind_rocm._backend import backend
from gpu_copies import CopyTests
from rocm_recording import Recording


class TestRocmCopies(CopyTests):
    module = dlbind_rocm
    backend = backend
    recording = Recording
    name = "rocm"
    prefix = "hip"
    device = (DeviceType.kDLROCM, 0)
    default_stream = 0
    stream_names = {0: "default"}  # noqa: RUF012
    refused_streams = (1, 2, -1)
    pinned = "hipHostMalloc"
    pinned_free = "hipHostFree"
    host_memory = ("host", DeviceType.kDLROCMHost, "hipHostMalloc(48, 0) -> H1 on device 0")
