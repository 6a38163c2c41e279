"""The end of every run of the tests (``nox -s tests``): the skips, counted by the kind of their reason.

A run on this machine skips hundreds of tests, each for a reason it states: no GPU here, a library this
session does not install, another Python, the other build, another nox session's job, or something an array
library lacks. ``pytest_terminal_summary`` counts them by kind, so that a reader sees at once that nothing was
skipped for a bad reason, and lists every reason of no known kind ("other") in full, to be read. Standard
library and pytest only: the interop cells and every Python's sessions load it too.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest

#: The kinds of skip, first match wins: (what the summary calls it, what its reason says).
SKIP_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("no GPU or device here (or the GPU run's)", re.compile(r"\bGPUs?\b|\bCUDA\b|libcuda|ROCm|Vulkan|Metal\b", re.I)),
    ("Python version", re.compile(r"\bPython 3\.\d+|\bPEP \d+|POSIX only|win32", re.I)),
    ("library not in this session", re.compile(r"not installed|could not import|No module named|\bneeds? \w", re.I)),
    ("the other build runs it", re.compile(r"\b(?:pure|compiled|C) build|both builds|compiled (?:pass|\w+'s)", re.I)),
    ("another nox session runs it", re.compile(r"\bnox -s \w+|\.ci/\w+", re.I)),
    ("does not apply to that library", re.compile(r"\bhas no\b|are mutable|cannot (?:be|make)|refuses|itself", re.I)),
)  # fmt: skip
OTHER = "other"


def skip_kind(reason: str) -> str:
    """The kind of a skip's reason (:data:`SKIP_KINDS`), or ``"other"``."""
    return next((kind for kind, pattern in SKIP_KINDS if pattern.search(reason)), OTHER)


def _reason(report: Any) -> str:
    """The reason a skipped report states (pytest keeps ``(path, line, "Skipped: reason")``)."""
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> Generator[None, None, None]:
    """After pytest's own summary (``-ra``'s list of every skip included), just before the line of counts: the
    skips by kind."""
    result = yield
    _skips_by_kind(terminalreporter)
    return result


def _skips_by_kind(terminalreporter: Any) -> None:
    """A count per kind, then each reason of no known kind with its count."""
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if getattr(r, "skipped", False)]
    if not skipped:
        return
    kinds: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for report in skipped:
        reason = _reason(report)
        kind = skip_kind(reason)
        kinds[kind] += 1
        if kind == OTHER:
            others[reason.splitlines()[0][:160] if reason else "(no reason given)"] += 1
    terminalreporter.write_sep("=", f"{len(skipped)} skipped, by the kind of their reason")
    for kind, _ in SKIP_KINDS:
        if kinds[kind]:
            terminalreporter.write_line(f"{kinds[kind]:6}  {kind}")
    if others:
        terminalreporter.write_line(f"{kinds[OTHER]:6}  {OTHER}: read each reason")
        for reason, count in others.most_common():
            terminalreporter.write_line(f"{count:10}  {reason}")
