"""dlbind-rocm on a real AMD GPU: allocation, host copies, exchange with torch (ROCm build) both ways,
stream ordering checked with real work on two streams, and the device and pinned host copies
(``tests/gpu_backends/gpu_hardware_copies.py``).

Every test here is marked ``rocm_gpu``: without a GPU they are skipped with the reason the HIP runtime
gives (conftest.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_rocm
from dlbind import DeviceType
from dlbind_rocm._backend import backend
from dlbind_rocm._runtime import runtime
from gpu_hardware_copies import HardwareCopyTests

pytestmark = pytest.mark.rocm_gpu


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


def torch_rocm() -> Any:
    torch = pytest.importorskip("torch")
    if not (getattr(torch.version, "hip", None) and torch.cuda.is_available()):
        pytest.skip(f"torch {torch.__version__} is not a ROCm build with a GPU here")
    return torch


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


# -- the device copy and the pinned host copy ------------------------------------------------------------------


class TestRocmCopies(HardwareCopyTests):
    module = dlbind_rocm
    backend = backend
    runtime = staticmethod(runtime)
    default_stream = 0
    memories = ("host",)
