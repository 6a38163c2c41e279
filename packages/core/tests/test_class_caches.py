"""What dlbind learns about a producer type is learned from the type, never from one instance (issue 39).

dlbind keeps per type how its ``__dlpack__`` takes an older call (``ExportPlan.call_style``). A wrapper whose
``__dlpack__(*args, **kwargs)`` forwarded once to an old-style producer made every later instance export the
legacy way, so a read-only array through the same wrapper was refused from then on. Now the style is learned
only from a method whose signature is the type's own answer (no ``*args``/``**kwargs``; a builtin's refusal
that names the keyword), a wrapper is asked per call, and a style is forgotten when the class's
``__dlpack__`` is replaced.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

import dlbind
from dlbind.sources import STREAM, export_plan


class Old:
    """A producer of the spec before max_version: ``__dlpack__(stream=None)`` only."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack__(self, stream: Any = None) -> object:
        return self.a.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


def _readonly() -> np.ndarray:
    a = np.arange(3.0)
    a.flags.writeable = False
    return a


def test_a_forwarding_wrapper_is_asked_per_call_and_never_poisons_its_class() -> None:
    class Wrapper:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __dlpack__(self, *args: Any, **kwargs: Any) -> object:
            return self.inner.__dlpack__(*args, **kwargs)

        def __dlpack_device__(self) -> Any:
            return self.inner.__dlpack_device__()

    for _ in range(3):  # the old-style inner first, then a read-only array through the same wrapper class
        assert np.asarray(dlbind.from_dlpack(Wrapper(Old(np.arange(3.0))))).tolist() == [0.0, 1.0, 2.0]
        t = dlbind.from_dlpack(Wrapper(_readonly()))
        assert t.readonly and np.asarray(t).tolist() == [0.0, 1.0, 2.0]
        assert np.from_dlpack(dlbind.asdlpack(Wrapper(_readonly()))).tolist() == [0.0, 1.0, 2.0]
    assert export_plan(Wrapper).call_style == 0


def test_an_old_style_class_is_learned_once_from_its_own_signature() -> None:
    class Own(Old):
        pass

    dlbind.from_dlpack(Own(np.arange(3.0)))
    assert export_plan(Own).call_style == STREAM


def test_a_replaced_dlpack_is_asked_anew() -> None:
    class Swapped(Old):
        pass

    old = Swapped.__dlpack__
    dlbind.from_dlpack(Swapped(np.arange(3.0)))
    assert export_plan(Swapped).call_style == STREAM

    def new(self: Any, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        return _readonly().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    Swapped.__dlpack__ = new  # type: ignore[method-assign]
    t = dlbind.from_dlpack(Swapped(np.arange(3.0)))
    assert t.readonly and export_plan(Swapped).call_style == 0
    Swapped.__dlpack__ = old  # type: ignore[method-assign]
    assert not dlbind.from_dlpack(Swapped(np.arange(3.0))).readonly


def test_a_dlpack_replaced_between_the_style_read_and_the_call_is_asked_anew() -> None:
    """The class's ``__dlpack__`` replaced while one of its arrays is imported, after dlbind read how the type takes
    an older call and before that call: here by the array's own ``__dlpack_device__``, which the import asks in
    between. The new method is asked as the spec says (with ``max_version``), never with the style learned from
    the old one (the compiled build checks the type's version right before the call)."""
    asked: list[Any] = []

    def new(self: Any, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        asked.append(max_version)
        return self.a.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    class Swapping(Old):
        swap = False

        def __dlpack_device__(self) -> Any:
            if self.swap:
                type(self).__dlpack__ = new  # type: ignore[method-assign]
            return self.a.__dlpack_device__()

    for _ in range(2):  # the style learned, then used
        assert np.asarray(dlbind.from_dlpack(Swapping(np.arange(3.0)))).tolist() == [0.0, 1.0, 2.0]
    assert export_plan(Swapping).call_style == STREAM and not asked
    x = Swapping(np.arange(3.0))
    x.swap = True
    assert np.asarray(dlbind.from_dlpack(x)).tolist() == [0.0, 1.0, 2.0]
    assert asked and all(isinstance(v, tuple) for v in asked), f"the new __dlpack__ was asked {asked}"


def test_a_class_whose_dlpack_is_replaced_while_threads_export_through_it() -> None:
    """Four threads export instances while the class's ``__dlpack__`` is swapped 200 times, 0.5 ms apart,
    between an old-style method (writable data) and a current one (read-only data): every export succeeds.
    The swaps are counted, not timed (a thread may hold the GIL for milliseconds on a loaded machine), and
    start once every thread has exported."""

    class Churned(Old):
        pass

    old = Churned.__dlpack__

    def new(self: Any, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        return _readonly().__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    failures: list[str] = []
    done = threading.Event()
    counts = [0] * 4

    def export(k: int) -> None:
        while not done.is_set():
            try:
                t = dlbind.from_dlpack(Churned(np.arange(3.0)))
                assert np.asarray(t).tolist() == [0.0, 1.0, 2.0]
                counts[k] += 1
            except Exception as exc:
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=export, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while not all(counts) and not failures and time.monotonic() < deadline:
        time.sleep(0.001)
    started = list(counts)
    for swap in range(200):
        Churned.__dlpack__ = new if swap % 2 == 0 else old  # type: ignore[method-assign]
        time.sleep(0.0005)
    done.set()
    for t in threads:
        t.join()
    assert not failures, f"{len(failures)} of {sum(counts) + len(failures)} exports failed, e.g. {failures[:3]}"
    assert all(started), f"a thread never exported before the swaps: {started}"
    assert sum(counts) > sum(started), "no export ran while the class was being swapped"
