"""The exchange on a device with streams, on the recording CUDA runtime (both builds; no GPU needed): which stream
dlbind asks a CUDA producer on, the stream a Tensor carries and how a re-export orders the next consumer after
it, and ``dlbind.convert``'s plans — hand over directly, relay on the target's own stream, copy on the device,
go through ``__cuda_array_interface__``, copy to the host through pinned memory — with spy targets that import
as a CUDA library's ``from_dlpack`` does (they ask the producer on a stream of their own).

The spies follow the DLPack protocol; what they stand for (CuPy, torch on a GPU) cannot run here. The same
decisions run against the real libraries in tests/gpu on a GPU.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_cuda
from cuda_recording import Recording, event_wait, user_stream
from dlbind import DeviceType, Flags
from dlbind._ffi import native
from dlbind._generated.adapters import Adapter, Export, Import
from dlbind.conversion import ExplanationKind
from dlbind.routes import ROUTES, Route, make_route
from dlbind.sources import PLANS, export_plan, plan_of

CUDA = (DeviceType.kDLCUDA, 0)


def values(t: Any, dtype: Any = np.float32) -> np.ndarray:
    """The values of a CUDA tensor, read through a host copy."""
    return np.asarray(dlbind.from_dlpack(t, device="cpu", copy=True)).astype(dtype)


class Producer:
    """A CUDA producer with ``__dlpack__`` (a dlbind_cuda tensor behind it) that records what it is asked."""

    def __init__(self, tensor: dlbind.Tensor) -> None:
        self.tensor, self.calls = tensor, []  # type: list[dict[str, Any]]

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(kw)
        return self.tensor.__dlpack__(**kw)


class CudaArray:
    """What a CUDA library's array without DLPack shows: __cuda_array_interface__ v3 (its stream included)."""

    def __init__(self, tensor: dlbind.Tensor, stream: int | None, **extra: Any) -> None:
        self.tensor = tensor
        self.__cuda_array_interface__ = {**tensor.__cuda_array_interface__, "stream": stream, **extra}


# -- the stream dlbind asks on, and the one a Tensor carries -------------------------------------------------


def test_none_asks_a_cuda_producer_for_the_legacy_stream_by_name(rec: Recording) -> None:
    """The array API's ``stream=None`` is CUDA's legacy default stream; dlbind passes 1 itself (as torch and CuPy
    do: torch's test_dlpack_default_stream), and the Tensor is ready there."""
    producer = Producer(dlbind_cuda.empty((4,), "float32"))
    t = dlbind.from_dlpack(producer)
    assert producer.calls[-1]["stream"] == 1 and t.stream == 1
    s = user_stream()
    t = dlbind.from_dlpack(producer, stream=s)
    assert producer.calls[-1]["stream"] == s and t.stream == s
    t = dlbind.from_dlpack(producer, stream=-1)
    assert producer.calls[-1]["stream"] == -1 and t.stream is None  # -1: the consumer orders nothing


def test_a_tensor_orders_the_next_consumer_after_its_stream(rec: Recording) -> None:
    s1, s2 = user_stream(), user_stream()
    base = dlbind_cuda.empty((4,), "float32")
    t = dlbind.from_dlpack(CudaArray(base, s1), stream=s1)  # the array's work is on s1; imported on s1
    assert t.stream == s1 and t.__cuda_array_interface__["stream"] == s1
    rec.clear()
    dlbind.from_dlpack(t.__dlpack__(stream=s1, max_version=(1, 3)))  # the same stream: nothing to do
    dlbind.from_dlpack(t.__dlpack__(stream=-1, max_version=(1, 3)))  # the consumer orders nothing
    assert rec.calls() == []
    again = dlbind.from_dlpack(t, stream=s2)  # another stream waits for s1
    assert rec.calls() == event_wait("S1", "S2") and again.stream == s2
    rec.clear()
    dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3)))  # None: the legacy default stream waits for s1
    assert rec.calls() == [c.replace("E1", "E2") for c in event_wait("S1", "legacy")]


def test_copy_true_copies_on_the_device_on_the_consumers_stream(rec: Recording) -> None:
    """``__dlpack__(copy=True)`` of CUDA memory: a copy on the device (torch's test_dlpack asks for it), enqueued
    on the consumer's stream after the data's; never through the host."""
    s1, s2 = user_stream(), user_stream()
    src = dlbind_cuda.asarray(np.arange(6, dtype=np.float32))
    t = dlbind.from_dlpack(src, stream=s1)
    rec.clear()
    copied = dlbind.from_dlpack(t.__dlpack__(stream=s2, max_version=(1, 3), copy=True))
    calls = rec.calls()
    assert calls[:5] == [c.replace("E1", "E2") for c in event_wait("S1", "S2")]  # E1: asarray's legacy -> s1
    assert any(c.startswith("cudaMalloc(24) -> D") for c in calls[5:]), calls
    assert [c for c in calls if c.startswith("cudaMemcpy")] == [c for c in calls if c.startswith("cudaMemcpyAsync(")]
    assert all(c.endswith(", S2)") for c in calls if c.startswith("cudaMemcpyAsync(")), calls
    assert not any("Host" in c for c in calls)
    assert copied.device == CUDA and copied.flags & Flags.IS_COPIED and copied.data_ptr != src.data_ptr
    assert values(copied).tolist() == list(range(6))


def test_a_host_copy_moves_through_pinned_memory(rec: Recording) -> None:
    src = dlbind_cuda.asarray(np.arange(8, dtype=np.float64))
    rec.clear()
    host = dlbind.from_dlpack(src, device="cpu", copy=True)
    assert host.device == (DeviceType.kDLCPU, 0) and np.asarray(host).tolist() == list(range(8))
    calls = rec.calls()  # through the pinned pool: an asynchronous copy then a synchronisation, not a pageable one
    assert any(c.startswith("cudaMemcpyAsync(") for c in calls) and not any(c.startswith("cudaMemcpy(") for c in calls)
    assert any(c.startswith("cudaStreamSynchronize(") for c in calls), calls


# -- convert's plans, with spy targets -----------------------------------------------------------------------


class Target:
    """A spy for a CUDA library's importer: it asks the producer on a stream of its own (``stream``) and keeps
    what it was given; its "array" is a dlbind.Tensor of what it imported."""

    def __init__(self, name: str, stream: int | None) -> None:
        self.name, self.stream = name, stream
        self.given, self.asked = [], []  # type: list[Any], list[dict[str, Any]]

    def __call__(self, producer: Any, **kw: Any) -> dlbind.Tensor:
        self.given.append(producer)
        self.asked.append(kw)
        producer.__dlpack_device__()
        if self.stream is not None:  # a CPU importer passes none
            kw["stream"] = self.stream
        return dlbind.from_dlpack(producer.__dlpack__(max_version=(1, 3), **kw))


def _row(name: str, export: Export | None = None, immutable: bool = False, **facts: Any) -> Adapter:
    """A row of the given facts of its import (a CUDA importer of no keywords unless they say), and ``export``."""
    taken = Import(**{"function": f"{name}.from_dlpack", "devices": ("cuda",), "keywords": (), **facts})
    return Adapter(name=name, import_name=name, array_types=(), immutable=immutable, verified=True, quirks=(),
                   import_=taken, export=export or Export())  # fmt: skip


_NAMES = itertools.count(1)


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Target]:
    """Make a spy target whose row has the given facts of its import; ``dlbind.convert(x, to=spy.name)`` reaches it
    (``through``: its importer of ``__cuda_array_interface__`` objects). Each has a name of its own: decisions are
    kept per target name, and a system's row never changes in a process."""

    def make(stream: int | None, through: Any = None, stream_of: Any = None, **facts: Any) -> Target:
        name = f"spy{next(_NAMES)}"
        spy = Target(name, stream)
        route: Route = make_route(_row(name, **facts), spy, interface=through, stream_of=stream_of)
        monkeypatch.setitem(ROUTES, name, route)
        return spy

    return make


def _rowed(kind: type, **facts: Any) -> type:
    """Give the producer type ``kind`` an export plan from a row with ``facts`` (a library dlbind knows)."""
    plan = plan_of(_row(kind.__name__.lower(), **facts))
    plan.lasting = PLANS.put(kind, plan)
    return kind


class TorchLike(Producer):
    """A producer of a library whose row says its exports are never read-only nor negatively strided."""


class CupyLike(Producer):
    """A producer whose capsules carry negative strides as unsigned numbers (CuPy before 14.3) and whose
    __cuda_array_interface__ carries them right."""

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        return self.tensor.__cuda_array_interface__

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(kw)
        t = self.tensor
        item = t.dtype.itemsize
        wrong = tuple(s if s >= 0 else ((s * item) % 2**64) // item for s in t.strides)  # the unsigned division
        # a defective producer's capsule, made below dlbind's validator (from_pointer refuses such strides)
        dtype = t.dtype
        return dlbind.capsule.export(t.data_ptr, t.shape, wrong, (dtype.code, dtype.bits, dtype.lanes), t.device,
                                     t.byte_offset, t, versioned=True, flags=0)  # fmt: skip


def test_a_pair_that_cannot_need_a_bridge_is_handed_over_directly(target: Any, rec: Recording) -> None:
    """torch -> CuPy: torch exports neither read-only data nor negative strides and CuPy takes any layout: the
    producer goes to the target's importer as it is, which asks it on its own stream (one exchange)."""
    _rowed(TorchLike, devices=("cuda",), export=Export(layout="nonnegative", readonly=False, devices=("cuda",)))
    s = user_stream()
    spy = target(s)
    x = TorchLike(dlbind_cuda.asarray(np.arange(4, dtype=np.float32)))
    out = dlbind.convert(x, to=spy.name)
    assert spy.given == [x] and x.calls[-1]["stream"] == s
    assert values(out).tolist() == [0, 1, 2, 3]
    # the decision is kept in the type's plan, and noted as a direct one for CUDA data: the compiled convert
    # follows it in C from the second call on, without entering Python's convert
    assert export_plan(TorchLike).direct[spy.name] == {int(DeviceType.kDLCUDA): False}  # no stream read first
    entered = _python_calls(lambda: dlbind.convert(x, to=spy.name))
    assert spy.given == [x, x] and x.calls[-1]["stream"] == s
    assert ("convert" in entered) == (native is None), sorted(entered)


def _python_calls(call: Callable[[], Any]) -> set[str]:
    """The names of the functions of dlbind's own modules that ``call`` enters."""
    entered: set[str] = set()

    def seen(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and "/dlbind/" in frame.f_code.co_filename.replace("\\", "/"):
            entered.add(frame.f_code.co_name)

    sys.setprofile(seen)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def test_a_relay_asks_the_producer_on_the_targets_stream(target: Any, rec: Recording) -> None:
    """Finding 1 of issue 21: the producer's work is on its stream s1 and the target asks on its non-blocking
    stream s2. dlbind stands in between (the producer has no row), and imports it on s2: s2 waits for s1,
    and the target then reads in order."""
    s1, s2 = user_stream(), user_stream()
    spy = target(s2)
    x = CudaArray(dlbind_cuda.asarray(np.arange(4, dtype=np.float32)), s1)
    rec.clear()
    out = dlbind.convert(x, to=spy.name)
    assert type(spy.given[0]).__name__ == "Relay"
    assert [c for c in rec.calls() if not c.startswith("cudaPointerGetAttributes")] == event_wait("S1", "S2")
    assert values(out).tolist() == [0, 1, 2, 3]


def test_convert_stream_orders_the_given_stream_then_the_targets(target: Any, rec: Recording) -> None:
    s1, s2, s3 = user_stream(), user_stream(), user_stream()
    spy = target(s2)
    x = CudaArray(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)), s1)
    rec.clear()
    dlbind.convert(x, to=spy.name, stream=s3)  # the result is used on s3; the target asks on s2
    calls = [c for c in rec.calls() if not c.startswith("cudaPointerGetAttributes")]
    assert calls == event_wait("S1", "S3") + [c.replace("E1", "E2") for c in event_wait("S3", "S2")], calls


@pytest.mark.parametrize("readonly", [True, False])
def test_read_only_data_is_copied_on_the_device_for_a_target_that_ignores_the_flag(
    target: Any, rec: Recording, readonly: bool
) -> None:
    """Finding 2 of issue 21 (jax -> torch): the target would import read-only memory writable, so dlbind copies
    it on the device, on the target's stream; the result does not alias the source and has its values."""
    s = user_stream()
    spy = target(s, readonly="ignored", layout="nonnegative")
    base = dlbind_cuda.asarray(np.arange(5, dtype=np.float32))
    x = dlbind.from_pointer(base.data_ptr, (5,), "float32", device=CUDA, readonly=readonly, owner=base)
    rec.clear()
    out = dlbind.convert(x, to=spy.name)
    calls = rec.calls()
    copied = any(c.startswith("cudaMemcpyAsync(") and c.endswith("S1)") for c in calls)
    assert copied == readonly, calls
    assert not any("ToHost" in c for c in calls)  # never through the host
    assert (out.data_ptr != base.data_ptr) == readonly and values(out).tolist() == [0, 1, 2, 3, 4]
    assert bool(out.flags & Flags.IS_COPIED) == readonly


def test_negative_strides_are_copied_on_the_device_for_a_target_that_cannot_take_them(
    target: Any, rec: Recording
) -> None:
    s = user_stream()
    spy = target(s, layout="nonnegative")
    base = dlbind_cuda.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    x = dlbind.from_pointer(base.data_ptr, (2, 3), "float32", strides=(3, -1), byte_offset=8, device=CUDA, owner=base)
    out = dlbind.convert(x, to=spy.name)
    assert all(st >= 0 for st in out.strides) and out.data_ptr != base.data_ptr
    assert values(out).tolist() == np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::-1].tolist()


def test_unsigned_negative_strides_are_bridged_through_the_array_interface(target: Any, rec: Recording) -> None:
    """Finding 3 of issue 21: CuPy before 14.3 divides negative byte strides as unsigned (torch aborts on what
    it exports). dlbind refuses such a capsule (its extent overflows) and imports the array through its
    __cuda_array_interface__ instead, where the strides are right; torch's layout rule then copies it."""
    unsigned = Export(negative_strides="unsigned", interface="__cuda_array_interface__")
    _rowed(CupyLike, devices=("cuda",), export=unsigned)
    s = user_stream()
    spy = target(s, layout="nonnegative")
    base = dlbind_cuda.asarray(np.arange(10, dtype=np.float64))
    reversed_view = dlbind.from_dlpack(
        dlbind.from_pointer(base.data_ptr, (10,), "float64", strides=(-1,), byte_offset=72, device=CUDA, owner=base)
    )
    x = CupyLike(reversed_view)
    with pytest.raises(BufferError, match=r"CupyLike\.__dlpack__ gave a tensor dlbind refuses"):
        dlbind.from_dlpack(x)  # its own capsule: refused, never passed on
    out = dlbind.convert(x, to=spy.name)
    assert values(out, np.float64).tolist() == list(range(9, -1, -1))


@pytest.mark.parametrize("memory", ["host", "managed"])
def test_pinned_and_managed_memory_reach_a_target_through_its_interface(
    target: Any, rec: Recording, memory: str
) -> None:
    """Finding 4 of issue 21: CuPy's from_dlpack refuses kDLCUDAHost and kDLCUDAManaged; its row names the importer
    of __cuda_array_interface__ (cupy.asarray) for them."""
    taken: list[Any] = []

    def interface(obj: Any) -> Any:
        taken.append(obj.__cuda_array_interface__)
        return obj

    s = user_stream()
    kinds = ("cuda_host", "cuda_managed")
    spy = target(s, through=interface, interface="spy.asarray", interface_devices=kinds)
    x = dlbind_cuda.asarray(np.arange(4, dtype=np.int32), memory=memory)
    dlbind.convert(x, to=spy.name)
    assert spy.given == [] and len(taken) == 1 and taken[0]["data"][0] == x.data_ptr


def test_device_data_for_a_host_only_target_is_copied_through_pinned_memory(target: Any, rec: Recording) -> None:
    spy = target(None, devices=("cpu",))
    x = dlbind_cuda.asarray(np.arange(3, dtype=np.float32))
    rec.clear()
    out = dlbind.convert(x, to=spy.name)
    assert out.device == (DeviceType.kDLCPU, 0) and np.asarray(out).tolist() == [0, 1, 2]
    assert any(c.startswith("cudaMemcpyAsync(") for c in rec.calls()), rec.calls()


def test_copy_true_for_a_target_that_ignores_copy_is_made_on_the_device(target: Any, rec: Recording) -> None:
    s = user_stream()
    spy = target(s, copy="ignored")
    x = dlbind_cuda.asarray(np.arange(3, dtype=np.float32))
    out = dlbind.convert(x, to=spy.name, copy=True)
    assert out.data_ptr != x.data_ptr and out.flags & Flags.IS_COPIED and values(out).tolist() == [0, 1, 2]


def test_vector_dtypes_reach_only_targets_that_take_lanes(target: Any, rec: Recording) -> None:
    base = dlbind_cuda.empty((8,), "float32")
    x = dlbind.from_pointer(base.data_ptr, (4,), dlbind.DType(2, 32, 2), device=CUDA, owner=base)
    spy = target(user_stream())
    with pytest.raises(BufferError, match="takes no vector dtypes"):
        dlbind.convert(x, to=spy.name)
    spy = target(user_stream(), lanes=("float32x2",))
    assert dlbind.convert(x, to=spy.name)._lanes == 2


def test_plans_are_made_once(target: Any, rec: Recording) -> None:
    from dlbind._libraries import row_lookups

    spy = target(user_stream())
    x = CudaArray(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)), None)
    dlbind.convert(x, to=spy.name)
    before = row_lookups()
    for _ in range(5):
        dlbind.convert(x, to=spy.name)
        dlbind.from_dlpack(x)
    assert row_lookups() == before


# -- one exchange asks its producer once (issue 27) -----------------------------------------------------------


def _ask_counts(route: Callable[[Any], Any], make: Callable[[], Producer], times: int = 3) -> list[int]:
    """The number of __dlpack__ calls each of ``times`` exchanges made of a fresh producer (the type's first
    exchange, and the ones after it, with every plan and C route cached)."""
    counts = []
    for _ in range(times):
        x = make()
        route(x)
        counts.append(len(x.calls))
    return counts


@pytest.mark.parametrize(
    "how",
    ["direct", "relay", "host copy (host-only target)", "copy=True on the device", "convert stream=",
     "from_dlpack", "from_dlpack stream=-1", "from_dlpack device=cpu copy=True", "from_dlpack copy=True"],
)  # fmt: skip
def test_each_route_asks_the_producer_once(how: str, target: Any, rec: Recording) -> None:
    """Every route of convert and from_dlpack from CUDA memory asks the producer once per exchange, in both
    builds: each extra ask would be an extra synchronisation on a GPU."""
    s = user_stream()
    if how == "direct":
        _rowed(TorchLike, devices=("cuda",), export=Export(layout="nonnegative", readonly=False, devices=("cuda",)))
        kind: type[Producer] = TorchLike
    else:
        kind = Producer
    spy = target(None if how.startswith("host copy") else s, **({"devices": ("cpu",)} if "host" in how else {}))
    spy = spy if not how.startswith("copy=True") else target(s, copy="ignored")
    routes: dict[str, Callable[[Any], Any]] = {
        "direct": lambda x: dlbind.convert(x, to=spy.name),
        "relay": lambda x: dlbind.convert(x, to=spy.name),
        "host copy (host-only target)": lambda x: dlbind.convert(x, to=spy.name),
        "copy=True on the device": lambda x: dlbind.convert(x, to=spy.name, copy=True),
        "convert stream=": lambda x: dlbind.convert(x, to=spy.name, stream=user_stream()),
        "from_dlpack": lambda x: dlbind.from_dlpack(x),
        "from_dlpack stream=-1": lambda x: dlbind.from_dlpack(x, stream=-1),
        "from_dlpack device=cpu copy=True": lambda x: dlbind.from_dlpack(x, device="cpu", copy=True),
        "from_dlpack copy=True": lambda x: dlbind.from_dlpack(x, copy=True),
    }
    counts = _ask_counts(routes[how], lambda: kind(dlbind_cuda.asarray(np.arange(4, dtype=np.float32))))
    assert counts == [1, 1, 1], counts


# -- what the first run on a GPU found (issue 37: an H200, torch 2.11, CuPy 14.2, JAX 0.11, numba-cuda 0.30) -------


class RefusesPerThread(Producer):
    """torch's __dlpack__ on CUDA: stream=2 (the per-thread default stream) is refused with BufferError."""

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(kw)
        if kw.get("stream") == 2:
            raise BufferError("per-thread default stream is not supported.")
        return self.tensor.__dlpack__(**kw)


def _refuses_per_thread(*refused: str) -> type:
    kind = type(f"RefusesPerThread{next(_NAMES)}", (RefusesPerThread,), {})
    return _rowed(kind, devices=("cuda",), export=Export(layout="nonnegative", readonly=False, devices=("cuda",),
                                                         streams_refused=refused))  # fmt: skip


def test_a_stream_the_producer_refuses_is_asked_on_the_default_and_the_target_waits(
    target: Any, rec: Recording
) -> None:
    """torch -> CuPy with CuPy's per-thread default stream current: cupy.from_dlpack(x) asks torch on stream 2,
    which torch refuses. dlbind reads the target's current stream first; on 2 it goes through its relay, which
    asks torch on the legacy default stream and makes the per-thread stream wait for it. On any other stream
    the producer is handed over directly, as before."""
    kind = _refuses_per_thread("cuda:2")
    current = {"stream": 2}
    spy = target(None, stream_of=lambda index: current["stream"])
    spy.stream = 2  # the target asks on its current stream, as cupy.from_dlpack does
    x = kind(dlbind_cuda.asarray(np.arange(4, dtype=np.float32)))
    rec.clear()
    out = dlbind.convert(x, to=spy.name)
    assert type(spy.given[0]).__name__ == "Relay" and x.calls[-1]["stream"] == 1
    assert [c.replace("E1", "E2") for c in event_wait("legacy", "per-thread")] == [
        c.replace("E1", "E2") for c in rec.calls() if "Event" in c or c.startswith("cudaGetDevice")
    ][-5:]
    assert values(out).tolist() == [0, 1, 2, 3]
    explained = str(dlbind.explain(x, to=spy.name))
    assert "through dlbind's relay" in explained and "refuses" in explained
    s = user_stream()
    current["stream"] = spy.stream = s  # another stream: handed over directly, one exchange
    dlbind.convert(x, to=spy.name)
    assert spy.given[-1] is x and x.calls[-1]["stream"] == s


def test_from_dlpack_on_a_stream_the_producer_refuses_waits_for_the_default(rec: Recording) -> None:
    kind = _refuses_per_thread("cuda:2")
    x = kind(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)))
    rec.clear()
    t = dlbind.from_dlpack(x, stream=2)
    assert x.calls[-1]["stream"] == 1 and t.stream == 2
    assert rec.calls()[-5:] == [c.replace("E1", "E2") for c in event_wait("legacy", "per-thread")][-5:] or any(
        c.startswith("cudaStreamWaitEvent(per-thread") for c in rec.calls()
    ), rec.calls()
    assert values(t).tolist() == [0, 1, 2]
    plain = _refuses_per_thread()  # a row that does not say so: the producer's own refusal reaches the caller
    with pytest.raises(BufferError, match="per-thread default stream is not supported"):
        dlbind.from_dlpack(plain(dlbind_cuda.asarray(np.arange(3, dtype=np.float32))), stream=2)


def test_a_copy_asked_on_a_stream_the_producer_refuses_is_made_once(rec: Recording) -> None:
    """``from_dlpack(x, stream=2, copy=True)`` of a producer refusing stream 2: asked on the default stream, it
    copies (its capsule says so), and the view made for stream 2 says so too: no second copy is made, and
    ``copy=False`` of a producer that copied anyway is refused on that path too."""
    x = _refuses_per_thread("cuda:2")(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)))
    rec.clear()
    t = dlbind.from_dlpack(x, stream=2, copy=True)
    assert x.calls[-1]["stream"] == 1 and x.calls[-1]["copy"] is True
    assert [c for c in rec.calls() if c.startswith("cudaMemcpy")] == [
        "cudaMemcpyAsync(D1+0, D0+0, 12, DeviceToDevice, legacy)"
    ], rec.calls()
    assert t.stream == 2 and t.flags & Flags.IS_COPIED and t.data_ptr != x.tensor.data_ptr
    assert values(t).tolist() == [0, 1, 2]
    copies_anyway = _refuses_per_thread("cuda:2")
    copies_anyway.__dlpack__ = lambda self, **kw: RefusesPerThread.__dlpack__(self, **{**kw, "copy": True})
    with pytest.raises(BufferError, match="copy=False, but the producer made a copy"):
        dlbind.from_dlpack(copies_anyway(x.tensor), stream=2, copy=False)


def test_a_legacy_producer_on_a_refused_stream_is_copied_on_the_stream_wanted(rec: Recording) -> None:
    """Its legacy capsule cannot say it copied: ``copy=True`` copies what it gave, once, on stream 2 (which waits
    for the default stream the producer was asked on), and the copy is ready on stream 2."""
    kind = _refuses_per_thread("cuda:2")
    kind.__dlpack__ = lambda self, **kw: RefusesPerThread.__dlpack__(self, stream=kw.get("stream"))  # legacy
    x = kind(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)))
    rec.clear()
    t = dlbind.from_dlpack(x, stream=2, copy=True)
    assert x.calls[-1] == {"stream": 1}
    assert rec.calls() == [
        *event_wait("legacy", "per-thread"),  # stream 2 waits for the one the producer was asked on, then copies
        "cudaGetDevice() -> 0", "cudaMalloc(12) -> D1 on device 0", "cudaGetDevice() -> 0",
        "cudaMemcpyAsync(D1+0, D0+0, 12, DeviceToDevice, per-thread)",
    ]  # fmt: skip
    assert t.stream == 2 and t.flags & Flags.IS_COPIED and t.data_ptr != x.tensor.data_ptr
    assert values(t).tolist() == [0, 1, 2]


class LegacyImmutable(Producer):
    """JAX's arrays: immutable, and __dlpack__ answers a legacy capsule (unmarked) whatever it is asked."""

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(kw)
        return self.tensor.__dlpack__(stream=kw.get("stream"))


def test_immutable_memory_in_legacy_capsules_never_reaches_a_target_writable(target: Any, rec: Recording) -> None:
    """jax -> CuPy on a GPU: JAX's legacy capsules cannot say read-only, and CuPy took its memory writable. dlbind
    stands between (its import of JAX is read-only): a target that honours the flag gets a read-only versioned
    capsule; one that ignores it (CuPy's row since) gets a copy on the device."""
    _rowed(LegacyImmutable, immutable=True, devices=("cuda",),
           export=Export(capsules="legacy", layout="compact", devices=("cuda",)))  # fmt: skip
    s = user_stream()
    base = dlbind_cuda.asarray(np.arange(4, dtype=np.float32))
    x = LegacyImmutable(base)
    honours = target(s)
    out = dlbind.convert(x, to=honours.name)
    assert type(honours.given[0]).__name__ == "Relay" and out.readonly and out.data_ptr == base.data_ptr
    ignores = target(s, readonly="ignored")
    out = dlbind.convert(x, to=ignores.name)
    assert not out.readonly and out.data_ptr != base.data_ptr and values(out).tolist() == [0, 1, 2, 3]
    assert str(dlbind.explain(x, to=ignores.name)).startswith("a copy on cuda:0")


@pytest.mark.parametrize("readonly", [True, False])
def test_read_only_data_through_the_interface_is_copied_for_a_target_that_takes_it_writable(
    target: Any, rec: Recording, readonly: bool
) -> None:
    """jax -> numba on a GPU: numba imports CUDA memory through __cuda_array_interface__ (as_cuda_array), whose
    read-only flag it does not read: read-only data is copied on the device first."""
    taken: list[Any] = []

    def interface(obj: Any) -> Any:
        taken.append(obj.__cuda_array_interface__)
        return obj

    s = user_stream()
    spy = target(s, through=interface, interface="spy.as_cuda_array", interface_devices=("cuda",),
                 readonly="ignored")  # fmt: skip
    base = dlbind_cuda.asarray(np.arange(5, dtype=np.float32))
    x = dlbind.from_pointer(base.data_ptr, (5,), "float32", device=CUDA, readonly=readonly, owner=base)
    explained = dlbind.explain(x, to=spy.name)
    out = dlbind.convert(x, to=spy.name)
    assert (taken[0]["data"][0] != base.data_ptr) == readonly and values(out).tolist() == [0, 1, 2, 3, 4]
    assert explained.kind == ("copy" if readonly else "zero-copy"), explained


def test_a_targets_own_array_without_dlpack_is_itself(target: Any, rec: Recording) -> None:
    """numba -> numba on a GPU: numba's CUDA arrays carry __cuda_array_interface__ only (no __dlpack_device__);
    converting one to its own library is the array itself, its device read from the interface."""
    spy = target(user_stream())
    own = _rowed(type(spy.name, (CudaArray,), {}), devices=("cuda",))
    x = own(dlbind_cuda.asarray(np.arange(3, dtype=np.float32)), None)
    assert dlbind.convert(x, to=spy.name) is x
    assert dlbind.explain(x, to=spy.name).kind == ExplanationKind.ITSELF


class OlderProducer(Producer):
    """A CUDA producer of DLPack 0.x's ``__dlpack__(stream=None)``: it refuses ``max_version`` (a TypeError, as
    Python raises for an unexpected keyword), and records every call."""

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(kw)
        if set(kw) - {"stream"}:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument {sorted(set(kw) - {'stream'})[0]!r}")
        return self.tensor.__dlpack__(**kw)


def test_an_older_cuda_producer_is_asked_once_a_way_and_ready_on_the_stream_asked(rec: Recording) -> None:
    """An older producer on CUDA refuses the versioned call, and is asked again with the stream only: each call
    once per exchange (the compiled build handed the refusal to Python, which made the versioned call again; a
    ``**kw`` method forwards, so its type learns no way), and the Tensor is ready on the stream it was asked on."""
    for n in range(3):
        producer = OlderProducer(dlbind_cuda.empty((4,), "float32"))
        t = dlbind.from_dlpack(producer)
        versioned = {"stream": 1, "max_version": dlbind.DLPACK_VERSION}
        assert producer.calls == [versioned, {"stream": 1}], f"exchange {n + 1}: {producer.calls}"
        assert t.stream == 1 and t.device == CUDA and t.data_ptr == producer.tensor.data_ptr
