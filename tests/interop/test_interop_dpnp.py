"""dpnp <-> dlbind (0.20: kDLOneAPI arrays on the OpenCL CPU device; spec-conformant DLPack; dpctl.tensor is
dpnp.tensor now)."""

from __future__ import annotations

import fnmatch
import io
import os
from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import DEVICES, InteropSuite, compiled, require, values, version  # noqa: F401

import dlbind

require("dpnp")


class TestDpnp(InteropSuite):
    system: ClassVar[str] = "dpnp"
    module: ClassVar[str] = "dpnp"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.asarray(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(lib.asnumpy(x), copy=True)

    @pytest.mark.parametrize(
        "make",
        [lambda a: a, lambda a: a[::-1, ::-2], lambda a: a.T, lambda a: a[1, 2, ...], lambda a: a[:0]],
        ids=["contiguous", "negative strides", "transposed", "0-d", "empty"],
    )
    @pytest.mark.parametrize("readonly", [False, True])
    def test_host_data_becomes_a_dpnp_array(self, lib: Any, make: Any, readonly: bool) -> None:
        """issue 21: dpnp.from_dlpack of host data answers numpy arrays, and its device= fallback fails on
        read-only, strided, 0-d and empty arrays; dlbind copies host data in with dpnp.asarray."""
        a = make(np.arange(12.0).reshape(3, 4))
        a.flags.writeable = not readonly
        y = dlbind.convert(a, to="dpnp")
        assert isinstance(y, lib.ndarray), type(y)
        np.testing.assert_array_equal(lib.asnumpy(y), a)

    def test_byte_offset_reaches_the_right_values(self, lib: Any) -> None:
        """dpnp's import of host data ignores byte_offset (wrong values); dlbind copies host data in itself."""
        base = np.arange(12.0).reshape(3, 4)
        p = dlbind.from_pointer(base.ctypes.data, (2, 4), "float64", byte_offset=32, owner=base)
        y = dlbind.convert(p, to="dpnp")
        assert isinstance(y, lib.ndarray)
        np.testing.assert_array_equal(lib.asnumpy(y), base[1:])

    @pytest.mark.parametrize("device", list(DEVICES))
    def test_from_numpy_device(self, lib: Any, device: str) -> None:
        """The suite's rule, for a system with no host arrays: dpnp holds SYCL (kDLOneAPI) memory only, so host
        data asked for on the host (kDLCPU, in every form of device=) cannot become a dpnp array: BufferError
        naming the device (issue 21). dpnp.from_dlpack(x, device=(kDLCPU, 0)) answers a numpy.ndarray; its
        device="cpu" is a SYCL filter selector (the OpenCL CPU device, kDLOneAPI), not kDLCPU."""
        with pytest.raises(BufferError, match="no device cpu:0"):
            dlbind.convert(values("float32"), to="dpnp", device=DEVICES[device])

    def test_host_data_copy_false_and_cpu_are_refused(self, lib: Any) -> None:
        a = np.arange(4.0)
        with pytest.raises(BufferError, match="copy=False"):
            dlbind.convert(a, to="dpnp", copy=False)
        with pytest.raises(BufferError):
            dlbind.convert(a, to="dpnp", device="cpu")

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}


# -- python -m dlbind check --libs dpnp,numpy (issue 28, item 8) ------------------------------------------------

#: What ``python -m dlbind check --libs dpnp,numpy`` reports failing in this cell (dpnp 0.20.0, numpy 2.4.6), in
#: both builds: "LIB KIND:CHECK" (or "convert SRC -> DST") -> (a fragment of the reported detail, the library's
#: own defect that it shows). Each is the library's, measured here; the checker reads dpnp's oneAPI memory
#: through dpnp's own host copy, so no failure may be the checker's (neither a check nor a pair).
CHECK_FAILURES: dict[str, tuple[str, str]] = {
    "dpnp consumer:byte_offset": (
        "byte_offset=16: values differ",
        "dpnp.from_dlpack of kDLCPU data answers a numpy.ndarray of the tensor's data pointer, ignoring its "
        "byte_offset (dlbind.convert copies host data in with dpnp.asarray instead)",
    ),
    "dpnp consumer:real_typeerror_propagates": (
        "retried __dlpack__ 2 times on an unrelated TypeError",
        "dpnp.from_dlpack calls __dlpack__() again with no keywords after any TypeError, so a producer's own "
        "TypeError is raised twice (IntelPython/dpctl#1789)",
    ),
    "numpy consumer:real_typeerror_propagates": (
        "retried __dlpack__ 2 times on an unrelated TypeError",
        "numpy's own (docs/quickstart.md): numpy.from_dlpack retries __dlpack__ without max_version on any TypeError",
    ),
}

#: ml_dtypes' dtypes, which the checks make only where ml_dtypes is installed (the dpnp cell has none; the Python
#: 3.14 interop venv, which holds dpnp beside every anchor, has it)
_ML_DTYPES = ("dtype_bfloat16", "dtype_float8_*")
try:
    import ml_dtypes  # noqa: F401

    HAS_ML_DTYPES = True
except ImportError:
    HAS_ML_DTYPES = False

#: The checks it reports unsupported ("-"), as fnmatch patterns over the same keys -> a fragment of the reason.
CHECK_UNSUPPORTED: dict[str, str] = {
    "dpnp producer:stream_refused_on_cpu": "not a CPU array",  # dpnp's arrays live on its oneAPI device
    **(
        {  # each library's own refusal of ml_dtypes' dtypes
            **{f"dpnp consumer:{d}": "Can not import DLPack tensor with type code" for d in _ML_DTYPES},
            **{f"dpnp producer:{d}": "cannot make this array" for d in _ML_DTYPES},
            **{f"numpy consumer:{d}": "Unsupported dtype in DLTensor" for d in _ML_DTYPES},
            **{
                f"numpy producer:{d}": "DLPack only supports signed/unsigned integers, float and complex"
                for d in _ML_DTYPES
            },
        }
        if HAS_ML_DTYPES
        else {f"* *:{d}": "needs ml_dtypes" for d in _ML_DTYPES}
    ),
}

#: dpnp's producer checks that read its arrays' values (its oneAPI memory) back on the host.
READ_BACK = ("values", "transposed", "negative_strides", "zero_size", "zero_d", "size1_dims", "offset_view", "dtype_*")


@pytest.fixture(scope="module")
def check_results() -> tuple[dict[str, dict[str, str]], str]:
    """Every result of ``dlbind check --libs dpnp,numpy`` by key ("LIB KIND:CHECK", "convert SRC -> DST"), and
    the rendered report (for the assertion messages)."""
    from dlbind import check

    matrix = check.run(["dpnp", "numpy"], stream=io.StringIO())  # its workers inherit DLBIND_PURE
    results = {f"{lib} {key}": r for lib, rows in matrix.results.items() for key, r in rows.items()}
    results.update({f"convert {src} -> {dst}": r for src, row in matrix.pairs.items() for dst, r in row.items()})
    return results, check.render(matrix, details=True)


def test_check_reports_only_the_libraries_own_failures(check_results: tuple[dict[str, dict[str, str]], str]) -> None:
    """issue 28 (8): the checker reads dpnp's oneAPI memory through dpnp's own host copy (no dlbind backend
    serves it), so the report's failures are the libraries' own, each with its reason (CHECK_FAILURES); a new
    failure, a listed one that no longer fails, or one failing for another reason fails this test."""
    results, report = check_results
    failing = {key: r["detail"] for key, r in results.items() if r["status"] in ("fail", "crash")}
    failing.update(
        {key: r["detail"] for key, r in results.items() if key.startswith("convert ") and r["status"] != "pass"}
    )
    build = os.environ.get("DLBIND_PURE", "0")
    problems = [
        f"unexpected failure: {key}: {detail}" for key, detail in sorted(failing.items()) if key not in CHECK_FAILURES
    ]
    problems += [
        f"no longer fails (remove it from CHECK_FAILURES): {key}" for key in CHECK_FAILURES if key not in failing
    ]
    problems += [
        f"{key} fails for another reason than {fragment!r} ({why}): {failing[key]}"
        for key, (fragment, why) in CHECK_FAILURES.items()
        if key in failing and fragment not in failing[key]
    ]
    assert not problems, f"DLBIND_PURE={build}:\n" + "\n".join(problems) + "\n\n" + report


def test_check_reads_dpnp_memory_through_its_own_host_copy(
    check_results: tuple[dict[str, dict[str, str]], str],
) -> None:
    """The checks that read dpnp's arrays back (READ_BACK) pass, reading them through dpnp's own host copy
    (dl_device=kDLCPU), and what the checker reports unsupported is what the cell lacks (CHECK_UNSUPPORTED),
    never the values on its device; an unsupported check not listed, or a listed one that runs, fails it."""
    results, report = check_results
    unread = [
        f"not read through dpnp's own host copy: {key}: {r['status']}: {r['detail']}"
        for key, r in results.items()
        if any(fnmatch.fnmatchcase(key, f"dpnp producer:{p}") for p in READ_BACK)
        and not any(fnmatch.fnmatchcase(key, p) for p in CHECK_UNSUPPORTED)
        and not (r["status"] == "pass" and "own host copy" in r["detail"])
    ]  # fmt: skip
    assert not unread, "\n".join(unread) + "\n\n" + report
    unsupported = {key: r["detail"] for key, r in results.items() if r["status"] == "unsupported"}
    problems = [
        f"unexpected unsupported: {key}: {detail}"
        for key, detail in sorted(unsupported.items())
        if not any(fnmatch.fnmatchcase(key, p) and f in detail for p, f in CHECK_UNSUPPORTED.items())
    ]
    problems += [f"matches nothing (remove it): {p}" for p in CHECK_UNSUPPORTED if not fnmatch.filter(unsupported, p)]
    assert not problems, "\n".join(problems) + "\n\n" + report


def test_sycl_devices_and_queues_are_read_as_dlpack_says_them() -> None:
    # dpctl's SyclDevice, its SyclQueue and dpnp's own Device are oneAPI devices, at the index the arrays'
    # __dlpack_device__ gives (SyclDevice.get_device_id()), and every device= takes them
    import dpctl
    import dpnp

    x = dpnp.arange(3.0)
    said = dlbind.Device(*(int(v) for v in x.__dlpack_device__()))
    assert said.name == "oneapi"
    for held in (x.sycl_device, x.sycl_queue, x.device, dpctl.SyclQueue(x.sycl_device)):
        assert dlbind.device(held) == said, held
    assert dlbind.from_dlpack(x, device=x.sycl_device).device == said


def test_a_sycl_device_is_made_where_this_machine_has_it() -> None:
    import dpctl

    made = dlbind.device("oneapi:0", to="dpnp")
    assert type(made) is dpctl.SyclDevice and dlbind.device(made) == (dlbind.DeviceType.kDLOneAPI, 0)
    beyond = len(dpctl.get_devices())
    with pytest.raises(ValueError, match=f"dpnp cannot make a device oneapi:{beyond}"):
        dlbind.device(f"oneapi:{beyond}", to="dpnp")
    with pytest.raises(ValueError, match="dpnp has no device objects of cpu: it makes those of oneapi"):
        dlbind.device("cpu", to="dpnp")
