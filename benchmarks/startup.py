"""Start-up costs: ``import dlbind`` and a warm regeneration, beside anchors measured in the same run.

    nox -s bench            (or: python benchmarks/startup.py [--json FILE] [--markdown-append FILE])

Import times are the median over fresh interpreters of the time ``-X importtime`` attributes to
the top-level import; the anchors are ``import json`` (a small stdlib package) and ``import numpy``.
"dlbind after numpy" is what ``import dlbind`` adds in an interpreter that imported numpy first (issue 23's
target: at most 5 ms), measured in the same run as numpy's. ``import dlbind`` loads its runtime on first use,
so "first use after numpy" is shown beside it: the time of the first ``dlbind.from_dlpack(ndarray)`` after
``import numpy, dlbind`` (loading the runtime, wiring the fast path, one exchange), timed in the process.
``--imports-only`` skips the regeneration (the other Pythons' sessions run it that way).
Regeneration is the median of in-process runs of the whole generator with the headers cached.
Nothing here passes or fails: it reports.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from summary import refresh

ROOT = Path(__file__).resolve().parents[1]


TARGET_AFTER_NUMPY_MS = 5.0


def import_us(module: str, runs: int, before: str = "") -> float | None:
    """The median time ``-X importtime`` gives the top-level import of ``module`` (after importing ``before``)."""
    samples = []
    for _ in range(runs):
        first = f"import {before}; " if before else ""
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"{first}import {module}"], capture_output=True, text=True
        )
        if proc.returncode != 0:
            return None
        for line in proc.stderr.splitlines():
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                samples.append(int(parts[1]))
    return statistics.median(samples) if samples else None


def first_use_us(runs: int) -> float | None:
    """The median time of the first ``dlbind.from_dlpack(ndarray)`` in a fresh interpreter, after ``import numpy,
    dlbind``: what the deferred runtime costs the first call."""
    code = (
        "import time, numpy, dlbind; x = numpy.zeros(1); t = time.perf_counter(); dlbind.from_dlpack(x); "
        "print((time.perf_counter() - t) * 1e6)"
    )
    samples = []
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if proc.returncode != 0:
            return None
        samples.append(float(proc.stdout.split()[-1]))
    return statistics.median(samples)


def regenerate_s(runs: int) -> float | None:
    try:
        from dlbind_generator.pipeline import Paths, build
    except ImportError:
        return None
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        build(Paths(ROOT), progress=lambda _: None, offline=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--markdown-append", type=Path, help="append a section with the table to this docs page")
    parser.add_argument("--imports-only", action="store_true", help="no regeneration (it needs the generator)")
    args = parser.parse_args()
    rows = {name: import_us(name, args.runs) for name in ("dlbind", "json", "numpy")}
    rows["dlbind after numpy"] = import_us("dlbind", args.runs, before="numpy")
    rows["first use after numpy"] = first_use_us(args.runs)
    regen = None if args.imports_only else regenerate_s(max(3, args.runs // 3))
    print(f"{'what':<28}{'median':>12}{'vs dlbind':>12}")
    base = rows["dlbind"]
    for name, us in rows.items():
        shown = name if name.startswith("first use") else f"import {name}"
        if us is None:
            print(f"{shown:<28}{'n/a':>12}")
            continue
        ratio = f"{us / base:.2f}x" if base else ""
        target = f"  (target <= {TARGET_AFTER_NUMPY_MS:g} ms)" if name == "dlbind after numpy" else ""
        print(f"{shown:<28}{us / 1000:>10.2f}ms{ratio:>12}{target}")
    print(f"(Python {sys.version.split()[0]}; {args.runs} fresh interpreters each)")
    if regen is not None:
        print(f"{'regenerate everything (warm)':<28}{regen:>11.2f}s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"import_us": rows, "regenerate_s": regen}, indent=2) + "\n")
    if args.markdown_append:
        with args.markdown_append.open("a", encoding="utf-8") as f:
            f.write(markdown(rows, regen, args.runs))
        refresh(args.markdown_append)  # the page's summary quotes the import times
    return 0


def markdown(rows: dict[str, float | None], regen: float | None, runs: int) -> str:
    """The section of docs/benchmarks.md: import times beside the anchors, the warm regeneration."""
    versions = f"Python {sys.version.split()[0]}"
    try:
        import numpy

        versions += f", numpy {numpy.__version__}"
    except ImportError:
        pass
    lines = [
        "",
        "## Start-up",
        "",
        f"Written by `benchmarks/startup.py` on {time.strftime('%Y-%m-%d')} ({versions}): the median over {runs} fresh "
        "interpreters of what `-X importtime` attributes to the top-level import; `import dlbind` imports no array "
        "library and no device backend, and loads its own runtime on first use (the first call's time, in the "
        "process, after `import numpy, dlbind`).",
        "",
        "| what | median | vs `import dlbind` | target |",
        "|---|---|---|---|",
    ]
    base = rows.get("dlbind")
    for name, us in rows.items():
        shown = {
            "dlbind after numpy": "`import dlbind` after `import numpy`",
            "first use after numpy": "first `dlbind.from_dlpack(ndarray)` (loads the runtime)",
        }.get(name, f"`import {name}`")
        target = f"<= {TARGET_AFTER_NUMPY_MS:g} ms" if name == "dlbind after numpy" else ""
        if us is None:
            lines.append(f"| {shown} | n/a | | {target} |")
        else:
            lines.append(f"| {shown} | {us / 1000:.1f} ms | {f'{us / base:.2f}x' if base else ''} | {target} |")
    if regen is not None:
        lines.append(f"| regenerate every generated file (warm, headers cached) | {regen:.2f} s | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
