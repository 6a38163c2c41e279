"""dlbind.testing: dlbind itself passes every check, and every check fails on a subject broken on purpose.

The broken producers and consumers are built from dlbind's own pieces (``RawProducer`` writes any
field wrong; the consumers below each skip one rule), so each check is shown to be able to fail.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import _capi, capsule
from dlbind._generated.enums import Flags
from dlbind.tensor import from_managed
from dlbind.testing import CONSUMER_CHECKS, PRODUCER_CHECKS, _checks, check_consumer, check_producer
from dlbind.testing._consumer_checks import RawProducer


def test_dlbind_passes_its_own_suite() -> None:
    producer = check_producer(dlbind.asdlpack, name="dlbind.asdlpack")
    assert producer.ok and producer.count("pass") == len(PRODUCER_CHECKS), producer.summary()
    consumer = check_consumer(dlbind.from_dlpack, name="dlbind.from_dlpack")
    assert consumer.ok and consumer.count("pass") == len(CONSUMER_CHECKS), consumer.summary()


def test_about_forty_checks_each_with_a_reason() -> None:
    assert len(PRODUCER_CHECKS) + len(CONSUMER_CHECKS) >= 40
    for check in (*PRODUCER_CHECKS, *CONSUMER_CHECKS):
        assert check.text and check.kind in (_checks.PRODUCER, _checks.CONSUMER)


# -- broken producers, one per producer check ---------------------------------------------------


class NoDevice:
    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, **kw: Any) -> object:
        return self.a.__dlpack__(**kw)


class NamedDevice(RawProducer):
    def __dlpack_device__(self) -> Any:
        return ("cpu", 0)


class RefusesKeyword(RawProducer):
    def __init__(self, a: np.ndarray, keyword: str) -> None:
        super().__init__(a)
        self.keyword = keyword

    def __dlpack__(self, **kw: Any) -> object:
        if self.keyword in kw:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument '{self.keyword}'")
        return super().__dlpack__(**kw)


class RaisesOnStreamNone(RawProducer):
    def __dlpack__(self, **kw: Any) -> object:
        if "stream" in kw:
            raise ValueError("stream must be an int")
        return super().__dlpack__(**kw)


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


def _wrong_code(a: np.ndarray) -> RawProducer:
    from dlbind.dtypes import from_numpy

    dt = from_numpy(a.dtype)
    return RawProducer(a, code=(dt.code + 1) % 3 if dt.code != 1 else 0)


BROKEN_PRODUCERS: dict[str, Callable[[np.ndarray], Any]] = {
    "protocol": NoDevice,
    "device": NamedDevice,
    "legacy_capsule": lambda a: RawProducer(a, versioned=True),
    "versioned_capsule": lambda a: RawProducer(a, versioned=False),
    "future_max_version": lambda a: RawProducer(a, versioned=True, major=2),
    "unknown_keyword_typeerror": RawProducer,  # takes any keyword
    "values": lambda a: RawProducer(a, byte_offset=4),
    "strides_emitted": lambda a: RawProducer(a, null_strides=True),
    "transposed": lambda a: RawProducer(a, strides=_contiguous(a.shape)),
    "negative_strides": lambda a: RawProducer(a, strides=_contiguous(a.shape)),
    "zero_size": lambda a: RawProducer(a, shape=(3,), strides=(1,)),
    "zero_d": lambda a: RawProducer(a, shape=(1,), strides=(1,)),
    "size1_dims": lambda a: RawProducer(a, shape=tuple(d for d in a.shape if d != 1) or (1,), strides=(2, 1)),
    "offset_view": lambda a: RawProducer(a, strides=_contiguous(a.shape)),
    "copy_true": RawProducer,  # never copies
    "copy_false": lambda a: RawProducer(a, flags=int(Flags.IS_COPIED)),
    "dl_device_same": lambda a: RefusesKeyword(a, "dl_device"),
    "dl_device_unsupported": RawProducer,  # accepts any device
    "stream_none": RaisesOnStreamNone,
    "stream_refused_on_cpu": RawProducer,  # accepts any stream
    **{c.id: _wrong_code for c in PRODUCER_CHECKS if c.id.startswith("dtype_")},
}


def test_every_producer_check_has_a_broken_producer() -> None:
    assert set(BROKEN_PRODUCERS) == {c.id for c in PRODUCER_CHECKS}


@pytest.mark.parametrize("check_id", [c.id for c in PRODUCER_CHECKS])
def test_producer_check_can_fail(check_id: str) -> None:
    report = check_producer(BROKEN_PRODUCERS[check_id], only=[check_id])
    assert [r.status for r in report.results] == ["fail"], report.summary()


def _stream_accepted_only_when(aligned: bool) -> Callable[[np.ndarray], Any]:
    """A producer that, as jax 0.10 does, refuses stream=1 on a CPU array it copied (not a BufferError) and
    silently accepts it on one that aliases 64-byte aligned memory; or the other way round."""

    def make(a: np.ndarray) -> Any:
        export = dlbind.asdlpack(a)

        class Producer:
            def __dlpack_device__(self) -> Any:
                return export.__dlpack_device__()

            def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
                if stream is not None and (a.ctypes.data % 64 == 0) != aligned:
                    raise RuntimeError("UNIMPLEMENTED: waiting on a stream is only implemented for GPU")
                return export.__dlpack__(**kwargs)  # the stream dropped: accepted, silently

        return Producer()

    return make


@pytest.mark.parametrize("aligned", [True, False], ids=["accepts-when-aligned", "accepts-when-unaligned"])
def test_stream_check_fails_whatever_numpy_allocates(aligned: bool) -> None:
    # numpy's allocations are 64-byte aligned by chance; the check tries both, so its verdict does not depend on it
    for _ in range(3):
        report = check_producer(_stream_accepted_only_when(aligned), only=["stream_refused_on_cpu"])
        assert [r.status for r in report.results] == ["fail"], report.summary()
        assert "accepted stream=1" in report.results[0].detail


# -- broken consumers, one per consumer check ------------------------------------------------------


def _take(producer: Any, **kw: Any) -> tuple[Any, Any]:
    managed, versioned = capsule.take(producer.__dlpack__(**kw))
    return managed, versioned


def legacy_only(p: Any) -> Any:
    return dlbind.from_dlpack(p.__dlpack__())


def no_fallback(p: Any) -> Any:
    return dlbind.from_dlpack(p.__dlpack__(max_version=dlbind.DLPACK_VERSION))


def retries_any_typeerror(p: Any) -> Any:
    try:
        return no_fallback(p)
    except TypeError:
        return legacy_only(p)


def hides_buffererror(p: Any) -> Any:
    try:
        return dlbind.from_dlpack(p)
    except BufferError as exc:
        raise RuntimeError(str(exc)) from None


def accepts_anything(p: Any) -> Any:
    result = p.__dlpack__(max_version=dlbind.DLPACK_VERSION)
    if type(result) is not _capi.PyCapsuleType:
        return np.zeros(2)
    managed, _ = capsule.take(result)  # no checks at all, never frees
    shape = tuple(managed.dl_tensor.shape[i] for i in range(managed.dl_tensor.ndim))
    return np.zeros(shape)


def does_not_rename(p: Any) -> Any:
    c = p.__dlpack__(max_version=dlbind.DLPACK_VERSION)
    t = dlbind.from_dlpack(c)
    _capi.capsule_set_name(c, b"dltensor_versioned")
    return t


def leaks(p: Any) -> Any:
    managed, _ = _take(p, max_version=dlbind.DLPACK_VERSION)
    t = managed.dl_tensor
    return np.zeros(tuple(t.shape[i] for i in range(t.ndim)), dtype=np.float32) + np.arange(
        np.prod([t.shape[i] for i in range(t.ndim)]), dtype=np.float32
    ).reshape(tuple(t.shape[i] for i in range(t.ndim)))


def _checked(p: Any, rule: Callable[[Any, bool], None]) -> Any:
    managed, versioned = _take(p, max_version=dlbind.DLPACK_VERSION)
    rule(managed, versioned)
    return from_managed(managed, versioned)


def refuses_null_data(p: Any) -> Any:
    def rule(m: Any, _: bool) -> None:
        if m.dl_tensor.data == dlbind._ffi.ffi.NULL:
            raise ValueError("NULL data")

    return _checked(p, rule)


def refuses_null_strides(p: Any) -> Any:
    def rule(m: Any, _: bool) -> None:
        if m.dl_tensor.strides == dlbind._ffi.ffi.NULL:
            raise ValueError("NULL strides")

    return _checked(p, rule)


def refuses_odd_size1_strides(p: Any) -> Any:
    t = dlbind.from_dlpack(p)
    if t.strides != _contiguous(t.shape):
        raise ValueError(f"strides {t.strides} are not contiguous")
    return t


def refuses_negative_strides(p: Any) -> Any:
    t = dlbind.from_dlpack(p)
    if any(s < 0 for s in t.strides):
        raise ValueError("negative strides")
    return t


def flattens(p: Any) -> Any:
    return np.asarray(dlbind.from_dlpack(p)).reshape(-1)


class _View:
    def __init__(self, interface: dict[str, Any], keep: Any) -> None:
        self.__array_interface__ = interface
        self.keep = keep


def ignores_byte_offset(p: Any) -> Any:
    t = dlbind.from_dlpack(p)
    dtype = t.dtype.to_numpy()
    interface = {
        "version": 3, "shape": t.shape, "typestr": dtype.str, "data": (t.data_ptr, False),
        "strides": tuple(s * dtype.itemsize for s in t.strides),
    }  # fmt: skip
    return np.asarray(_View(interface, t))


def refuses_readonly(p: Any) -> Any:
    t = dlbind.from_dlpack(p)
    if t.readonly:
        raise BufferError("read-only tensors are not supported")
    return t


def raw_bytes(p: Any) -> Any:
    return np.asarray(dlbind.from_dlpack(p)) + 1  # values (and for bool the dtype) come out wrong


BROKEN_CONSUMERS: dict[str, Callable[[Any], Any]] = {
    "sends_max_version": legacy_only,
    "legacy_fallback": no_fallback,
    "real_typeerror_propagates": retries_any_typeerror,
    "buffererror_propagates": hides_buffererror,
    "non_capsule_refused": accepts_anything,
    "renames_capsule": does_not_rename,
    "deleter_once": leaks,
    "major_2_refused": accepts_anything,
    "unknown_dtype_refused": accepts_anything,
    "lanes_refused": accepts_anything,
    "unknown_device_refused": accepts_anything,
    "zero_size_null_data": refuses_null_data,
    "zero_d": flattens,
    "negative_strides": refuses_negative_strides,
    "byte_offset": ignores_byte_offset,
    "null_strides": refuses_null_strides,
    "size1_strides": refuses_odd_size1_strides,
    "readonly_respected": refuses_readonly,
    **{c.id: raw_bytes for c in CONSUMER_CHECKS if c.id.startswith("dtype_")},
}


def test_every_consumer_check_has_a_broken_consumer() -> None:
    assert set(BROKEN_CONSUMERS) == {c.id for c in CONSUMER_CHECKS}


@pytest.mark.parametrize("check_id", [c.id for c in CONSUMER_CHECKS])
def test_consumer_check_can_fail(check_id: str) -> None:
    report = check_consumer(BROKEN_CONSUMERS[check_id], only=[check_id])
    assert [r.status for r in report.results] == ["fail"], report.summary()


# -- warnings: allowed by the spec, hazardous in use ------------------------------------------------------


def ignores_readonly(p: Any) -> Any:
    """A consumer without read-only arrays (torch): the flag ignored, a writable alias of the producer's memory."""
    t = dlbind.from_dlpack(p)
    interface = {**np.asarray(t).__array_interface__}
    interface["data"] = (t.data_ptr, False)  # writable
    return np.asarray(_View(interface, t))


def test_readonly_data_imported_writable_warns_citing_the_recommendation() -> None:
    report = check_consumer(ignores_readonly, only=["readonly_respected"])
    assert [r.status for r in report.results] == ["warn"], report.summary()
    assert report.ok  # allowed: a warning is not a failure
    detail = report.results[0].detail
    assert "writable" in detail and "data-apis/array-api#749" in detail and "hazardous" in detail
    assert "WARN readonly_respected: flag ignored" in report.summary() and "1 warned, 0 failed" in report.summary()


def test_readonly_data_imported_as_a_writable_copy_passes() -> None:
    def copies(p: Any) -> Any:
        return np.array(np.asarray(dlbind.from_dlpack(p)))  # writable, and not the read-only memory

    report = check_consumer(copies, only=["readonly_respected"])
    assert [r.status for r in report.results] == ["pass"], report.summary()
    assert "copy" in report.results[0].detail


def _matrix(status: str, detail: str) -> Any:
    from dlbind.check import Matrix

    results = {"consumer:readonly_respected": {"status": status, "detail": detail}}
    pairs = {"torch": {"torch": {"status": "pass", "detail": ""}}}
    return Matrix(["torch"], {"torch": "2.13.0"}, results={"torch": results}, pairs=pairs)


def test_the_matrix_marks_a_warning_and_its_legend_says_so() -> None:
    from dlbind.check import TEXT_LEGEND, render
    from dlbind.testing._consumer_checks import READONLY_IGNORED

    matrix = _matrix("warn", READONLY_IGNORED)
    text = render(matrix)
    row = next(line for line in text.splitlines() if line.startswith("readonly_respected"))
    assert row.split() == ["readonly_respected", "WARN"], row
    assert "WARN: allowed by the spec, hazardous in use" in TEXT_LEGEND and TEXT_LEGEND in text
    assert text.splitlines()[-1].startswith("0 findings and 1 warning about the libraries")
    details = render(matrix, details=True)
    assert "Findings (0)" in details and "Warnings (1): allowed, hazardous in use" in details
    assert "torch 2.13.0 as consumer, readonly_respected: warn: flag ignored" in details
    page = render(matrix, markdown=True)
    link = "[data-apis/array-api#749](https://github.com/data-apis/array-api/issues/749)"
    legend = next(line for line in page.splitlines() if line.startswith("`ok` passed"))
    assert "`WARN` allowed by the spec but hazardous in use" in legend and link in legend
    assert "## Warnings (1)" in page and "- torch 2.13.0 as consumer, readonly_respected: warn: flag ignored" in page
    assert page.count(link) == 2  # the legend's and the warning's


def test_torch_imports_read_only_data_writable_and_is_warned() -> None:
    """The example of issue 45: torch.from_dlpack(dlbind.asdlpack(b"abc")) is a writable tensor over immutable
    bytes; the checker marks it a warning (it passed before)."""
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(dlbind.asdlpack(b"abc"))
    assert t.tolist() == [97, 98, 99]  # writable: torch has no read-only tensors (nothing is written here)
    report = check_consumer(torch.from_dlpack, only=["readonly_respected"])
    assert [r.status for r in report.results] == ["warn"], report.summary()


# -- the pairs through dlbind.convert: a convert that loses values or the target's type fails its cell --------------


@pytest.mark.parametrize(
    ("broken", "said"),
    [(lambda y: y[::-1], "values differ"), (lambda y: y.tolist(), "TypeError: got a list")],
    ids=["values", "type"],
)
def test_a_pair_fails_when_convert_breaks_it(
    monkeypatch: pytest.MonkeyPatch, broken: Callable[[Any], Any], said: str
) -> None:
    import io

    from dlbind import check

    real, calls = dlbind.convert, iter(range(100))

    def convert(x: Any, to: Any, **kw: Any) -> Any:  # each case converts twice (to the source, then the target)
        y = real(x, to, **kw)
        return broken(y) if next(calls) % 2 else y  # the second: the target's array broken

    monkeypatch.setattr(dlbind, "convert", convert)
    pairs = check.run_pairs(["numpy"], check.Progress(io.StringIO(), 1))
    cell = pairs["numpy"]["numpy"]
    assert cell["status"] == "fail" and said in cell["detail"], cell


# -- the command line -------------------------------------------------------------------------------


def test_check_command(tmp_path: Any) -> None:
    out = tmp_path / "matrix.json"
    md = tmp_path / "matrix.md"
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind", "check", "--libs", "numpy", "--json", str(out), "--markdown", str(md)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "DLPack conformance of numpy" in proc.stdout and "As producer" in proc.stdout
    assert "numpy: " in proc.stderr  # the progress display
    data = json.loads(out.read_text())
    assert data["results"]["numpy"]["producer:values"]["status"] == "pass"
    assert data["results"]["numpy"]["consumer:real_typeerror_propagates"]["status"] == "fail"  # a real numpy finding
    assert data["pairs"]["numpy"]["numpy"]["status"] == "pass"
    assert md.read_text().startswith("# Conformance matrix")


@pytest.mark.parametrize("form", [["numpy", "array_api_strict"], ["numpy,array_api_strict"]], ids=["spaces", "comma"])
def test_check_libs_forms(tmp_path: Any, form: list[str]) -> None:
    pytest.importorskip("array_api_strict")
    out = tmp_path / "matrix.json"
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind", "check", "--libs", *form, "--json", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert sorted(json.loads(out.read_text())["results"]) == ["array_api_strict", "numpy"]


def test_check_names_a_library_that_is_not_installed() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind", "check", "--libs", "numpy", "cupy"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "not installed here: cupy" in proc.stderr


def test_a_consumer_that_copies_may_free_at_once() -> None:
    def copies(p: Any) -> Any:
        return np.array(np.asarray(dlbind.from_dlpack(p)))  # the Tensor (and the producer's data) go at once

    report = check_consumer(copies, only=["deleter_once"])
    assert [r.status for r in report.results] == ["pass"], report.summary()
    assert "copied on import" in report.results[0].detail


@pytest.mark.parametrize(("fails", "line"), [(1, "1 finding about"), (2, "2 findings about")])
def test_the_findings_line_counts_in_english(fails: int, line: str) -> None:
    from dlbind.check import TEXT_LEGEND, Matrix, render

    results = {f"producer:check{i}": {"status": "fail", "detail": "wrong"} for i in range(fails)}
    pairs = {"numpy": {"numpy": {"status": "pass", "detail": ""}}}
    matrix = Matrix(["numpy"], {"numpy": "2.x"}, results={"numpy": results}, pairs=pairs)
    text = render(matrix).splitlines()
    assert text[-1].startswith(f"{line} the libraries; --details lists them") and "nox -s demo -- --details" in text[-1]
    # the legend under the title says what FAIL and CRASH mean, and whose findings they are
    assert text[1] == TEXT_LEGEND and "CRASH: its process died" in text[1] and "not a failure of dlbind's" in text[1]
