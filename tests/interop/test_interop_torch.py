"""torch <-> dlbind (torch 2.13 in the matrix), and torch's export checks on every dlbind route."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

import dlbind

require("torch")

# torch refuses to export these itself (BufferError from Tensor.__dlpack__); every dlbind route must too
REFUSED: dict[str, Callable[[Any], Any]] = {
    "conj": lambda torch: torch.tensor([1 + 1j, 2 - 1j]).conj(),
    "neg": lambda torch: torch.tensor([1 + 1j, 2 - 1j]).conj().imag,
    "requires_grad": lambda torch: torch.zeros(3, requires_grad=True),
    "sparse": lambda torch: torch.eye(3).to_sparse(),
    "quantized": lambda torch: torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.qint8),
}
ROUTES: dict[str, Callable[[Any], Any]] = {
    "from_dlpack": lambda x: dlbind.from_dlpack(x),
    "convert-numpy": lambda x: dlbind.convert(x, to="numpy"),
    "asdlpack": lambda x: dlbind.asdlpack(x).__dlpack__(),
    "compat": lambda x: dlbind.compat(x).__dlpack__(),
}


class TestTorch(InteropSuite):
    system: ClassVar[str] = "torch"
    module: ClassVar[str] = "torch"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "complex64",
        "complex128",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.from_numpy(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.detach().resolve_conj().resolve_neg().numpy(), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.data_ptr())

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}

    @pytest.mark.parametrize("route", list(ROUTES))
    @pytest.mark.parametrize("kind", list(REFUSED))
    def test_torch_refusals_kept(self, lib: Any, kind: str, route: str) -> None:
        """What torch's own __dlpack__ refuses, dlbind refuses with BufferError on every route."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch deprecates its quantized types
            x = REFUSED[kind](lib)
        with pytest.raises(BufferError):
            ROUTES[route](x)

    def test_conj_value_never_wrong(self, lib: Any) -> None:
        x = lib.tensor([1 + 1j, 2 - 1j]).conj()
        try:
            y = np.asarray(dlbind.from_dlpack(x))
        except BufferError:
            return
        np.testing.assert_array_equal(y, np.array([1 - 1j, 2 + 1j]))

    def test_readonly_copy_false_refused(self, lib: Any) -> None:
        """torch has no read-only tensors: copy=False of read-only data must be a BufferError."""
        a = np.arange(4.0)
        a.flags.writeable = False
        with pytest.raises(BufferError):
            dlbind.convert(a, to="torch", copy=False)

    def test_zero_copy_to_torch(self, lib: Any) -> None:
        a = np.arange(6.0).reshape(2, 3)
        y = dlbind.convert(a, to="torch")
        assert int(y.data_ptr()) == ndarray_ptr(a)
