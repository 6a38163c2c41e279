"""Plan once, execute once (issue 21): what a producer type takes to export from, how a target imports and one
decision per (type, target, device type) are made from the rows of spec/adapters.toml once, and every later
exchange follows them without looking a row up (``dlbind._libraries.row_lookups`` counts the lookups)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import DeviceType
from dlbind._generated.adapters import Layout
from dlbind._generated.tables import DEVICE_BY_NAME
from dlbind._libraries import installed, row_lookups
from dlbind.conversion import ExplanationKind
from dlbind.routes import DIRECT, HOST, HOST_COPY, INTERFACE, REFUSE, RELAY, SAME, decide, route_to
from dlbind.sources import export_plan

CPU, CUDA, CUDA_HOST = int(DeviceType.kDLCPU), int(DeviceType.kDLCUDA), DEVICE_BY_NAME["cuda_host"]


def _sources() -> dict[str, Any]:
    out: dict[str, Any] = {"numpy": np.arange(6.0).reshape(2, 3)}
    for name, make in (
        ("torch", lambda m: m.arange(6.0).reshape(2, 3)),
        ("jax", lambda m: m.numpy.arange(6.0).reshape(2, 3)),
        ("array_api_strict", lambda m: m.reshape(m.arange(6.0), (2, 3))),
    ):
        try:
            module = __import__(name)
        except ImportError:
            continue
        out[name] = make(module)
    return out


def test_after_the_first_exchange_of_a_type_no_row_is_looked_up() -> None:
    sources = _sources()
    for x in sources.values():  # the first exchanges make the plans
        dlbind.from_dlpack(x)
        for to in sources:
            dlbind.convert(x, to=to)
    before = row_lookups()
    for _ in range(3):
        for x in sources.values():
            dlbind.from_dlpack(x)
            dlbind.from_dlpack(x, copy=True)
            for to in sources:
                dlbind.convert(x, to=to)
                dlbind.convert(x, to=to, copy=True)
    assert row_lookups() == before, f"{row_lookups() - before} row lookups during exchanges that follow their plans"


def test_the_count_is_a_real_count() -> None:
    """The counter moves when rows are looked up (the test above could not fail otherwise)."""
    from dlbind._libraries import library_of

    before = row_lookups()
    library_of(np.arange(3))
    assert row_lookups() == before + 1


def test_a_plan_holds_its_rows_facts() -> None:
    numpy_plan = export_plan(np.ndarray)
    assert numpy_plan.library == "numpy" and numpy_plan.host_only and not numpy_plan.immutable
    assert export_plan(np.ndarray) is numpy_plan  # made once
    assert export_plan(object).row is None and not export_plan(object).host_only
    torch = pytest.importorskip("torch")
    torch_plan = export_plan(torch.Tensor)
    assert torch_plan.guards == (("requires_grad", False, False), ("is_neg", True, False), ("is_conj", True, False))
    assert torch_plan.layout == Layout.NONNEGATIVE and not torch_plan.readonly and not torch_plan.host_only


def test_decisions() -> None:
    torch = pytest.importorskip("torch")
    numpy_plan, torch_plan = export_plan(np.ndarray), export_plan(torch.Tensor)
    to_torch, to_numpy = route_to("torch"), route_to("numpy")
    assert decide(numpy_plan, to_torch, CPU).kind == HOST
    assert decide(numpy_plan, to_numpy, CPU).kind == SAME
    # torch on a GPU to numpy (host only): a host copy first
    assert decide(torch_plan, to_numpy, CUDA).kind == HOST_COPY
    # a producer no row names, to torch on a GPU: dlbind stands in between (the values are checked on the way)
    relay = decide(export_plan(object), to_torch, CUDA)
    assert relay.kind == RELAY and "no row" in relay.why
    # a device type the header does not name: refused, with the reason
    refused = decide(numpy_plan, to_torch, 99)
    assert refused.kind == REFUSE and "a header bump" in refused.why
    assert decide(numpy_plan, to_torch, CPU) is decide(numpy_plan, to_torch, CPU)  # kept in the plan


def test_cupy_rows_decide_direct_relay_and_interface() -> None:
    """CuPy cannot be imported here (no GPU); its row is data, and the decisions from it are what tests/gpu checks
    on a GPU: torch -> CuPy straight to cupy.from_dlpack, CuPy (negative strides unsigned before 14.3) -> torch
    through a relay, pinned memory -> CuPy through its __cuda_array_interface__ importer."""
    pytest.importorskip("torch")
    from dlbind._generated.adapters import ADAPTERS
    from dlbind._libraries import for_release
    from dlbind.routes import make_route
    from dlbind.sources import plan_of

    cupy = ADAPTERS["cupy"]
    cupy_row = cupy._replace(export=cupy.export._replace(negative_strides="unsigned"))  # a release before 14.3
    to_cupy = make_route(cupy_row, importer=lambda x: x, interface=lambda x: x)
    # fresh plans of torch's and numpy's rows, so that the process's own plans keep no decision for this route
    assert decide(plan_of(for_release(ADAPTERS["torch"])), to_cupy, CUDA).kind == DIRECT
    assert decide(plan_of(ADAPTERS["numpy"]), to_cupy, CUDA_HOST).kind == INTERFACE
    why = decide(plan_of(cupy_row), route_to("torch"), CUDA).why
    assert "negative strides as unsigned numbers" in why and "nonnegative" in why


def _on_cuda_route(monkeypatch: pytest.MonkeyPatch, stream: int | None) -> tuple[Any, list[Any]]:
    """torch's tensor type saying it is on CUDA (a subclass: no CUDA memory is read, the hand-over is decided and
    made as on a GPU), and ``to="cupy"`` made a system under test with CuPy's row: its importer records what it is
    handed, and its current stream is ``stream``."""
    torch = pytest.importorskip("torch")
    from dlbind import routes
    from dlbind._generated.adapters import ADAPTERS
    from dlbind._libraries import for_release

    class OnCuda(torch.Tensor):
        def __dlpack_device__(self) -> tuple[int, int]:
            return (CUDA, 0)

    handed: list[Any] = []

    def importer(x: Any) -> str:
        handed.append(x)
        return "imported"

    route = routes.make_route(for_release(ADAPTERS["cupy"]), importer=importer, stream_of=lambda index: stream)
    monkeypatch.setitem(routes.ROUTES, "cupy", route)
    return OnCuda, handed


def test_a_producer_handed_over_as_it_is_is_held_to_its_export_guards(monkeypatch: pytest.MonkeyPatch) -> None:
    """A DIRECT decision hands the producer itself to the target's importer: torch's __dlpack__ drops the negative
    bit (wrong values), so its export guards are checked first, by Python's plan (explain says so too) and by the
    compiled convert, which reads the decision once Python has made it."""
    torch = pytest.importorskip("torch")
    on_cuda, handed = _on_cuda_route(monkeypatch, stream=None)
    plain = torch.arange(3.0).as_subclass(on_cuda)
    negated = torch._neg_view(torch.arange(3.0)).as_subclass(on_cuda)
    for _ in range(2):  # the decision made in Python, then read (compiled build) by C
        assert dlbind.convert(plain, "cupy") == "imported" and handed[-1] is plain
        with pytest.raises(BufferError, match=r"is_neg\(\) is true"):
            dlbind.convert(negated, "cupy")
        said = dlbind.explain(negated, "cupy")
        assert said.kind == ExplanationKind.REFUSED and "is_neg() is true" in said.text
    assert handed == [plain, plain]


def test_a_stream_the_producer_refuses_sends_the_hand_over_through_the_relay(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch refuses CUDA's per-thread default stream (2): where the target's current stream is that one, the
    target is handed dlbind's relay (which asks torch on the default stream), in both builds; on another stream,
    the tensor itself."""
    torch = pytest.importorskip("torch")
    on_cuda, handed = _on_cuda_route(monkeypatch, stream=2)
    x = torch.arange(3.0).as_subclass(on_cuda)
    for _ in range(2):
        assert dlbind.convert(x, "cupy") == "imported"
        assert handed[-1] is not x and type(handed[-1]).__name__ == "Relay"
    on_cuda, handed = _on_cuda_route(monkeypatch, stream=7)
    x = torch.arange(3.0).as_subclass(on_cuda)
    for _ in range(2):
        assert dlbind.convert(x, "cupy") == "imported" and handed[-1] is x


class _Sliced:
    """An array whose export would say compact strides although ``is_contiguous`` is false (MAX's slices)."""

    def __init__(self, contiguous: bool) -> None:
        self.is_contiguous = contiguous

    def __dlpack__(self, **kwargs: object) -> object:
        return np.arange(4.0).__dlpack__()


@pytest.mark.parametrize("contiguous", [True, False])
def test_a_negated_guard_holds_when_its_value_is_falsy(contiguous: bool) -> None:
    from dlbind.sources import ExportPlan, _guard, check_guards, truthy_guard

    assert _guard("not is_contiguous") == ("is_contiguous", False, True)
    assert _guard("is_conj()") == ("is_conj", True, False)
    plan = ExportPlan(guards=(_guard("not is_contiguous"),), refusal_help=(("is_contiguous", "compact it first"),))
    x = _Sliced(contiguous)
    if contiguous:
        assert truthy_guard(x, plan) is None
        check_guards(x, plan)
        return
    assert truthy_guard(x, plan) == ("is_contiguous", False, True)
    with pytest.raises(BufferError, match=r"_Sliced\.is_contiguous is false: .*wrong values.*\(compact it first\)"):
        check_guards(x, plan)


def test_a_system_is_installed_by_its_whole_import_name(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # a namespace package holding another distribution's module (CuPy's cuda.pathfinder beside no cuda.core)
    (tmp_path / "dlbind_ns_demo").mkdir()
    (tmp_path / "dlbind_ns_demo" / "pathfinder.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert installed("dlbind_ns_demo") and installed("dlbind_ns_demo.pathfinder")
    assert not installed("dlbind_ns_demo.core")
    assert not installed("dlbind_no_such_package.core")  # no parent: not installed, no ModuleNotFoundError
