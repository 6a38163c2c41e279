"""awkward <-> dlbind (2.14): ``ak.from_dlpack`` imports (numpy's from_dlpack underneath); its arrays have no
``__dlpack__``: a flat numeric array exports through ``ak.to_numpy`` (zero-copy), jagged and option-typed ones
are refused."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, ndarray_ptr, require, values

import dlbind

require("awkward")


class TestAwkward(InteropSuite):
    system: ClassVar[str] = "awkward"
    module: ClassVar[str] = "awkward"
    ndims: ClassVar[tuple[int, int] | None] = (1, 64)  # an awkward array has a length

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.from_numpy(np.array(a, copy=True), regulararray=True)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(lib.to_numpy(x), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(lib.to_numpy(x))

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # awkward arrays have no item assignment

    def view(self, lib: Any, x: Any) -> Any:
        return x[1:, ::2]

    # -- the quirk, with the bare library, and dlbind's handling of it --------------------------------

    def test_no_dlpack_export(self, lib: Any) -> None:
        """Quirk no_dlpack_export: fails when awkward's arrays get __dlpack__ (then the row's export is to be
        updated)."""
        x = lib.Array([1.0, 2.0])
        assert not hasattr(x, "__dlpack__")
        with pytest.raises((TypeError, AttributeError)):
            np.from_dlpack(x)
        np.testing.assert_array_equal(dlbind.convert(x, to="numpy"), [1.0, 2.0])

    def test_flat_export_is_shared(self, lib: Any) -> None:
        a = values("float64")
        x = lib.from_numpy(a, regulararray=True)
        assert ndarray_ptr(dlbind.convert(x, to="numpy")) == ndarray_ptr(a)
        assert ndarray_ptr(np.asarray(dlbind.from_dlpack(x))) == ndarray_ptr(a)

    def test_numpy_import_is_shared(self, lib: Any) -> None:
        a = values("float32")
        y = dlbind.convert(a, to="awkward")
        assert isinstance(y, lib.Array)
        assert ndarray_ptr(lib.to_numpy(y)) == ndarray_ptr(a)

    @pytest.mark.parametrize(
        ("data", "why"),
        [([[1, 2], [3]], "jagged"), ([1, None, 3], "missing values"), ([[1.0, None], [2.0, 3.0]], "missing values")],
    )
    def test_jagged_and_option_types_are_refused(self, lib: Any, data: list[Any], why: str) -> None:
        x = lib.Array(data)
        for call in (lambda: dlbind.convert(x, to="numpy"), lambda: dlbind.from_dlpack(x)):
            with pytest.raises(BufferError, match=rf"awkward\.to_numpy.*{why}"):
                call()
        self._explain_says_the_refusal(x)

    @pytest.mark.parametrize(("data", "held"), [(["ab", "c"], "<U2"), ([{"x": 1, "y": 2.0}], "('x', '<i8')")])
    def test_strings_and_records_are_refused_naming_awkward(self, lib: Any, data: list[Any], held: str) -> None:
        """ak.to_numpy gives them as a numpy array of strings or records, whose __dlpack__ refuses in numpy's
        words: dlbind's BufferError names awkward's export, what it gave, and what to do instead."""
        x = lib.Array(data)
        with pytest.raises(BufferError, match="DLPack only supports"):
            lib.to_numpy(x).__dlpack__()  # numpy's own refusal, which names neither awkward nor a way out
        for call in (lambda: dlbind.convert(x, to="torch"), lambda: dlbind.from_dlpack(x)):
            with pytest.raises(BufferError) as info:
                call()
            said = str(info.value)
            assert said.startswith("Array exported by awkward.to_numpy as a numpy.ndarray of dtype "), said
            assert held in said and "take a numeric field of a record array" in said, said
        self._explain_says_the_refusal(x)

    @staticmethod
    def _explain_says_the_refusal(x: Any) -> None:
        """explain renders the refusal convert raises, in the same words (and calls nothing that raises)."""
        with pytest.raises(BufferError) as info:
            dlbind.convert(x, to="torch")
        said = dlbind.explain(x, to="torch")
        assert (said.kind, said.text) == ("refused", f"refused: {info.value}")

    def test_to_torch_and_back(self, lib: Any) -> None:
        torch = pytest.importorskip("torch")
        a = values("float32")
        t = dlbind.convert(lib.from_numpy(a, regulararray=True), to="torch")
        assert t.data_ptr() == ndarray_ptr(a)
        y = dlbind.convert(torch.arange(4.0), to="awkward")
        assert lib.to_list(y) == [0.0, 1.0, 2.0, 3.0]
