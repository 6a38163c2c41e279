"""Dr.Jit <-> dlbind (1.5, its LLVM backend on the CPU): ``__dlpack__`` takes only ``stream`` (nanobind refuses
``max_version`` with its own words) and gives legacy capsules; a tensor type per dtype, each casting what it is
handed silently."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, ndarray_ptr, require, values

import dlbind

require("drjit")

# dlbind's dtype name -> Dr.Jit's LLVM tensor type (spec/adapters.toml [drjit.import] by_dtype)
TYPES = {"bool": "TensorXb", "int8": "TensorXi8", "uint8": "TensorXu8", "int32": "TensorXi", "uint32": "TensorXu",
         "int64": "TensorXi64", "uint64": "TensorXu64", "float16": "TensorXf16", "float32": "TensorXf",
         "float64": "TensorXf64"}  # fmt: skip


class TestDrjit(InteropSuite):
    system: ClassVar[str] = "drjit"
    module: ClassVar[str] = "drjit"
    dtypes: ClassVar[tuple[str, ...]] = tuple(TYPES)

    def make(self, lib: Any, a: np.ndarray) -> Any:
        import drjit.llvm

        return getattr(drjit.llvm, TYPES[a.dtype.name])(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # its item assignment makes a new variable (copy on write): nothing is written in place

    def view(self, lib: Any, x: Any) -> Any:
        return x[1:, ::2]  # a new, compact tensor: Dr.Jit's slices are gathers

    # -- the quirks, with the bare library, and dlbind's handling of them ---------------------------------

    def test_dlpack_takes_stream_only(self, lib: Any) -> None:
        """Quirk dlpack_takes_stream_only: nanobind's refusal of max_version is a keyword refusal dlbind retries;
        fails when Dr.Jit takes max_version (then the row's capsules fact is to be updated)."""
        a = values("float32")
        x = self.make(lib, a)
        with pytest.raises(TypeError, match="incompatible function arguments"):
            x.__dlpack__(stream=None, max_version=(1, 3))
        t = dlbind.from_dlpack(x)
        np.testing.assert_array_equal(np.asarray(t), a)
        y = dlbind.convert(x, to="numpy")
        np.testing.assert_array_equal(y, a)

    @pytest.mark.parametrize("dtype", ["int64", "float64", "int8"])
    def test_constructor_casts_silently(self, lib: Any, dtype: str) -> None:
        """Quirk constructor_casts: TensorXf casts other dtypes to float32; dlbind picks the dtype's own type."""
        import drjit.llvm

        a = values(dtype)
        assert np.from_dlpack(drjit.llvm.TensorXf(a)).dtype == np.float32  # the bare library casts
        y = dlbind.convert(a, to="drjit")
        assert type(y).__name__ == TYPES[dtype]
        np.testing.assert_array_equal(np.from_dlpack(y), a)

    @pytest.mark.parametrize("dtype", ["float32", "int64"])
    def test_contiguous_numpy_is_shared(self, lib: Any, dtype: str) -> None:
        a = values(dtype)
        y = dlbind.convert(a, to="drjit")
        assert ndarray_ptr(np.from_dlpack(y)) == ndarray_ptr(a)
        back = dlbind.convert(y, to="numpy")
        assert ndarray_ptr(back) == ndarray_ptr(a)

    @pytest.mark.parametrize("dtype", ["int16", "uint16", "complex64", "complex128"])
    def test_dtypes_without_a_type_are_refused(self, lib: Any, dtype: str) -> None:
        with pytest.raises(BufferError, match=rf"drjit has no array type of {dtype}.*cast it to one of"):
            dlbind.convert(values(dtype), to="drjit")
        plan = str(dlbind.explain(values(dtype), to="drjit"))
        assert plan.startswith("refused") and f"no array type of {dtype}" in plan

    def test_bfloat16_is_refused(self, lib: Any) -> None:
        torch = pytest.importorskip("torch")
        with pytest.raises(BufferError, match="drjit has no array type of bfloat16"):
            dlbind.convert(torch.zeros(3, dtype=torch.bfloat16), to="drjit")

    def test_readonly_numpy_is_copied(self, lib: Any) -> None:
        """Dr.Jit asks for a legacy capsule, which cannot say read-only, and writes what it imports
        (drjit.scatter): read-only data is copied first."""
        a = values("float32")
        a.flags.writeable = False
        y = dlbind.convert(a, to="drjit")
        assert ndarray_ptr(np.from_dlpack(y)) != ndarray_ptr(a)
        np.testing.assert_array_equal(np.from_dlpack(y), a)
        with pytest.raises(BufferError, match="copy=False"):
            dlbind.convert(a, to="drjit", copy=False)

    def test_dtypes_cross(self, lib: Any) -> None:
        assert dlbind.dtype(lib.VarType.Float32) == dlbind.dtype("float32")
        assert dlbind.dtype("int64", to="drjit") is lib.VarType.Int64
        with pytest.raises(ValueError, match="drjit"):
            dlbind.dtype("bfloat16", to="drjit")
