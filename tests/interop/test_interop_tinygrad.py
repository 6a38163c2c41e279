"""tinygrad <-> dlbind (0.14 with DEV=PYTHON: no DLPack, no buffer protocol on Tensor; Tensor.data() gives a
memoryview)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, require, version  # noqa: F401

import dlbind

require("tinygrad")

# ml_dtypes' names -> tinygrad's
ML = {"bfloat16": "bfloat16", "float8_e4m3fn": "fp8e4m3", "float8_e5m2": "fp8e5m2",
      "float8_e4m3fnuz": "fp8e4m3fnuz", "float8_e5m2fnuz": "fp8e5m2fnuz"}  # fmt: skip

os.environ.setdefault("DEV", "PYTHON")


class TestTinygrad(InteropSuite):
    system: ClassVar[str] = "tinygrad"
    module: ClassVar[str] = "tinygrad"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "float64",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.Tensor(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    @pytest.mark.parametrize("name", list(ML))
    def test_ml_dtypes_both_ways(self, lib: Any, name: str) -> None:
        """bfloat16 and the fp8s travel as their bits both ways (issue 21: its numpy() widens them to float32,
        and Tensor(ndarray) cannot read an ml_dtypes buffer back)."""
        ml = pytest.importorskip("ml_dtypes")
        a = np.array([[1.5, -2.0], [0.25, 0.0]], dtype=getattr(ml, name))
        y = dlbind.convert(a, to="tinygrad")
        assert y.dtype == getattr(lib.dtypes, ML[name])
        np.testing.assert_array_equal(y.numpy(), a.astype(np.float32))
        back = dlbind.convert(y, to="numpy")
        assert back.dtype == a.dtype and back.tobytes() == a.tobytes()
        assert dlbind.from_dlpack(y).dtype.name == name
        torch = pytest.importorskip("torch")
        if hasattr(torch, name):
            assert dlbind.convert(y, to="torch").dtype == getattr(torch, name)

    def test_complex_is_refused_by_name(self, lib: Any) -> None:
        with pytest.raises(BufferError, match="complex64"):
            dlbind.convert(np.zeros(3, dtype=np.complex64), to="tinygrad")
