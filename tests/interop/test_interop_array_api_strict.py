"""array_api_strict <-> dlbind (2.6)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

require("array_api_strict")


class TestArrayApiStrict(InteropSuite):
    system: ClassVar[str] = "array_api_strict"
    module: ClassVar[str] = "array_api_strict"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
        "complex64", "complex128",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.asarray(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(np.from_dlpack(x), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(np.from_dlpack(x))

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
