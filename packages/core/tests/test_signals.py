"""Signals mid-exchange (issue 39): a handler's exception never leaks an export (compiled build).

Taking a capsule and owning its struct is one step in C (``native.take_wrap``; the plain import was C already):
no Python code, so no signal handler, runs between. ``signals_worker.py`` interrupts exchanges with a 10 µs
timer whose handler raises; the exports alive must be where they were. ``DLBIND_SIGNALS`` sets the count
(``nox -s leaks``: 20 000). The pure build's remaining window — a handler's exception landing at the entry of a
finalizer that releases an export — is measured by the same worker and documented in docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dlbind

HERE = Path(__file__).resolve().parent
PURE = dlbind.ffi_build() == "pure"


@pytest.mark.skipif(sys.platform == "win32", reason="setitimer: POSIX only")
@pytest.mark.skipif(PURE, reason="the pure build's remaining window is measured and documented (docs/reliability.md)")
def test_timer_signals_mid_exchange_leak_nothing() -> None:
    count = os.environ.get("DLBIND_SIGNALS", "500")
    proc = subprocess.run(
        [sys.executable, str(HERE / "signals_worker.py"), count, "300"],
        capture_output=True, text=True, timeout=600, env=dict(os.environ, DLBIND_PURE="0"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.splitlines()[-1])
    assert result["interrupts"] >= min(int(count), 100), result  # the timer did interrupt exchanges
    assert result["alive_after"] == result["alive_before"], result
    assert "Exception ignored" not in proc.stderr, proc.stderr[-2000:]
