"""``python -m dlbind check``: the conformance suite on every installed array library, as producer
and as consumer, and every pair of libraries through ``dlbind.convert``, as a matrix.

Each library runs in its own process (a library that crashes on a check is reported, not fatal:
the run goes on in a new process after that check). ``--device cuda`` runs the same on each library's
CUDA arrays, made by its own constructor (``dlbind.testing._devices.DEVICE_ARRAYS``), with the device's
stream checks added; dlbind-cuda provides the memory dlbind makes there and the host copies of results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Any, TextIO

from dlbind._generated.adapters import ADAPTERS
from dlbind._libraries import installed as installed_here

MARKS = {"pass": "ok", "warn": "WARN", "fail": "FAIL", "unsupported": "-", "crash": "CRASH", "skip": " "}
#: What the marks of the text tables mean: printed under the title of every text matrix.
TEXT_LEGEND = (
    "ok: passed. WARN: allowed by the spec, hazardous in use (the reason cites the recommendation). FAIL: the "
    "library breaks a rule of the DLPack spec or the array API. -: it refuses cleanly (unsupported, as the spec "
    "allows). CRASH: its process died. Each mark is a finding about that library as installed, exchanging "
    "through dlbind: not a failure of dlbind's."
)
#: The same for the Markdown page (docs/matrix.md), its references as links.
MARKDOWN_LEGEND = (
    "`ok` passed, `WARN` allowed by the spec but hazardous in use (read-only data imported writable, which "
    "[data-apis/array-api#749](https://github.com/data-apis/array-api/issues/749) recommends over refusing it), "
    "`FAIL` failed, `-` unsupported (cleanly refused, as the spec allows), `CRASH` the process died. Every "
    "failure and warning is listed with its reason below the tables."
)


@dataclass
class Matrix:
    libs: list[str]
    versions: dict[str, str]
    results: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # lib -> key -> result
    pairs: dict[str, dict[str, dict[str, str]]] = field(default_factory=dict)  # src -> dst -> result
    seconds: float = 0.0
    device: str | None = None  # None: the CPU


def installed(names: list[str] | None) -> list[str]:
    wanted = names or [n for n, a in ADAPTERS.items() if a.verified]
    out = []
    for name in wanted:
        if name not in ADAPTERS:
            raise SystemExit(f"unknown library {name!r}; dlbind knows {', '.join(ADAPTERS)}")
        if installed_here(ADAPTERS[name].import_name):
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


def on_device(device: str, names: list[str] | None) -> tuple[list[str], list[str]]:
    """(installed libraries checked on ``device``, installed ones that cannot be: no constructor of their
    arrays there in dlbind.testing). ``names``: the asked ones (default: every installed one with a row)."""
    from dlbind.testing._devices import DEVICE_ARRAYS

    rows = DEVICE_ARRAYS.get(device, {})
    wanted = names or [n for n in ADAPTERS if n in rows]
    found = installed(wanted)
    return [n for n in found if n in rows], [n for n in found if n not in rows]


def run_library(name: str, progress: Progress, index: int, device: str | None = None) -> dict[str, dict[str, str]]:
    from dlbind.testing._checks import checks_for

    producer_checks, consumer_checks = checks_for(device)
    keys = [f"{c.kind}:{c.id}" for c in (*producer_checks, *consumer_checks)]
    results: dict[str, dict[str, str]] = {}
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    where = ["--device", device] if device else []
    while len(results) < len(keys):
        args = [sys.executable, "-m", "dlbind.testing._worker", *where, name, *results]
        running = None
        # the context closes the pipes (a caller running under -W error::ResourceWarning sees no unclosed file)
        with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
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
    warned = sum(r["status"] == "warn" for r in results.values())
    also = f", {warned} warned" if warned else ""
    progress.show(f"[{index}/{progress.total}] {name}: {len(keys)} checks, {failed} failed{also}", final=True)
    return results


CASES = ("contiguous", "transposed", "read-only")
# on a device: views the source library makes with its own indexing (read-only memory is jax's, always).
# No negative strides here: the pairs run in this process, and a target that aborts on them (torch) would end
# it; the producer and consumer checks (one process per library) cover them.
DEVICE_CASES: dict[str, Any] = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "offset": lambda a: a[1:, 2:],
}


def _host_values(y: Any) -> Any:
    """What ``y`` (an array of a pair's target) holds, as numpy: itself on the host, else the host copy of its
    device's backend or, where none serves it (dpnp's oneAPI memory), ``y``'s own host copy (its
    ``__dlpack__(dl_device=(kDLCPU, 0), copy=True)``; a ``compat`` wrapper cannot ask it for one). Raises
    ``dlbind.testing``'s Unsupported, with the reason, when ``y`` refuses that."""
    import dlbind
    from dlbind.testing._checks import _values_of

    return _values_of(y, dlbind.from_dlpack(dlbind.compat(y)))[0]


def run_pairs(libs: list[str], progress: Progress, device: str | None = None) -> dict[str, dict[str, dict[str, str]]]:
    """Every pair through dlbind.convert: values intact for contiguous, transposed and read-only data (on a
    device: contiguous, transposed and offset views, on the device, of the target's type)."""
    import numpy as np

    import dlbind
    from dlbind._libraries import library_of, prepare_for_check
    from dlbind.testing._checks import Unsupported
    from dlbind.testing._devices import device_only

    # on the CPU, a system of device arrays only is not imported: its pairs are unsupported here
    elsewhere = {name: "" if device is not None else device_only(name) for name in libs}
    for name in libs:
        if not elsewhere[name]:
            prepare_for_check(ADAPTERS[name])  # its check.setup (jax: 64-bit dtypes on)
    if device is not None:
        return _device_pairs(libs, progress, device)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for src in libs:
        for dst in libs:
            progress.show(f"pairs: {src} -> {dst}")
            why = elsewhere[src] or elsewhere[dst]
            if why:
                out.setdefault(src, {})[dst] = {"status": "unsupported", "detail": why}
                continue
            problems, unread = [], []
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
                    back = np.asarray(_host_values(y))
                    if back.tolist() != a.tolist():
                        raise ValueError("values differ")
                except Unsupported as exc:  # converted, but nothing can read the result's values back
                    unread.append(f"{case}: {exc}")
                except Exception as exc:
                    problems.append(
                        f"{case}: {type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else ''}"
                    )
            if problems:
                result = {"status": "fail", "detail": "; ".join(problems + unread)}
            elif unread:
                result = {"status": "unsupported", "detail": "; ".join(unread)}
            else:
                result = {"status": "pass", "detail": ""}
            out.setdefault(src, {})[dst] = result
    progress.show(f"pairs: {len(libs) ** 2} conversions", final=True)
    return out


def _device_pairs(libs: list[str], progress: Progress, device: str) -> dict[str, dict[str, dict[str, str]]]:
    import numpy as np

    import dlbind
    from dlbind._libraries import library_of
    from dlbind.testing._checks import _values
    from dlbind.testing._devices import current, maker, placed, unusable

    out: dict[str, dict[str, dict[str, str]]] = {}
    with placed(device):
        place = current()
        assert place is not None
        usable = {name: unusable(name, device) for name in libs}
        for src in libs:
            for dst in libs:
                progress.show(f"pairs on {device}: {src} -> {dst}")
                why = usable[src] or usable[dst]
                if why is not None:
                    out.setdefault(src, {})[dst] = {"status": "unsupported", "detail": why}
                    continue
                problems, made = [], 0
                for case, view in DEVICE_CASES.items():
                    base = np.arange(20.0).reshape(4, 5)
                    try:
                        x = view(maker(src, device)(base))
                    except Exception:
                        continue  # the source cannot make this view on the device (torch: negative strides)
                    made += 1
                    try:
                        y = dlbind.convert(x, dst)
                        if library_of(y) is not ADAPTERS[dst]:
                            raise TypeError(f"got a {type(y).__name__}")
                        t = dlbind.from_dlpack(dlbind.compat(y))
                        if int(t.device[0]) != place.device_type:
                            raise BufferError(f"got an array on {t.device}, not on {device}")
                        if _values(t).tolist() != view(base).tolist():
                            raise ValueError("values differ")
                    except Exception as exc:
                        text = str(exc).splitlines()[0][:120] if str(exc) else ""
                        problems.append(f"{case}: {type(exc).__name__}: {text}")
                result = {"status": "pass", "detail": ""} if made else {"status": "unsupported", "detail": "no view"}
                out.setdefault(src, {})[dst] = (
                    result if not problems else {"status": "fail", "detail": "; ".join(problems)}
                )
    progress.show(f"pairs on {device}: {len(libs) ** 2} conversions", final=True)
    return out


def run(libs: list[str], stream: TextIO = sys.stderr, device: str | None = None) -> Matrix:
    """What ``python -m dlbind check --libs ...`` runs: the producer and consumer checks on each library (names
    of ``spec/adapters.toml``), each library in its own process (a crash is a ``CRASH`` result and the run
    goes on), then ``dlbind.convert`` between every pair. Progress lines go to ``stream``. ``device``
    ("cuda"): on each library's arrays on that device, with the device's stream checks."""
    matrix = Matrix(libs, {name: _version(name) for name in libs}, device=device)
    start = time.perf_counter()
    progress = Progress(stream, len(libs))
    for i, name in enumerate(libs, 1):
        matrix.results[name] = run_library(name, progress, i, device)
    matrix.pairs = run_pairs(libs, progress, device)
    matrix.seconds = time.perf_counter() - start
    return matrix


def _table(matrix: Matrix, kind: str, markdown: bool) -> list[str]:
    from dlbind.testing._checks import checks_for

    producer_checks, consumer_checks = checks_for(matrix.device)
    checks = producer_checks if kind == "producer" else consumer_checks
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


def findings(matrix: Matrix, statuses: tuple[str, ...] = ("fail", "crash")) -> list[str]:
    """Each result of ``statuses`` with its reason (the pairs' failures too, unless only warnings are asked)."""
    out = []
    for lib in matrix.libs:
        for key, r in sorted(matrix.results[lib].items()):
            if r["status"] in statuses:
                kind, check = key.split(":")
                out.append(f"{lib} {matrix.versions[lib]} as {kind}, {check}: {r['status']}: {r['detail']}")
    for src, row in matrix.pairs.items():
        for dst, r in row.items():
            if r["status"] != "pass" and "fail" in statuses:
                out.append(f"convert {src} -> {dst}: {r['detail']}")
    return out


def render(matrix: Matrix, *, markdown: bool = False, details: bool = False) -> str:
    """The matrix as text (or a Markdown page): producer and consumer tables, the pairs, and the findings
    (listed with their reasons when ``details``, always in Markdown)."""
    versions = ", ".join(f"{lib} {matrix.versions[lib]}" for lib in matrix.libs)
    if matrix.device is not None:
        versions += f", on {matrix.device}"
    lines = []
    if markdown:
        written = f"Written by `nox -s matrix` (`python -m dlbind check --markdown`) on {time.strftime('%Y-%m-%d')}"
        lines += [
            "# Conformance matrix",
            "",
            f"{written}: {versions}; {matrix.seconds:.0f} s.",
            "",
            MARKDOWN_LEGEND,
            "",
        ]
    else:
        lines += [f"DLPack conformance of {versions} ({matrix.seconds:.1f} s)", TEXT_LEGEND, ""]
    for kind in ("producer", "consumer"):
        lines += [("## " if markdown else "") + f"As {kind}", ""]
        lines += [*_table(matrix, kind, markdown), ""]
    lines += [("## " if markdown else "") + "Pairs through dlbind.convert (rows: from, columns: to)", ""]
    rows = [[src, *(MARKS[matrix.pairs[src][dst]["status"]] for dst in matrix.libs)] for src in matrix.libs]
    lines += [*_render(["from \\ to", *matrix.libs], rows, markdown), ""]
    found, warned = findings(matrix), findings(matrix, ("warn",))
    if markdown or details:
        lines += [("## " if markdown else "") + f"Findings ({len(found)})", ""]
        lines += [("- " if markdown else "  ") + f for f in found] or ["none"]
        if warned:
            lines += ["", ("## " if markdown else "") + f"Warnings ({len(warned)}): allowed, hazardous in use", ""]
            lines += [("- " if markdown else "  ") + _linked(w, markdown) for w in warned]
    else:
        noun = "finding" if len(found) == 1 else "findings"
        also = f" and {len(warned)} warning{'' if len(warned) == 1 else 's'}" if warned else ""
        lines += [f"{len(found)} {noun}{also} about the libraries; --details lists them with their reasons "
                  "(`nox -s demo -- --details`)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def _linked(text: str, markdown: bool) -> str:
    """``text`` with each ``owner/repo#N`` reference a link on the Markdown page."""
    if not markdown:
        return text
    import re

    return re.sub(r"\b([\w.-]+/[\w.-]+)#(\d+)\b", r"[\1#\2](https://github.com/\1/issues/\2)", text)


def as_json(matrix: Matrix) -> dict[str, Any]:
    return {
        "versions": matrix.versions, "seconds": matrix.seconds, "device": matrix.device or "cpu",
        "results": matrix.results, "pairs": matrix.pairs,
    }  # fmt: skip
