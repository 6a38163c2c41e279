"""pyarrow <-> dlbind (15.0.2, the first release with ``__dlpack__``, and 26.0.1, the newest).

Arrow exports through ``Array.__dlpack__`` (fixed-width arrays without nulls; versioned capsules from 26) and,
from 21, ``Tensor.__dlpack__`` (before: the buffer protocol). It has no DLPack importer before 26: dlbind hands
``pyarrow.array`` a numpy view for 1-D data and ``pyarrow.Tensor.from_numpy`` for every other shape, zero-copy
where the layout allows. Values are read back by Arrow's own ``to_numpy``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, ndarray_ptr, require, same, values, version  # noqa: F401

import dlbind
from dlbind.conversion import ExplanationKind

require("pyarrow")

FIXED = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")


class TestPyarrow(InteropSuite):
    system: ClassVar[str] = "pyarrow"
    module: ClassVar[str] = "pyarrow"
    # bool is bit-packed in Arrow (its __dlpack__ refuses it), and Arrow has no complex types
    dtypes: ClassVar[tuple[str, ...]] = FIXED
    immutable: ClassVar[bool] = True
    sample_shape: ClassVar[tuple[int, ...]] = (24,)  # an Array: Tensor has __dlpack__ from 21 only

    def make(self, lib: Any, a: np.ndarray) -> Any:
        a = np.array(a, copy=True)
        return lib.array(a) if a.ndim == 1 else lib.Tensor.from_numpy(a)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        if isinstance(x, lib.Tensor):
            return np.array(x.to_numpy(), copy=True)
        return np.array(x.to_numpy(zero_copy_only=False), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        if isinstance(x, lib.Tensor):
            return ndarray_ptr(x.to_numpy())  # its zero-copy view
        return int(x.buffers()[1].address) + x.offset * x.type.bit_width // 8

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # Arrow arrays are immutable

    def view(self, lib: Any, x: Any) -> Any:
        return None  # a Tensor has no slicing (an Array's slices: test_slice_keeps_its_offset)

    # -- Arrow's own --------------------------------------------------------------------------------------

    @pytest.mark.parametrize("dtype", FIXED)
    def test_1d_is_an_array_over_the_same_memory(self, lib: Any, dtype: str) -> None:
        a = values(dtype, (24,))
        y = dlbind.convert(a, to="pyarrow", copy=False)
        assert isinstance(y, lib.Array) and self.ptr(lib, y) == ndarray_ptr(a)
        same(self.to_numpy(lib, y), a)
        back = dlbind.convert(y, to="numpy", copy=False)
        assert ndarray_ptr(back) == ndarray_ptr(a) and not back.flags.writeable  # Arrow's memory stays read-only
        same(back, a)

    @pytest.mark.parametrize("shape", [(), (4, 6), (2, 3, 4)], ids=["0-d", "2-d", "3-d"])
    def test_other_shapes_are_a_tensor_over_the_same_memory(self, lib: Any, shape: tuple[int, ...]) -> None:
        a = values("float64", shape)
        y = dlbind.convert(a, to="pyarrow", copy=False)
        assert isinstance(y, lib.Tensor) and self.ptr(lib, y) == ndarray_ptr(a)
        same(self.to_numpy(lib, y), a)
        same(dlbind.convert(y, to="numpy"), a)

    def test_strided_data(self, lib: Any) -> None:
        """pyarrow.array copies strided data silently: dlbind copies first (copy=False refuses it); a Tensor takes
        positive strides as they are, and negative ones through a copy."""
        a = values("float32", (24,))[::2]
        with pytest.raises(BufferError, match=r"not compact.*copy=False"):
            dlbind.convert(a, to="pyarrow", copy=False)
        same(self.to_numpy(lib, dlbind.convert(a, to="pyarrow")), a)
        b = values("float32")[:, ::2]
        y = dlbind.convert(b, to="pyarrow", copy=False)
        assert self.ptr(lib, y) == ndarray_ptr(b)
        same(self.to_numpy(lib, y), b)
        c = values("float32")[::-1]
        with pytest.raises(BufferError, match="negative strides"):
            dlbind.convert(c, to="pyarrow", copy=False)
        same(self.to_numpy(lib, dlbind.convert(c, to="pyarrow")), c)

    def test_slice_keeps_its_offset(self, lib: Any) -> None:
        x = lib.array(np.arange(10, dtype=np.int64)).slice(3, 4)
        y = dlbind.convert(x, to="numpy", copy=False)
        assert y.tolist() == [3, 4, 5, 6] and ndarray_ptr(y) == self.ptr(lib, x)

    def test_bool_goes_in_packed(self, lib: Any) -> None:
        """Arrow holds bool as bits: 1-D bool goes in through pyarrow.array's packing (a copy, so copy=False refuses
        it); a Tensor has no bool."""
        a = values("bool", (24,))
        y = dlbind.convert(a, to="pyarrow")
        assert y.type == lib.bool_() and y.to_pylist() == a.tolist()
        with pytest.raises(BufferError, match=r"bool as bits.*copy=False"):
            dlbind.convert(a, to="pyarrow", copy=False)
        with pytest.raises(BufferError, match="bool of 2 dimensions"):
            dlbind.convert(values("bool"), to="pyarrow")
        assert dlbind.explain(a, to="pyarrow").kind == ExplanationKind.COPY

    @pytest.mark.parametrize("dtype", ["complex64", "complex128"])
    def test_complex_is_refused_by_name(self, lib: Any, dtype: str) -> None:
        with pytest.raises(BufferError, match=f"cannot import {dtype}"):
            dlbind.convert(values(dtype, (24,)), to="pyarrow")

    @pytest.mark.parametrize("route", ["convert", "from_dlpack", "to torch", "explain"])
    @pytest.mark.parametrize("kind", ["nulls", "bool"])
    def test_nulls_and_bools_are_refused_with_the_way_out(self, lib: Any, kind: str, route: str) -> None:
        """Arrow refuses arrays with nulls and bit-packed bool with ArrowTypeError (a TypeError): dlbind says
        BufferError, the spec's type, naming the cause and what to do instead."""
        x = lib.array([1.5, None, 3.0]) if kind == "nulls" else lib.array([True, False])
        cause, way = ("no nulls", "fill_null") if kind == "nulls" else ("Bit-packed boolean", "cast")
        if route == "explain":
            said = dlbind.explain(x, to="numpy")
            assert said.kind == ExplanationKind.REFUSED and cause in said.text and way in said.text
            return
        call = {
            "convert": lambda: dlbind.convert(x, to="numpy"),
            "from_dlpack": lambda: dlbind.from_dlpack(x),
            "to torch": lambda: dlbind.convert(x, to=pytest.importorskip("torch")),
        }[route]
        with pytest.raises(BufferError) as caught:
            call()
        assert type(caught.value) is BufferError, type(caught.value)
        assert (
            cause in str(caught.value)
            and way in str(caught.value)
            and "to_numpy(zero_copy_only=False)" in str(caught.value)
        )
        # the way out works
        import pyarrow.compute as pc

        fixed = pc.fill_null(x, 0.0) if kind == "nulls" else x.cast(lib.uint8())
        assert dlbind.convert(fixed, to="numpy").tolist() == fixed.to_pylist()

    def test_versioned_capsules_from_26(self, lib: Any) -> None:
        """Before 26 its __dlpack__ takes stream= only: dlbind learns the older call once, and Arrow's memory
        still reaches numpy read-only."""
        x = lib.array(np.arange(4.0))
        t = dlbind.from_dlpack(x)
        assert t.readonly
        from dlbind.sources import export_plan

        plan = export_plan(type(x))
        assert (plan.call_style != 0) == (version("pyarrow") < (26,)), plan.call_style
