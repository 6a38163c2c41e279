"""Bandwidth and peak memory of every copy dlbind makes, beside numpy's own copy of the same data.

    nox -s bench          (or: python benchmarks/copies.py [--json FILE] [--markdown-append FILE] [--quick])

256 MiB as a contiguous, a transposed and a reversed view, through every copy dlbind makes (``PATHS``:
copy=True, a host copy for dl_device, the bridges for strides, read-only data and bf16). Each row runs in a
fresh process (both builds; the pure one with DLBIND_PURE=1) so that ``ru_maxrss`` shows the peak of
that copy alone: "peak / size" 1.0 means one copy and nothing more. The anchor is numpy in the same
process: ``x.copy()`` for compact data, ``np.ascontiguousarray(x)`` for strided. The ratio is bandwidth
(anchor time / dlbind time: above 1 is faster than numpy). Nothing here passes or fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

from common import arguments, markdown_table, write_json
from summary import refresh

MIB = 1 << 20
LAYOUTS = ("contiguous", "transposed", "reversed")
# Every copy dlbind makes (issue 13): name -> (source, layouts where dlbind copies, modules needed, the call).
# Sources: "float64", "read-only" (float64, not writable), "bfloat16" (ml_dtypes'). In the call, ``x`` is
# the numpy source, ``t`` its dlbind.Tensor and ``pinned`` the same memory described as kDLCUDAHost.
PATHS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...], str]] = {
    # copy=True
    "Tensor.copy()": ("float64", LAYOUTS, (), "lambda: t.copy()"),
    "__dlpack__(copy=True)": ("float64", LAYOUTS, (), "lambda: np.from_dlpack(dlbind.asdlpack(x), copy=True)"),
    # a host copy for dl_device: host memory described as kDLCUDAHost (what cudaHostAlloc gives; no GPU
    # is needed to copy it), asked for on the CPU with a copy
    "__dlpack__(dl_device=cpu, copy=True) of kDLCUDAHost memory": (
        "float64", LAYOUTS, (), "lambda: np.from_dlpack(pinned, device='cpu', copy=True)"
    ),
    # bridges for strides the target cannot view: torch aborts on negative strides, onnxruntime imports
    # compact data only
    "strides: convert(x, to='torch')": ("float64", ("reversed",), ("torch",), "lambda: dlbind.convert(x, to='torch')"),
    "strides: convert(x, to='onnxruntime')": (
        "float64", ("transposed", "reversed"), ("onnxruntime",), "lambda: dlbind.convert(x, to='onnxruntime')"
    ),
    # a read-only source: torch imports read-only data writable
    "read-only: convert(x, to='torch')": ("read-only", LAYOUTS, ("torch",), "lambda: dlbind.convert(x, to='torch')"),
    # bf16 through ml_dtypes: numpy's __dlpack__ refuses it, dlbind exports the buffer and copies
    "bf16: convert(x, to='torch', copy=True)": (
        "bfloat16", LAYOUTS, ("torch", "ml_dtypes"), "lambda: dlbind.convert(x, to='torch', copy=True)"
    ),
    "bf16 strides: convert(x, to='torch')": (
        "bfloat16", ("reversed",), ("torch", "ml_dtypes"), "lambda: dlbind.convert(x, to='torch')"
    ),
}  # fmt: skip
TARGET = ">= 0.8x"
PEAK_TARGET = "1 copy"

CHILD = r"""
import json, resource, sys, time
import numpy as np
import dlbind
nbytes, source, layout, call, repeats = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
for name in sys.argv[6:]:
    __import__(name)
def make(nbytes):
    # no temporary larger than the source: ru_maxrss is a high-water mark, and a copy must raise it
    if source == "bfloat16":
        import ml_dtypes
        bits = np.empty(nbytes // 2, dtype=np.uint16)
        bits.reshape(-1, 1 << 10)[:] = np.arange(1 << 10, dtype=np.uint16) + 0x3F80  # 1.0 onwards
        base = bits.view(ml_dtypes.bfloat16)
    else:
        base = np.arange(nbytes // 8, dtype=np.float64)
    if source == "read-only":
        base.flags.writeable = False
    rows = 8 if base.size < (1 << 16) else 1024
    return {"transposed": base.reshape(-1, rows).T, "reversed": base[::-1]}.get(layout, base)
def views(x):
    if "pinned" not in call:
        return dlbind.from_dlpack(dlbind.asdlpack(x)), None
    pinned = dlbind.from_pointer(
        x.__array_interface__["data"][0], x.shape, x.dtype, strides=[s // x.itemsize for s in x.strides],
        device=(dlbind.DeviceType.kDLCUDAHost, 0), readonly=not x.flags.writeable, owner=x,
    )
    return dlbind.from_dlpack(dlbind.asdlpack(x)), pinned
x = make(1 << 12)  # warm every route on a small array first: imports and first-call costs are not the copy's
t, pinned = views(x)
eval(call)()
x = make(nbytes)
t, pinned = views(x)
anchor = (lambda: x.copy()) if x.flags.c_contiguous else (lambda: np.ascontiguousarray(x))
fn = eval(call)
def timed(f):
    start = time.perf_counter()
    r = f()
    elapsed = time.perf_counter() - start
    del r
    return elapsed
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
first = timed(fn)  # dlbind's copy alone raises the peak: numpy's has not run yet
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
# then dlbind's and numpy's copies in turn, so that both meet the same disturbances; the fastest of each
ours, theirs = [first], []
for _ in range(repeats):
    theirs.append(timed(anchor))
    ours.append(timed(fn))
ours, theirs = min(ours), min(theirs)
json.dump({"seconds": ours, "anchor_seconds": theirs, "peak_growth": peak, "build": dlbind.ffi_build()}, sys.stdout)
"""


def missing(modules: tuple[str, ...]) -> str | None:
    """Why a row cannot run here (a module it needs is not installed), or None."""
    import importlib.util

    for name in modules:
        if importlib.util.find_spec(name) is None:
            return f"{name} is not installed"
    return None


def measure(layout: str, path: str, nbytes: int, repeats: int, pure: bool) -> dict[str, Any]:
    source, _, modules, call = PATHS[path]
    env = {**os.environ, "DLBIND_PURE": "1" if pure else "0"}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(nbytes), source, layout, call, str(repeats), *modules],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    build = "pure" if pure else "compiled"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return {"layout": layout, "path": path, "build": build, "error": last}
    row = json.loads(proc.stdout)
    row.update(layout=layout, path=path, nbytes=nbytes)
    return row


def table(found: list[dict[str, Any]]) -> str:
    header = (
        "| build | copy | layout | dlbind ms | numpy ms (same process) | bandwidth ratio | target "
        "| peak / size | peak target |"
    )
    return markdown_table(header, found, _line)


def _line(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"| {r['build']} | `{r['path']}` | {r['layout']} | failed: {r['error']} | | | | | |"
    return (
        f"| {r['build']} | `{r['path']}` | {r['layout']} | {r['seconds'] * 1e3:.1f} | "
        f"{r['anchor_seconds'] * 1e3:.1f} | {r['anchor_seconds'] / r['seconds']:.2f}x | {TARGET} | "
        f"{r['peak_growth'] / r['nbytes']:.2f} | {PEAK_TARGET} |"
    )


def section(found: list[dict[str, Any]], nbytes: int, skipped: list[str], day: str = "") -> str:
    """The section of docs/benchmarks.md: how the copies were measured (on ``day``, else today), and the table."""
    notes = "".join(f"\n\nSkipped {s}." for s in skipped)
    return (
        f"\n## Copies\n\nWritten by `benchmarks/copies.py` on {day or time.strftime('%Y-%m-%d')}: "
        f"{nbytes // MIB} MiB per copy (float64, or ml_dtypes' bfloat16 for the bf16 rows), as a "
        "contiguous, a transposed (`reshape(-1, 1024).T`) and a reversed (`[::-1]`) view, each row "
        "in a fresh process. The rows are every copy dlbind makes: `copy=True`, a host copy for "
        "`dl_device` (the source is host memory described as kDLCUDAHost, as a GPU runtime's "
        "page-locked buffer is: the same copy, no GPU needed), the bridges for strides a target "
        "cannot view, for a read-only source and for bf16; a layout that needs no copy has no row. "
        "The bandwidth ratio is numpy's time over dlbind's for the same data (`x.copy()` when "
        "compact, `np.ascontiguousarray(x)` when strided: above 1 is faster than numpy); *peak / "
        "size* is the growth of the process's peak RSS (`ru_maxrss`) during the copy over the "
        "copy's size (1.00: one copy, nothing more). Times are the fastest of several copies, dlbind's and "
        "numpy's taken in turn." + notes + "\n\n" + table(found) + "\n"
    )


def main() -> int:
    parser = arguments(__doc__, "append a section with the table to this docs page")
    parser.add_argument("--quick", action="store_true", help="32 MiB, fewer repeats")
    args = parser.parse_args()
    nbytes, repeats = (32 * MIB, 2) if args.quick else (256 * MIB, 5)
    found = []
    skipped = []
    for pure in (False, True):
        for path, (_, layouts, modules, _) in PATHS.items():
            why = missing(modules)
            if why is not None:
                if not pure:
                    print(f"skipped `{path}`: {why}", flush=True)
                    skipped.append(f"`{path}`: {why}")
                continue
            for layout in layouts:
                row = measure(layout, path, nbytes, repeats, pure)
                found.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    if args.markdown_append:
        with open(args.markdown_append, "a") as f:
            f.write(section(found, nbytes, skipped))
        refresh(args.markdown_append)
    if args.json:
        write_json(args.json, found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
