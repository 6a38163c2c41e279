"""The rules of issue 13, written once for every system: each ``test_interop_<system>.py`` subclasses
:class:`InteropSuite` and says how its system makes, reads, writes and points at its own arrays (by the
system's own API, never through dlbind), which dtypes it shares with numpy, and which of today's gaps
(``gaps()``) the tests are expected to hit.

The tests say what the issue demands, not what dlbind does today. Where dlbind is wrong today, ``gaps()``
names the test (an fnmatch pattern over the test's name) and what is wrong; tests/interop/conftest.py
turns that into ``pytest.mark.xfail(strict=True, reason="issue 13: ...")``, so the matrix stays green
while listing each gap, and a gap that gets fixed fails until its entry is removed.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import warnings
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

import dlbind
from dlbind._generated.adapters import ExportBool

# every dtype numpy shares with DLPack (no ml_dtypes here: those are issue 13's bf16 item, in torch/jax)
ALL_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)  # fmt: skip

# numpy layouts handed to the system: views with strides and offsets, 0-d and zero-size
LAYOUTS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "reversed": lambda a: a[::-1],
    "offset": lambda a: a[1:, 2:],
    "step": lambda a: a[:, ::2],
    "0-d": lambda a: a[1, 2, ...],
    "zero-size": lambda a: a[:0],
}
DEVICES: dict[str, Any] = {"str": "cpu", "str-index": "cpu:0", "tuple": (1, 0)}


def write_summary(reporter: Any, path: str) -> None:
    """The counts of a finished pytest run (its terminal reporter's) as JSON, for the nox session to print."""
    import json

    keys = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    counts: dict[str, Any] = {key: len(reporter.stats.get(key, [])) for key in keys}
    counts["ran"] = sum(n for key, n in counts.items() if key != "skipped")
    # the gaps that remain (strict xfails): test name -> why, for docs/interop.md
    gaps = {}
    for report in reporter.stats.get("xfailed", []):
        name = report.nodeid.rpartition("::")[2]
        gaps[name] = str(getattr(report, "wasxfail", "")).removeprefix("reason: ")
    counts["gaps"] = dict(sorted(gaps.items()))
    with open(path, "w") as f:
        json.dump(counts, f)


def version(dist: str) -> tuple[int, ...]:
    """The installed version of distribution ``dist`` as a tuple of ints ((0,) when absent)."""
    try:
        text = importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return (0,)
    out = []
    for part in text.split("+")[0].split("."):
        digits = "".join(ch for ch in part if ch.isdigit())
        if not digits:
            break
        out.append(int(digits))
    return tuple(out)


def require(module: str) -> None:
    """Skip the calling test module when ``module`` is not installed (found without importing it)."""
    import importlib.util

    root = module.split(".")[0]
    if importlib.util.find_spec(root) is None:
        pytest.skip(f"{root} is not installed", allow_module_level=True)


def compiled() -> bool:
    return dlbind.ffi_build() == "compiled"


def aligned(a: np.ndarray, alignment: int = 64) -> np.ndarray:
    """A C-contiguous copy of ``a`` whose data starts on an ``alignment``-byte boundary (so that consumers
    with alignment rules, jax's 64 bytes, behave the same on every run)."""
    raw = np.empty(a.nbytes + alignment, dtype=np.uint8)
    start = -raw.__array_interface__["data"][0] % alignment
    out = raw[start : start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def values(dtype: str, shape: tuple[int, ...] = (4, 6)) -> np.ndarray:
    """A reference array of ``dtype``, 64-byte aligned: distinct small values (negative for signed types)."""
    n = int(np.prod(shape))
    base = np.arange(n)
    if dtype == "bool":
        out = (base % 3 == 0).astype(bool)
    elif dtype.startswith("u"):
        out = (base % 7).astype(dtype)
    elif dtype.startswith("complex"):
        out = ((base % 7) - 3 + 1j * (base % 5)).astype(dtype)
    else:
        out = ((base % 7) - 3).astype(dtype)
    return aligned(out.reshape(shape))


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert isinstance(got, np.ndarray), type(got)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert np.array_equal(got, want), (got, want)


def ndarray_ptr(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def poke(a: np.ndarray) -> Any:
    """A value different from ``a``'s first element, of its dtype."""
    first = a.reshape(-1)[0]
    return not first if a.dtype == bool else first + 1


def numpy_target_gaps() -> dict[str, str]:
    """Gaps of convert(..., to="numpy") at the installed numpy version, shared by every suite."""
    return {}  # none left: device forms and numpy<2.1's keyword-less from_dlpack are bridged


class InteropSuite:
    """Both directions between one system and dlbind/numpy (and torch, where installed beside it)."""

    system: ClassVar[str]  # the name for dlbind.convert(..., to=)
    module: ClassVar[str]  # what to import
    dtypes: ClassVar[tuple[str, ...]] = ALL_DTYPES
    immutable: ClassVar[bool] = False  # the system's arrays are never written: no writable alias may reach them
    known: ClassVar[bool] = True  # spec/adapters.toml has it today
    sample_shape: ClassVar[tuple[int, ...]] = (4, 6)  # the shape of the array its row's facts are read from
    ndims: ClassVar[tuple[int, int] | None] = None  # the fewest and most dimensions its importer takes (None: any)
    # keywords its importer's signature names but refuses for a producer that is not its own or numpy (MAX's
    # copy=): its row leaves them out, and the system's suite shows the refusal
    narrowed: ClassVar[frozenset[str]] = frozenset()

    # -- the system's own API (overridden per system) ---------------------------------------------

    @classmethod
    def load(cls) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pytest.importorskip(cls.module)

    def make(self, lib: Any, a: np.ndarray) -> Any:
        """A new array of the system holding ``a``'s values (its own copy)."""
        raise NotImplementedError

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        """``x``'s values, copied out by the system's own API."""
        raise NotImplementedError

    def ptr(self, lib: Any, x: Any) -> int | None:
        """The address of ``x``'s first element, by the system's own API (None: the system does not say)."""
        return None

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        """Write ``value`` into ``x``'s first element in place; False when the system cannot write ``x``."""
        try:
            x[(0,) * len(x.shape)] = value
        except (TypeError, ValueError, RuntimeError, NotImplementedError, AttributeError):
            return False
        return True

    def view(self, lib: Any, x: Any) -> Any:
        """A strided, offset view of 2-d ``x`` made by the system (its own slicing)."""
        return x[1:, ::2]

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        """Test-name patterns -> what dlbind gets wrong there today with this system (issue 13)."""
        return {}

    @classmethod
    def crashes(cls) -> dict[str, str]:
        """Test-name patterns -> gaps where dlbind crashes the interpreter today (not run: xfail(run=False))."""
        return {}

    @classmethod
    def gaps(cls) -> dict[str, str]:
        """Every gap of this suite: numpy's as a target (its version decides), then the system's own."""
        gaps = {}
        if not cls.known:
            gaps.update(dict.fromkeys(
                ["test_from_numpy_*", "test_from_tensor_*", "test_from_torch"],
                f"convert(to={cls.system!r}): dlbind does not know {cls.system} (unknown array library)",
            ))  # fmt: skip
        return {**gaps, **cls.own_gaps(), **numpy_target_gaps()}

    # -- fixtures and helpers -----------------------------------------------------------------------

    @pytest.fixture(scope="class")
    @classmethod
    def lib(cls) -> Any:
        return cls.load()

    def _make(self, lib: Any, a: np.ndarray) -> Any:
        try:
            return self.make(lib, a)
        except Exception as exc:  # the system's own constructor refused: it lacks the dtype or layout
            pytest.skip(f"{self.system} cannot make this array itself: {type(exc).__name__}: {exc}")

    def _dtype(self, dtype: str) -> None:
        if dtype not in self.dtypes:
            pytest.skip(f"{self.system} has no {dtype}")

    # -- its row of spec/adapters.toml against the installed release -------------------------------

    def test_adapter_row_holds(self, lib: Any) -> None:
        """The facts dlbind reads from the system's row hold for the installed release."""
        import inspect

        from dlbind._generated.adapters import ADAPTERS
        from dlbind._libraries import dotted, for_release, library_of

        x = self._make(lib, values("float32", self.sample_shape))
        row = ADAPTERS[self.system]
        assert library_of(x) is row, f"{type(x)} is not recognised as {self.system}"
        release = for_release(row)
        fn = dotted(release.import_.function)
        assert callable(fn)
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            params = None  # a builtin without a signature: the row's keywords stand
        if params is not None and not any(p.kind is p.VAR_KEYWORD for p in params.values()):
            for keyword in ("device", "copy"):
                named = keyword in params and keyword not in self.narrowed
                assert named == (keyword in release.import_.keywords), f"{release.import_.function} {keyword}="
        assert hasattr(type(x), "__dlpack_c_exchange_api__") == release.import_.exchange_api
        if release.export.via == "__dlpack__":
            assert hasattr(x, "__dlpack__")
        elif release.export.via.endswith("()"):
            assert callable(getattr(x, release.export.via[:-2]))
        else:
            assert callable(dotted(release.export.via))
        if "bool" in self.dtypes:
            self._bool_encoding_holds(lib, release)

    def _bool_encoding_holds(self, lib: Any, release: Any) -> None:
        """``export.bool``: the dtype its own export of a bool array puts in the capsule."""
        from dlbind import _capi, capsule
        from dlbind.sources import library_export
        from dlbind.tensor import from_managed

        x = self._make(lib, values("bool", self.sample_shape))
        try:
            raw = x.__dlpack__() if release.export.via == "__dlpack__" else library_export(x)
        except Exception:  # an exporter without bool (its host copy serves it): nothing to read
            return
        if type(raw) is _capi.PyCapsuleType:  # not a buffer
            managed, versioned = capsule.take(raw)
            dtype = managed.dl_tensor.dtype
            found = (int(dtype.code), int(dtype.bits), int(dtype.lanes))
            from_managed(managed, versioned, allow_vector=True)  # runs the deleter when dropped
            expected = {"bool": (6, 8, 1), "uint1": (1, 1, 1), "uint8": (1, 8, 1)}[release.export.bool_as]
            assert found == expected, f"export.bool = {release.export.bool_as!r}, but its capsule says {found}"
            if release.export.bool_as == ExportBool.UINT8:
                assert str(getattr(x, release.export.dtype[:-2])()) == release.export.bool_name

    # -- system -> dlbind / numpy -----------------------------------------------------------------

    @pytest.mark.parametrize("dtype", ALL_DTYPES)
    def test_from_dlpack_values(self, lib: Any, dtype: str) -> None:
        self._dtype(dtype)
        a = values(dtype)
        x = self._make(lib, a)
        t = dlbind.from_dlpack(x)
        assert isinstance(t, dlbind.Tensor)
        assert t.shape == a.shape
        assert t.dtype == dlbind.dtypes.from_numpy(a.dtype)
        if t.__dlpack_device__()[0] != dlbind.DeviceType.kDLCPU:  # device memory: read through a host copy
            t = dlbind.from_dlpack(x, device="cpu")
        same(np.array(t), a)

    @pytest.mark.parametrize("dtype", ALL_DTYPES)
    def test_to_numpy_values(self, lib: Any, dtype: str) -> None:
        self._dtype(dtype)
        a = values(dtype)
        same(dlbind.convert(self._make(lib, a), to="numpy"), a)

    @pytest.mark.parametrize("shape", [(), (0,), (3, 0)], ids=["0-d", "zero-size", "zero-size-2d"])
    def test_to_numpy_edge_shapes(self, lib: Any, shape: tuple[int, ...]) -> None:
        a = values("float32", shape)
        same(dlbind.convert(self._make(lib, a), to="numpy"), a)

    def test_to_numpy_strided_view(self, lib: Any) -> None:
        x = self.view(lib, self._make(lib, values("float32")))
        if x is None:
            pytest.skip(f"{self.system} arrays cannot be sliced")
        same(dlbind.convert(x, to="numpy"), self.to_numpy(lib, x))

    @pytest.mark.parametrize("device", list(DEVICES))
    def test_to_numpy_device(self, lib: Any, device: str) -> None:
        a = values("float32")
        same(dlbind.convert(self._make(lib, a), to="numpy", device=DEVICES[device]), a)

    @pytest.mark.parametrize("device", list(DEVICES))
    def test_from_dlpack_device(self, lib: Any, device: str) -> None:
        a = values("float32")
        same(np.array(dlbind.from_dlpack(self._make(lib, a), device=DEVICES[device])), a)

    def test_to_numpy_copy_false(self, lib: Any) -> None:
        """copy=False: a view of the system's memory, or BufferError; never a silent copy."""
        x = self._make(lib, values("float32"))
        try:
            y = dlbind.convert(x, to="numpy", copy=False)
        except BufferError:
            return
        same(y, self.to_numpy(lib, x))
        where = self.ptr(lib, x)
        if where is None:
            pytest.skip(f"{self.system} does not tell where its data is")
        assert ndarray_ptr(y) == where, "copy=False, yet the result is a copy"

    def test_to_numpy_copy_true(self, lib: Any) -> None:
        x = self._make(lib, values("float32"))
        y = dlbind.convert(x, to="numpy", copy=True)
        same(y, self.to_numpy(lib, x))
        where = self.ptr(lib, x)
        if where is not None:
            assert ndarray_ptr(y) != where, "copy=True, yet the result shares the system's memory"
        y[0, 0] += 1
        assert self.to_numpy(lib, x)[0, 0] != y[0, 0]

    def test_to_numpy_no_writable_alias_of_immutable(self, lib: Any) -> None:
        """An immutable system's array never reaches numpy as a writable alias."""
        if not self.immutable:
            pytest.skip(f"{self.system} arrays are mutable")
        a = values("float32")
        x = self._make(lib, a)
        y = dlbind.convert(x, to="numpy")
        if y.flags.writeable:
            y[0, 0] = 99
        same(self.to_numpy(lib, x), a)

    # -- numpy / dlbind.Tensor -> system ----------------------------------------------------------

    @pytest.mark.parametrize("dtype", ALL_DTYPES)
    def test_from_numpy_values(self, lib: Any, dtype: str) -> None:
        self._dtype(dtype)
        a = values(dtype)
        same(self.to_numpy(lib, dlbind.convert(a, to=self.system)), a)

    @pytest.mark.parametrize("dtype", ALL_DTYPES)
    def test_from_tensor_values(self, lib: Any, dtype: str) -> None:
        self._dtype(dtype)
        a = values(dtype)
        same(self.to_numpy(lib, dlbind.convert(dlbind.from_dlpack(a), to=self.system)), a)

    def _refuses_shape(self, a: np.ndarray) -> bool:
        """``a``'s number of dimensions is one the system's importer cannot take: convert must say so."""
        if self.ndims is None or self.ndims[0] <= a.ndim <= self.ndims[1]:
            return False
        for x in (a, dlbind.from_dlpack(a)):
            with pytest.raises(BufferError, match=f"imports arrays of {self.ndims[0]} to {self.ndims[1]} dimensions"):
                dlbind.convert(x, to=self.system)
        return True

    @pytest.mark.parametrize("layout", list(LAYOUTS))
    def test_from_numpy_layout(self, lib: Any, layout: str) -> None:
        a = LAYOUTS[layout](values("float32"))
        if not self._refuses_shape(a):
            same(self.to_numpy(lib, dlbind.convert(a, to=self.system)), a)

    @pytest.mark.parametrize("layout", list(LAYOUTS))
    def test_from_tensor_layout(self, lib: Any, layout: str) -> None:
        a = LAYOUTS[layout](values("float32"))
        if not self._refuses_shape(a):
            same(self.to_numpy(lib, dlbind.convert(dlbind.from_dlpack(a), to=self.system)), a)

    @pytest.mark.parametrize("device", list(DEVICES))
    def test_from_numpy_device(self, lib: Any, device: str) -> None:
        a = values("float32")
        same(self.to_numpy(lib, dlbind.convert(a, to=self.system, device=DEVICES[device])), a)

    def test_from_numpy_copy_false(self, lib: Any) -> None:
        a = values("float32")
        try:
            y = dlbind.convert(a, to=self.system, copy=False)
        except BufferError:
            return
        same(self.to_numpy(lib, y), a)
        where = self.ptr(lib, y)
        if where is None:
            pytest.skip(f"{self.system} does not tell where its data is")
        assert where == ndarray_ptr(a), "copy=False, yet the result is a copy"

    def test_from_numpy_copy_true(self, lib: Any) -> None:
        a = values("float32")
        y = dlbind.convert(a, to=self.system, copy=True)
        same(self.to_numpy(lib, y), a)
        where = self.ptr(lib, y)
        if where is not None:
            assert where != ndarray_ptr(a), "copy=True, yet the result shares numpy's memory"
        if self.write(lib, y, poke(a)):
            same(a, values("float32"))

    def test_from_numpy_readonly_no_writable_alias(self, lib: Any) -> None:
        """A read-only ndarray reaches the system as a copy or as something that cannot be written."""
        a = values("float32")
        a.flags.writeable = False
        y = dlbind.convert(a, to=self.system)
        same(self.to_numpy(lib, y), a)
        self.write(lib, y, poke(a))
        same(a, values("float32"))

    def test_from_numpy_readonly_copy_false(self, lib: Any) -> None:
        """copy=False with read-only data for a system that would write it: BufferError, never an alias."""
        a = values("float32")
        a.flags.writeable = False
        try:
            y = dlbind.convert(a, to=self.system, copy=False)
        except BufferError:
            return
        self.write(lib, y, poke(a))
        same(a, values("float32"))

    @pytest.mark.parametrize("copy", [None, True])
    @pytest.mark.parametrize("source", ["ndarray", "Tensor"])
    def test_from_numpy_is_the_systems_array(self, lib: Any, source: str, copy: bool | None) -> None:
        """convert(..., to=system) gives the system's own array (issue 21: dpnp answered numpy arrays)."""
        from dlbind._libraries import library_of

        a = values("float32")
        x = a if source == "ndarray" else dlbind.from_dlpack(a)
        y = dlbind.convert(x, to=self.system, copy=copy)
        row = library_of(y)
        assert row is not None and row.name == self.system, type(y)
        same(self.to_numpy(lib, y), a)

    @pytest.mark.parametrize("readonly", [False, True])
    @pytest.mark.parametrize(
        "kw", [{}, {"copy": None}, {"copy": False}, {"device": "cpu"}, {"device": "cpu", "copy": False}]
    )
    def test_own_array_is_itself(self, lib: Any, readonly: bool, kw: dict[str, Any]) -> None:
        """An array converted to its own library is itself whatever copy=False or its own device asks (issue 21:
        numpy < 2.1 copied, refused or made a read-only view)."""
        x = self._make(lib, values("float32"))
        if readonly and not self._set_readonly(lib, x):
            pytest.skip(f"{self.system} has no read-only arrays")
        if "device" in kw:
            from dlbind.devices import producer_device

            try:
                if tuple(producer_device(dlbind.compat(x))) != (1, 0):
                    pytest.skip(f"{self.system}'s array is not on the CPU")
            except (BufferError, TypeError):
                pytest.skip(f"{self.system}'s array does not say its device")
        assert dlbind.convert(x, to=self.system, **kw) is x

    def _set_readonly(self, lib: Any, x: Any) -> bool:
        flags = getattr(x, "flags", None)
        if flags is None or not hasattr(flags, "writeable"):
            return False
        flags.writeable = False
        return True

    # -- system <-> torch, where both install -------------------------------------------------------

    def _torch(self) -> Any:
        if self.system == "torch":
            pytest.skip("torch itself")
        return pytest.importorskip("torch")

    def test_to_torch(self, lib: Any) -> None:
        torch = self._torch()
        a = values("float32")
        y = dlbind.convert(self._make(lib, a), to="torch")
        assert isinstance(y, torch.Tensor)
        same(y.numpy(), a)

    def test_from_torch(self, lib: Any) -> None:
        torch = self._torch()
        a = values("float32")
        same(self.to_numpy(lib, dlbind.convert(torch.from_numpy(a.copy()), to=self.system)), a)


def load_module(name: str) -> Any:
    """Import ``name`` with warnings silenced (systems warn at import about their own dependencies)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)
