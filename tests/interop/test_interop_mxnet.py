"""mxnet <-> dlbind (1.9.1 with numpy 1.23.5: no __dlpack__, module functions and legacy capsules, bool as
1-bit kDLUInt stored one byte per element, byte_offset ignored)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("mxnet")


class TestMxnet(InteropSuite):
    system: ClassVar[str] = "mxnet"
    module: ClassVar[str] = "mxnet"
    dtypes: ClassVar[tuple[str, ...]] = ("bool", "int8", "int32", "int64", "uint8", "float16", "float32", "float64")

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.nd.array(np.array(a, copy=True), dtype=a.dtype)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.asnumpy(), copy=True)
