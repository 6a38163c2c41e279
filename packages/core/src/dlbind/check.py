"""``python -m dlbind check``: the conformance suite on every installed array library, as producer
and as consumer, and every pair of libraries through ``dlbind.convert``, as a matrix.

Each library runs in its own process (a library that crashes on a check is reported, not fatal:
the run goes on in a new process after that check).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from dlbind._generated.adapters import ADAPTERS

MARKS = {"pass": "ok", "fail": "FAIL", "unsupported": "-", "crash": "CRASH", "skip": " "}


@dataclass
class Matrix:
    libs: list[str]
    versions: dict[str, str]
    results: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # lib -> key -> result
    pairs: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # src -> dst -> result
    seconds: float = 0.0


def installed(names: list[str] | None) -> list[str]:
    wanted = names or [n for n, a in ADAPTERS.items() if a.verified]
    out = []
    for name in wanted:
        if name not in ADAPTERS:
            raise SystemExit(f"unknown library {name!r}; dlbind knows {', '.join(ADAPTERS)}")
        root = ADAPTERS[name].import_name.split(".")[0]
        if importlib.util.find_spec(root) is not None:
            out.append(name)
    return out


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, packages_distributions, version

    root = ADAPTERS[name].import_name.split(".")[0]
    for dist in packages_distributions().get(root, [root]):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "?"


class Progress:
    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream, self.total, self.tty = stream, total, stream.isatty()
        self.start = time.perf_counter()

    def show(self, text: str, *, final: bool = False) -> None:
        line = f"[{time.perf_counter() - self.start:5.1f}s] {text}"
        if self.tty and not final:
            self.stream.write("\r" + line[:120].ljust(120))
        elif final:
            self.stream.write(("\r" if self.tty else "") + line.ljust(120 if self.tty else 0) + "\n")
        self.stream.flush()


def run_library(name: str, progress: Progress, index: int) -> dict[str, dict[str, str]]:
    from dlbind.testing import CONSUMER_CHECKS, PRODUCER_CHECKS

    keys = [f"{c.kind}:{c.id}" for c in (*PRODUCER_CHECKS, *CONSUMER_CHECKS)]
    results: dict[str, dict[str, str]] = {}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    while len(results) < len(keys):
        args = [sys.executable, "-m", "dlbind.testing._worker", name, *results]
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        running = None
        assert proc.stdout is not None
        for line in proc.stdout:
            msg = json.loads(line)
            if "start" in msg:
                running = msg["start"]
                progress.show(f"[{index}/{progress.total}] {name}: {len(results) + 1}/{len(keys)} {running}")
            else:
                results[msg["key"]] = {"status": msg["status"], "detail": msg["detail"]}
                running = None
        stderr = proc.stderr.read() if proc.stderr else ""
        code = proc.wait()
        if running is not None:  # the library killed the process during this check
            results[running] = {"status": "crash", "detail": f"the process died (exit {code})"}
        elif len(results) < len(keys):
            last = stderr.strip().splitlines()[-1:] or [f"exit {code}"]
            for key in keys:
                results.setdefault(key, {"status": "fail", "detail": f"could not run: {last[0][:200]}"})
    failed = sum(r["status"] in ("fail", "crash") for r in results.values())
    progress.show(f"[{index}/{progress.total}] {name}: {len(keys)} checks, {failed} failed", final=True)
    return results


CASES = ("contiguous", "transposed", "read-only")


def run_pairs(libs: list[str], progress: Progress) -> dict[str, dict[str, dict[str, str]]]:
    """Every pair through dlbind.convert: values intact for contiguous, transposed and read-only data."""
    import numpy as np

    import dlbind
    from dlbind._libraries import library_of, prepare_for_check

    for name in libs:
        prepare_for_check(ADAPTERS[name])  # its check.setup (jax: 64-bit dtypes on)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for src in libs:
        for dst in libs:
            progress.show(f"pairs: {src} -> {dst}")
            problems = []
            for case in CASES:
                a = np.arange(12.0).reshape(3, 4)
                a = a.T if case == "transposed" else a
                if case == "read-only":
                    a.flags.writeable = False
                try:
                    x = dlbind.convert(a, src)
                    y = dlbind.convert(x, dst)
                    if library_of(y) is not ADAPTERS[dst]:
                        raise TypeError(f"got a {type(y).__name__}")
                    back = np.asarray(dlbind.from_dlpack(dlbind.compat(y)))
                    if back.tolist() != a.tolist():
                        raise ValueError("values differ")
                except Exception as exc:
                    problems.append(
                        f"{case}: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
                    )
            out.setdefault(src, {})[dst] = (
                {"status": "pass", "detail": ""} if not problems else {"status": "fail", "detail": "; ".join(problems)}
            )
    progress.show(f"pairs: {len(libs) ** 2} conversions", final=True)
    return out


def run(libs: list[str], stream: TextIO = sys.stderr) -> Matrix:
    """What ``python -m dlbind check --libs ...`` runs: the producer and consumer checks on each library (names
    of ``spec/adapters.toml``), each library in its own process (a crash is a ``CRASH`` result and the run
    goes on), then ``dlbind.convert`` between every pair. Progress lines go to ``stream``."""
    matrix = Matrix(libs, {name: _version(name) for name in libs})
    start = time.perf_counter()
    progress = Progress(stream, len(libs))
    for i, name in enumerate(libs, 1):
        matrix.results[name] = run_library(name, progress, i)
    matrix.pairs = run_pairs(libs, progress)
    matrix.seconds = time.perf_counter() - start
    return matrix


def _table(matrix: Matrix, kind: str, markdown: bool) -> list[str]:
    from dlbind.testing import CONSUMER_CHECKS, PRODUCER_CHECKS

    checks = PRODUCER_CHECKS if kind == "producer" else CONSUMER_CHECKS
    head = ["check", *matrix.libs]

    def mark(lib: str, check_id: str) -> str:
        return MARKS[matrix.results[lib].get(f"{kind}:{check_id}", {"status": "skip"})["status"]]

    rows = [[c.id, *(mark(lib, c.id) for lib in matrix.libs)] for c in checks]
    return _render(head, rows, markdown)


def _render(head: list[str], rows: list[list[str]], markdown: bool) -> list[str]:
    if markdown:
        return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(r) + " |" for r in rows]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows, strict=True)]

    def fmt(row: list[str]) -> str:
        return "  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)).rstrip()

    return [fmt(head), fmt(["-" * w for w in widths]), *map(fmt, rows)]


def findings(matrix: Matrix) -> list[str]:
    out = []
    for lib in matrix.libs:
        for key, r in sorted(matrix.results[lib].items()):
            if r["status"] in ("fail", "crash"):
                kind, check = key.split(":")
                out.append(f"{lib} {matrix.versions[lib]} as {kind}, {check}: {r['status']}: {r['detail']}")
    for src, row in matrix.pairs.items():
        for dst, r in row.items():
            if r["status"] != "pass":
                out.append(f"convert {src} -> {dst}: {r['detail']}")
    return out


def render(matrix: Matrix, *, markdown: bool = False, details: bool = False) -> str:
    """The matrix as text (or a Markdown page): producer and consumer tables, the pairs, and the findings
    (listed with their reasons when ``details``, always in Markdown)."""
    versions = ", ".join(f"{lib} {matrix.versions[lib]}" for lib in matrix.libs)
    lines = []
    if markdown:
        written = f"Written by `nox -s matrix` (`python -m dlbind check --markdown`) on {time.strftime('%Y-%m-%d')}"
        legend = (
            "`ok` passed, `FAIL` failed, `-` unsupported (cleanly refused, as the spec allows), "
            "`CRASH` the process died. Every failure is listed with its reason below the tables."
        )
        lines += ["# Conformance matrix", "", f"{written}: {versions}; {matrix.seconds:.0f} s.", "", legend, ""]
    else:
        lines += [f"DLPack conformance of {versions} ({matrix.seconds:.1f} s)", ""]
    for kind in ("producer", "consumer"):
        lines += [("## " if markdown else "") + f"As {kind}", ""]
        lines += [*_table(matrix, kind, markdown), ""]
    lines += [("## " if markdown else "") + "Pairs through dlbind.convert (rows: from, columns: to)", ""]
    rows = [[src, *(MARKS[matrix.pairs[src][dst]["status"]] for dst in matrix.libs)] for src in matrix.libs]
    lines += [*_render(["from \\ to", *matrix.libs], rows, markdown), ""]
    found = findings(matrix)
    if markdown or details:
        lines += [("## " if markdown else "") + f"Findings ({len(found)})", ""]
        lines += [("- " if markdown else "  ") + f for f in found] or ["none"]
    else:
        noun = "finding" if len(found) == 1 else "findings"
        lines += [f"{len(found)} {noun}; --details lists them with their reasons."]
    return "\n".join(lines) + "\n"


def as_json(matrix: Matrix) -> dict[str, Any]:
    return {"versions": matrix.versions, "seconds": matrix.seconds, "results": matrix.results, "pairs": matrix.pairs}
