"""Where the compiled build's C code stops, one Python function per entry point goes on (issue 41): it is told
where C stopped (nothing done, or the producer's refusal, or the target's failure) and never asks twice. C reads
the plans Python made (``dlbind.sources.PLANS``) and calls no Python to make one: a type without a plan yet is
Python's, once. Each test runs in both builds; what only the compiled build has is skipped in the pure one."""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind._ffi import native
from dlbind._libraries import MISSING
from dlbind.sources import PLANS, export_plan

MODULE_C = Path(__file__).resolve().parents[1] / "src" / "dlbind" / "_fastpath" / "module.c"
PACKAGE = os.path.dirname(os.path.abspath(dlbind.__file__))
compiled = pytest.mark.skipif(native is None, reason="the compiled build's C code (this is the pure build)")

#: The Python callables the C code may be handed (issue 41: at most 7): a fall-back per entry point (asdlpack,
#: from_dlpack, convert, Tensor.__dlpack__ with keywords), the validator's message, and the exchange API's
#: allocator and stream order. Records it reads (routes, plans) are not callables.
MOST_CALLABLES = 7


def configured_callables(source: str) -> list[str]:
    """The keywords of ``configure()`` that take a callable, read from module.c's table."""
    return re.findall(r'\{"(\w+)", &dlbind_cfg\.\w+, \'c\'\}', source)


def test_the_c_code_is_handed_few_python_callables() -> None:
    found = configured_callables(MODULE_C.read_text(encoding="utf-8"))
    assert "from_dlpack" in found and "convert" in found  # the table is read (the pattern still matches)
    assert len(found) <= MOST_CALLABLES, f"{len(found)} callables handed to C: {found}"


def test_the_count_of_callables_can_fail() -> None:
    planted = MODULE_C.read_text(encoding="utf-8").replace(
        "static const dlbind_cfg_entry dlbind_cfg_entries[] = {",
        "static const dlbind_cfg_entry dlbind_cfg_entries[] = {\n    {\"extra\", &dlbind_cfg.extra, 'c'},",
    )
    assert len(configured_callables(planted)) == len(configured_callables(MODULE_C.read_text("utf-8"))) + 1


def dlbind_frames(call: Callable[[], Any]) -> list[str]:
    """``module.function`` of every Python function of dlbind that ``call`` enters."""
    entered: list[str] = []

    def profile(frame: Any, event: str, arg: object) -> None:
        name = os.path.abspath(frame.f_code.co_filename)
        if event == "call" and name.startswith(PACKAGE):
            entered.append(f"{os.path.splitext(os.path.basename(name))[0]}.{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return entered


def _producer_class() -> type:
    """A host producer type made now (so that no plan of it exists yet, and its plan is held weakly)."""

    class Fresh:
        def __init__(self) -> None:
            self.inner, self.asked = np.arange(4.0), 0

        def __dlpack__(self, **kwargs: Any) -> Any:
            self.asked += 1
            return self.inner.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.inner.__dlpack_device__()

    return Fresh


def test_a_new_type_is_planned_by_python_once_and_then_read() -> None:
    kind = _producer_class()
    assert PLANS.get(kind) is MISSING  # nothing kept for a type never asked
    first = kind()
    entered = dlbind_frames(lambda: dlbind.from_dlpack(first))
    assert "sources.export_plan" in entered  # Python made the plan of a type it had not seen
    assert first.asked == 1
    assert PLANS.get(kind) is export_plan(kind)
    second = kind()
    entered = dlbind_frames(lambda: dlbind.from_dlpack(second))
    assert second.asked == 1
    if native is not None:  # C read the plan Python made: no Python code of dlbind ran
        assert entered == []
    else:
        assert "consumer.imported" in entered


@compiled
def test_the_fall_back_is_told_nothing_was_done_and_calls_the_public_function() -> None:
    entered = dlbind_frames(lambda: dlbind.from_dlpack(np.arange(3.0), copy=True))
    assert entered[:2] == ["consumer.resume", "consumer.from_dlpack"]
    with pytest.raises(TypeError, match="from_dlpack"):  # a wrong call is the public function's own error
        dlbind.from_dlpack(np.arange(3.0), colour=True)


@compiled
def test_a_refusal_is_continued_by_the_fall_back_without_asking_again() -> None:
    asked: list[dict[str, Any]] = []

    class Older:  # a producer of an older spec: __dlpack__(stream=None), no max_version
        def __init__(self) -> None:
            self.inner = np.arange(5.0)

        def __dlpack__(self, stream: Any = None) -> Any:
            asked.append({"stream": stream})
            return self.inner.__dlpack__(stream=stream)

        def __dlpack_device__(self) -> Any:
            return self.inner.__dlpack_device__()

    export_plan(Older)  # planned: C asks it, is refused, and hands the refusal over
    entered = dlbind_frames(lambda: np.testing.assert_array_equal(dlbind.from_dlpack(Older()), np.arange(5.0)))
    assert "consumer.resume" in entered and "consumer._after_refusal" in entered
    assert "consumer.from_dlpack" not in entered  # continued where C stopped, not started again
    assert len(asked) == 1  # the refused call raised before the method ran: one call made it
    asked.clear()
    entered = dlbind_frames(lambda: dlbind.from_dlpack(Older()))
    assert (asked, entered) == ([{"stream": None}], [])  # learned: C asks it the older way



class _NoCopyKeyword:
    """A producer whose ``__dlpack__`` takes ``stream`` and ``max_version`` only (an older signature), recording
    the ``max_version`` of each call."""

    def __init__(self) -> None:
        self.array = np.arange(3.0)
        self.asked: list[object] = []

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None) -> object:
        self.asked.append(max_version)
        return self.array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_a_call_style_learned_later_is_the_compiled_plain_imports_too() -> None:
    """The plain import made in C reads how the type's ``__dlpack__`` takes an older call, also where Python
    learned it after the C code had read the type (here: its refusal of ``copy=``): both builds then ask it the
    same way, and the tensors say the same version."""
    x = _NoCopyKeyword()
    dlbind.from_dlpack(x)  # planned, and read by the C code in the compiled build
    dlbind.from_dlpack(x)
    dlbind.from_dlpack(x, copy=True)  # refuses copy=: its type's call style is learned
    learned = export_plan(_NoCopyKeyword).call_style
    assert learned != 0
    x.asked.clear()
    t = dlbind.from_dlpack(x)
    assert x.asked == [None] and t.version is None, (x.asked, t.version)  # asked the learned way, as Python asks


class _Plain:
    """A producer of every keyword, with nothing but ``__dlpack__`` (asdlpack wraps it: re-asked per export)."""

    def __init__(self) -> None:
        self.array = np.arange(3.0)

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


class _BareOnADevice:
    """An older producer whose ``__dlpack__`` takes no keyword at all, saying it is on CUDA (its data is not)."""

    def __dlpack__(self) -> object:
        return np.arange(3.0).__dlpack__()

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0)


def test_no_call_style_is_learned_for_dlbinds_own_exporters() -> None:
    """``asdlpack`` of an older producer raises the producer's TypeError through dlbind's Exporter, which takes
    every keyword: that is no style of the Exporter's type, or every later exporter would be asked legacily (the
    pure build's imports of asdlpack(torch tensors) then said version None)."""
    before = dlbind.from_dlpack(dlbind.asdlpack(_Plain())).version
    assert before == dlbind.DLPACK_VERSION
    for _ in range(2):
        with contextlib.suppress(BufferError, TypeError):  # what it answers does not matter here
            dlbind.from_dlpack(dlbind.asdlpack(_BareOnADevice()))
    assert dlbind.from_dlpack(dlbind.asdlpack(_Plain())).version == before
