"""paddle <-> dlbind (paddlepaddle 3.3.1: __dlpack_device__ gives (kDLCPU, None), which dlbind reads as 0;
imports read-only data writable)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

import dlbind

require("paddle")


class TestPaddle(InteropSuite):
    system: ClassVar[str] = "paddle"
    module: ClassVar[str] = "paddle"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "complex64",
        "complex128",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.to_tensor(np.array(a, copy=True), place=lib.CPUPlace())

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.data_ptr()) if hasattr(x, "data_ptr") else None

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        gaps: dict[str, str] = {}
        return gaps

    def test_byte_offset_reaches_the_right_values(self, lib: Any) -> None:
        """issue 21: paddle's importer ignores byte_offset (wrong values); its row says so and dlbind copies."""
        base = np.arange(12.0).reshape(3, 4)
        p = dlbind.from_pointer(base.ctypes.data, (2, 4), "float64", byte_offset=32, owner=base)
        np.testing.assert_array_equal(dlbind.convert(p, to="paddle").numpy(), base[1:])
