"""warp <-> dlbind (warp-lang 1.19.0, CPU).

Warp is a legacy DLPack producer (``array.__dlpack__`` takes no ``max_version``) and a legacy consumer
(``warp.from_dlpack`` asks ``__dlpack__(stream=None)``). Its import drops ``byte_offset``, crashes on 0-d data,
takes at most 4 dimensions, no complex dtypes, and takes read-only memory writable: dlbind copies, or refuses
with a BufferError that says why. Values are read back by warp's own ``array.numpy()``."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, ndarray_ptr, require, same, values, version  # noqa: F401

import dlbind
from dlbind.conversion import ExplanationKind

require("warp")


class TestWarp(InteropSuite):
    system: ClassVar[str] = "warp"
    module: ClassVar[str] = "warp"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "float64",
    )  # fmt: skip
    ndims: ClassVar[tuple[int, int] | None] = (1, 4)

    @classmethod
    def load(cls) -> Any:
        wp = super().load()
        wp.config.log_level = wp.LOG_ERROR  # its start-up banner, on stdout
        wp.init()
        return wp

    def make(self, lib: Any, a: np.ndarray) -> Any:
        if not 1 <= a.ndim <= 4:
            raise ValueError(f"warp arrays have 1 to 4 dimensions, not {a.ndim}")
        return lib.array(np.array(a, copy=True), device="cpu")

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return int(x.ptr)

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        view = x.numpy()  # a writable view of its memory on the CPU
        view[(0,) * view.ndim] = value
        return True

    # -- Warp's own ---------------------------------------------------------------------------------------

    def test_zero_copy_both_ways(self, lib: Any) -> None:
        a = values("float32")
        y = dlbind.convert(a, to="warp", copy=False)
        assert isinstance(y, lib.array) and y.ptr == ndarray_ptr(a)
        same(self.to_numpy(lib, y), a)
        back = dlbind.convert(y, to="numpy", copy=False)
        assert ndarray_ptr(back) == y.ptr
        same(back, a)

    def test_strided_and_reversed_views_go_in_as_they_are(self, lib: Any) -> None:
        for a in (values("float32")[:, ::2], values("float32")[::-1]):
            y = dlbind.convert(a, to="warp", copy=False)
            assert y.ptr == ndarray_ptr(a)
            same(self.to_numpy(lib, y), a)

    def test_byte_offset_is_copied_first(self, lib: Any) -> None:
        """warp.from_dlpack ignores byte_offset (it would read the wrong elements): dlbind copies such data, and
        copy=False refuses it."""
        base = np.arange(8.0, dtype=np.float32)
        pointer = dlbind.from_pointer(ndarray_ptr(base), (4,), "float32", byte_offset=16, owner=base)
        shifted = dlbind.from_dlpack(pointer)
        assert shifted.byte_offset == 16
        same(self.to_numpy(lib, dlbind.convert(shifted, to="warp")), np.arange(4.0, 8.0, dtype=np.float32))
        with pytest.raises(BufferError, match=r"byte_offset.*copy=False"):
            dlbind.convert(shifted, to="warp", copy=False)

    def test_read_only_memory_is_copied(self, lib: Any) -> None:
        a = values("float32")
        a.flags.writeable = False
        y = dlbind.convert(a, to="warp")
        assert y.ptr != ndarray_ptr(a)
        with pytest.raises(BufferError, match=r"read-only data.*copy=False"):
            dlbind.convert(a, to="warp", copy=False)
        assert "read-only" in dlbind.explain(a, to="warp").text

    @pytest.mark.parametrize("dtype", ["complex64", "complex128"])
    def test_complex_is_refused_by_name(self, lib: Any, dtype: str) -> None:
        with pytest.raises(BufferError, match=f"cannot import {dtype}"):
            dlbind.convert(values(dtype), to="warp")

    @pytest.mark.parametrize("shape", [(), (1, 1, 1, 2, 3)], ids=["0-d", "5-d"])
    def test_shapes_it_cannot_hold_are_refused(self, lib: Any, shape: tuple[int, ...]) -> None:
        with pytest.raises(BufferError, match="warp imports arrays of 1 to 4 dimensions"):
            dlbind.convert(values("float32", shape), to="warp")
        assert dlbind.explain(values("float32", shape), to="warp").kind == ExplanationKind.REFUSED

    def test_a_legacy_producer_is_asked_once_the_older_way(self, lib: Any) -> None:
        x = lib.array(np.arange(4.0, dtype=np.float32), device="cpu")
        from dlbind.sources import export_plan

        same(np.asarray(dlbind.from_dlpack(x)), np.arange(4.0, dtype=np.float32))
        assert export_plan(type(x)).call_style != 0  # it refused max_version once; asked as it takes since

    def test_pyarrow_both_ways(self, lib: Any) -> None:
        pa = pytest.importorskip("pyarrow")
        a = np.arange(6.0)
        y = dlbind.convert(pa.array(a), to="warp")
        same(self.to_numpy(lib, y), a)
        z = dlbind.convert(lib.array(a, device="cpu"), to="pyarrow")
        assert isinstance(z, pa.Array) and z.to_pylist() == a.tolist()


_LEGACY = "warp's array.__dlpack__ takes stream= only (a legacy producer): the checks that ask more fail there"
_ASKS_MORE = (
    "versioned_capsule", "future_max_version", "copy_true", "copy_false", "dl_device_same", "dl_device_unsupported",
    "stream_none",
)  # fmt: skip

#: ``dlbind check --libs numpy,pyarrow,warp``, both builds: "LIB KIND:CHECK" -> (a fragment of the reported detail,
#: the library's own defect it shows). Each is the library's, measured here (issue 30: no blanket misreport).
CHECK_FAILURES: dict[str, tuple[str, str]] = {
    "numpy consumer:real_typeerror_propagates": (
        "retried __dlpack__ 2 times on an unrelated TypeError",
        "numpy's own (docs/quickstart.md): numpy.from_dlpack retries __dlpack__ without max_version on any TypeError",
    ),
    "pyarrow consumer:negative_strides": (
        "refused with ArrowInvalid, not BufferError",
        "pyarrow.Tensor.from_numpy refuses negative strides with ArrowInvalid (dlbind.convert copies them first)",
    ),
    "pyarrow consumer:dtype_bool": (
        "dtype uint8, expected bool",
        "an Arrow Tensor has no bool: Tensor.from_numpy makes uint8 of it (dlbind.convert refuses N-D bool)",
    ),
    **{f"warp producer:{check}": ("unexpected keyword argument 'max_version'", _LEGACY) for check in _ASKS_MORE},
    "warp producer:strides_emitted": ("NULL strides", "its capsules of compact arrays carry NULL strides"),
    "warp consumer:sends_max_version": (
        "called __dlpack__({'stream': None})",
        "warp.from_dlpack never sends max_version (dlbind copies read-only data for it)",
    ),
    "warp consumer:readonly_respected": (
        "read-only data needs a versioned capsule",
        "its legacy ask cannot take read-only data (dlbind copies it)",
    ),
    "warp consumer:lanes_refused": ("accepted lanes=4", "warp.from_dlpack takes vector dtypes without saying so"),
    "warp consumer:zero_d": ("refused with IndexError", "warp.from_dlpack of 0-d data raises IndexError"),
    "warp consumer:byte_offset": ("byte_offset=16: values differ", "warp.from_dlpack drops byte_offset"),
}


def test_check_reports_only_the_libraries_own_failures() -> None:
    """`python -m dlbind check --libs numpy,pyarrow,warp` reports both new systems, each failure its library's own
    with its reason (CHECK_FAILURES), every pair through dlbind.convert passing: a new failure, a listed one that
    no longer fails, or one failing for another reason fails this test."""
    import io

    from dlbind import check

    matrix = check.run(["numpy", "pyarrow", "warp"], stream=io.StringIO())  # its workers inherit DLBIND_PURE
    report = check.render(matrix, details=True)
    results = {f"{lib} {key}": r for lib, rows in matrix.results.items() for key, r in rows.items()}
    failing = {key: r["detail"] for key, r in results.items() if r["status"] in ("fail", "crash")}
    pairs = {f"{s} -> {d}": r for s, row in matrix.pairs.items() for d, r in row.items() if r["status"] != "pass"}
    problems = [f"pair {key}: {r}" for key, r in pairs.items()]
    problems += [f"unexpected failure: {key}: {detail}" for key, detail in sorted(failing.items())
                 if key not in CHECK_FAILURES]  # fmt: skip
    problems += [f"no longer fails (remove it from CHECK_FAILURES): {k}" for k in CHECK_FAILURES if k not in failing]
    problems += [
        f"{key} fails for another reason than {fragment!r} ({why}): {failing[key]}"
        for key, (fragment, why) in CHECK_FAILURES.items()
        if key in failing and fragment not in failing[key]
    ]
    assert not problems, "\n".join(problems) + "\n\n" + report
    assert {"numpy", "pyarrow", "warp"} <= set(matrix.results)
