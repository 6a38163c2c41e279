"""dlbind-rocm's runtime calls on the recording HIP runtime: the probe, allocations, host copies,
device_of (HIP 5's and HIP 6's memory-type numbering), errors.

The recording runtime's "device" memory is host memory, so values survive a round trip: what these tests
check is the calls dlbind makes and the bytes and offsets it asks for, not what a GPU would do.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_rocm
from dlbind import DeviceType, Flags
from dlbind._backends import Backend
from dlbind_rocm._backend import backend
from rocm_recording import Recording

ROCM = (DeviceType.kDLROCM, 0)


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


def test_available_with_a_device(rec: Recording) -> None:
    status = dlbind.backends()["rocm"]
    assert status.available and status.device_count == 1 and status.device_types == ("rocm", "rocm_host")
    assert str(status) == f"rocm: available (HIP runtime 5.2.21153 ({rec.path}), 1 device(s))"
    assert isinstance(backend, Backend)


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (
            {"device_count_error": 100},
            "no device: the HIP runtime finds no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)",
        ),
        ({"devices": 0}, "no device: the HIP runtime finds no AMD GPU (hipGetDeviceCount: 0 devices)"),
        (
            {"device_count_error": 35},
            "no driver: hipGetDeviceCount: hipErrorInsufficientDriver; the amdgpu kernel driver (/dev/kfd) is "
            "missing or too old",
        ),
        (
            {"device_count_error": 999},
            "runtime error: hipGetDeviceCount: unknown error (hipErrorUnknown); HIP runtime 5.2.21153",
        ),
    ],
    ids=["no-device", "zero-devices", "no-driver", "other-error"],
)
def test_unavailable_reasons(recording: Recording, settings: dict[str, int], reason: str) -> None:
    for key, value in settings.items():
        recording.set(key, value)
    recording.load()
    status = dlbind.backends()["rocm"]
    assert not status.available and status.reason == reason and "\n" not in reason
    with pytest.raises(dlbind_rocm.Unavailable, match="^dlbind-rocm is unavailable: " + reason.split(":")[0]):
        dlbind_rocm.asarray(np.ones(3))
    assert recording.calls() == []


@pytest.mark.parametrize(
    ("memory", "call", "free", "name", "device_type"),
    [
        ("device", "hipMalloc", "hipFree", "D0", DeviceType.kDLROCM),
        ("host", "hipHostMalloc", "hipHostFree", "H0", DeviceType.kDLROCMHost),
    ],
)
def test_empty_allocates_and_frees(
    rec: Recording, memory: str, call: str, free: str, name: str, device_type: DeviceType
) -> None:
    t = dlbind_rocm.empty((2, 3), "float32", memory=memory)
    assert t.device == (device_type, 0)
    flags = ", 0" if memory == "host" else ""  # hipHostMallocDefault
    assert rec.calls() == ["hipGetDevice() -> 0", f"{call}(24{flags}) -> {name} on device 0"]
    assert dlbind_rocm.device_of(t.data_ptr) == (device_type, 0)
    del t
    gc.collect()
    assert rec.calls()[-1] == f"{free}({name})"


def test_asarray_copies_then_synchronises(rec: Recording) -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = dlbind_rocm.asarray(a)
    assert t.device == ROCM
    assert rec.calls()[-2:] == ["hipMemcpy(D0+0, host, 96, HostToDevice)", "hipStreamSynchronize(default)"]
    rec.clear()
    assert np.array_equal(host(t), a)
    assert rec.calls() == [  # through a pinned block of the pool (test_rocm_copies.py)
        "hipGetDevice() -> 0",
        "hipHostMalloc(1048576, 1) -> H0 on device 0",
        "hipMemcpyAsync(H0+0, D0+0, 96, DeviceToHost, default)",
        "hipStreamSynchronize(default)",
    ]


@pytest.mark.parametrize(
    "a",
    [np.arange(-5, 5, dtype=np.int8), np.array([True, False]), np.array(2.5), np.zeros((0, 3)),
     np.arange(60, dtype=np.uint16).reshape(3, 4, 5)[:, ::2, ::-1]],
    ids=["int8", "bool", "0-d", "empty", "strided-source"],
)  # fmt: skip
def test_asarray_round_trip(rec: Recording, a: np.ndarray) -> None:
    back = host(dlbind_rocm.asarray(a))
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_strided_device_memory_copies_its_span_then_compacts(rec: Recording) -> None:
    a = np.arange(24, dtype=np.float32)
    base = dlbind_rocm.asarray(a)
    view = dlbind.from_dlpack(
        dlbind.from_pointer(base.data_ptr, (2, 3), "float32", strides=(12, 2), byte_offset=4, device=ROCM, owner=base)
    )
    rec.clear()
    c = dlbind.from_dlpack(view, device="cpu", copy=True)
    assert c.flags & Flags.IS_COPIED and np.array_equal(np.asarray(c), a.reshape(4, 6)[::2, 1::2])
    assert "hipMemcpyAsync(H0+0, D0+4, 68, DeviceToHost, default)" in rec.calls()


@pytest.mark.parametrize("version", [50221153, 60300000], ids=["hip5", "hip6"])
def test_device_of_reads_the_numbering_of_the_runtime_loaded(recording: Recording, version: int) -> None:
    recording.set("runtime_version", version)
    recording.set("devices", 2)
    recording.load()
    d = dlbind_rocm.empty((4,), "uint8", device_id=1)
    h = dlbind_rocm.empty((4,), "uint8", memory="host", device_id=1)
    assert dlbind_rocm.device_of(d.data_ptr + 2) == (DeviceType.kDLROCM, 1)
    assert h.device == (DeviceType.kDLROCMHost, 0)  # pinned memory made by GPU 1: device id 0 (dlpack.h)
    assert dlbind_rocm.device_of(h.data_ptr) == (DeviceType.kDLROCMHost, 0)
    plain = np.ones(2)
    with pytest.raises(BufferError, match="is not memory the HIP runtime knows"):
        dlbind_rocm.device_of(plain.ctypes.data)


def test_managed_memory_is_rocm_device_memory(rec: Recording) -> None:
    from dlbind_rocm._runtime import ffi, runtime

    rt = runtime()
    out = ffi.new("void **")
    assert rt.lib.hipMallocManaged(out, 16, 1) == 0
    assert dlbind_rocm.device_of(int(ffi.cast("uintptr_t", out[0]))) == ROCM


def test_arguments_and_failures(rec: Recording) -> None:
    with pytest.raises(ValueError, match="memory must be one of 'device', 'host', not 'managed'"):
        dlbind_rocm.empty((1,), memory="managed")
    with pytest.raises(ValueError, match="no ROCm device 2: this machine has 1"):
        dlbind_rocm.empty((1,), device_id=2)
    rec.fail("hipMalloc", 2)
    with pytest.raises(MemoryError, match="hipMalloc failed: out of memory"):
        dlbind_rocm.empty((8,))
    t = dlbind_rocm.asarray(np.ones(2))
    rec.fail("hipMemcpyAsync", 1)
    with pytest.raises(BufferError, match="copying rocm:0 memory to the host failed: hipMemcpyAsync failed"):
        host(t)
    with pytest.raises(BufferError, match="numpy needs host memory; this tensor is on rocm"):
        np.asarray(t)
    assert not hasattr(t, "__cuda_array_interface__")


def test_backend_object_serves_the_protocol(rec: Recording) -> None:
    t: Any = backend.asarray(np.arange(3.0))
    assert np.array_equal(host(t), np.arange(3.0))
    assert host(backend.empty((2,), "float64")).shape == (2,)
    assert backend.device_of(t.data_ptr) == ROCM
