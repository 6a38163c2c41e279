"""The checker (``dlbind.testing``, ``python -m dlbind check``) on systems that export without ``__dlpack__``,
on producers whose device id is not an int, and on devices (``--device cuda``), where the CPU can show it.

- mxnet, mindspore and tinygrad export through ``export.via`` of their rows in spec/adapters.toml (a method
  or a function giving a legacy capsule, or a host copy): the checks reach them that way, or say
  ``unsupported`` with the reason; none fails with ``AttributeError: ... '__dlpack__'`` (issue 21). Stand-ins
  here carry those systems' type names (dlbind recognises arrays by name, never importing the library);
  the real systems run in their interop cells (``nox -s interop``).
- paddle's ``__dlpack_device__()`` returns ``(kDLCPU, None)``: a failed check saying so, not a raw TypeError.
- device mode: the checks' plumbing (device copies of the consumer checks' producers laid out as on the host,
  views taken by the library's own indexing, the device-only stream checks, the CLI's refusal without a GPU)
  runs here on a stand-in device whose memory is host memory.
"""

from __future__ import annotations

import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

import dlbind
from dlbind.testing import _checks, check_consumer, check_producer
from dlbind.testing import _devices as devices
from dlbind.testing._checks import (
    CONSUMER_CHECKS,
    DEVICE_CONSUMER_CHECKS,
    DEVICE_PRODUCER_CHECKS,
    PRODUCER_CHECKS,
    checks_for,
)
from dlbind.testing._consumer_checks import RawProducer

# -- stand-ins of systems that export another way ------------------------------------------------------------


def _named(module: str, name: str, body: dict[str, Any]) -> type:
    cls = type(name, (), body)
    cls.__module__ = module
    cls.__qualname__ = name
    return cls


def _legacy_capsule(self: Any) -> object:
    return dlbind.asdlpack(self.a).__dlpack__()  # a 'dltensor' capsule, as mxnet's to_dlpack_for_read gives


def _init(self: Any, a: np.ndarray) -> None:
    self.a = a


# mxnet: to_dlpack_for_read() (export.via), no __dlpack__, no __dlpack_device__
MxNDArray = _named("mxnet.ndarray.ndarray", "NDArray", {"__init__": _init, "to_dlpack_for_read": _legacy_capsule})
# tinygrad: numpy(), a host copy (export.via)
TinyTensor = _named("tinygrad.tensor", "Tensor", {"__init__": _init, "numpy": lambda self: np.array(self.a)})
# mindspore: the function mindspore.utils.dlpack.to_dlpack (export.via), asnumpy() where it refuses
MsTensor = _named("mindspore.common.tensor", "Tensor", {"__init__": _init, "asnumpy": lambda self: np.array(self.a)})


@pytest.fixture
def fake_mindspore(monkeypatch: pytest.MonkeyPatch) -> None:
    """A module at mindspore.utils.dlpack whose to_dlpack refuses bool and complex, as mindspore 2.10's does."""

    def to_dlpack(x: Any) -> object:
        if x.a.dtype.kind in "bc":
            raise RuntimeError("Unsupported data type")
        return _legacy_capsule(x)

    package = types.ModuleType("mindspore")
    package.__version__ = "2.10.0"  # type: ignore[attr-defined]
    utils = types.ModuleType("mindspore.utils")
    dlpack = types.ModuleType("mindspore.utils.dlpack")
    dlpack.to_dlpack = to_dlpack  # type: ignore[attr-defined]
    package.utils = utils  # type: ignore[attr-defined]
    utils.dlpack = dlpack  # type: ignore[attr-defined]
    for name, module in (("mindspore", package), ("mindspore.utils", utils), ("mindspore.utils.dlpack", dlpack)):
        monkeypatch.setitem(sys.modules, name, module)


def _report(cls: type) -> dict[str, tuple[str, str]]:
    report = check_producer(cls, name=cls.__module__)
    return {r.check: (r.status, r.detail) for r in report.results}


@pytest.mark.parametrize("cls", [MxNDArray, TinyTensor], ids=["mxnet", "tinygrad"])
def test_systems_exporting_another_way_are_reached_their_way(cls: type) -> None:
    results = _report(cls)
    assert not [k for k, (_, d) in results.items() if "AttributeError" in d], results
    assert not [k for k, (s, _) in results.items() if s in ("fail", "crash")], results
    assert results["protocol"][0] == "unsupported" and "export.via" in results["protocol"][1]
    for check in ("values", "transposed", "negative_strides", "zero_size", "zero_d", "size1_dims", "offset_view"):
        assert results[check][0] == "pass", (check, results[check])
    for check in ("versioned_capsule", "copy_true", "dl_device_same", "stream_none", "unknown_keyword_typeerror"):
        assert results[check][0] == "unsupported", (check, results[check])
        assert "no __dlpack__" in results[check][1]


def test_a_legacy_capsule_through_export_via_is_checked_as_one() -> None:
    results = _report(MxNDArray)
    assert results["legacy_capsule"] == ("pass", "to_dlpack_for_read() gives a legacy capsule")
    assert results["strides_emitted"][0] == "pass"
    assert results["device"][0] == "pass" and "read from the capsule" in results["device"][1]
    assert results["dtype_float32"] == ("pass", "through to_dlpack_for_read()")


def test_a_host_copy_through_export_via_is_read_as_values() -> None:
    results = _report(TinyTensor)
    assert results["values"][0] == "pass" and "host copy" in results["values"][1]
    assert results["legacy_capsule"][0] == "unsupported" and "no capsule" in results["legacy_capsule"][1]
    assert results["strides_emitted"][0] == "unsupported"


@pytest.mark.usefixtures("fake_mindspore")
def test_a_function_export_with_a_host_fallback() -> None:
    results = _report(MsTensor)
    assert not [k for k, (s, _) in results.items() if s in ("fail", "crash")], results
    assert results["values"] == ("pass", "through mindspore.utils.dlpack.to_dlpack")
    assert results["dtype_bool"][0] == "pass" and "host copy" in results["dtype_bool"][1]  # asnumpy()


def test_a_wrong_dtype_through_export_via_still_fails() -> None:
    """What the system gives is checked, not waved through: float32 values arriving as float64 fail."""
    wide = _named("tinygrad.tensor", "Tensor", {"__init__": _init, "numpy": lambda self: self.a.astype("float64")})
    results = _report(wide)
    assert results["values"][0] == "fail" and "dtype float64" in results["values"][1]


def test_an_array_without_dlpack_and_without_a_row_fails_protocol() -> None:
    report = check_producer(lambda a: object(), only=["protocol", "values"])
    assert [r.status for r in report.results] == ["fail", "fail"], report.summary()
    assert all("has no __dlpack__" in r.detail for r in report.results)


# -- paddle's device id -----------------------------------------------------------------------------------------


class DeviceIdNone:
    """A producer whose __dlpack_device__ says (kDLCPU, None), as paddlepaddle 3.3's does."""

    def __init__(self, a: np.ndarray) -> None:
        self.export = dlbind.asdlpack(a)

    def __dlpack__(self, **kw: Any) -> object:
        return self.export.__dlpack__(**kw)

    def __dlpack_device__(self) -> tuple[Any, Any]:
        return (dlbind.DeviceType.kDLCPU, None)


def test_a_device_id_that_is_not_an_int_fails_the_device_check_by_name() -> None:
    report = check_producer(DeviceIdNone, only=["device"])
    (result,) = report.results
    assert result.status == _checks.FAIL
    assert "the device id is a NoneType, not an int" in result.detail
    assert not result.detail.startswith("TypeError")


def test_numpy_integers_are_ints_to_the_device_check() -> None:
    class NumpyInts(DeviceIdNone):
        def __dlpack_device__(self) -> tuple[Any, Any]:
            return (np.int64(1), np.int32(0))

    assert [r.status for r in check_producer(NumpyInts, only=["device"]).results] == ["pass"]


# -- device mode, on a stand-in device ----------------------------------------------------------------------------


class HostBackend:
    """A backend module whose 'device' memory is host memory: what dlbind_cuda.asarray does, on the CPU."""

    keep: ClassVar[list[Any]] = []

    @staticmethod
    def asarray(array: Any) -> dlbind.Tensor:
        copy = np.array(array, copy=True, order="C")
        HostBackend.keep.append(copy)
        return dlbind.from_dlpack(copy)


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A device "standin" whose memory is host memory (its device type is kDLCPU), so that the device
    plumbing of the checks runs here."""
    place = devices.Place("standin", "standin", int(dlbind.DeviceType.kDLCPU))
    monkeypatch.setattr(devices.Place, "module", lambda self: HostBackend)
    monkeypatch.setitem(devices.PLACES, "standin", place)
    yield "standin"
    HostBackend.keep.clear()


@pytest.mark.parametrize("array", [
    np.arange(12.0).reshape(3, 4),
    np.arange(12.0).reshape(3, 4)[::-1],
    np.arange(12.0).reshape(3, 4)[1:, ::-2],
    np.arange(20.0).reshape(4, 5).T[1:, 2:],
    np.arange(0.0),
], ids=["contiguous", "reversed", "offset-negative", "transposed-offset", "empty"])  # fmt: skip
def test_the_span_an_array_reaches(array: np.ndarray) -> None:
    lo, hi = devices._span(array)
    data = array.__array_interface__["data"][0]
    if array.size:
        reached = {
            data + sum(i * s for i, s in zip(index, array.strides, strict=True)) for index in np.ndindex(*array.shape)
        }
        assert lo == min(reached) and hi == max(reached) + array.itemsize
    else:
        assert lo == hi


def test_upload_lays_a_view_out_as_on_the_host(stand_in: str) -> None:
    place = devices.PLACES[stand_in]
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = base[::-1, 1::2]
    _owner, address = place.upload(view)  # the owner keeps the copy alive
    interface = {
        "version": 3, "shape": view.shape, "typestr": view.dtype.str, "data": (address, True), "strides": view.strides,
    }  # fmt: skip
    holder = types.SimpleNamespace(__array_interface__=interface)
    assert np.array_equal(np.asarray(holder), view)
    assert address != view.__array_interface__["data"][0]  # a copy, not the host memory itself


def test_consumer_checks_on_a_device_feed_device_copies(stand_in: str) -> None:
    """dlbind.from_dlpack passes every consumer check on the stand-in device: the producers' copies keep
    strides, byte offsets and read-only flags right; the device-only stream check says what was passed."""
    report = check_consumer(dlbind.from_dlpack, device=stand_in)
    by_id = {r.check: r for r in report.results}
    assert report.ok, report.summary()
    assert set(by_id) == {c.id for c in (*CONSUMER_CHECKS, *DEVICE_CONSUMER_CHECKS)}
    assert by_id["stream_passed"].status == _checks.PASS
    assert "without a stream" in by_id["stream_passed"].detail  # dlbind on the CPU passes none
    assert "writability is not read" in by_id["readonly_respected"].detail


def test_producer_checks_on_a_device_take_views_by_the_librarys_indexing(stand_in: str) -> None:
    """numpy as the 'library' of the stand-in device: the layout checks make the base there and view it."""
    made: list[tuple[int, ...]] = []

    def make(sample: np.ndarray) -> np.ndarray:
        made.append(sample.shape)
        return np.array(sample, copy=True)

    layouts = ["transposed", "negative_strides", "offset_view", "values", "zero_d"]
    report = check_producer(make, only=layouts, device=stand_in)
    assert report.ok and report.count("pass") == len(layouts), report.summary()
    assert (3, 4) in made and (4, 5) in made  # the bases, not the views: (4, 3) never made
    assert (4, 3) not in made


# -- every device check fails on a subject broken on purpose (the stand-in's streams: host memory, in order) --------


@pytest.fixture
def streams(stand_in: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """The stand-in device with streams: ints, a copy done at once (memmove), nothing to wait for."""
    import ctypes

    monkeypatch.setattr(devices.Place, "new_stream", lambda self: 1234)
    monkeypatch.setattr(devices.Place, "destroy_stream", lambda self, stream: None)
    monkeypatch.setattr(devices.Place, "synchronize", lambda self, stream: None)
    monkeypatch.setattr(
        devices.Place, "copy_async", lambda self, dst, src, nbytes, stream: ctypes.memmove(dst, src, nbytes)
    )
    return stand_in


class RefusesTheLegacyStream(RawProducer):
    """Refuses stream=1, the legacy default stream every CUDA producer must take."""

    def __dlpack__(self, **kwargs: Any) -> object:
        if kwargs.get("stream") == 1:
            raise BufferError("stream 1 is not supported")
        return super().__dlpack__(**kwargs)


class LateWriter:
    """A producer whose pending write (VALUE into zeros) is not ordered before the consumer's stream: its
    ``__dlpack__`` ignores the stream asked (``ordered=False``), or finishes the write first (``ordered=True``)."""

    def __init__(self, n: int, *, ordered: bool) -> None:
        self.a, self.ordered = np.zeros(n, dtype=np.float32), ordered

    def __dlpack_device__(self) -> tuple[int, int]:
        return (int(dlbind.DeviceType.kDLCPU), 0)

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, **kwargs: Any) -> object:
        if self.ordered:
            self.write()
        return self.a.__dlpack__(max_version=max_version)

    def write(self) -> None:
        self.a[:] = devices.VALUE


def _busy_library(monkeypatch: pytest.MonkeyPatch, device: str, *, ordered: bool) -> Any:
    """``make_array`` of a library "late" on ``device`` whose stream the stream checks keep busy with a LateWriter."""
    import contextlib

    def busy(n: int) -> devices.Busy:
        writer = LateWriter(n, ordered=ordered)
        return devices.Busy(writer, contextlib.nullcontext, lambda: True, writer.write)

    monkeypatch.setitem(devices.DEVICE_ARRAYS, device, {"late": devices.DeviceArrays(make="late", streams="late")})
    monkeypatch.setitem(devices.BUSY_WRITERS, "late", busy)

    def make(sample: np.ndarray) -> Any:
        return RawProducer(sample)

    make.dlbind_library = "late"  # type: ignore[attr-defined]
    return make


def test_stream_values_fails_a_producer_refusing_the_legacy_stream(streams: str) -> None:
    report = check_producer(RefusesTheLegacyStream, only=["stream_values"], device=streams)
    assert [r.status for r in report.results] == ["fail"], report.summary()
    assert "stream=1 (legacy default) refused" in report.results[0].detail


def test_stream_zero_refused_fails_a_producer_taking_stream_0(streams: str) -> None:
    report = check_producer(RawProducer, only=["stream_zero_refused"], device=streams)  # it takes any stream
    assert [r.status for r in report.results] == ["fail"], report.summary()
    assert "accepted stream=0" in report.results[0].detail


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_stream_ordered_fails_a_producer_that_does_not_order_its_write(
    streams: str, monkeypatch: pytest.MonkeyPatch, ordered: bool
) -> None:
    make = _busy_library(monkeypatch, streams, ordered=ordered)
    report = check_producer(make, only=["stream_ordered"], device=streams)
    assert [r.status for r in report.results] == ["pass" if ordered else "fail"], report.summary()
    if not ordered:
        assert "before the producer wrote them (while it was still busy)" in report.results[0].detail


@pytest.mark.parametrize("stream", [0, "1", None], ids=["zero", "not-an-int", "never-asked"])
def test_stream_passed_fails_a_consumer_passing_a_wrong_stream(streams: str, stream: Any) -> None:
    def consume(p: Any) -> Any:
        if stream is None:  # imports without calling __dlpack__ at all: a copy of the producer's array
            return np.array(p.array)
        return dlbind.from_dlpack(p.__dlpack__(max_version=dlbind.DLPACK_VERSION, stream=stream))

    report = check_consumer(consume, only=["stream_passed"], device=streams)
    assert [r.status for r in report.results] == ["fail"], report.summary()
    said = {0: "passed stream=0", "1": "passed stream='1', not an int", None: "imported without calling __dlpack__"}
    assert said[stream] in report.results[0].detail


def test_a_pair_on_a_device_fails_when_convert_loses_values(stand_in: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pairs of ``--device``: numpy as the stand-in device's library, a convert to it that reverses the rows."""
    import io

    from dlbind import check

    monkeypatch.setitem(devices.DEVICE_ARRAYS, stand_in, {"numpy": devices.DeviceArrays(make="numpy.array")})
    real = dlbind.convert
    monkeypatch.setattr(dlbind, "convert", lambda x, to, **kw: real(x, to, **kw)[::-1])
    pairs = check.run_pairs(["numpy"], check.Progress(io.StringIO(), 1), device=stand_in)
    cell = pairs["numpy"]["numpy"]
    assert cell["status"] == "fail" and "values differ" in cell["detail"], cell


#: The tests above: every device check, and the subject that fails it.
BROKEN_ON_A_DEVICE = {
    "producer:stream_values": test_stream_values_fails_a_producer_refusing_the_legacy_stream,
    "producer:stream_zero_refused": test_stream_zero_refused_fails_a_producer_taking_stream_0,
    "producer:stream_ordered": test_stream_ordered_fails_a_producer_that_does_not_order_its_write,
    "consumer:stream_passed": test_stream_passed_fails_a_consumer_passing_a_wrong_stream,
}


def test_every_device_check_has_a_broken_subject() -> None:
    listed = {f"{c.kind}:{c.id}" for c in (*DEVICE_PRODUCER_CHECKS, *DEVICE_CONSUMER_CHECKS)}
    assert set(BROKEN_ON_A_DEVICE) == listed


def test_device_checks_off_a_device_are_unsupported() -> None:
    from dlbind.testing._checks import run_check

    for check in DEVICE_PRODUCER_CHECKS:
        assert run_check(check, dlbind.asdlpack).status == _checks.UNSUPPORTED
    for check in DEVICE_CONSUMER_CHECKS:
        assert run_check(check, dlbind.from_dlpack, np.asarray).status == _checks.UNSUPPORTED


def test_the_device_checks_are_listed_for_devices_only() -> None:
    assert checks_for(None) == (PRODUCER_CHECKS, CONSUMER_CHECKS)
    producer, consumer = checks_for("cuda")
    assert producer[: len(PRODUCER_CHECKS)] == PRODUCER_CHECKS and consumer[: len(CONSUMER_CHECKS)] == CONSUMER_CHECKS
    assert {c.id for c in DEVICE_PRODUCER_CHECKS} == {"stream_values", "stream_zero_refused", "stream_ordered"}
    assert {c.id for c in DEVICE_CONSUMER_CHECKS} == {"stream_passed"}
    assert not {c.id for c in PRODUCER_CHECKS} & {c.id for c in DEVICE_PRODUCER_CHECKS}


# -- the table of device constructors ------------------------------------------------------------------------------


def test_every_row_names_a_library_dlbind_knows() -> None:
    from dlbind._generated.adapters import ADAPTERS

    for device, rows in devices.DEVICE_ARRAYS.items():
        assert device in devices.PLACES
        for library, row in rows.items():
            assert library in ADAPTERS, library
            assert row.takes in (devices.NDARRAY, devices.HOST)
            assert row.streams in ("", *devices.BUSY_WRITERS)
            assert row.consumer == "row" or row.consumer_note, library


def test_a_maker_calls_the_rows_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[Any, dict[str, Any]]] = []
    module = types.ModuleType("standin_lib")
    module.make = lambda given, **kw: calls.append((given, kw)) or given  # type: ignore[attr-defined]
    module.devices = lambda kind: [f"{kind}:0", f"{kind}:1"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "standin_lib", module)
    row = devices.DeviceArrays(make="standin_lib.make", keywords=(("pinned", True),), device="standin_lib.devices",
                               device_args=("gpu",), device_keyword="where")  # fmt: skip
    monkeypatch.setitem(devices.DEVICE_ARRAYS, "cuda", {**devices.DEVICE_ARRAYS["cuda"], "numpy": row})
    make = devices.maker("numpy", "cuda")
    a = np.arange(3.0)
    assert make(a) is a
    assert calls == [(a, {"pinned": True, "where": "gpu:0"})]
    assert make.dlbind_device == "cuda" and make.dlbind_library == "numpy"  # type: ignore[attr-defined]


def test_unusable_says_why() -> None:
    assert "knows no constructor" in (devices.unusable("tensorflow", "cuda") or "")
    assert devices.unusable("numpy", "cuda") is not None


def test_check_on_cuda_without_a_gpu_says_why_and_exits_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind", "check", "--device", "cuda", "--libs", "numpy"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    status = dlbind.backends().get("cuda")
    if status is not None and status.available:
        pytest.skip("a CUDA GPU is here: the GPU run (tests/gpu, .ci/gpu) checks --device cuda")
    assert proc.returncode == 2, proc.stderr
    assert "--device cuda: cannot run here: dlbind-cuda" in proc.stderr


def test_a_system_of_device_arrays_only_is_checked_on_its_device_not_with_host_arrays() -> None:
    # CuPy holds CUDA and ROCm arrays and takes no host data: with host arrays every check and pair of it would
    # fail for want of a GPU. They are unsupported, saying where they run, before CuPy is imported
    import io
    import json

    from dlbind import check

    assert devices.device_only("cupy") == (
        "cupy holds cuda, rocm arrays only: check it there (python -m dlbind check --device ...)"
    )
    assert devices.device_only("numpy") == devices.device_only("dpnp") == ""  # host arrays; dpnp copies them in
    pairs = check.run_pairs(["cupy", "numpy"], check.Progress(io.StringIO(), 1))
    assert (
        pairs["cupy"]["numpy"]
        == pairs["numpy"]["cupy"]
        == {"status": "unsupported", "detail": devices.device_only("cupy")}
    )
    assert pairs["numpy"]["numpy"]["status"] == "pass"
    out = subprocess.run(
        [sys.executable, "-m", "dlbind.testing._worker", "cupy"], capture_output=True, text=True, check=True
    ).stdout
    results = [json.loads(line) for line in out.splitlines() if '"key"' in line]
    assert results and all(r["status"] == "unsupported" and r["detail"] == devices.device_only("cupy") for r in results)
