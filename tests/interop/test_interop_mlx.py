"""mlx <-> dlbind (mlx[cpu] 0.32: mlx.core.array(obj) imports; negative strides refused)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

require("mlx.core")


class TestMlx(InteropSuite):
    system: ClassVar[str] = "mlx"
    module: ClassVar[str] = "mlx.core"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "complex64",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.array(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x, copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(np.asarray(memoryview(x)))  # mlx arrays export their own memory as a buffer

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
