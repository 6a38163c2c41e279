"""numpy <-> dlbind at the installed numpy version (1.24, 1.26, 2.0, newest in the matrix)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

import dlbind

require("numpy")


class TestNumpy(InteropSuite):
    system: ClassVar[str] = "numpy"
    module: ClassVar[str] = "numpy"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return np.array(a, copy=True)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x, copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(x)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        gaps: dict[str, str] = {}
        return gaps

    # read-only sources: numpy before 2.1 refuses to export them, yet the buffer protocol carries them
    def _readonly(self) -> np.ndarray:
        a = np.arange(6.0).reshape(2, 3)
        a.flags.writeable = False
        return a

    def test_readonly_from_dlpack(self, lib: Any) -> None:
        a = self._readonly()
        t = dlbind.from_dlpack(a)
        assert t.readonly
        np.testing.assert_array_equal(np.array(t), a)

    def test_readonly_compat(self, lib: Any) -> None:
        a = self._readonly()
        if version("numpy") < (2, 1):
            # numpy<2.1 asks for a legacy capsule, which cannot say read-only: refused, as the spec says
            # (the producer cannot know this consumer imports every legacy capsule read-only)
            with pytest.raises(BufferError, match="read-only"):
                np.from_dlpack(dlbind.compat(a))
            y = dlbind.convert(a, "numpy")  # convert knows the consumer: read-only data arrives read-only
            assert not y.flags.writeable or not np.shares_memory(y, a)
            np.testing.assert_array_equal(y, a)
            return
        y = np.from_dlpack(dlbind.compat(a))
        assert not y.flags.writeable
        np.testing.assert_array_equal(y, a)

    @pytest.mark.parametrize("target", ["torch", "jax", "tvm_ffi", "array_api_strict"])
    def test_readonly_convert(self, lib: Any, target: str) -> None:
        """A read-only ndarray reaches every installed target: as a non-writable view or as a copy."""
        pytest.importorskip(target)
        a = self._readonly()
        y = dlbind.convert(a, to=target)
        back = y.numpy() if target == "torch" else np.array(y) if target == "jax" else np.from_dlpack(y)
        np.testing.assert_array_equal(back, a)
        if back.flags.writeable and np.shares_memory(back, a):
            raise AssertionError(f"convert(read-only, to={target!r}) gave a writable alias")


@pytest.mark.parametrize("readonly", [False, True])
def test_own_array_copy_true_is_a_writable_copy(readonly: bool) -> None:
    a = np.arange(6.0)
    a.flags.writeable = not readonly
    y = dlbind.convert(a, to="numpy", copy=True)
    assert not np.shares_memory(y, a) and y.flags.writeable and np.array_equal(y, a)


def test_a_read_only_tensor_reaches_numpy_zero_copy() -> None:
    """numpy < 2.1 imports every legacy capsule read-only: a read-only tensor needs no copy (issue 21)."""
    a = np.arange(6.0)
    a.flags.writeable = False
    y = dlbind.convert(dlbind.from_dlpack(a), to="numpy", copy=False)
    assert np.shares_memory(y, a) and not y.flags.writeable
