"""Instructions per exchange (valgrind's callgrind), each dlbind path beside its anchor, and wall time beside it.

    nox -s bench          (or: python benchmarks/instructions.py [--json FILE] [--markdown-append FILE]
                           [--from-json FILE: render a saved run's rows, measuring nothing])

Wall time on a shared machine moves with whatever else runs; an instruction count does not. Each row runs
its statement in a fresh interpreter under ``valgrind --tool=callgrind`` twice, ``SHORT`` and ``LONG`` times
after the same set-up (the first exchange of a type makes its plans), and reports the difference per
exchange: the set-up, the start and the first exchanges cancel. The statement runs as timeit runs it, set-up
and loop inside one function (``--harness module`` runs it at module level instead, where the loop's own
dict stores and name lookups are counted in every row too). With the settings of :data:`QUIET` the count
is the same from run to run. The targets of issue 27 are judged by these
counts. Wall time is reported beside them as the median ratio of ``ROUNDS`` interleaved runs (row, anchor,
row, anchor, ...), each the best of a few batches. Nothing here passes or fails.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

SHORT, LONG = 1_000, 11_000
ROUNDS = 7

SETUP = """
import numpy as np, dlbind
a = np.ones(1, dtype=np.float32)
"""
TORCH_SETUP = """
import torch
t = torch.ones(1)
"""
# a producer of an older spec: its __dlpack__ takes no max_version (benchmarks/exchange.py's LegacyProducer)
LEGACY_SETUP = """
class LegacyProducer:
    __slots__ = ("a",)
    def __init__(self, a):
        self.a = a
    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()
    def __dlpack_device__(self):
        return self.a.__dlpack_device__()
legacy = LegacyProducer(a)
"""
ORT_SETUP = """
import onnxruntime
ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy(a)
"""
# What makes a count repeatable: one thread per BLAS/OpenMP pool (idle workers spin, and callgrind counts every
# thread), a fixed hash seed, no address-space randomisation (setarch -R), and no cyclic collection inside the
# counted loop (gc.disable() after the set-up: a collection's cost depends on what earlier code left behind).
QUIET = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}

# name -> (statement, the anchor's name or None, the target: the ratio it must not exceed, or "")
ROWS: dict[str, tuple[str, str | None, str]] = {
    "np.from_dlpack(ndarray)": ("np.from_dlpack(a)", None, ""),
    "np.from_dlpack(dlbind.asdlpack(ndarray))": (
        "np.from_dlpack(dlbind.asdlpack(a))", "np.from_dlpack(ndarray)", "<= 1.2x"),
    "dlbind.from_dlpack(ndarray)": ("dlbind.from_dlpack(a)", "np.from_dlpack(ndarray)", ""),
    "np.from_dlpack(torch.Tensor)": ("np.from_dlpack(t)", None, ""),
    "dlbind.from_dlpack(torch.Tensor)": ("dlbind.from_dlpack(t)", "np.from_dlpack(torch.Tensor)", "<= 0.15x"),
    "torch.from_numpy(ndarray)": ("torch.from_numpy(a)", None, ""),
    "dlbind.convert(ndarray, to='torch')": (
        "dlbind.convert(a, to='torch')", "torch.from_numpy(ndarray)", ""),
    "tensor.numpy()": ("t.numpy()", None, ""),
    "dlbind.convert(torch.Tensor, to='numpy')": ("dlbind.convert(t, to='numpy')", "tensor.numpy()", ""),
    # issue 40: the two rows of benchmarks/exchange.py that missed their targets with no word
    "np.from_dlpack(legacy producer)": ("np.from_dlpack(legacy)", None, ""),
    "dlbind.from_dlpack(legacy producer)": (
        "dlbind.from_dlpack(legacy)", "np.from_dlpack(legacy producer)", "<= 1.2x"),
    "np.from_dlpack(OrtValue)": ("np.from_dlpack(ortvalue)", None, ""),
    "dlbind.convert(OrtValue, to='numpy')": (
        "dlbind.convert(ortvalue, to='numpy')", "np.from_dlpack(OrtValue)", "<= 1.2x"),
    # issue 43: a dtype read, and made for a system, each cached per object
    "np.dtype(np.float32)": ("np.dtype(np.float32)", None, ""),
    "dlbind.dtype(np.float32)": ("dlbind.dtype(np.float32)", "np.dtype(np.float32)", "<= 1.5x"),
    "dlbind.dtype(torch.float32)": ("dlbind.dtype(torch.float32)", "np.dtype(np.float32)", "<= 1.5x"),
    "dlbind.dtype(torch.float32, to='numpy')": (
        "dlbind.dtype(torch.float32, to='numpy')", "np.dtype(np.float32)", "<= 1.5x"),
}  # fmt: skip


def _needs_torch(statement: str) -> bool:
    return "torch" in statement or re.search(r"\bt\b", statement) is not None


def _needs_onnxruntime(statement: str) -> bool:
    return "ortvalue" in statement


def _setup(statement: str) -> str:
    extra = (TORCH_SETUP if _needs_torch(statement) else "") + (LEGACY_SETUP if "legacy" in statement else "")
    return SETUP + extra + (ORT_SETUP if _needs_onnxruntime(statement) else "")


# Where the statement runs: "function" (the default), as timeit runs it: set-up and loop inside one function,
# so the loop's own work is a local store and the names are local reads; or "module", at module level, where
# every round also stores the loop variable into the globals dict and reads each name from it (about 700
# instructions a round, and more or fewer as the names happen to collide in that dict).
HARNESSES = ("function", "module")


def _program(statement: str, count: int, harness: str) -> str:
    body = (
        f"{_setup(statement)}\n{statement}\nimport gc\ngc.collect()\ngc.disable()\n"
        f"for _ in range({count}):\n    {statement}\n"
    )
    if harness == "module":
        return body
    inner = "".join(f"    {line}\n" if line.strip() else "\n" for line in body.splitlines())
    return f"def _rounds():\n{inner}\n_rounds()\n"


def instructions(statement: str, count: int, env: dict[str, str], harness: str = "function") -> int:
    """Instructions a fresh interpreter runs for the set-up, one warm-up and ``count`` runs of ``statement``."""
    code = _program(statement, count, harness)
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []
    proc = subprocess.run(
        [*fixed, "valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
        capture_output=True, text=True, env={**env, **QUIET}, check=False,
    )  # fmt: skip
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if proc.returncode != 0 or found is None:
        raise RuntimeError(f"callgrind failed on {statement!r}: {proc.stderr.strip()[-400:]}")
    return int(found.group(1))


def per_exchange(statement: str, env: dict[str, str], harness: str = "function") -> float:
    return (instructions(statement, LONG, env, harness) - instructions(statement, SHORT, env, harness)) / (LONG - SHORT)


def wall_ratio(row: str, anchor: str, number: int = 20_000) -> float:
    """The median over ``ROUNDS`` interleaved rounds of (row's best batch / anchor's best batch), in ns."""
    scope: dict[str, Any] = {}
    exec(_setup(ROWS[row][0] + ROWS[anchor][0]), scope)
    fns = {name: eval(f"lambda: {ROWS[name][0]}", scope) for name in (row, anchor)}
    ratios = []
    for _ in range(ROUNDS):
        best = {}
        for name, fn in fns.items():
            fn()
            batches = []
            for _ in range(3):
                start = time.perf_counter_ns()
                for _ in range(number):
                    fn()
                batches.append((time.perf_counter_ns() - start) / number)
            best[name] = min(batches)
        ratios.append(best[row] / best[anchor])
    return statistics.median(ratios)


def measure(build: str, harness: str = "function") -> list[dict[str, Any]]:
    env = {**os.environ, "DLBIND_PURE": "1" if build == "pure" else "0"}
    try:
        import torch  # noqa: F401

        has_torch = True
    except ImportError:
        has_torch = False
    try:
        import onnxruntime  # noqa: F401

        has_ort = True
    except ImportError:
        has_ort = False
    counts: dict[str, float] = {}
    out = []
    for name, (statement, anchor, target) in ROWS.items():
        if (_needs_torch(statement) and not has_torch) or (_needs_onnxruntime(statement) and not has_ort):
            print(f"{build:8} {name:45} skipped: its library is not installed", file=sys.stderr, flush=True)
            continue
        counts[name] = per_exchange(statement, env, harness)
        row: dict[str, Any] = {"build": build, "path": name, "instructions": counts[name], "anchor": anchor}
        row["harness"] = harness
        row["target"] = target
        if anchor is not None and anchor in counts:
            row["ratio"] = counts[name] / counts[anchor]
            row["wall_ratio"] = wall_ratio(name, anchor) if build == _loaded_build() else None
        out.append(row)
        print(f"{build:8} {name:45} {counts[name]:9,.0f}", file=sys.stderr, flush=True)
    return out


def _loaded_build() -> str:
    import dlbind

    return dlbind.ffi_build()


def table(rows: list[dict[str, Any]]) -> str:
    from common import markdown_table  # beside this script (tests load it without its folder on sys.path)

    header = "| build | path | instructions/exchange | anchor | ratio (instructions) | ratio (wall, median) | target |"
    return markdown_table(header, rows, _line)


def _line(r: dict[str, Any]) -> str:
    ratio = f"{r['ratio']:.2f}x" if r.get("ratio") is not None else ""
    wall = f"{r['wall_ratio']:.2f}x" if r.get("wall_ratio") is not None else ""
    met = ""
    if r["target"] and r.get("ratio") is not None:
        met = " (met)" if r["ratio"] <= float(r["target"].strip("<= x")) else " (not met)"
    anchor = f"`{r['anchor']}`" if r["anchor"] else ""
    return (
        f"| {r['build']} | `{r['path']}` | {r['instructions']:,.0f} | {anchor} | {ratio} | {wall} "
        f"| {r['target']}{met} |"
    )


def main() -> int:
    from common import arguments, write_json  # beside this script (tests load it without its folder on sys.path)

    parser = arguments(__doc__, "append a section with the table to this page")
    parser.add_argument("--builds", default="compiled", help="comma-separated: compiled, pure (default compiled)")
    parser.add_argument("--from-json", help="render the rows a run wrote with --json, measuring nothing")
    parser.add_argument(
        "--harness",
        choices=HARNESSES,
        default="function",
        help="where the statement runs: in a function, as timeit runs it (default), or at module level",
    )
    args = parser.parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            run = json.load(f)
        if isinstance(run, list):  # a run written before the day and the versions were kept with the rows
            run = {"date": "", "versions": "", "rows": run}
    elif shutil.which("valgrind") is None:
        print("valgrind is not installed (apt-get install valgrind): no instruction counts", file=sys.stderr)
        return 0
    else:
        rows = [r for build in args.builds.split(",") for r in measure(build, args.harness)]
        run = {"date": time.strftime("%Y-%m-%d"), "versions": versions(), "rows": rows}
    print(table(run["rows"]))
    if args.json:
        write_json(args.json, run)
    if args.markdown_append:
        from summary import refresh

        with open(args.markdown_append, "a") as f:
            f.write(section(run["rows"], run["date"], run["versions"]))
        refresh(args.markdown_append)  # the page's summary quotes these counts
    return 0


def versions() -> str:
    from common import installed

    return f"Python {platform.python_version()}, " + installed(("numpy", "torch"))


def section(rows: list[dict[str, Any]], day: str, found: str) -> str:
    """The section of docs/benchmarks.md: how the counts were made (on ``day``, with ``found``, the versions),
    the table, and where the history of the counts is told."""
    when = "".join(f", {x}" for x in (day, found) if x)
    return (
        "\n## Instructions per exchange\n\n"
        f"Counted by valgrind's callgrind (`benchmarks/instructions.py`{when}): the difference between {LONG:,} "
        f"and {SHORT:,} runs of each statement in a fresh interpreter, per run, so that start-up and "
        "the first exchanges (which make the plans) cancel; set-up and loop run inside one function, as "
        "timeit runs a statement. Unlike wall time, the count is the same "
        "whatever else the machine does; the targets are judged by it. The wall ratio beside it "
        f"is the median of {ROUNDS} interleaved rounds (each the best of three batches). Rows through torch move "
        "by about ±100 instructions from run to run (torch hands the GIL over inside its own calls, and callgrind "
        "counts the switches).\n\n" + table(rows) + "\n\nHow these counts came down, change by change, and why "
        "the harness runs each statement inside a function:\n"
        "[Design: performance history](design.md#performance-history).\n"
    )


if __name__ == "__main__":
    sys.exit(main())
