from __future__ import annotations

import numpy as np
import pytest

from dlbind import DataTypeCode, DType, dtypes

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize(
    ("np_dtype", "code", "bits"),
    [
        (np.bool_, DataTypeCode.kDLBool, 8),
        (np.int8, DataTypeCode.kDLInt, 8),
        (np.uint64, DataTypeCode.kDLUInt, 64),
        (np.float16, DataTypeCode.kDLFloat, 16),
        (np.float64, DataTypeCode.kDLFloat, 64),
        (np.complex64, DataTypeCode.kDLComplex, 64),
        (np.complex128, DataTypeCode.kDLComplex, 128),
        (ml_dtypes.bfloat16, DataTypeCode.kDLBfloat, 16),
        (ml_dtypes.float8_e4m3fn, DataTypeCode.kDLFloat8_e4m3fn, 8),
        (ml_dtypes.float8_e5m2, DataTypeCode.kDLFloat8_e5m2, 8),
        (ml_dtypes.float8_e8m0fnu, DataTypeCode.kDLFloat8_e8m0fnu, 8),
        (ml_dtypes.float4_e2m1fn, DataTypeCode.kDLFloat4_e2m1fn, 4),
        (ml_dtypes.float6_e2m3fn, DataTypeCode.kDLFloat6_e2m3fn, 6),
    ],
)
def test_numpy_round_trip(np_dtype: object, code: int, bits: int) -> None:
    dt = dtypes.from_numpy(np_dtype)
    assert (dt.code, dt.bits, dt.lanes) == (code, bits, 1)
    assert dt.to_numpy() == np.dtype(np_dtype)


def test_names_and_formats() -> None:
    assert dtypes.lookup("bfloat16") == DType(DataTypeCode.kDLBfloat, 16)
    assert DType(2, 32, 4).name == "float32x4"
    assert DType(99, 8).name == "code99:8"
    assert dtypes.from_format("<i") == DType(DataTypeCode.kDLInt, 32)
    assert dtypes.from_format("Zd") == DType(DataTypeCode.kDLComplex, 128)
    assert DType(DataTypeCode.kDLBool, 8).format == "?"
    assert DType(DataTypeCode.kDLFloat4_e2m1fn, 4).nbytes(5) == 3  # packed
    assert DType(DataTypeCode.kDLFloat4_e2m1fn, 4).nbytes(5, padded=True) == 5


@pytest.mark.parametrize("bad", [">i", "!d", "T{i:a:}", "x"])
def test_formats_refused(bad: str) -> None:
    with pytest.raises(BufferError):
        dtypes.from_format(bad)


def test_numpy_refusals() -> None:
    with pytest.raises(BufferError, match="not native-endian"):
        dtypes.from_numpy(np.dtype(">f4"))
    with pytest.raises(BufferError, match="no DLPack equivalent"):
        dtypes.from_numpy(np.dtype("U3"))
    with pytest.raises(ValueError, match="unknown DLPack dtype name"):
        dtypes.lookup("float128")
