"""paddle <-> dlbind (paddlepaddle 3.3.1: __dlpack_device__ gives (kDLCPU, None); imports read-only data writable)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

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
        negative = "negative strides are handed to paddle as they are (paddle: MemoryError); no bridge copy"
        device = "paddle 3.3's __dlpack_device__ gives (kDLCPU, None): raw TypeError from int(None)"
        gaps: dict[str, str] = {
            "test_from_numpy_layout[reversed]": negative,
            "test_from_tensor_layout[reversed]": negative,
            "test_from_numpy_device[str-index]": "device 'cpu:0' is passed raw to paddle.from_dlpack (ValueError)",
            "test_from_numpy_device[tuple]": "device (1, 0) is passed raw to paddle.from_dlpack (ValueError)",
            "test_from_dlpack_device[*]": device,
        }
        if not compiled():  # the compiled build's import skips __dlpack_device__ when no device is asked
            gaps.update(dict.fromkeys(
                ["test_from_dlpack_values[*]", "test_to_numpy_values[*]", "test_to_numpy_edge_shapes[*]",
                 "test_to_numpy_strided_view", "test_to_numpy_device[str]", "test_to_numpy_copy_*",
                 "test_to_torch"],
                f"{device} (pure build: every import)",
            ))  # fmt: skip
        return gaps
