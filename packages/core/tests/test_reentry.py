"""How often one exchange re-enters a dlbind module it had left (issue 27's run-time measure).

An exchange should walk dlbind top to bottom — plan, exchange, bridge, target — staying in each module once.
Each test traces one exchange of a route (``sys.setprofile``: the calls into dlbind's own modules, in order)
and counts the *returns*: entries into a module the exchange had already left. The figures are held at or
below the counts measured by these same tests on ffedf59 (before the "one decision" work), so that no change
makes the walk longer; the work on issue 27 lowers them (its acceptance: at least halved).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind

PACKAGE = os.path.dirname(dlbind.__file__) + os.sep


def walk(exchange: Callable[[], Any]) -> list[str]:
    """The dlbind modules one call of ``exchange`` enters, in order (consecutive calls in one module: once)."""
    modules: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(PACKAGE):
            name = frame.f_code.co_filename[len(PACKAGE) :].removesuffix(".py")
            if not modules or modules[-1] != name:
                modules.append(name)

    sys.setprofile(profile)
    try:
        exchange()
    finally:
        sys.setprofile(None)
    return modules


def returns(modules: list[str]) -> int:
    """Entries into a module that the walk had entered and left before."""
    return sum(1 for i, m in enumerate(modules) if m in modules[:i])


def _torch() -> Any:
    return pytest.importorskip("torch")


# route -> (the exchange, given a fresh numpy array; its returns at ffedf59 per build)
ROUTES: dict[str, tuple[Callable[[np.ndarray], Any], dict[str, int]]] = {
    "from_dlpack(ndarray)": (lambda a: dlbind.from_dlpack(a), {"pure": 7, "compiled": 0}),
    "from_dlpack(ndarray, copy=True)": (lambda a: dlbind.from_dlpack(a, copy=True), {"pure": 6, "compiled": 3}),
    "np.from_dlpack(asdlpack(ndarray))": (lambda a: np.from_dlpack(dlbind.asdlpack(a)), {"pure": 0, "compiled": 0}),
    "convert(ndarray, 'numpy', copy=True)": (
        lambda a: dlbind.convert(a, to="numpy", copy=True),
        {"pure": 0, "compiled": 0},
    ),
    "convert(ndarray, 'torch')": (lambda a: dlbind.convert(a, to="torch"), {"pure": 16, "compiled": 0}),
    "convert(torch tensor, 'numpy')": (
        lambda a: dlbind.convert(_torch().from_numpy(a), to="numpy"),
        {"pure": 17, "compiled": 0},
    ),
    "convert(ndarray[::-1], 'torch')": (lambda a: dlbind.convert(a[::-1], to="torch"), {"pure": 35, "compiled": 0}),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_an_exchange_re_enters_no_more_modules_than_before(route: str) -> None:
    exchange, baseline = ROUTES[route]
    if "torch" in route:
        _torch()
    exchange(np.arange(6.0))  # the type's first exchange makes its plans: the walk measured is a later one
    modules = walk(lambda: exchange(np.arange(6.0)))
    build = dlbind.ffi_build()
    assert returns(modules) <= baseline[build], f"{returns(modules)} returns (ffedf59: {baseline[build]}): {modules}"


def test_the_exchanges_re_enter_half_as_often_as_before() -> None:
    """Issue 27's acceptance: over every route above, the returns are at most half of their count at ffedf59
    (pure: 81; compiled: 3), in each build."""
    _torch()
    build = dlbind.ffi_build()
    counts = {}
    for route, (exchange, _) in ROUTES.items():
        exchange(np.arange(6.0))  # the type's first exchange makes its plans
        counts[route] = returns(walk(lambda exchange=exchange: exchange(np.arange(6.0))))
    before = sum(baseline[build] for _, baseline in ROUTES.values())
    assert sum(counts.values()) * 2 <= before, f"{sum(counts.values())} returns (ffedf59: {before}): {counts}"
