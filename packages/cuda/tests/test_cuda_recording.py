"""dlbind-cuda's runtime calls on the recording runtime: the probe, allocations, host copies, device_of,
``__cuda_array_interface__`` both ways, errors.

The recording runtime's "device" memory is host memory, so values survive a round trip: what these tests
check is the calls dlbind makes and the bytes and offsets it asks for, not what a GPU would do.
"""

from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_cuda
from cuda_recording import Recording
from dlbind import DeviceType, Flags
from dlbind._backends import Backend
from dlbind_cuda._backend import backend

CUDA = (DeviceType.kDLCUDA, 0)


def host(t: object) -> np.ndarray:
    return np.from_dlpack(t, device="cpu", copy=True)


# -- the probe ------------------------------------------------------------------------------------------------


def test_available_with_a_device(rec: Recording) -> None:
    status = dlbind.backends()["cuda"]
    assert status.available and status.device_count == 1
    assert status.runtime_version == f"CUDA runtime 13.0 ({rec.path})"
    assert status.device_types == ("cuda", "cuda_host", "cuda_managed")
    assert str(status) == f"cuda: available (CUDA runtime 13.0 ({rec.path}), 1 device(s))"
    assert isinstance(backend, Backend)


@pytest.mark.parametrize(
    ("settings", "reason"),
    [
        (
            {"driver_version": 0, "device_count_error": 35},
            "no driver: cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
            "(cudaErrorInsufficientDriver); no NVIDIA driver is loaded (cudaDriverGetVersion: 0), CUDA runtime "
            "13.0 needs one",
        ),
        (
            {"driver_version": 12020, "device_count_error": 35},
            "no driver: cudaGetDeviceCount: CUDA driver version is insufficient for CUDA runtime version "
            "(cudaErrorInsufficientDriver); the NVIDIA driver supports CUDA 12.2, older than the CUDA runtime "
            "13.0: update the driver or use a runtime of its version",
        ),
        (
            {"device_count_error": 100},
            "no device: the CUDA driver finds no GPU (cudaGetDeviceCount: no CUDA-capable device is detected "
            "(cudaErrorNoDevice))",
        ),
        ({"devices": 0}, "no device: the CUDA driver finds no GPU (cudaGetDeviceCount: 0 devices)"),
        (
            {"device_count_error": 999},
            "runtime error: cudaGetDeviceCount: unknown error (cudaErrorUnknown); CUDA runtime 13.0",
        ),
    ],
    ids=["no-driver", "old-driver", "no-device", "zero-devices", "other-error"],
)
def test_unavailable_reasons(recording: Recording, settings: dict[str, int], reason: str) -> None:
    for key, value in settings.items():
        recording.set(key, value)
    recording.load()
    status = dlbind.backends()["cuda"]
    assert not status.available and status.reason == reason
    assert "\n" not in status.reason and status.runtime_version.startswith("CUDA runtime 13.0")
    with pytest.raises(dlbind_cuda.Unavailable, match="^dlbind-cuda is unavailable: " + reason.split(":")[0]):
        dlbind_cuda.asarray(np.ones(3))
    assert recording.calls() == []  # nothing is attempted on an unavailable runtime


def test_the_probe_runs_once(recording: Recording) -> None:
    recording.load()
    dlbind.backends()
    dlbind_cuda.probe()
    assert recording.calls() == []


# -- allocation and copies ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("memory", "call", "name", "device_type"),
    [
        ("device", "cudaMalloc", "D0", DeviceType.kDLCUDA),
        ("host", "cudaMallocHost", "H0", DeviceType.kDLCUDAHost),
        ("managed", "cudaMallocManaged", "M0", DeviceType.kDLCUDAManaged),
    ],
)
def test_empty_allocates_and_frees(rec: Recording, memory: str, call: str, name: str, device_type: DeviceType) -> None:
    t = dlbind_cuda.empty((2, 3), "float32", memory=memory)
    assert t.device == (device_type, 0) and t.shape == (2, 3) and t.dtype.name == "float32"
    assert rec.calls() == ["cudaGetDevice() -> 0", f"{call}(24) -> {name} on device 0"]
    assert dlbind_cuda.device_of(t.data_ptr) == (device_type, 0)
    u = dlbind.from_dlpack(t)
    del t
    gc.collect()
    assert not any(c.startswith("cudaFree") for c in rec.calls())  # u still uses it
    del u
    gc.collect()
    assert rec.calls()[-1] == f"{'cudaFreeHost' if memory == 'host' else 'cudaFree'}({name})"


def test_asarray_copies_then_synchronises(rec: Recording) -> None:
    a = np.arange(12.0).reshape(3, 4)
    t = dlbind_cuda.asarray(a)
    assert t.device == CUDA and t.is_contiguous() and t.dtype.name == "float64"
    assert rec.calls() == [
        "cudaGetDevice() -> 0",
        "cudaMalloc(96) -> D0 on device 0",
        "cudaGetDevice() -> 0",
        "cudaMemcpy(D0+0, host, 96, HostToDevice)",
        "cudaStreamSynchronize(legacy)",
    ]
    rec.clear()
    back = host(t)
    assert np.array_equal(back, a)
    assert rec.calls() == [  # through a pinned block of the pool (test_cuda_copies.py)
        "cudaGetDevice() -> 0",
        "cudaHostAlloc(1048576, 1) -> H0 on device 0",
        "cudaMemcpyAsync(H0+0, D0+0, 96, DeviceToHost, legacy)",
        "cudaStreamSynchronize(legacy)",
    ]


@pytest.mark.parametrize(
    "a",
    [
        np.arange(-5, 5, dtype=np.int8),
        np.array([True, False, True]),
        (np.arange(6) + 1j * np.arange(6)).astype(np.complex64).reshape(2, 3),
        np.array(3.5),
        np.zeros((0, 4), dtype=np.float32),
        np.arange(60, dtype=np.uint16).reshape(3, 4, 5)[:, ::2, ::-1],
    ],
    ids=["int8", "bool", "complex64", "0-d", "empty", "strided-source"],
)
def test_asarray_round_trip(rec: Recording, a: np.ndarray) -> None:
    t = dlbind_cuda.asarray(a)
    assert t.shape == a.shape and t.dtype == dlbind.dtypes.from_numpy(a.dtype) and t.device == CUDA
    back = host(t)
    assert back.dtype == a.dtype and np.array_equal(back, a)


def test_host_and_managed_uploads_let_the_runtime_infer_the_direction(rec: Recording) -> None:
    dlbind_cuda.asarray(np.ones(2, dtype=np.float32), memory="managed")
    assert "cudaMemcpy(M0+0, host, 8, Default)" in rec.calls()


@pytest.mark.parametrize(
    ("strides", "offset", "view", "span"),
    [
        ((1, 6), 0, lambda a: a.reshape(4, 6).T, (0, 96)),  # transposed: the whole buffer
        ((6, -1), 5, lambda a: a.reshape(4, 6)[:, ::-1], (0, 96)),  # negative stride from byte_offset
        ((12, 2), 1, lambda a: a.reshape(4, 6)[::2, 1::2], (4, 68)),  # gaps: only the span is copied
    ],
    ids=["transposed", "negative", "gaps"],
)
def test_strided_device_memory_copies_its_span_then_compacts(
    rec: Recording, strides: tuple[int, int], offset: int, view: Any, span: tuple[int, int]
) -> None:
    a = np.arange(24, dtype=np.float32)
    base = dlbind_cuda.asarray(a)
    expected = view(a)
    t = dlbind.from_dlpack(
        dlbind.from_pointer(base.data_ptr, expected.shape, "float32", strides=strides, byte_offset=offset * 4,
                            device=CUDA, owner=base)
    )  # fmt: skip
    assert not t.is_contiguous()
    rec.clear()
    c = dlbind.from_dlpack(t, device="cpu", copy=True)
    assert c.flags & Flags.IS_COPIED and c.is_contiguous()
    assert np.array_equal(np.asarray(c), expected)
    start, nbytes = span
    assert f"cudaMemcpyAsync(H0+0, D0+{start}, {nbytes}, DeviceToHost, legacy)" in rec.calls()


def test_copy_false_to_the_host_is_refused(rec: Recording) -> None:
    t = dlbind_cuda.asarray(np.ones(3))
    with pytest.raises(BufferError, match=r"exporting to cpu:0 needs a copy from cuda:0, and copy=False forbids"):
        t.__dlpack__(max_version=(1, 3), dl_device=(DeviceType.kDLCPU, 0), copy=False)
    with pytest.raises(BufferError, match="numpy needs host memory; this tensor is on cuda"):
        np.asarray(t)


@pytest.mark.parametrize("stream", [5, 2, 1, -1])
def test_an_export_to_the_cpu_takes_no_stream(rec: Recording, stream: int) -> None:
    """The array API's ``__dlpack__``: a stream belongs to the device exported to, and the CPU takes None only;
    the export on stream=None waits for the tensor's work and copies (the producer synchronises)."""
    t = dlbind_cuda.asarray(np.arange(3.0))
    rec.clear()
    with pytest.raises(BufferError, match=f"stream must be None for an export to cpu \\(got {stream}\\)"):
        t.__dlpack__(max_version=(1, 3), dl_device=(DeviceType.kDLCPU, 0), stream=stream)
    assert not any("Memcpy" in call for call in rec.calls()), rec.calls()  # refused before any copy
    host = dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), dl_device=(DeviceType.kDLCPU, 0)))
    assert host.device == (DeviceType.kDLCPU, 0) and np.array_equal(np.asarray(host), np.arange(3.0))


def test_a_device_tensor_has_no_array_interface_and_asdlpack_wraps_its_dlpack(rec: Recording) -> None:
    """Device memory has no ``__array_interface__`` (``hasattr`` is False, as for ``__cuda_array_interface__``
    elsewhere), so ``asdlpack`` takes the Tensor's ``__dlpack__``; numpy's own read still says why it cannot."""
    t = dlbind_cuda.asarray(np.arange(3.0))
    assert not hasattr(t, "__array_interface__")
    wrapped = dlbind.asdlpack(t)
    assert wrapped.__dlpack_device__() == t.__dlpack_device__()
    again = dlbind.from_dlpack(wrapped)
    assert (again.data_ptr, again.shape, again.dtype) == (t.data_ptr, t.shape, t.dtype)
    with pytest.raises(BufferError, match="numpy needs host memory; this tensor is on cuda"):
        np.asarray(t)


def test_pinned_memory_is_read_by_numpy_without_a_copy(rec: Recording) -> None:
    a = np.arange(5, dtype=np.int64)
    t = dlbind_cuda.asarray(a, memory="host")
    rec.clear()
    assert np.array_equal(np.from_dlpack(t), a)
    assert rec.calls() == []


def test_empty_arguments(rec: Recording) -> None:
    assert dlbind_cuda.empty(5, "uint8").shape == (5,)
    assert dlbind_cuda.empty((0,)).data_ptr == 0
    with pytest.raises(ValueError, match="negative dimension"):
        dlbind_cuda.empty((-1,))
    with pytest.raises(ValueError, match=r"no CUDA device 3: this machine has 1 \(ids from 0\)"):
        dlbind_cuda.empty((1,), device_id=3)
    with pytest.raises(TypeError, match="device_id must be an int"):
        dlbind_cuda.empty((1,), device_id="0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory must be one of 'device', 'host', 'managed', not 'pinned'"):
        dlbind_cuda.empty((1,), memory="pinned")
    with pytest.raises(ValueError, match="unknown DLPack dtype name"):
        dlbind_cuda.empty((1,), "float31")


def test_allocation_failure_is_a_memory_error(rec: Recording) -> None:
    rec.fail("cudaMalloc", 2)
    with pytest.raises(MemoryError, match=r"cudaMalloc failed: out of memory \(cudaErrorMemoryAllocation\)"):
        dlbind_cuda.empty((1 << 20,), "float32")


def test_copy_failures(rec: Recording) -> None:
    rec.fail("cudaMemcpy", 1)
    with pytest.raises(dlbind_cuda.CudaError, match=r"cudaMemcpy failed: invalid argument \(cudaErrorInvalidValue\)"):
        dlbind_cuda.asarray(np.ones(4))
    t = dlbind_cuda.asarray(np.ones(4))
    rec.fail("cudaMemcpyAsync", 1)
    with pytest.raises(BufferError, match="copying cuda:0 memory to the host failed: cudaMemcpyAsync failed"):
        host(t)


def test_set_device_failure_names_the_call(recording: Recording) -> None:
    recording.set("devices", 2)
    recording.load()
    recording.fail("cudaSetDevice", 101)
    with pytest.raises(dlbind_cuda.CudaError, match=r"cudaSetDevice failed: invalid device ordinal") as info:
        dlbind_cuda.empty((1,), device_id=1)
    assert info.value.code == 101 and info.value.name == "cudaErrorInvalidDevice" and info.value.call == "cudaSetDevice"


def test_asarray_of_a_cuda_tensor_goes_through_the_host(rec: Recording) -> None:
    a = np.arange(5, dtype=np.int64)
    t = dlbind_cuda.asarray(dlbind_cuda.asarray(a))
    assert np.array_equal(host(t), a)


# -- device_of ------------------------------------------------------------------------------------------------


def test_device_of(recording: Recording) -> None:
    recording.set("devices", 3)
    recording.load()
    d = dlbind_cuda.empty((16,), "uint8", device_id=2)
    assert dlbind_cuda.device_of(d.data_ptr) == (DeviceType.kDLCUDA, 2)
    assert dlbind_cuda.device_of(d.data_ptr + 5) == (DeviceType.kDLCUDA, 2)  # inside the allocation
    assert backend.device_of(d.data_ptr) == (DeviceType.kDLCUDA, 2)
    # pinned and managed memory, made by GPU 2: device id 0, as dlpack.h says of them
    for memory, device_type in (("host", DeviceType.kDLCUDAHost), ("managed", DeviceType.kDLCUDAManaged)):
        t = dlbind_cuda.empty((4,), "float32", memory=memory, device_id=2)
        assert t.device == (device_type, 0) and dlbind_cuda.device_of(t.data_ptr) == (device_type, 0), memory
        interface = type("Interface", (), {"__cuda_array_interface__": t.__cuda_array_interface__})()
        assert dlbind.from_dlpack(dlbind.asdlpack(interface)).device == (device_type, 0), memory  # found by pointer
    plain = np.ones(4)
    with pytest.raises(BufferError, match="is not memory the CUDA runtime knows"):
        dlbind_cuda.device_of(plain.ctypes.data)
    with pytest.raises(TypeError, match="a pointer is an int"):
        dlbind_cuda.device_of("0x10")  # type: ignore[arg-type]
    recording.fail("cudaPointerGetAttributes", 400)
    with pytest.raises(BufferError, match=r"cannot tell which CUDA device holds .*invalid resource handle"):
        dlbind_cuda.device_of(d.data_ptr)


# -- __cuda_array_interface__ ----------------------------------------------------------------------------------


def test_export_cuda_array_interface(rec: Recording) -> None:
    t = dlbind_cuda.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    cai = t.__cuda_array_interface__
    assert cai == {
        "version": 3,
        "shape": (2, 3),
        "typestr": "<f4",
        "data": (t.data_ptr, False),
        "strides": None,
        "stream": 1,
    }
    transposed = dlbind.from_dlpack(
        dlbind.from_pointer(t.data_ptr, (3, 2), "float32", strides=(1, 3), device=CUDA, owner=t, readonly=True)
    )
    cai = transposed.__cuda_array_interface__
    assert cai["strides"] == (4, 12) and cai["data"] == (t.data_ptr, True)
    assert dlbind_cuda.empty((0, 3), "int16").__cuda_array_interface__["data"] == (0, False)
    assert dlbind_cuda.empty((2,), "bool", memory="managed").__cuda_array_interface__["typestr"] == "|b1"
    assert not hasattr(dlbind.from_dlpack(np.ones(2)), "__cuda_array_interface__")
    assert not hasattr(dlbind_cuda.empty((2,), "bfloat16"), "__cuda_array_interface__")


class CudaArray:
    def __init__(self, interface: dict[str, Any]) -> None:
        self.__cuda_array_interface__ = interface


def test_import_cuda_array_interface_finds_the_device_from_the_pointer(recording: Recording) -> None:
    recording.set("devices", 2)
    recording.load()
    a = np.arange(8, dtype=np.int32)
    src = dlbind_cuda.asarray(a, device_id=1)
    interface = {**src.__cuda_array_interface__, "stream": None}
    t = dlbind.from_dlpack(CudaArray(interface))
    assert t.device == (DeviceType.kDLCUDA, 1) and t.data_ptr == src.data_ptr
    assert np.array_equal(host(t), a)
    managed = dlbind_cuda.empty((2,), "float64", memory="managed")
    assert dlbind.from_dlpack(CudaArray(managed.__cuda_array_interface__)).device == (DeviceType.kDLCUDAManaged, 0)
    # device_id= overrides the look-up; a zero-size array has no pointer to look up
    assert dlbind.from_dlpack(dlbind.asdlpack(CudaArray(interface), device_id=0)).device == CUDA
    empty = {"shape": (0,), "typestr": "<f4", "data": (0, False), "version": 3}
    assert dlbind.from_dlpack(CudaArray(empty)).shape == (0,)


def test_import_cuda_array_interface_refusals(rec: Recording) -> None:
    t = dlbind_cuda.asarray(np.ones(3, dtype=np.float32))
    cai = t.__cuda_array_interface__
    with pytest.raises(BufferError, match="with a mask"):
        dlbind.from_dlpack(CudaArray({**cai, "mask": object()}))
    with pytest.raises(TypeError, match=r"data must be \(pointer, read_only\)"):
        dlbind.from_dlpack(CudaArray({**cai, "data": None}))  # the wrong type, as __array_interface__'s data
    with pytest.raises(BufferError, match="stream True is not valid"):
        dlbind.from_dlpack(CudaArray({**cai, "stream": True}))
    plain = np.ones(3, dtype=np.float32)
    with pytest.raises(BufferError, match=r"not memory the CUDA runtime knows.*\(or pass device_id="):
        dlbind.from_dlpack(CudaArray({**cai, "data": (plain.ctypes.data, False)}))


def test_read_only_cuda_array_interface_stays_read_only(rec: Recording) -> None:
    t = dlbind_cuda.asarray(np.ones(3, dtype=np.float32))
    u = dlbind.from_dlpack(CudaArray({**t.__cuda_array_interface__, "data": (t.data_ptr, True)}))
    assert u.readonly
