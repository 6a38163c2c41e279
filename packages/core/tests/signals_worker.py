"""Timer signals mid-exchange (issue 39): ``python signals_worker.py N`` interrupts exchanges N times.

A SIGALRM timer fires every 10 µs; its handler raises an exception derived from BaseException (as
KeyboardInterrupt is) once per exchange it lands in, wherever that is: in dlbind's Python code, in a
deleter, between taking a capsule and owning it. The exchanges: ``from_dlpack`` of an ndarray (plain and
``copy=True``), ``asdlpack`` of a buffer to numpy and to dlbind, a raw capsule's import and ``convert``.
At the end it prints one JSON line: the build, the interrupts, and the exports alive before and after
(``dlbind.capsule.stats``: an export a signal leaked is alive for good).
"""

from __future__ import annotations

import gc
import json
import signal
import sys
import time
from typing import Any

import numpy as np

import dlbind


class Interrupt(BaseException):
    """What the timer's handler raises (a BaseException, as KeyboardInterrupt)."""


armed = False


def _handler(signum: int, frame: Any) -> None:
    global armed
    if armed:
        armed = False  # one interrupt per exchange: the harness's own except clause is never interrupted
        raise Interrupt


def main(target: int, seconds: float) -> dict[str, Any]:
    global armed
    a = np.arange(16.0)
    b = bytearray(64)
    paths = [
        lambda: dlbind.from_dlpack(a),
        lambda: dlbind.from_dlpack(a, copy=True),
        lambda: np.from_dlpack(dlbind.asdlpack(b)),
        lambda: dlbind.from_dlpack(dlbind.asdlpack(b)),
        lambda: dlbind.convert(a, to="numpy"),
        lambda: dlbind.from_dlpack(dlbind.asdlpack(b).__dlpack__(max_version=(1, 0))),
    ]
    for path in paths:
        path()
    gc.collect()
    before = dlbind.capsule.stats()
    signal.signal(signal.SIGALRM, _handler)
    interrupts = 0
    signal.setitimer(signal.ITIMER_REAL, 1e-5, 1e-5)
    end = time.monotonic() + seconds
    try:
        while interrupts < target and time.monotonic() < end:
            for path in paths:
                try:
                    armed = True
                    path()
                    armed = False
                except Interrupt:
                    interrupts += 1
    finally:
        armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
    gc.collect()
    after = dlbind.capsule.stats()
    return {"build": dlbind.ffi_build(), "interrupts": interrupts, "alive_before": before[0] - before[1],
            "alive_after": after[0] - after[1]}  # fmt: skip


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 600.0)))
