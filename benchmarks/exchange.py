"""ns per DLPack exchange, each dlbind path beside its anchor measured in the same run.

    nox -s bench          (or: python benchmarks/exchange.py [--json FILE] [--quick])

Every row is the fastest of several timed batches (after a warm-up), on a 1-element float32 array
and on a 1 GiB one (allocated, never touched: zero-copy paths must not care). The pure build is
measured in a child process with DLBIND_PURE=1. The table says how each row compares with the
target the project set; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

GIB = 1 << 30


def per_call_ns(fn: Callable[[], object], *, batches: int, number: int) -> float:
    for _ in range(number):
        fn()
    samples = []
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter_ns() - start) / number)
    return min(samples)  # the least disturbed batch (timeit's advice): noise only ever adds time


def rows(quick: bool) -> list[dict[str, Any]]:
    import dlbind

    batches, number = (3, 2000) if quick else (7, 20000)
    small = np.ones(1, dtype=np.float32)
    big = np.empty(GIB // 4, dtype=np.float32)
    blob = bytes(4)
    out: list[dict[str, Any]] = []
    deadline = time.perf_counter() + 1.0  # settle the CPU clock and the allocators before the first row
    while time.perf_counter() < deadline:
        np.from_dlpack(dlbind.asdlpack(small))

    def add(name: str, fn: Callable[[], object], anchor: str | None = None, target: str = "") -> None:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ns = per_call_ns(fn, batches=batches, number=number)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        out.append({"path": name, "ns": ns, "anchor": anchor, "target": target, "rss_growth_kib": rss})

    add("np.from_dlpack(ndarray)", lambda: np.from_dlpack(small))
    add(
        "np.from_dlpack(dlbind.asdlpack(ndarray))",
        lambda: np.from_dlpack(dlbind.asdlpack(small)),
        "np.from_dlpack(ndarray)",
        "<= 1.5x",
    )
    add(
        "np.from_dlpack(dlbind.asdlpack(bytes))",
        lambda: np.from_dlpack(dlbind.asdlpack(blob)),
        "np.from_dlpack(ndarray)",
        "<= 2.0x",
    )
    add("dlbind.from_dlpack(ndarray)", lambda: dlbind.from_dlpack(small), "np.from_dlpack(ndarray)", "<= 1.5x")
    add(
        "np.from_dlpack(dlbind.asdlpack(1 GiB ndarray))",
        lambda: np.from_dlpack(dlbind.asdlpack(big)),
        "np.from_dlpack(dlbind.asdlpack(ndarray))",
        "<= 1.1x",
    )
    add("dlbind.from_dlpack(1 GiB ndarray)", lambda: dlbind.from_dlpack(big), "dlbind.from_dlpack(ndarray)", "<= 1.1x")
    try:
        import dlpack as pydlpack  # pydlpack 0.2.1 installs the import name `dlpack`

        add(
            "pydlpack: np.from_dlpack(asdlpack(ndarray))",
            lambda: np.from_dlpack(pydlpack.asdlpack(small)),
            "np.from_dlpack(dlbind.asdlpack(ndarray))",
            "dlbind >= 50x faster",
        )
    except ImportError:
        pass
    try:
        import ctypes_dlpack

        add(
            "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))",
            lambda: np.from_dlpack(ctypes_dlpack.DLPackArray(ctypes_dlpack.array_as_dlpack(small))),
        )
    except ImportError:
        pass
    try:
        import torch

        tt = torch.ones(1)
        add("np.from_dlpack(torch.Tensor)", lambda: np.from_dlpack(tt))
        add(
            "dlbind.from_dlpack(torch.Tensor)",
            lambda: dlbind.from_dlpack(tt),
            "np.from_dlpack(torch.Tensor)",
            "<= 0.3x",
        )
        add("torch.from_dlpack(ndarray)", lambda: torch.from_dlpack(small))
        add("torch.from_numpy(ndarray)", lambda: torch.from_numpy(small))
        add("tensor.numpy()", lambda: tt.numpy())
        add(
            "dlbind.convert(ndarray, to='torch')",
            lambda: dlbind.convert(small, to="torch"),
            "torch.from_numpy(ndarray)",
            "<= 1.2x",
        )
        add(
            "dlbind.convert(torch.Tensor, to='numpy')",
            lambda: dlbind.convert(tt, to="numpy"),
            "tensor.numpy()",
            "<= 1.2x",
        )
        add(
            "torch.from_dlpack(dlbind.asdlpack(ndarray))",
            lambda: torch.from_dlpack(dlbind.asdlpack(small)),
            "torch.from_dlpack(ndarray)",
        )
        add("torch.Tensor.__dlpack__()", lambda: tt.__dlpack__())
        add(
            "dlbind.from_dlpack(torch.Tensor) (export checks)",
            lambda: dlbind.from_dlpack(tt),
            "torch.Tensor.__dlpack__()",
            "<= 1.5x",
        )
        add(
            "dlbind.asdlpack(torch.Tensor).__dlpack__()",
            lambda: dlbind.asdlpack(tt).__dlpack__(),
            "torch.Tensor.__dlpack__()",
            "<= 1.5x",
        )
    except ImportError:
        pass
    try:
        import tvm_ffi

        add("tvm_ffi.from_dlpack(ndarray)", lambda: tvm_ffi.from_dlpack(small))
        add(
            "tvm_ffi.from_dlpack(dlbind.asdlpack(ndarray))",
            lambda: tvm_ffi.from_dlpack(dlbind.asdlpack(small)),
            "tvm_ffi.from_dlpack(ndarray)",
        )
    except ImportError:
        pass
    for row in out:
        row["build"] = dlbind.ffi_build()
    return out  # fmt: skip


PURE_TARGETS = {
    "np.from_dlpack(dlbind.asdlpack(ndarray))": "<= 0.4x",  # against ctypes-dlpack, measured in the same process
    "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))": "",
}


def pure_rows(quick: bool) -> list[dict[str, Any]]:
    env = {**os.environ, "DLBIND_PURE": "1"}
    args = [sys.executable, __file__, "--child"] + (["--quick"] if quick else [])
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    keep = ("np.from_dlpack(ndarray)", "dlbind.from_dlpack(ndarray)", *PURE_TARGETS)
    found = [r for r in json.loads(proc.stdout) if r["path"] in keep]
    ctypes_row = "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))"
    for r in found:
        r["target"] = PURE_TARGETS.get(r["path"], "")
        if r["path"] == "np.from_dlpack(dlbind.asdlpack(ndarray))":
            r["anchor"] = ctypes_row
        elif r["path"] == ctypes_row:
            r["anchor"] = None
    return found


def table(all_rows: list[dict[str, Any]]) -> str:
    by_key = {(r["build"], r["path"]): r for r in all_rows}
    lines = [
        "| build | path | ns/exchange | anchor (same run) | ratio | target | RSS growth |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in all_rows:
        anchor = by_key.get((r["build"], r["anchor"])) if r["anchor"] else None
        ratio = f"{r['ns'] / anchor['ns']:.2f}x" if anchor else ""
        if anchor and "faster" in r["target"]:
            ratio = f"{anchor['ns'] and r['ns'] / anchor['ns']:.1f}x slower than dlbind"
        lines.append(
            f"| {r['build']} | `{r['path']}` | {r['ns']:,.0f} | {('`' + r['anchor'] + '`') if r['anchor'] else ''} "
            f"| {ratio} | {r['target']} | {r['rss_growth_kib']} KiB |"
        )
    return "\n".join(lines)


def versions() -> str:
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in ("dlbind", "numpy", "torch", "apache-tvm-ffi", "pydlpack", "ctypes-dlpack", "cffi"):
        with contextlib.suppress(PackageNotFoundError):
            found.append(f"{dist} {version(dist)}")
    return f"Python {platform.python_version()}, {os.cpu_count()} cores ({platform.machine()}); " + ", ".join(found)


def page(markdown_table: str) -> str:
    return (
        "# Benchmarks\n\n"
        "Written by `nox -s bench` (`benchmarks/exchange.py --markdown docs/benchmarks.md`) on "
        f"{time.strftime('%Y-%m-%d')}: {versions()}.\n\n"
        "ns per exchange, fastest of several timed batches; each ratio is against the anchor measured in the same run. "
        "The 1 GiB rows use an array that is allocated but never touched: a zero-copy path costs the same "
        "as on one element, and the process's peak RSS does not grow.\n\n" + markdown_table + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--markdown", help="also write a docs page with the table, the date and the versions")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter batches")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        json.dump(rows(args.quick), sys.stdout)
        return 0
    all_rows = rows(args.quick) + pure_rows(args.quick)
    print(table(all_rows))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(page(table(all_rows)))
    if args.json:
        os.makedirs(os.path.dirname(args.json) or ".", exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(all_rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
