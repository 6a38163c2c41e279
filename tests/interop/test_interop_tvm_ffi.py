"""tvm_ffi <-> dlbind (apache-tvm-ffi 0.1.15)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

require("tvm_ffi")


class TestTvmFfi(InteropSuite):
    system: ClassVar[str] = "tvm_ffi"
    module: ClassVar[str] = "tvm_ffi"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.from_dlpack(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(np.from_dlpack(x), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(np.from_dlpack(x))

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        view = np.from_dlpack(x)
        if not view.flags.writeable:
            return False
        view[(0,) * view.ndim] = value
        return True

    def view(self, lib: Any, x: Any) -> Any:
        return None

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
