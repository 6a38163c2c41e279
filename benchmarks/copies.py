"""Bandwidth and peak memory of every copy dlbind makes, beside numpy's own copy of the same data.

    nox -s bench          (or: python benchmarks/copies.py [--json FILE] [--markdown-append FILE] [--quick])

256 MiB of float64, as a contiguous, a read-only, a transposed and a reversed view. Each row runs in a
fresh process (both builds; the pure one with DLBIND_PURE=1) so that ``ru_maxrss`` shows the peak of
that copy alone: "peak / size" 1.0 means one copy and nothing more. The anchor is numpy in the same
process: ``x.copy()`` for compact data, ``np.ascontiguousarray(x)`` for strided. The ratio is bandwidth
(anchor time / dlbind time: above 1 is faster than numpy). Nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

MIB = 1 << 20
LAYOUTS = ("contiguous", "read-only", "transposed", "reversed")
PATHS = {
    "Tensor.copy()": "lambda: t.copy()",
    "__dlpack__(copy=True)": "lambda: np.from_dlpack(dlbind.asdlpack(x), copy=True)",
    # the bridges: torch imports read-only data writable and aborts on negative strides, so dlbind copies
    "convert(x, to='torch')": "lambda: dlbind.convert(x, to='torch')",
}
BRIDGED = {"convert(x, to='torch')": ("read-only", "reversed")}
TARGET = ">= 0.8x"

CHILD = r"""
import json, resource, sys, time
import numpy as np
import dlbind
n, layout, path, repeats = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
def make(count):
    base = np.arange(count, dtype=np.float64)
    if layout == "read-only":
        base.flags.writeable = False
    return {"transposed": lambda: base.reshape(-1, 8).T, "reversed": lambda: base[::-1]}.get(layout, lambda: base)()
if "torch" in PATH:
    import torch
x = make(64)  # warm every route on a small array first: imports and first-call costs are not the copy's
t = dlbind.from_dlpack(dlbind.asdlpack(x))
eval(PATH)()
x = make(n // 8)
if layout == "transposed":
    x = x.base.reshape(-1, 1024).T
t = dlbind.from_dlpack(dlbind.asdlpack(x))
anchor = (lambda: x.copy()) if x.flags.c_contiguous else (lambda: np.ascontiguousarray(x))
fn = eval(PATH)
def best(f):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        r = f()
        times.append(time.perf_counter() - start)
        del r
    return min(times)
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ours = best(fn)
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
theirs = best(anchor)
json.dump({"seconds": ours, "anchor_seconds": theirs, "peak_growth": peak, "build": dlbind.ffi_build()}, sys.stdout)
"""


def measure(layout: str, path: str, nbytes: int, repeats: int, pure: bool) -> dict[str, Any]:
    env = {**os.environ, "DLBIND_PURE": "1" if pure else "0"}
    code = CHILD.replace("PATH", repr(PATHS[path]))
    proc = subprocess.run(
        [sys.executable, "-c", code, str(nbytes), layout, path, str(repeats)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        return {"layout": layout, "path": path, "error": proc.stderr.strip().splitlines()[-1]}
    row = json.loads(proc.stdout)
    row.update(layout=layout, path=path, nbytes=nbytes)
    return row


def table(found: list[dict[str, Any]]) -> str:
    lines = [
        "| build | copy | layout | dlbind ms | numpy ms (same process) | bandwidth ratio | target | peak / size |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in found:
        if "error" in r:
            lines.append(f"| | `{r['path']}` | {r['layout']} | {r['error']} | | | | |")
            continue
        lines.append(
            f"| {r['build']} | `{r['path']}` | {r['layout']} | {r['seconds'] * 1e3:.1f} | "
            f"{r['anchor_seconds'] * 1e3:.1f} | {r['anchor_seconds'] / r['seconds']:.2f}x | {TARGET} | "
            f"{r['peak_growth'] / r['nbytes']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--markdown-append", help="append a section with the table to this docs page")
    parser.add_argument("--quick", action="store_true", help="32 MiB, fewer repeats")
    args = parser.parse_args()
    nbytes, repeats = (32 * MIB, 2) if args.quick else (256 * MIB, 4)
    found = []
    for pure in (False, True):
        for layout in LAYOUTS:
            for path in PATHS:
                if layout not in BRIDGED.get(path, LAYOUTS):
                    continue
                row = measure(layout, path, nbytes, repeats, pure)
                found.append(row)
                print(table([row]).splitlines()[-1], flush=True)
    text = table(found)
    if args.markdown_append:
        with open(args.markdown_append, "a") as f:
            f.write(
                f"\n## Copies\n\nWritten by `benchmarks/copies.py` on {time.strftime('%Y-%m-%d')}: "
                f"{nbytes // MIB} MiB of float64 per copy, each row in a fresh process; the bandwidth ratio is "
                "numpy's time over dlbind's for the same data (`x.copy()` when compact, "
                "`np.ascontiguousarray(x)` when strided); *peak / size* is the growth of the process's peak "
                "RSS during the copy over the copy's size (1.00: one copy, nothing more).\n\n" + text + "\n"
            )
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(found, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
