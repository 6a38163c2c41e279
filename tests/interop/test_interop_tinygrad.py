"""tinygrad <-> dlbind (0.14 with DEV=PYTHON: no DLPack, no buffer protocol on Tensor; Tensor.data() gives a
memoryview)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("tinygrad")

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
