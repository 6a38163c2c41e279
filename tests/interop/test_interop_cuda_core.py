"""cuda.core <-> dlbind (1.2, host memory: no GPU here): ``StridedMemoryView`` views any DLPack array, CPU ones
included, and has ``__dlpack_c_exchange_api__``; its ``__dlpack__`` refuses every ``dl_device`` and
``copy=True``, and ``StridedMemoryView.from_dlpack`` wants ``stream_ptr=-1`` for host memory."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, ndarray_ptr, require, values

import dlbind
from dlbind.conversion import ExplanationKind

require("cuda.core")


class TestCudaCore(InteropSuite):
    system: ClassVar[str] = "cuda_core"
    module: ClassVar[str] = "cuda.core"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        from cuda.core.utils import StridedMemoryView

        return StridedMemoryView.from_dlpack(np.array(a, copy=True), stream_ptr=-1)

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(np.from_dlpack(x), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.ptr)

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # a view's metadata only: it has no item assignment

    def view(self, lib: Any, x: Any) -> Any:
        from cuda.core.utils import StridedMemoryView

        return StridedMemoryView.from_dlpack(np.from_dlpack(x)[1:, ::2], stream_ptr=-1)

    # -- the quirks, with the bare library, and dlbind's handling of them ---------------------------------

    def test_export_refuses_dl_device_and_copy(self, lib: Any) -> None:
        """Quirk export_refuses_dl_device_and_copy: fails when the view takes them (update the row)."""
        a = values("float32")
        x = self.make(lib, a)
        with pytest.raises(BufferError, match="dl_device"):
            x.__dlpack__(dl_device=(1, 0))
        with pytest.raises(BufferError, match="copy=True"):
            x.__dlpack__(copy=True)
        t = dlbind.from_dlpack(x, copy=True)
        assert t.flags & dlbind.Flags.IS_COPIED and not np.shares_memory(np.from_dlpack(t), np.from_dlpack(x))
        np.testing.assert_array_equal(np.from_dlpack(t), a)
        pytest.importorskip("torch")
        y = dlbind.convert(x, to="torch", copy=True)
        assert y.data_ptr() != x.ptr
        np.testing.assert_array_equal(y.numpy(), a)

    def test_import_needs_stream_ptr(self, lib: Any) -> None:
        """Quirk import_needs_stream_ptr: fails when from_dlpack takes host memory without stream_ptr."""
        from cuda.core.utils import StridedMemoryView

        a = values("float32")
        with pytest.raises(BufferError, match="ambiguous"):
            StridedMemoryView.from_dlpack(a)
        assert dlbind.convert(a, to="cuda.core").ptr == ndarray_ptr(a)

    @pytest.mark.parametrize("layout", ["contiguous", "transposed", "step", "reversed", "offset"])
    def test_numpy_is_viewed_in_every_layout(self, lib: Any, layout: str) -> None:
        base = values("float64", (4, 6))
        a = {"contiguous": base, "transposed": base.T, "step": base[:, ::2], "reversed": base[::-1],
             "offset": base[1:]}[layout]  # fmt: skip
        v = dlbind.convert(a, to="cuda.core")
        assert v.ptr == ndarray_ptr(a)
        assert tuple(v.strides) == tuple(s // a.itemsize for s in a.strides)
        np.testing.assert_array_equal(np.from_dlpack(v), a)

    def test_view_to_numpy_is_shared(self, lib: Any) -> None:
        a = values("float32")
        v = self.make(lib, a)
        assert ndarray_ptr(dlbind.convert(v, to="numpy")) == v.ptr

    def test_exchange_table_is_read(self, lib: Any) -> None:
        from cuda.core.utils import StridedMemoryView

        assert hasattr(StridedMemoryView, "__dlpack_c_exchange_api__")
        if dlbind.ffi_build() == "compiled":
            assert "exchange table" in str(dlbind.explain(values("float32"), to="cuda.core"))

    def test_what_convert_gives_is_usable_or_refused(self, lib: Any) -> None:
        """Every dtype numpy holds (ml_dtypes' among them) reaches a view whose ``dtype`` reads and whose
        ``__dlpack__`` exports or refuses as the spec says (BufferError: bfloat16), or is refused beforehand by
        name (float8: TypeError "Unsupported dtype. dtype code: 10" from both, of a view convert called
        zero-copy)."""
        ml_dtypes = pytest.importorskip("ml_dtypes")
        from dlbind._generated.tables import DTYPE_BY_NAME

        for name in DTYPE_BY_NAME:
            kind = getattr(ml_dtypes, name, None) if name not in ("bool",) else np.bool_
            try:
                a = np.zeros(3, kind if kind is not None else name)
            except TypeError:
                continue  # numpy holds no such dtype here
            said = dlbind.explain(a, to="cuda.core")
            if said.kind == ExplanationKind.REFUSED:
                with pytest.raises(BufferError):
                    dlbind.convert(a, to="cuda.core")
                continue
            v = dlbind.convert(a, to="cuda.core")
            assert v.dtype == a.dtype, name
            with contextlib.suppress(BufferError):  # its export's refusal (bfloat16), as the spec says it
                v.__dlpack__(max_version=(1, 0))
