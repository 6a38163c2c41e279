"""Modular MAX <-> dlbind (26.7, its CPU device): ``max.driver.Buffer`` exports column and step slices with the
strides of a compact array, ``Buffer.from_dlpack`` reads producers other than numpy and torch as compact and
copies read-only numpy arrays silently; ``copy=True`` is refused by its ``__dlpack__``."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, ndarray_ptr, require, values

import dlbind

require("max")


class _Producer:
    """A producer that is neither numpy nor torch (MAX checks the strides of those two only)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class TestMax(InteropSuite):
    system: ClassVar[str] = "max"
    module: ClassVar[str] = "max.driver"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "float64",
    )  # fmt: skip

    narrowed: ClassVar[frozenset[str]] = frozenset({"copy"})

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.Buffer.from_dlpack(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.to_numpy(), copy=True)

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        return False  # a Buffer is written through numpy views, not item assignment

    def view(self, lib: Any, x: Any) -> Any:
        return x[1:, :]  # rows: a compact view (its column and step slices are refused, below)

    # -- the quirks, with the bare library, and dlbind's handling of them ---------------------------------

    @pytest.mark.parametrize("cut", ["columns", "step"])
    def test_strided_export_wrong_strides(self, lib: Any, cut: str) -> None:
        """Quirk strided_export_wrong_strides: fails when MAX exports the slice's own strides (update the row)."""
        a = values("float32", (3, 4))
        b = lib.Buffer.from_dlpack(a)
        s, want = (b[:, 0:2], a[:, 0:2]) if cut == "columns" else (b[:, ::2], a[:, ::2])
        assert not s.is_contiguous
        assert not np.array_equal(np.from_dlpack(s), want)  # the bare library: wrong values
        for call in (lambda: dlbind.from_dlpack(s), lambda: dlbind.convert(s, to="numpy"),
                     lambda: dlbind.convert(s, to="torch")):  # fmt: skip
            with pytest.raises(BufferError, match=r"is_contiguous is false.*contiguous\(\)"):
                call()
        assert str(dlbind.explain(s, to="numpy")).startswith("refused")
        np.testing.assert_array_equal(dlbind.convert(s.contiguous(), to="numpy"), want)

    def test_import_ignores_strides(self, lib: Any) -> None:
        """Quirk import_ignores_strides, in a child process (a view reaching past the data would read out of
        bounds): fails when MAX reads the strides (update the row's layout)."""
        code = textwrap.dedent("""
            import numpy as np, max.driver as D
            a = np.arange(12, dtype=np.float32).reshape(3, 4)
            class P:
                def __dlpack__(self, **kw): return a.T.__dlpack__(**kw)
                def __dlpack_device__(self): return (1, 0)
            print(np.from_dlpack(D.Buffer.from_dlpack(P())).tolist() == a.T.tolist())
        """)
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and out.stdout.strip() == "False", out.stdout + out.stderr
        a = values("float32", (3, 4))
        for src in (a.T, _Producer(a.T), a[:, ::2], a[::-1]):
            y = dlbind.convert(src, to="max")
            want = src.a if isinstance(src, _Producer) else src
            np.testing.assert_array_equal(np.from_dlpack(y), want)

    def test_readonly_copied(self, lib: Any) -> None:
        """Quirk readonly_copied: fails when MAX views read-only numpy data."""
        a = values("float32")
        a.flags.writeable = False
        assert ndarray_ptr(np.from_dlpack(lib.Buffer.from_dlpack(a))) != ndarray_ptr(a)
        with pytest.raises(BufferError, match="copy=False"):
            dlbind.convert(a, to="max", copy=False)
        np.testing.assert_array_equal(np.from_dlpack(dlbind.convert(a, to="max")), a)

    def test_import_copy_is_for_numpy_only(self, lib: Any) -> None:
        """Buffer.from_dlpack's copy= is refused for other producers (the row leaves it out: dlbind copies);
        fails when MAX takes it (add it to the row's keywords)."""
        a = values("float32")
        with pytest.raises(ValueError, match="copy"):
            lib.Buffer.from_dlpack(dlbind.from_dlpack(a), copy=True)
        y = dlbind.convert(a, to="max", copy=True)
        assert ndarray_ptr(np.from_dlpack(y)) != ndarray_ptr(a)
        np.testing.assert_array_equal(np.from_dlpack(y), a)

    def test_copy_true_is_made_by_dlbind(self, lib: Any) -> None:
        a = values("float32")
        b = lib.Buffer.from_dlpack(a)
        with pytest.raises(BufferError, match="copy=True"):
            b.__dlpack__(copy=True)
        t = dlbind.from_dlpack(b, copy=True)
        assert not np.shares_memory(np.from_dlpack(t), a)
        np.testing.assert_array_equal(np.from_dlpack(t), a)

    @pytest.mark.parametrize("dtype", ["float32", "int64", "uint8"])
    def test_contiguous_numpy_is_shared_both_ways(self, lib: Any, dtype: str) -> None:
        a = values(dtype)
        y = dlbind.convert(a, to="max")
        assert ndarray_ptr(np.from_dlpack(y)) == ndarray_ptr(a)
        assert ndarray_ptr(dlbind.convert(y, to="numpy")) == ndarray_ptr(a)

    def test_dtypes_cross(self, lib: Any) -> None:
        from max.dtype import DType

        assert dlbind.dtype(DType.bfloat16) == dlbind.dtype("bfloat16")
        assert dlbind.dtype("float32", to="max") is DType.float32

    def test_devices_are_made_by_the_class_of_their_kind(self, lib: Any) -> None:
        """MAX has a class per kind of device (``devices.make_by``): the CPU is made here and read back; an
        Accelerator only where MAX finds that GPU, else a ValueError naming MAX; a kind it has no class of is
        refused before MAX is called."""
        from max.driver import CPU

        made = dlbind.device("cpu", to="max")
        assert type(made) is CPU and dlbind.device(made) == dlbind.device("cpu")
        if not lib.driver.accelerator_count():
            with pytest.raises(ValueError, match="max cannot make a device cuda:0"):
                dlbind.device("cuda:0", to="max")
        with pytest.raises(ValueError, match="max has no device objects of vulkan: it makes those of cpu, cuda, rocm"):
            dlbind.device("vulkan:0", to="max")
