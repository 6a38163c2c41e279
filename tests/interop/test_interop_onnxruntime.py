"""onnxruntime <-> dlbind (1.31: OrtValue.__dlpack__ takes no max_version, exports NULL strides and bool as
uint8; OrtValue.from_dlpack imports only contiguous data and ignores byte_offset)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("onnxruntime")


class TestOnnxruntime(InteropSuite):
    system: ClassVar[str] = "onnxruntime"
    module: ClassVar[str] = "onnxruntime"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "float64",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.OrtValue.ortvalue_from_numpy(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.data_ptr())

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # an OrtValue has no in-place write from Python

    def view(self, lib: Any, x: Any) -> Any:
        return None
