"""One decision per (producer type, target, device type, keyword shape), made once (issue 27).

``dlbind.convert`` asks :mod:`dlbind.routes` once for each shape of call — the route, the importer's keywords,
dlbind's own copy, a host copy, a refusal — and keeps the answer in the producer's plan; later exchanges of the
same shape run it without calling into dlbind.routes and without looking a row of spec/adapters.toml up.
:func:`dlbind.explain` prints that Decision, and what the data itself adds (its bridge); these tests hold it to
what ``convert`` then does.
"""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Callable
from contextlib import redirect_stdout
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind._ffi
from dlbind import routes
from dlbind.__main__ import main
from dlbind._generated.adapters import ADAPTERS
from dlbind._libraries import for_release, installed, row_lookups
from dlbind.conversion import ExplanationKind
from dlbind.devices import device_name
from dlbind.sources import export_plan

ROUTES_FILE = os.path.abspath(routes.__file__)


def routes_calls(exchange: Callable[[], Any]) -> list[str]:
    """The functions of dlbind.routes one call of ``exchange`` enters."""
    entered: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and os.path.abspath(frame.f_code.co_filename) == ROUTES_FILE:
            entered.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        exchange()
    except BufferError:
        pass  # a refusal is a decision too
    finally:
        sys.setprofile(None)
    return entered


def _torch() -> Any:
    return pytest.importorskip("torch")


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


# name -> the exchange, given a fresh array
EXCHANGES: dict[str, Callable[[np.ndarray], Any]] = {
    "numpy -> torch": lambda a: dlbind.convert(a, to="torch"),
    "numpy[::-1] -> torch": lambda a: dlbind.convert(a[::-1], to="torch"),
    "read-only numpy -> torch": lambda a: dlbind.convert(_readonly(a), to="torch"),
    "numpy -> torch, copy=True": lambda a: dlbind.convert(a, to="torch", copy=True),
    "numpy[::-1] -> torch, copy=False (refused)": lambda a: dlbind.convert(a[::-1], to="torch", copy=False),
    "numpy -> torch, device='cpu'": lambda a: dlbind.convert(a, to="torch", device="cpu"),
    "numpy -> numpy": lambda a: dlbind.convert(a, to="numpy"),
    "numpy -> numpy, copy=True": lambda a: dlbind.convert(a, to="numpy", copy=True),
    "torch -> numpy": lambda a: dlbind.convert(_torch().from_numpy(a), to="numpy"),
    "torch -> numpy, copy=True": lambda a: dlbind.convert(_torch().from_numpy(a), to="numpy", copy=True),
    "Tensor -> numpy, device='cpu'": lambda a: dlbind.convert(dlbind.from_dlpack(a), to="numpy", device="cpu"),
    "torch type as target": lambda a: dlbind.convert(a, to=_torch().Tensor),
    "torch module as target": lambda a: dlbind.convert(a, to=_torch()),
}


@pytest.mark.parametrize("name", list(EXCHANGES))
def test_a_decision_is_made_once_then_read(name: str) -> None:
    exchange = EXCHANGES[name]
    _torch()
    first = routes_calls(lambda: exchange(np.arange(6.0)))
    lookups = row_lookups()
    later = routes_calls(lambda: exchange(np.arange(6.0)))
    assert later == [], f"{name}: the second exchange called into dlbind.routes: {later} (the first: {first})"
    assert row_lookups() == lookups, f"{name}: the second exchange looked a row up"


def test_each_keyword_shape_has_its_decision() -> None:
    torch = _torch()
    a = np.arange(6.0)
    source, route = export_plan(np.ndarray), routes.route_to("torch")
    cpu = int(dlbind.DeviceType.kDLCPU)
    shapes = [(None, None, 0), (None, True, 0), (None, False, 0), (cpu, None, 0)]
    for device, copy, _ in shapes:
        dlbind.convert(a, to="torch", device=None if device is None else "cpu", copy=copy)
    keys = {routes.key(route, cpu, device, copy, stream) for device, copy, stream in shapes}
    assert keys <= set(source.pairs), "a shape of call was not kept under its own key"
    assert len(keys) == len(shapes)
    # what the keywords decide is in the Decision: copy=True reaches torch's importer, device= its own form
    assert source.pairs[routes.key(route, cpu, None, True, 0)].copy_kw is True
    assert source.pairs[routes.key(route, cpu, cpu, None, 0)].device_kw == routes.DEVICE_ARG
    assert isinstance(dlbind.convert(a, to="torch", copy=True), torch.Tensor)


def _fresh_decisions(request: pytest.FixtureRequest, *kinds: type) -> None:
    """The types' plans start with no decisions made, and get back exactly theirs after the test (a plan is
    frozen; the dict of its decisions is what fills)."""

    def restore(pairs: dict[Any, Any], kept: dict[Any, Any]) -> None:
        pairs.clear()
        pairs.update(kept)

    for kind in kinds:
        pairs = export_plan(kind).pairs
        kept = dict(pairs)
        pairs.clear()
        request.addfinalizer(functools.partial(restore, pairs, kept))


def test_its_own_array_is_itself_even_where_the_importer_always_copies(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """copy=False to a system whose importer copies on every import (numba: copy = "always") is refused, unless
    the producer is that system's own array: then it is the answer (interop cell numba, issue 21)."""
    numpy = for_release(ADAPTERS["numpy"])  # (for_release keeps a row per name)
    row = numpy._replace(import_=numpy.import_._replace(copy="always"))
    monkeypatch.setitem(routes.ROUTES, "numpy", routes.make_route(row))
    _fresh_decisions(request, np.ndarray, dlbind.Tensor)  # this row's decisions, dropped after the test
    a = np.arange(3.0)
    assert dlbind.convert(a, to="numpy", copy=False) is a
    assert dlbind.convert(a, to="numpy", copy=False, device="cpu") is a
    assert dlbind.explain(a, "numpy", copy=False).kind == ExplanationKind.ITSELF
    with pytest.raises(BufferError, match="copies on every import"):
        dlbind.convert(dlbind.from_dlpack(a), to="numpy", copy=False)  # not its own array: its importer copies
    # a device it holds no arrays on: refused by dlbind before its importer, in explain's words
    said = dlbind.explain(a, "numpy", copy=False, device="cuda")
    assert said.kind == ExplanationKind.REFUSED and "numpy holds no cuda arrays" in said.text, said
    with pytest.raises(BufferError) as refused:
        dlbind.convert(a, to="numpy", copy=False, device="cuda")
    assert str(refused.value) == said.text.removeprefix("refused: ")


@pytest.mark.skipif(dlbind._ffi.native is None, reason="the pure build has no C routes")
def test_the_compiled_convert_follows_the_route_record_convert_runs(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """The compiled convert's C route is read from the Route record of ``routes.ROUTES`` (issue 41), not from a
    copy of its fields: a record with a handover type is followed in C (its importer is handed a Handover of the
    imported struct), and the same name's record replaced by one without is followed in Python (the importer is
    handed the producer)."""
    seen: list[str] = []

    def importer(x: Any) -> Any:
        seen.append(type(x).__name__)
        return np.from_dlpack(x)

    numpy_route = routes.make_route(for_release(ADAPTERS["numpy"])._replace(name="numpy_spy"), importer)
    t = dlbind.from_dlpack(np.arange(3.0))
    _fresh_decisions(request, dlbind.Tensor)  # the spy's decisions, dropped after the test
    monkeypatch.setitem(
        routes.ROUTES, "numpy_spy", numpy_route._replace(table_type=None, handover_type=np.ndarray, in_c=True)
    )
    np.testing.assert_array_equal(dlbind.convert(t, "numpy_spy"), [0.0, 1.0, 2.0])
    assert seen == ["Handover"]
    monkeypatch.setitem(
        routes.ROUTES, "numpy_spy", numpy_route._replace(table_type=None, handover_type=None, in_c=False)
    )
    np.testing.assert_array_equal(dlbind.convert(t, "numpy_spy"), [0.0, 1.0, 2.0])
    assert len(seen) == 2 and seen[1] != "Handover", seen


@pytest.mark.skipif(dlbind._ffi.native is None, reason="the pure build has no C routes")
@pytest.mark.parametrize(
    "make",
    [bytes, bytearray, memoryview, lambda b: dlbind.asdlpack(b)],
    ids=["bytes", "bytearray", "memoryview", "Exporter"],
)
def test_explain_says_in_c_where_convert_takes_the_c_route(
    make: Callable[[bytes], Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where explain says the exchange is made in C, convert makes no Python import of it: also for an object that
    only describes its memory (a buffer), whose producer is dlbind's own Exporter, which the C route takes."""
    from dlbind import bridges

    imports: list[object] = []
    real = bridges.import_for

    def counted(p: Any, **kw: Any) -> Any:
        imports.append(p.producer)
        return real(p, **kw)

    x = make(bytes(range(6)))
    said = dlbind.explain(x, "numpy")
    assert said.text.endswith(", in C"), said
    monkeypatch.setattr(bridges, "import_for", counted)
    assert dlbind.convert(x, "numpy").tolist() == list(range(6))
    assert imports == [], f"explain said {said.text!r}, and convert imported {imports} in Python"


class _RefusingProducer:
    """A producer whose ``__dlpack__`` refuses every export, and whose memory its array interface describes (as
    numpy's ``__dlpack__`` refuses an ml_dtypes dtype): dlbind exports that interface itself."""

    def __init__(self, array: np.ndarray) -> None:
        self.__array_interface__ = array.__array_interface__
        self.array = array

    def __dlpack__(self, **kwargs: Any) -> object:
        raise BufferError("this producer exports nothing")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _bfloat16_of_numpy() -> tuple[Any, str]:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    pytest.importorskip("torch")
    return np.arange(6.0).astype(ml_dtypes.bfloat16), "torch"


@pytest.mark.parametrize(
    "case",
    [lambda: (_RefusingProducer(np.arange(6.0)), "numpy"), _bfloat16_of_numpy],
    ids=["refusing-producer", "numpy-bfloat16-to-torch"],
)
def test_explain_says_where_the_producers_own_export_refuses(
    case: Callable[[], tuple[Any, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the producer's own ``__dlpack__`` refuses the array, dlbind exports its memory itself, and the compiled
    convert's C route hands the call to Python: explain says so (not "in C"), from its one import, and convert
    hands the target's importer a dlbind.Tensor in Python (not the C route's hand-over), giving the same data."""
    x, to = case()
    said = dlbind.explain(x, to)
    assert said.kind == ExplanationKind.ZERO_COPY and "in C" not in said.text, said
    assert f"{type(x).__name__}.__dlpack__ refuses it, so dlbind exports its memory" in said.text, said
    handed: list[object] = []
    route = routes.route_to(to)
    real = route.importer

    def counted(arg: Any, **kw: Any) -> Any:
        handed.append(arg)
        return real(arg, **kw)

    monkeypatch.setitem(routes.ROUTES, to, route._replace(importer=counted))
    out = dlbind.convert(x, to)
    assert [type(a) for a in handed] == [dlbind.Tensor], f"explain said {said.text!r}, and convert handed {handed}"
    assert np.asarray(dlbind.from_dlpack(out)).tobytes() == np.asarray(dlbind.from_dlpack(x)).tobytes()


# -- dlbind.explain, held to what convert does ---------------------------------------------------------------


def _pointer(x: Any) -> int:
    """Where an array's first element is, read through dlbind (any DLPack producer)."""
    t = dlbind.from_dlpack(x)
    return t.data_ptr + t.byte_offset


ARRAYS: dict[str, Callable[[], np.ndarray]] = {
    "plain": lambda: np.arange(6.0).reshape(2, 3),
    "reversed": lambda: np.arange(6.0)[::-1],
    "transposed": lambda: np.arange(6.0).reshape(2, 3).T,
    "read-only": lambda: _readonly(np.arange(6.0)),
    "offset": lambda: np.arange(7.0)[1:],
}


@pytest.mark.parametrize("copy", [None, True, False], ids=["copy=None", "copy=True", "copy=False"])
@pytest.mark.parametrize("array", list(ARRAYS))
@pytest.mark.parametrize("to", ["torch", "numpy"])
def test_explain_says_what_convert_does(to: str, array: str, copy: bool | None) -> None:
    if to == "torch":
        _torch()
    a = ARRAYS[array]()
    said = dlbind.explain(a, to, copy=copy)
    assert said.kind in (
        ExplanationKind.ITSELF,
        ExplanationKind.ZERO_COPY,
        ExplanationKind.COPY,
        ExplanationKind.REFUSED,
    ), said
    if said.kind == ExplanationKind.REFUSED:
        with pytest.raises(BufferError) as refused:
            dlbind.convert(a, to=to, copy=copy)
        assert str(refused.value) == said.text.removeprefix("refused: ")
        return
    out = dlbind.convert(a, to=to, copy=copy)
    if said.kind == ExplanationKind.ITSELF:
        assert out is a
    elif said.kind == ExplanationKind.ZERO_COPY:
        assert _pointer(out) == _pointer(a), f"explain said zero-copy: {said}"
    else:
        assert _pointer(out) != _pointer(a), f"explain said a copy: {said}"
    assert np.asarray(dlbind.convert(out, to="numpy")).tolist() == a.tolist()


# DLPack's default for a sub-byte dtype: packed below a byte (no IS_SUBBYTE_TYPE_PADDED flag), as from_pointer says it
PACKED = {
    "int4": dlbind.DType(dlbind.DataTypeCode.kDLInt, 4),
    "uint1": dlbind.DType(dlbind.DataTypeCode.kDLUInt, 1),
    "float4_e2m1fn": "float4_e2m1fn",
}
# the systems installed here, each a target
INSTALLED = sorted(name for name, row in ADAPTERS.items() if installed(row.import_name))


def _packed(dtype: str, strided: bool = False) -> Any:
    buf = np.arange(8, dtype=np.uint8)  # four elements in two bytes; reversed: a stride of -1 from the last
    if strided:
        return dlbind.from_pointer(buf.ctypes.data + 3, (4,), PACKED[dtype], strides=(-1,), owner=buf)
    return dlbind.from_pointer(buf.ctypes.data, (4,), PACKED[dtype], owner=buf)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("copy", [None, True], ids=["copy=None", "copy=True"])
@pytest.mark.parametrize("strided", [False, True], ids=["compact", "strided"])
@pytest.mark.parametrize("dtype", list(PACKED))
@pytest.mark.parametrize("to", INSTALLED)
def test_packed_subbyte_data_is_refused_where_the_target_takes_whole_bytes(
    to: str, dtype: str, strided: bool, copy: bool | None
) -> None:
    """Packed sub-byte data reaches only a target whose row says ``import.packed``, and dlbind's copy of it is
    compact only (dlbind.export.export_memory): explain refuses by name exactly where convert cannot, in both
    builds; and the C routes hand every sub-byte dtype to the bridge for such a target (``Route.c_lacks``)."""
    route = routes.route_to(to)
    takes = route.adapter.import_.packed
    lacked = route.c_lacks or b""
    sub_byte = {(code, bits) for code, bits in zip(lacked[::2], lacked[1::2], strict=True) if bits < 8}
    assert bool(sub_byte) is not takes or route.lacks[dlbind.dtype(PACKED["int4"])], (to, route.c_lacks)
    x = _packed(dtype, strided)
    said = dlbind.explain(x, to, copy=copy)
    if not takes:
        assert said.kind == ExplanationKind.REFUSED, said
    if said.kind == ExplanationKind.REFUSED:
        with pytest.raises(BufferError) as refused:
            dlbind.convert(x, to=to, copy=copy)
        assert str(refused.value) == said.text.removeprefix("refused: ")
    else:
        dlbind.convert(x, to=to, copy=copy)


def test_explain_cites_the_targets_quirk() -> None:
    _torch()
    said = dlbind.explain(np.arange(6.0)[::-1], "torch")
    row = for_release(ADAPTERS["torch"])
    quirks = [q for q in row.quirks if q.id.startswith("negative_strides")]
    assert quirks, "torch's row names no negative-strides quirk: the test has nothing to hold"
    assert said.kind == ExplanationKind.COPY
    for quirk in quirks:
        assert quirk.ref in said.text and quirk.text in said.text


class _Foreign:
    """A producer of another library (no dlbind type): it makes its own host copies when asked for the CPU."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.inner.__dlpack_device__()  # type: ignore[no-any-return]


def test_explain_of_device_memory_the_target_cannot_import() -> None:
    """A host copy first; dlbind's own producer makes it through the device's dlbind backend, so where none can
    here explain refuses as convert does, naming what to install; another's producer copies itself."""
    a = np.arange(6.0)
    on_device = dlbind.from_pointer(a.ctypes.data, (6,), "float64", device="cuda", owner=a)
    said = dlbind.explain(_Foreign(on_device), "numpy")
    assert said.kind == ExplanationKind.HOST_COPY, said
    assert said.decision.kind == routes.HOST_COPY
    assert f"{device_name(dlbind.DeviceType.kDLCUDA)}:0" in said.text
    own = dlbind.explain(on_device, "numpy")
    if dlbind.backends(known=True)["cuda"].available:
        assert own.kind == ExplanationKind.HOST_COPY, own
    else:
        assert own.kind == ExplanationKind.REFUSED and "copying cuda memory to the host needs" in own.text, own
        with pytest.raises(BufferError, match="copying cuda memory to the host needs"):
            dlbind.convert(on_device, to="numpy")
    refused = dlbind.explain(on_device, "numpy", copy=False)
    assert refused.kind == ExplanationKind.REFUSED and "copy=False" in refused.text
    with pytest.raises(BufferError, match="copy=False"):
        dlbind.convert(on_device, to="numpy", copy=False)


def test_explain_of_a_relay_on_a_device_with_streams() -> None:
    """The decision for device data of a producer without a row is a relay; explained as zero-copy on the stream
    given where torch has the device, else refused (test_device_asked: a CPU build has no cuda:0)."""
    torch = _torch()  # its row imports CUDA memory
    a = np.arange(6.0)
    on_device = dlbind.from_pointer(a.ctypes.data, (6,), "float64", device="cuda", owner=a)
    said = dlbind.explain(on_device, "torch", stream=7)
    assert said.decision.kind == routes.RELAY and "its producer has no row" in said.decision.why, said
    if not torch.cuda.is_available():
        assert said.kind == ExplanationKind.REFUSED and "no device 'cuda:0' for torch" in said.text, said
        return
    if not dlbind.backends(known=True)["cuda"].available:  # stream 7 waited for by torch's: the backend's work
        assert said.kind == ExplanationKind.REFUSED and "needs a dlbind backend" in said.text, said
        return
    assert said.kind == ExplanationKind.ZERO_COPY and "ordered on the stream given" in said.text, said


def _described(device: str, **kwargs: Any) -> Any:
    a = np.arange(4.0)
    return dlbind.from_pointer(a.ctypes.data, (4,), "float64", device=device, owner=a, **kwargs)


# (what, target, keywords): dlbind's own producers on devices this machine's dlbind backends may not serve
BACKEND_CASES: dict[str, tuple[Callable[[], Any], str, dict[str, Any]]] = {
    "managed Exporter -> numpy": (lambda: _described("cuda_managed"), "numpy", {}),
    "managed Exporter -> torch": (lambda: _described("cuda_managed"), "torch", {}),
    "managed Exporter -> numpy, copy=True": (lambda: _described("cuda_managed"), "numpy", {"copy": True}),
    "managed Tensor -> numpy": (lambda: dlbind.from_dlpack(_described("cuda_managed")), "numpy", {}),
    "cuda Exporter -> numpy": (lambda: _described("cuda"), "numpy", {}),
    "cuda Exporter -> tvm_ffi, copy=True": (lambda: _described("cuda"), "tvm_ffi", {"copy": True}),
    "cuda Exporter -> tvm_ffi, stream=5": (lambda: _described("cuda"), "tvm_ffi", {"stream": 5}),
    "read-only cuda Exporter -> tvm_ffi": (lambda: _described("cuda", readonly=True), "tvm_ffi", {}),
    "cuda Exporter -> tvm_ffi": (lambda: _described("cuda"), "tvm_ffi", {}),
}


@pytest.mark.parametrize("case", list(BACKEND_CASES))
def test_explain_asks_what_the_export_needs_of_a_backend(case: str) -> None:
    """What dlbind's own producer needs of the data's dlbind backend (a host copy of memory the host cannot
    read, a copy on the device, a stream waited for: dlbind.export.export_memory's work) explain asks on every
    branch, as convert meets it: refused in convert's words where no backend serves, never for what the CPU
    does (a host copy of managed memory no stream orders)."""
    make, to, kwargs = BACKEND_CASES[case]
    if to in ("torch", "tvm_ffi"):
        pytest.importorskip(to)
    x = make()
    said = dlbind.explain(x, to, **kwargs)
    if said.kind == ExplanationKind.REFUSED:
        with pytest.raises(BufferError) as refused:
            dlbind.convert(x, to=to, **kwargs)
        assert said.text.removeprefix("refused: ") in str(refused.value)
        return
    out = dlbind.convert(x, to=to, **kwargs)
    assert out is not None
    if case.startswith("managed Exporter"):
        assert said.kind == ExplanationKind.HOST_COPY, said  # the CPU copies it: no backend asked


def test_explain_leaves_a_raw_capsule_unconsumed() -> None:
    capsule = dlbind.asdlpack(np.arange(3.0)).__dlpack__(max_version=dlbind.DLPACK_VERSION)
    with pytest.raises(TypeError, match="raw capsule"):
        dlbind.explain(capsule, "numpy")
    assert dlbind.from_dlpack(capsule).shape == (3,)  # still a usable capsule


def test_python_m_dlbind_explain() -> None:
    _torch()
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["explain", "numpy", "torch", "--reversed"]) == 0
    assert "to='torch'" in out.getvalue()
    assert str(dlbind.explain(np.arange(6.0, dtype=np.float32).reshape(2, 3)[::-1], "torch")) in out.getvalue()
    with redirect_stdout(io.StringIO()):
        assert main(["explain", "numpy", "no-such-library"]) == 2
        assert main(["explain", "numpy", "numpy", "--device", "vulkan:0"]) == 1  # refused: convert would raise


def test_the_targets_own_array_that_cannot_say_where_it_is_is_itself_on_every_call() -> None:
    """torch's meta tensors raise from ``__dlpack_device__``. Asked plainly for torch, one is itself (no device is
    needed for that), on the first call as on every later one and in both builds (the compiled convert answered
    the first call with torch's ValueError and the later ones with the tensor); explain says so. A call that needs
    its device still raises torch's error."""
    torch = pytest.importorskip("torch")
    x = torch.ones(2, device="meta")
    for _ in range(3):
        assert dlbind.convert(x, "torch") is x
    said = dlbind.explain(x, "torch")
    assert said.kind == ExplanationKind.ITSELF, said
    for kwargs in ({"copy": True}, {"device": "cpu"}, {"stream": 1}):
        with pytest.raises(ValueError, match="meta"):
            dlbind.convert(x, "torch", **kwargs)
    with pytest.raises(ValueError, match="meta"):
        dlbind.convert(x, "numpy")


def test_a_byte_offset_of_part_of_an_element_is_copied_for_a_target_that_refuses_it() -> None:
    """torch refuses a byte_offset that is not a whole number of elements (its row's import.byte_offset_items;
    a ValueError from torch, which explain had called zero-copy): dlbind copies such data first, as explain says,
    and copy=False is refused with a BufferError naming the byte_offset."""
    pytest.importorskip("torch")
    rows = [name for name, row in ADAPTERS.items() if row.import_.byte_offset_items]
    assert "torch" in rows
    buf = np.arange(16, dtype=np.uint8)
    x = dlbind.from_pointer(buf.ctypes.data, (3,), "float32", byte_offset=2, owner=buf)
    said = dlbind.explain(x, "torch")
    assert said.kind == ExplanationKind.COPY and "byte_offset of 2 bytes" in said.text, said
    out = dlbind.convert(x, "torch")
    assert out.numpy().tobytes() == buf.tobytes()[2:14]
    with pytest.raises(BufferError, match="byte_offset of 2 bytes"):
        dlbind.convert(x, "torch", copy=False)
    aligned = dlbind.from_pointer(buf.ctypes.data, (3,), "float32", byte_offset=4, owner=buf)
    assert dlbind.explain(aligned, "torch").kind == ExplanationKind.ZERO_COPY
