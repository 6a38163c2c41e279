"""One exchange asks its producer once (issue 27), on the host: every route of `convert` and `from_dlpack` from
host memory calls the producer's `__dlpack__` once per exchange, the type's first exchange and every one after
it (plans and the compiled build's C routes cached), in both builds. (Device routes: dlbind-vulkan's and
dlbind-cuda's tests.)"""

from __future__ import annotations

import gc
import importlib
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind._generated.adapters import ADAPTERS
from dlbind.routes import Route, route_to
from faulty import PY310_PURE, PY310_PURE_REASON


class Counting:
    """A host producer that counts the times it is asked (a numpy array inside; no row of any system)."""

    def __init__(self, inner: np.ndarray) -> None:
        self.inner, self.asked = inner, 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.inner.__dlpack_device__()


ROUTES: dict[str, Callable[[Any], Any]] = {
    "convert to numpy": lambda p: dlbind.convert(p, to="numpy"),
    "convert to numpy, copy=True": lambda p: dlbind.convert(p, to="numpy", copy=True),
    "convert to numpy, device='cpu'": lambda p: dlbind.convert(p, to="numpy", device="cpu"),
    "convert to torch": lambda p: dlbind.convert(p, to="torch"),
    "convert to torch, copy=False": lambda p: dlbind.convert(p, to="torch", copy=False),
    "from_dlpack": lambda p: dlbind.from_dlpack(p),
    "from_dlpack, copy=True": lambda p: dlbind.from_dlpack(p, copy=True),
    "from_dlpack, device='cpu', copy=False": lambda p: dlbind.from_dlpack(p, device="cpu", copy=False),
    "numpy from dlbind's re-export": lambda p: np.from_dlpack(dlbind.from_dlpack(p)),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_producer_is_asked_once(route: str) -> None:
    if "torch" in route:
        pytest.importorskip("torch")
    values = np.arange(6.0).reshape(2, 3)
    for n in range(3):
        producer = Counting(values.copy())
        out = ROUTES[route](producer)
        assert producer.asked == 1, f"exchange {n + 1}: asked {producer.asked} times"
        got = out.numpy() if type(out).__module__.startswith("torch") else np.asarray(out)
        np.testing.assert_array_equal(got, values)


class Made:
    """A producer of the structs ``faulty.make_capsule`` makes of ``fields`` (each capsule's deleter counted, in
    ``keep``), counting the times it is asked."""

    def __init__(self, **fields: Any) -> None:
        self.fields, self.asked, self.keep = fields, 0, []

    def __dlpack__(self, **kwargs: Any) -> Any:
        from faulty import make_capsule

        self.asked += 1
        capsule, counter = make_capsule(**self.fields)
        self.keep.append(counter)
        return capsule

    def __dlpack_device__(self) -> Any:
        return (1, 0)


@pytest.mark.parametrize("to", ["numpy", "torch"])
@pytest.mark.parametrize(
    "fields",
    [{"bits": 128}, {"shape": (-4,)}, {"versioned": False, "name": b"dltensor", "bits": 128}],
    ids=["dtype", "negative dimension", "legacy dtype"],
)
def test_a_struct_that_is_not_valid_is_refused_on_its_one_ask(to: str, fields: dict[str, Any]) -> None:
    """convert refuses it with its validator's BufferError after one ask (the compiled build's C route had handed
    it back, and Python's route then asked the producer again); its deleter runs once."""
    pytest.importorskip(to)
    producer = Made(**fields)
    with pytest.raises(BufferError, match=r"invalid|negative"):
        dlbind.convert(producer, to=to)
    assert producer.asked == 1
    assert [counter.calls for counter in producer.keep] == [1]


@pytest.mark.parametrize(
    "to", [pytest.param("numpy", marks=pytest.mark.xfail(PY310_PURE, reason=PY310_PURE_REASON)), "torch"]
)  # numpy refuses the CUDA capsule dlbind hands it on: a consumer's exception pending (faulty.PY310_PURE)
def test_a_capsule_on_another_device_than_the_producer_said_is_asked_once(to: str) -> None:
    """A producer whose ``__dlpack_device__`` says the CPU and whose capsule says a device with streams (CUDA): the
    import ends as the target answers that device, after one ask (the compiled build's C route had released the
    struct and Python's route asked again); its deleter runs once."""
    pytest.importorskip(to)
    producer = Made(device_type=int(dlbind.DeviceType.kDLCUDA))
    with pytest.raises(BufferError):
        dlbind.convert(producer, to=to)
    assert producer.asked == 1
    assert [counter.calls for counter in producer.keep] == [1]


class Refusing:
    """A producer whose ``__dlpack__`` refuses every export, its memory described by its array interface (as
    numpy's refuses an ml_dtypes dtype), counting the times it is asked."""

    def __init__(self, inner: np.ndarray) -> None:
        self.__array_interface__ = inner.__array_interface__
        self.inner, self.asked = inner, 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        raise BufferError("this producer exports nothing")

    def __dlpack_device__(self) -> Any:
        return (1, 0)


class Older:
    """A producer of an older spec (``__dlpack__(stream=None)`` only: a TypeError for any other keyword, as such
    a signature raises), counting the times it is asked, refused calls too."""

    def __init__(self, inner: np.ndarray) -> None:
        self.inner, self.asked = inner, 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        unexpected = [k for k in kwargs if k != "stream"]  # in the order given, as Python names the first
        if unexpected:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {unexpected[0]!r}")
        return self.inner.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self.inner.__dlpack_device__()


@pytest.mark.parametrize("given", ["name", "module"])
@pytest.mark.parametrize("to", ["numpy", "torch"])
def test_a_refusal_in_the_c_route_is_not_asked_again(to: str, given: str) -> None:
    """convert's C route meets the producer's refusal (a BufferError: its array interface carries the data; a
    TypeError: an older producer, asked again its way) and continues in Python with what it learned: the
    producer is asked as often as the pure build asks it (the compiled build asked it once more), and its memory
    is released with the result (through Python's convert, the C route's Tensor was lost, never released)."""
    module = pytest.importorskip(to)
    target = to if given == "name" else module
    values = np.arange(6.0)
    for n in range(3):
        refusing = Refusing(values.copy())
        assert np.asarray(dlbind.from_dlpack(dlbind.convert(refusing, to=target))).tolist() == values.tolist()
        assert refusing.asked == 1, f"exchange {n + 1}: asked {refusing.asked} times"
    for n in range(3):
        older = Older(values.copy())
        assert np.asarray(dlbind.from_dlpack(dlbind.convert(older, to=target))).tolist() == values.tolist()
        # asked with max_version (refused), then its way: twice (its signature says nothing dlbind learns from)
        assert older.asked == 2, f"exchange {n + 1}: asked {older.asked} times"
        inner = weakref.ref(older.inner)
        del older
        gc.collect()
        assert inner() is None, f"exchange {n + 1}: the producer's memory outlived the conversion"


def test_a_struct_the_target_refuses_unconsumed_is_taken_back() -> None:
    """numpy's importer refuses a bfloat16 struct that the C route handed it (before consuming its capsule): the
    struct is taken back and Python's route views it (ml_dtypes), so a producer that exports once is asked once
    (the compiled build asked again, and such a producer then failed)."""
    torch = pytest.importorskip("torch")
    ml_dtypes = pytest.importorskip("ml_dtypes")

    class Once(Counting):
        def __dlpack__(self, **kwargs: Any) -> Any:
            if self.asked:
                raise BufferError("already exported")
            return super().__dlpack__(**kwargs)

    for n in range(3):  # the type's first exchange plans it; the C route takes every later one
        producer = Once(torch.arange(4, dtype=torch.bfloat16))  # type: ignore[arg-type]
        out = dlbind.convert(producer, to="numpy")
        assert producer.asked == 1, f"exchange {n + 1}"
        assert out.dtype == ml_dtypes.bfloat16 and out.astype(np.float32).tolist() == [0.0, 1.0, 2.0, 3.0]


def _c_routed(to: str) -> Route:
    """The route to ``to``, skipped where the compiled build has no C route to it here (no exchange table, nor
    a handover: the pure build runs the same cases, its Python route being the specification of that one)."""
    pytest.importorskip(ADAPTERS[to].import_name)
    route = route_to(to)
    if route.table_type is None and route.handover_type is None:
        pytest.skip(f"the compiled build has no C route to {to}")
    return route


def _refusal(call: Callable[[], Any]) -> str | None:
    """The BufferError ``call`` raised, in words; None where it returned (its result dropped)."""
    try:
        call()
    except BufferError as exc:
        return str(exc)
    return None


def _given(route: Route, given: str) -> Any:
    """``to=`` as a name (the compiled build's C convert runs the route) or the target's module (Python's convert
    runs it, through the C route's convert_to)."""
    return route.adapter.name if given == "name" else importlib.import_module(route.adapter.import_name)


@pytest.mark.parametrize("given", ["name", "module"])
@pytest.mark.parametrize("to", sorted(ADAPTERS))
def test_a_vector_dtype_is_refused_on_its_one_ask(to: str, given: str) -> None:
    """A struct of a vector dtype goes to Python's bridge, which refuses it in dlbind's words (the compiled
    build's C route handed it to the target: cuda_core raised NotImplementedError); asked once, released once."""
    target = _given(_c_routed(to), given)
    for n in range(2):  # the type's first exchange plans it; the C route takes every later one
        producer = Made(lanes=4, shape=(2,), strides=(1,))
        with pytest.raises(BufferError, match=r"lanes"):
            dlbind.convert(producer, to=target)
        assert producer.asked == 1, f"exchange {n + 1}: asked {producer.asked} times"
        gc.collect()
        assert [counter.calls for counter in producer.keep] == [1], f"exchange {n + 1}"


@pytest.mark.parametrize("given", ["name", "module"])
@pytest.mark.parametrize("to", sorted(ADAPTERS))
def test_a_dtype_the_target_lacks_is_bridged_on_its_one_ask(to: str, given: str) -> None:
    """Each whole-byte dtype the target's importer lacks (its row's ``lacks_dtypes``) goes to Python's bridge, which
    views it or refuses it, after one ask: the compiled build's C route handed it to the target, which may take the
    struct and only then refuse it (array_api_strict with float16), and the producer was asked again. The struct
    is released once, the view dropped."""
    route = _c_routed(to)
    target = _given(route, given)
    pairs = route.c_lacks or b""
    lacked = [(code, bits) for code, bits in zip(pairs[::2], pairs[1::2], strict=True) if bits % 8 == 0]
    if not lacked:
        pytest.skip(f"{to}'s importer lacks no whole-byte dtype")
    for code, bits in lacked:
        for n in range(2):
            producer = Made(code=code, bits=bits, shape=(4,), strides=(1,))
            refusal = _refusal(lambda: dlbind.convert(producer, to=target))  # noqa: B023 (called at once)
            assert refusal is None or "lacks" in refusal or "cannot" in refusal, refusal
            assert producer.asked == 1, f"dtype {code}:{bits}, exchange {n + 1}: asked {producer.asked}"
            gc.collect()
            assert [counter.calls for counter in producer.keep] == [1], f"dtype {code}:{bits}"


@pytest.mark.parametrize("given", ["name", "module"])
def test_read_only_sub_byte_data_is_copied_or_refused_on_its_one_ask(given: str) -> None:
    """Read-only data that torch would import writable needs a copy, which the compiled build's C route leaves
    to Python's for sub-byte elements: from the Tensor it imported (it handed the struct back, and the producer was
    asked again). torch has no int4: refused, after one ask; released once."""
    from dlbind.capsule import READ_ONLY

    target = _given(_c_routed("torch"), given)
    for n in range(2):
        producer = Made(code=0, bits=4, shape=(4,), strides=(1,), flags=int(READ_ONLY))
        assert _refusal(lambda: dlbind.convert(producer, to=target)) is not None  # noqa: B023 (called at once)
        assert producer.asked == 1, f"exchange {n + 1}: asked {producer.asked} times"
        gc.collect()
        assert [counter.calls for counter in producer.keep] == [1], f"exchange {n + 1}"


class Answering:
    """A producer on ``device`` whose ``__dlpack__`` answers ``answer`` (an exception: raised), counting its asks."""

    def __init__(self, answer: Any, device: tuple[int, int]) -> None:
        self.answer, self.device, self.asked = answer, device, 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        return self.answer

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device


CPU, CUDA = (int(dlbind.DeviceType.kDLCPU), 0), (int(dlbind.DeviceType.kDLCUDA), 0)
ANSWERS: dict[str, tuple[Callable[[Any], Any], Any, tuple[int, int], type[Exception], str]] = {
    # (the exchange, the answer, the producer's device, what is raised, its words)
    "convert of a host producer answering an int": (
        lambda p: dlbind.convert(p, to="numpy"), 5, CPU, TypeError, "returned int, not a DLPack capsule"),
    "from_dlpack of a CUDA producer answering an int": (
        dlbind.from_dlpack, 5, CUDA, TypeError, "returned int, not a DLPack capsule"),
    "from_dlpack of a CUDA producer raising TypeError": (
        dlbind.from_dlpack, TypeError("no stream today"), CUDA, TypeError, "no stream today"),
    "from_dlpack of a CUDA producer refusing": (
        dlbind.from_dlpack, BufferError("nothing to export"), CUDA, BufferError, "nothing to export"),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ANSWERS))
def test_a_producer_that_fails_its_one_ask_is_not_asked_again(case: str) -> None:
    """A ``__dlpack__`` that answers no capsule, or raises, is asked once and its failure raised, in both builds:
    the compiled build's C routes handed such calls to Python, which asked the producer again (a producer that
    failed once and then exported gave a result the pure build never gives). A CUDA producer is asked on the
    device's default stream (no device is needed: nothing is imported)."""
    exchange, answer, device, kind, words = ANSWERS[case]
    exchange(Counting(np.arange(3.0)))  # this module's producers' first exchanges are planned; then the type's
    for n in range(3):
        producer = Answering(answer, device)
        with pytest.raises(kind, match=words):
            exchange(producer)
        assert producer.asked == 1, f"exchange {n + 1}: asked {producer.asked} times"


class _BorrowsDlbindsTable:
    """A producer type holding dlbind's own exchange table, as a class reusing it has: the table asks ``__dlpack__``
    (max_version only). ``answers``: what each ask answers in turn (an exception is raised)."""

    __dlpack_c_exchange_api__ = dlbind.Tensor.__dlpack_c_exchange_api__  # type: ignore[attr-defined]

    def __init__(self, *answers: Any) -> None:
        self.answers, self.asked = list(answers), 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer() if callable(answer) else answer

    def __dlpack_device__(self) -> tuple[int, int]:
        return CPU


def test_a_type_borrowing_dlbinds_table_is_asked_once() -> None:
    """A type that holds dlbind's own table is asked through its ``__dlpack__``, once, in both builds: the compiled
    build asked it through the table, and where that failed (a refusal, a legacy capsule the table refuses) asked it
    again, so a producer that refused once then exported was imported where the pure build raises its refusal."""
    array = np.arange(3.0)
    for n in range(3):  # the type's first exchange (planned), then its plan's
        busy = _BorrowsDlbindsTable(BufferError("busy: try later"), lambda: array.__dlpack__())
        with pytest.raises(BufferError, match="busy: try later"):
            dlbind.from_dlpack(busy)
        assert busy.asked == 1, f"exchange {n + 1}: asked {busy.asked} times"
        legacy = _BorrowsDlbindsTable(lambda: array.__dlpack__())  # no max_version: a legacy capsule
        assert np.asarray(dlbind.from_dlpack(legacy)).tolist() == [0.0, 1.0, 2.0]
        assert legacy.asked == 1, f"exchange {n + 1}: asked {legacy.asked} times"


def test_a_stream_the_device_refuses_is_refused_before_the_table_is_asked() -> None:
    """``from_dlpack(x, stream=...)`` of a producer whose type has an exchange table checks the stream against the
    producer's device first, as the pure build does: the compiled build asked the table for a struct, then released
    it and refused the stream (``nativehelp.lib.table_made`` counts what its table made)."""
    from nativehelp import lib, table_capsule

    class OnTheHost:
        __dlpack_c_exchange_api__ = table_capsule()

        def __dlpack__(self, **kwargs: Any) -> Any:  # the pure build's ask (it uses no producer's table)
            return np.arange(3.0).__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return CPU

    dlbind.from_dlpack(OnTheHost())  # the type planned
    made = lib.table_made()
    for stream in (0, -1, 1):
        with pytest.raises(BufferError, match=f"stream must be None for cpu tensors \\(got {stream}\\)"):
            dlbind.from_dlpack(OnTheHost(), stream=stream)
    assert lib.table_made() == made
