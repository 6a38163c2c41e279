"""What ``dlbind.explain`` says is what ``dlbind.convert`` does (issue 40), for every system this environment
installs (each interop cell runs it for its own), in both builds.

Both read one value, the plan (``dlbind.conversion.plan``): ``convert`` runs it, ``explain`` renders it. The
table below walks the layouts, dtypes and ``copy=``/``device=``/``stream=`` keywords the bridges, the checker and
``test_device_asked`` cover, from numpy arrays, dlbind Tensors and each system's own arrays, and holds each
explanation to the outcome:

- ``refused``: ``convert`` raises ``BufferError`` with the explanation's message, word for word;
- ``itself``: ``convert`` returns the producer;
- ``zero-copy``: the result's data is the producer's (its first element's address, read through dlbind);
- ``copy`` and ``host copy``: the result's data is elsewhere;
- an exception from ``explain`` (an unknown device, a ``copy=`` that is not a bool): the same from ``convert``.

Only the cases :data:`ONLY_BY_TRYING` names may leave the outcome to the target ("known only by trying"), and
``explain`` must say so in words.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from _suite import ALL_DTYPES, LAYOUTS

import dlbind
from dlbind._generated.adapters import ADAPTERS
from dlbind._generated.tables import DTYPE_BY_NAME
from dlbind._libraries import dotted, for_release, installed
from dlbind.conversion import ExplanationKind
from dlbind.routes import ROUTES, make_route
from dlbind.sources import export_plan

# the systems installed here whose importer dlbind can reach (the cell's, and whatever else its venv has)
SYSTEMS = sorted(name for name, row in ADAPTERS.items() if installed(row.import_name))

try:  # the dtypes numpy holds through ml_dtypes, which some targets lack (numpy's own DLPack import among them)
    import ml_dtypes

    # every one dlbind names (spec/dtypes.toml): bfloat16, each float8, float6 and float4 (one element per byte,
    # which no legacy capsule can say)
    EXTRA_DTYPES: dict[str, Any] = {
        name: getattr(ml_dtypes, name) for name in DTYPE_BY_NAME if hasattr(ml_dtypes, name)
    }
except ImportError:
    EXTRA_DTYPES = {}
DTYPES = (*ALL_DTYPES, *EXTRA_DTYPES)  # every dtype numpy shares with DLPack
COPIES = (None, True, False)
# device= as users write it: the host in each form, an index the host lacks, and devices this machine may lack
DEVICES: tuple[Any, ...] = ("cpu", "cpu:0", (1, 0), "cpu:1", "cuda", "cuda:1", "rocm", "vulkan:0", "metal", "oneapi")
STREAMS = (-1, 1)

# (target, device asked) pairs whose outcome dlbind cannot know without trying the target; each must make
# explain say "known only by trying". None today: every device= either has a count (the row's device_count,
# the array API namespace's devices) or is refused by the row, or the importer takes no device= at all.
ONLY_BY_TRYING: frozenset[tuple[str, str]] = frozenset()

# the libraries' own warnings (numpy's np.bool alias in mxnet, paddle's missing ccache) are not what is held here
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _array(dtype: str, layout: str) -> np.ndarray:
    base = np.arange(60).reshape(6, 10)
    a = (base % 2 == 1) if dtype == "bool" else base.astype(EXTRA_DTYPES.get(dtype, dtype))
    if layout == "read-only":
        a = a[1:, :]
        a.flags.writeable = False
        return a
    return LAYOUTS[layout](a)


LAYOUT_NAMES = (*LAYOUTS, "read-only")


def _address(x: Any) -> int | None:
    """Where an array's first element is, read through dlbind; None where it holds no elements or cannot say (a
    system whose every export is a new copy, export.copies: tinygrad's numpy())."""
    row = export_plan(type(x)).row
    if row is not None and row.export.copies:
        return None
    try:
        t = dlbind.from_dlpack(x)
    except (BufferError, TypeError, ValueError):
        return None
    if any(n == 0 for n in t.shape):
        return None
    return t.data_ptr + t.byte_offset


def _mismatch(x: Any, to: str, **kw: Any) -> str | None:
    """Why ``explain(x, to, **kw)`` does not say what ``convert(x, to, **kw)`` does (None: it does)."""
    shown = f"{type(x).__name__} -> {to} {kw}"
    try:
        said = dlbind.explain(x, to, **kw)
    except Exception as exc:  # explain refuses the call itself: so must convert, in the same words
        try:
            dlbind.convert(x, to=to, **kw)
        except Exception as exc2:
            if type(exc2) is type(exc) and str(exc2) == str(exc):
                return None
            return f"{shown}: explain raised {exc!r}, convert raised {exc2!r}"
        return f"{shown}: explain raised {exc!r}, convert succeeded"
    device = kw.get("device")
    trying = device is not None and (to, str(device)) in ONLY_BY_TRYING
    if said.kind == ExplanationKind.REFUSED:
        try:
            dlbind.convert(x, to=to, **kw)
        except BufferError as exc:
            if str(exc) != said.text.removeprefix("refused: "):
                return f"{shown}: explain said {said.text!r}, convert raised {str(exc)!r}"
            return None
        except Exception as exc:
            return f"{shown}: explain said {said.text!r}, convert raised {exc!r}"
        return f"{shown}: explain said {said.text!r}, convert succeeded"
    if "known only by trying" in said.text and not trying:
        return f"{shown}: explain left it to the target ({said.text!r}), which ONLY_BY_TRYING does not name"
    try:
        out = dlbind.convert(x, to=to, **kw)
    except Exception as exc:
        if trying and isinstance(exc, BufferError) and "known only by trying" in said.text:
            return None
        return f"{shown}: explain said {said.text!r}, convert raised {exc!r}"
    if said.kind == ExplanationKind.ITSELF:
        return None if out is x else f"{shown}: explain said itself, convert gave another array"
    mine, theirs = _address(x), _address(out)
    if mine is None or theirs is None:
        return None  # no elements (or an array that cannot say where): the kind alone is held, above
    if said.kind == ExplanationKind.ZERO_COPY and mine != theirs:
        return f"{shown}: explain said {said.text!r}, convert copied"
    if said.kind in (ExplanationKind.COPY, ExplanationKind.HOST_COPY) and mine == theirs:
        return f"{shown}: explain said {said.text!r}, convert shared the data"
    return None


def _cases() -> Iterator[tuple[Callable[[np.ndarray], Any], dict[str, Any], np.ndarray]]:
    """(how a producer is made of a numpy array, keywords, the numpy array): the table's rows."""
    for dtype in DTYPES:
        for layout in LAYOUT_NAMES:
            for copy in COPIES:
                yield (lambda a: a), {"copy": copy}, _array(dtype, layout)
    for layout in ("contiguous", "reversed"):
        for device in DEVICES:
            for copy in COPIES:
                yield (lambda a: a), {"device": device, "copy": copy}, _array("float64", layout)
    for stream in STREAMS:
        yield (lambda a: a), {"stream": stream}, _array("float32", "contiguous")
    yield (lambda a: a), {"copy": "yes"}, _array("float32", "contiguous")  # a TypeError, from both


PRODUCERS: dict[str, Callable[[np.ndarray], Any]] = {
    "numpy": lambda a: a,
    "dlbind.Tensor": dlbind.from_dlpack,
    "dlbind.asdlpack": dlbind.asdlpack,
}


def _own(system: str, a: np.ndarray) -> Any:
    """``a`` as the system's own array (through dlbind), or None where the system cannot hold it."""
    try:
        return dlbind.convert(a, to=system, copy=True)
    except (BufferError, TypeError, ValueError):
        return None


@contextmanager
def _as_checked(systems: list[str]) -> Iterator[None]:
    """The systems' rows' check setups, as ``python -m dlbind check`` runs them (jax's 64-bit dtypes, off by
    default: its import narrows int64 and float64 to 32 bits, which its row's ``import.narrows`` says), and each
    setting put back afterwards, so that no later test depends on this one having run."""
    undo = []
    for name in systems:
        row = ADAPTERS[name]
        if not row.check_setup:
            continue
        setup = dotted(row.check_setup)
        config = getattr(setup, "__self__", None)  # jax.config.update(name, value): a config's own setter
        if config is not None and len(row.check_setup_args) == 2 and isinstance(row.check_setup_args[0], str):
            option = row.check_setup_args[0]
            undo.append((setup, option, getattr(config, option)))
        setup(*row.check_setup_args)
    try:
        yield
    finally:
        for setup, option, value in undo:
            setup(option, value)


# each test runs as its users run the system (its defaults), then as the checker sets it up (where the row says)
SETTINGS = ("as installed", "as checked")


@pytest.fixture(autouse=True, params=SETTINGS)
def _setting(request: pytest.FixtureRequest) -> Iterator[None]:
    system = getattr(request.node, "callspec", None) and request.node.callspec.params.get("system")
    systems = [system] if system else SYSTEMS
    if request.param == "as checked" and not any(ADAPTERS[name].check_setup for name in systems):
        pytest.skip("the row has no check setup: as installed is as checked")
    if request.param == "as installed":
        yield
        return
    with _as_checked(systems):
        yield


def test_systems_are_found() -> None:
    assert "numpy" in SYSTEMS  # the table's targets: numpy at least, and each cell's system


@pytest.mark.parametrize("producer", list(PRODUCERS))
@pytest.mark.parametrize("system", SYSTEMS)
def test_explain_says_what_convert_does(system: str, producer: str) -> None:
    make = PRODUCERS[producer]
    wrong = []
    for _, kw, a in _cases():
        try:
            x = make(a)
        except BufferError:  # dlbind's own producer refuses the array (nothing to convert)
            continue
        found = _mismatch(x, system, **kw)
        if found:
            wrong.append(found)
    assert not wrong, f"{len(wrong)} cases where explain and convert disagree:\n" + "\n".join(wrong[:40])


@pytest.mark.parametrize("system", SYSTEMS)
def test_explain_says_what_convert_does_with_the_systems_own_arrays(system: str) -> None:
    wrong, made = [], 0
    for dtype in ("float64", "float32", "int32", "bool"):
        x = _own(system, np.arange(12).reshape(3, 4).astype(dtype))
        if x is None:
            continue
        made += 1
        for to in sorted({system, "numpy"}):
            for copy in COPIES:
                for device in (None, "cpu", "cpu:1", "cuda", "vulkan:0"):
                    found = _mismatch(x, to, copy=copy, device=device)
                    if found:
                        wrong.append(found)
    if not made:
        pytest.skip(f"{system} holds none of the table's arrays on this machine")
    assert not wrong, f"{len(wrong)} cases where explain and convert disagree:\n" + "\n".join(wrong[:40])


def _refused_by_their_export(system: str) -> dict[str, Any]:
    """Arrays of ``system`` (made by its own API) that its DLPack export refuses or its importer lacks, by name:
    what its own importer, asked for a copy, meets in that export."""
    if system == "torch":
        import torch

        eye = torch.eye(3)
        return {
            "requires_grad": torch.ones(3, requires_grad=True), "conj": torch.ones(3, dtype=torch.complex64).conj(),
            "neg": torch._neg_view(torch.ones(3)), "sparse coo": eye.to_sparse(), "sparse csc": eye.to_sparse_csc(),
            "quantized": torch.quantize_per_tensor(eye, 0.1, 0, torch.qint8),
        }  # fmt: skip
    if system == "numpy":
        made = {"structured": np.zeros(3, "f4,i4"), "datetime": np.zeros(3, "M8[s]"), "big-endian": np.zeros(3, ">f8")}
        made.update({name: np.zeros(3, kind) for name, kind in EXTRA_DTYPES.items()})
        return made
    return {}


@pytest.mark.parametrize("system", [s for s in SYSTEMS if s in ("torch", "numpy")])
def test_explain_says_what_the_systems_own_importer_meets_in_its_export(system: str) -> None:
    """Handed to its own importer with ``copy=True`` (or ``device=``), an array is exported by its own library, which
    refuses some (torch's sparse layouts and ``requires_grad``, numpy's structured arrays): explain says that
    refusal, in convert's words; an array of a dtype that importer lacks (numpy's bfloat16) goes through dlbind's
    import, which views it, as explain says."""
    wrong = []
    for name, x in _refused_by_their_export(system).items():
        for kw in ({"copy": True}, {"copy": True, "device": "cpu"}, {"copy": False}, {}):
            found = _mismatch(x, system, **kw)
            if found:
                wrong.append(f"{name}: {found}")
    assert not wrong, f"{len(wrong)} cases where explain and convert disagree:\n" + "\n".join(wrong)


#: dtypes DLPack defines that numpy holds no dtype of, as ``(code, bits)``: complex32 (torch's chalf, two float16)
NUMPY_LACKS = {"complex32": (5, 32)}


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("dtype", list(NUMPY_LACKS))
def test_explain_says_what_convert_does_with_dtypes_numpy_lacks(system: str, dtype: str) -> None:
    """A dtype that only some systems hold (complex32) is refused by explain where the target's importer cannot
    take it (its row's ``lacks_dtypes``), not promised and then raised by that importer."""
    code, bits = NUMPY_LACKS[dtype]
    store = np.arange(12, dtype=np.float16)  # six complex32 elements, as two float16 each
    wrong = []
    exporter = dlbind.from_pointer(store.ctypes.data, (6,), dlbind.DType(code, bits), owner=store)
    for x in (exporter, dlbind.from_dlpack(exporter)):
        for copy in COPIES:
            found = _mismatch(x, system, copy=copy)
            if found:
                wrong.append(f"{type(x).__name__}: {found}")
    assert not wrong, f"{len(wrong)} cases where explain and convert disagree:\n" + "\n".join(wrong)


def test_an_unknown_device_is_refused_alike() -> None:
    a = np.arange(3.0)
    with pytest.raises(ValueError, match="unknown device") as said:
        dlbind.explain(a, "numpy", device="cuda9:x")
    with pytest.raises(ValueError, match="unknown device") as done:
        dlbind.convert(a, to="numpy", device="cuda9:x")
    assert str(done.value) == str(said.value)


def test_a_device_the_target_lacks_is_refused_before_its_importer() -> None:
    """device= a device the target holds no arrays on (numpy's are cpu only) is refused by dlbind, in explain as in
    convert, and the target's importer is never called (counted through a route of numpy's row)."""
    calls = []

    def importer(x: Any, **kw: Any) -> Any:
        calls.append(kw)
        return np.from_dlpack(x, **kw)

    row = for_release(ADAPTERS["numpy"])._replace(name="numpy_counted")  # (before 2.1: no device= keyword)
    ROUTES["numpy_counted"] = make_route(row, importer)
    try:
        a = np.arange(4.0)
        said = dlbind.explain(a, "numpy_counted", device="vulkan:0")
        assert said.kind == ExplanationKind.REFUSED and "holds no vulkan arrays" in said.text, said
        with pytest.raises(BufferError) as refused:
            dlbind.convert(a, to="numpy_counted", device="vulkan:0")
        assert str(refused.value) == said.text.removeprefix("refused: ")
        assert calls == []
        # the counter counts: a device it has reaches the importer, with the device in numpy's form
        assert dlbind.convert(a, to="numpy_counted", device="cpu").tolist() == a.tolist()
        assert calls == [{"device": "cpu"} if "device" in row.import_.keywords else {}]
    finally:
        del ROUTES["numpy_counted"]


class _Counted:
    """A producer counting its exports (a numpy array's ``__dlpack__``, handed on; an ask numpy refuses, such as
    max_version before numpy 2.1, is no export)."""

    def __init__(self, a: np.ndarray) -> None:
        self.a, self.calls = a, 0

    def __dlpack__(self, **kw: Any) -> Any:
        made = self.a.__dlpack__(**kw)
        self.calls += 1
        return made

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


@pytest.mark.parametrize("layout", ["contiguous", "reversed", "read-only"])
@pytest.mark.parametrize("system", SYSTEMS)
def test_explain_asks_the_producer_at_most_once_and_never_the_target(system: str, layout: str) -> None:
    """explain makes no exchange of its own: at most the plan's one import, where the data's bridge depends on
    the data, and never the target's importer (counted through a route of the system's row)."""
    calls = []
    real = dlbind.routes.route_to(system)

    def importer(x: Any, **kw: Any) -> Any:
        calls.append(kw)
        return real.importer(x, **kw)

    name = f"{system}_counted"
    ROUTES[name] = make_route(real.adapter._replace(name=name), importer)
    try:
        x = _Counted(_array("float64", layout))
        try:
            said: Any = dlbind.explain(x, name)
        except (TypeError, BufferError) as exc:  # numpy<2.1 exports no read-only array: the refusal is the answer
            said = exc
        assert x.calls <= 1, f"explain asked the producer {x.calls} times: {said}"
        assert calls == [], f"explain called {system}'s importer: {said}"
    finally:
        del ROUTES[name]


def test_a_huge_broadcast_array_is_explained() -> None:
    """A broadcast view of 4 EiB: explain explains it for every target (numpy's own importer raised "array is too
    big" inside explain before); where dlbind would copy it, the copy is refused, in explain as in convert."""
    big = np.broadcast_to(np.zeros(1, dtype=np.int8), (2**31, 2**31))
    said = dlbind.explain(big, "numpy", copy=True)
    assert said.kind in (ExplanationKind.COPY, ExplanationKind.REFUSED), said
    refused = 0
    for to in SYSTEMS:
        said = dlbind.explain(big, to)
        assert said.kind in (
            ExplanationKind.ITSELF,
            ExplanationKind.ZERO_COPY,
            ExplanationKind.COPY,
            ExplanationKind.REFUSED,
        ), said
        if said.text == "refused: the tensor is too large to copy":
            refused += 1
            assert _mismatch(big, to) is None
    if any(s in SYSTEMS for s in ("torch", "jax", "tvm_ffi")):  # each copies read-only or broadcast data first
        assert refused
