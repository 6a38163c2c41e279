"""jax <-> dlbind (0.10 on Python 3.11: legacy capsules only; newest on 3.12). jax arrays are immutable."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, load_module, require

import dlbind

require("jax")


class TestJax(InteropSuite):
    system: ClassVar[str] = "jax"
    module: ClassVar[str] = "jax"
    immutable: ClassVar[bool] = True
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "complex64",
    )  # fmt: skip  (x64 off: jax has no 64-bit types by default)

    @classmethod
    def load(cls) -> Any:
        super().load()
        return load_module("jax.numpy")

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.array(a)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x, copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.unsafe_buffer_pointer())

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}

    @pytest.mark.parametrize("target", ["torch", "tvm_ffi", "array_api_strict"])
    def test_no_writable_alias_to(self, lib: Any, target: str) -> None:
        """An immutable jax array never becomes a writable alias in another library."""
        mod = pytest.importorskip(target)
        a = np.arange(6.0, dtype=np.float32)
        x = self.make(lib, a)
        y = dlbind.convert(x, to=target)
        view = np.from_dlpack(y) if target != "torch" else y.numpy()
        if view.flags.writeable:
            view[0] = 99
        np.testing.assert_array_equal(np.array(x), a)
        del mod
