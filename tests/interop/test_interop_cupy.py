"""cupy <-> dlbind without a GPU (cupy-cuda13x 14.2): CuPy imports where no GPU is, and its dtypes and device
objects are plain Python objects; its arrays need a CUDA device. What runs here: the dtype and device round trips
(test_dtypes_cross.py, test_devices_cross.py), dlbind's refusals of what CuPy cannot hold, and the quirks of its
row (spec/adapters.toml) on the bare library. The exchanges themselves run where a GPU is (.ci/gpu).
"""

from __future__ import annotations

import numpy as np
import pytest
from _suite import require

import dlbind
from dlbind import DeviceType

require("cupy")
import cupy  # noqa: E402


def _gpus() -> int:
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except cupy.cuda.runtime.CUDARuntimeError:
        return 0


needs_gpu = pytest.mark.skipif(_gpus() == 0, reason="no CUDA GPU here: CuPy's arrays need one")


def test_its_device_objects_have_no_hash_and_are_read() -> None:
    made = cupy.cuda.Device(3)
    with pytest.raises(TypeError, match="unhashable"):
        hash(made)  # so dlbind reads them without a cache keyed by the object
    assert dlbind.device(made) == (DeviceType.kDLCUDA, 3)
    assert dlbind.device("cuda:3", to="cupy") == made and type(dlbind.device("cuda:3", to="cupy")) is type(made)


def test_it_has_no_cpu_device_objects() -> None:
    with pytest.raises(ValueError, match=r"^cupy has no device objects of cpu: it makes those of cuda$"):
        dlbind.device("cpu", to="cupy")


def test_its_dtypes_are_numpys() -> None:
    assert dlbind.dtype("float16", to="cupy") is np.dtype(np.float16) is cupy.dtype("float16")
    assert dlbind.dtype(cupy.complex64) == dlbind.dtype("complex64")


def test_bare_cupy_refuses_host_producers_with_a_type_error() -> None:
    # the row's no_device_keyword quirk: host producers get a TypeError, device= a NotImplementedError
    with pytest.raises(TypeError, match="CPU arrays cannot be directly imported to CuPy"):
        cupy.from_dlpack(np.arange(3))
    with pytest.raises(NotImplementedError, match="does not support device"):
        cupy.from_dlpack(np.arange(3), device=cupy.cuda.Device(0))


def test_dlbind_refuses_host_data_for_cupy_in_explain_as_in_convert() -> None:
    said = dlbind.explain(np.arange(3.0), to="cupy")
    with pytest.raises(BufferError) as refused:
        dlbind.convert(np.arange(3.0), to="cupy")
    assert str(said) == f"refused: {refused.value}" and "cupy imports from cuda, rocm only" in str(refused.value)


def test_a_cupy_device_asked_of_a_host_only_target_is_refused_by_name() -> None:
    with pytest.raises(BufferError, match="no device <CUDA Device 0> for numpy: numpy holds no cuda arrays"):
        dlbind.convert(np.arange(3.0), to="numpy", device=cupy.cuda.Device(0))


@needs_gpu
def test_its_arrays_cross_zero_copy_on_a_gpu() -> None:
    x = cupy.arange(6.0).reshape(2, 3)
    t = dlbind.from_dlpack(x)
    assert t.device == (DeviceType.kDLCUDA, x.device.id) and t.data_ptr + t.byte_offset == x.data.ptr
    back = dlbind.convert(t, to="cupy")
    assert back.data.ptr == x.data.ptr and bool((back == x).all())
