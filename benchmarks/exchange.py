"""ns per DLPack exchange, each dlbind path beside its anchor measured in the same run.

    nox -s bench          (or: python benchmarks/exchange.py [--json FILE] [--quick])

Every row is the fastest of several timed batches (after a warm-up), on a 1-element float32 array
and on a 1 GiB one (allocated, never touched: zero-copy paths must not care). The pure build is
measured in a child process with DLBIND_PURE=1. The table says how each row compares with the
target the project set; nothing here passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from common import fastest, installed, markdown_table, write_json
from summary import summarized

GIB = 1 << 30
Statements = tuple[Callable[[], object], Callable[[], object]]  # an anchor's, and dlbind's timed beside it
SKIPPED: list[str] = []  # rows not measured here, with the reason


def skip(library: str, exc: ImportError) -> None:
    """A library is not installed: its rows are skipped, and the page says why."""
    reason = f"{library} rows skipped: {exc}"
    if reason not in SKIPPED:  # once, whatever the rounds
        SKIPPED.append(reason)
        print(reason, file=sys.stderr, flush=True)


class LegacyProducer:
    """A producer of an older spec: its ``__dlpack__`` takes no ``max_version`` (legacy capsules only)."""

    __slots__ = ("a",)

    def __init__(self, a: Any) -> None:
        self.a = a

    def __dlpack__(self, stream: Any = None) -> Any:
        return self.a.__dlpack__()

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


class CountedLegacyProducer(LegacyProducer):
    """:class:`LegacyProducer` counting its ``__dlpack__`` calls, the refused ones (TypeError) included."""

    __slots__ = ("calls",)

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.calls += 1
        unexpected = [k for k in kwargs if k != "stream"]
        if unexpected or len(args) > 1:
            name = f"{type(self).__name__}.__dlpack__()"
            raise TypeError(f"{name} got an unexpected keyword argument {unexpected[0]!r}" if unexpected else name)
        return self.a.__dlpack__()


def calls_per_import(importer: Callable[[Any], object]) -> float:
    """``__dlpack__`` calls (refused ones included) per import of a legacy producer, after the first
    import from its type."""
    producer = CountedLegacyProducer(np.ones(1, dtype=np.float32))
    producer.calls = 0
    importer(producer)
    producer.calls = 0
    for _ in range(100):
        importer(producer)
    return producer.calls / 100


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
    deadline = time.perf_counter() + 1.0  # settle the CPU clock and the allocators before the first row
    while time.perf_counter() < deadline:
        np.from_dlpack(dlbind.asdlpack(small))
    table = _Rows(batches, number)
    _numpy_rows(table.add, small)
    _anchor_rows(table.add, small)
    _torch_rows(table.add, small)
    _other_rows(table, small)
    for row in table.out:
        row["build"] = dlbind.ffi_build()
    return table.out


class _Rows:
    """The rows measured: each statement's time per call and the growth of the process's peak memory."""

    def __init__(self, batches: int, number: int) -> None:
        self.batches, self.number = batches, number
        self.out: list[dict[str, Any]] = []

    def add(self, name: str, fn: Callable[[], object], anchor: str | None = None, target: str = "") -> None:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        ns = per_call_ns(fn, batches=self.batches, number=self.number)
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        self.out.append({"path": name, "ns": ns, "anchor": anchor, "target": target, "rss_growth_kib": rss})


def _numpy_rows(add: Callable[..., None], small: Any) -> None:
    import dlbind

    big = np.empty(GIB // 4, dtype=np.float32)
    blob = bytes(4)
    own, asked = "np.from_dlpack(ndarray)", "np.from_dlpack(dlbind.asdlpack(ndarray))"
    # path, statement, anchor (the row it is a ratio of), target
    rows: list[tuple[str, Callable[[], object], str | None, str]] = [
        (own, lambda: np.from_dlpack(small), None, ""),
        (asked, lambda: np.from_dlpack(dlbind.asdlpack(small)), own, "<= 1.5x"),
        ("np.from_dlpack(dlbind.asdlpack(bytes))", lambda: np.from_dlpack(dlbind.asdlpack(blob)), own, "<= 2.0x"),
        ("dlbind.from_dlpack(ndarray)", lambda: dlbind.from_dlpack(small), own, "<= 1.5x"),
        ("np.from_dlpack(dlbind.asdlpack(1 GiB ndarray))", lambda: np.from_dlpack(dlbind.asdlpack(big)), asked,
         "<= 1.1x"),
        ("dlbind.from_dlpack(1 GiB ndarray)", lambda: dlbind.from_dlpack(big), "dlbind.from_dlpack(ndarray)",
         "<= 1.1x"),
    ]  # fmt: skip
    for row in rows:
        add(*row)


def _anchor_rows(add: Callable[..., None], small: Any) -> None:
    """The other Python bindings of DLPack, beside dlbind's asdlpack."""
    try:
        import dlpack as pydlpack  # pydlpack 0.2.1 installs the import name `dlpack`

        add(
            "pydlpack: np.from_dlpack(asdlpack(ndarray))",
            lambda: np.from_dlpack(pydlpack.asdlpack(small)),
            "np.from_dlpack(dlbind.asdlpack(ndarray))",
            "dlbind >= 50x faster",
        )
    except ImportError as exc:
        skip("pydlpack", exc)
    try:
        import ctypes_dlpack

        add(
            "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))",
            lambda: np.from_dlpack(ctypes_dlpack.DLPackArray(ctypes_dlpack.array_as_dlpack(small))),
        )
    except ImportError as exc:
        skip("ctypes-dlpack", exc)


def _torch_rows(add: Callable[..., None], small: Any) -> None:
    import dlbind

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
    except ImportError as exc:
        skip("torch", exc)


def _other_rows(table: _Rows, small: Any) -> None:
    """tvm-ffi, a legacy producer, ONNX Runtime and TensorFlow (last: importing it starts threads of its own)."""
    import dlbind

    add, out = table.add, table.out
    try:
        import tvm_ffi

        add("tvm_ffi.from_dlpack(ndarray)", lambda: tvm_ffi.from_dlpack(small))
        add(
            "tvm_ffi.from_dlpack(dlbind.asdlpack(ndarray))",
            lambda: tvm_ffi.from_dlpack(dlbind.asdlpack(small)),
            "tvm_ffi.from_dlpack(ndarray)",
        )
    except ImportError as exc:
        skip("tvm_ffi", exc)
    # issue 13: a producer of an older spec, and the systems whose producers are legacy-only
    legacy = LegacyProducer(small)
    add("np.from_dlpack(legacy producer)", lambda: np.from_dlpack(legacy))
    add(
        "dlbind.from_dlpack(legacy producer)",
        lambda: dlbind.from_dlpack(legacy),
        "np.from_dlpack(legacy producer)",
        "<= 1.2x",
    )
    out[-2]["dlpack_calls"] = calls_per_import(np.from_dlpack)
    out[-1]["dlpack_calls"] = calls_per_import(dlbind.from_dlpack)
    for library, (anchor, path, statements) in LEGACY_ONLY.items():  # tensorflow last: it starts threads of its own
        try:
            theirs, ours = statements(small)
            add(anchor, theirs)
            add(path, ours, anchor, "<= 1.2x")
        except ImportError as exc:
            skip(library, exc)


def _onnxruntime(small: Any) -> Statements:
    import onnxruntime

    import dlbind

    ortvalue = onnxruntime.OrtValue.ortvalue_from_numpy(small)
    return lambda: np.from_dlpack(ortvalue), lambda: dlbind.convert(ortvalue, to="numpy")


def _tensorflow(small: Any) -> Statements:
    import torch

    import dlbind

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    tf_tensor = tf.constant(small)
    return lambda: torch.from_dlpack(tf_tensor), lambda: dlbind.convert(tf_tensor, to="torch")


# issue 13's systems whose producers are legacy-only: library -> (the anchor, dlbind's conversion timed beside it,
# the statements of both on the library's array made from a 1-element ndarray)
LEGACY_ONLY: dict[str, tuple[str, str, Callable[[Any], Statements]]] = {
    "onnxruntime": ("np.from_dlpack(OrtValue)", "dlbind.convert(OrtValue, to='numpy')", _onnxruntime),
    "tensorflow": ("torch.from_dlpack(tf.Tensor)", "dlbind.convert(tf.Tensor, to='torch')", _tensorflow),
}


def rounds(quick: bool, count: int = 2) -> list[dict[str, Any]]:
    """:func:`rows` ``count`` times, each row's fastest kept (:func:`common.fastest`)."""
    return fastest(lambda: rows(quick), count)


# issue 13's rows and their anchors, reported in both builds (the targets are the compiled build's)
ISSUE_13 = (
    "np.from_dlpack(legacy producer)",
    "dlbind.from_dlpack(legacy producer)",
    "np.from_dlpack(OrtValue)",
    "dlbind.convert(OrtValue, to='numpy')",
    "torch.from_dlpack(tf.Tensor)",
    "dlbind.convert(tf.Tensor, to='torch')",
    "torch.Tensor.__dlpack__()",
    "dlbind.asdlpack(torch.Tensor).__dlpack__()",
)
PURE_TARGETS = {
    "np.from_dlpack(dlbind.asdlpack(ndarray))": "<= 0.4x",  # against ctypes-dlpack, measured in the same process
    "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))": "",
}


def pure_rows(quick: bool) -> list[dict[str, Any]]:
    env = {**os.environ, "DLBIND_PURE": "1"}
    args = [sys.executable, __file__, "--child"] + (["--quick"] if quick else [])
    proc = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
    keep = ("np.from_dlpack(ndarray)", "dlbind.from_dlpack(ndarray)", *PURE_TARGETS, *ISSUE_13)
    found = [r for r in json.loads(proc.stdout) if r["path"] in keep]
    ctypes_row = "ctypes-dlpack: np.from_dlpack(DLPackArray(array_as_dlpack(ndarray)))"
    for r in found:
        if r["path"] not in ISSUE_13:
            r["target"] = PURE_TARGETS.get(r["path"], "")
        elif r["target"]:  # the issue set these for the compiled build: shown for comparison, not the pure one's
            r["target"] = f"compiled: {r['target']}"
        if r["path"] == "np.from_dlpack(dlbind.asdlpack(ndarray))":
            r["anchor"] = ctypes_row
        elif r["path"] == ctypes_row:
            r["anchor"] = None
    return found


def table(all_rows: list[dict[str, Any]]) -> str:
    by_key = {(r["build"], r["path"]): r for r in all_rows}

    def line(r: dict[str, Any]) -> str:
        anchor = by_key.get((r["build"], r["anchor"])) if r["anchor"] else None
        ratio = f"{r['ns'] / anchor['ns']:.2f}x" if anchor else ""
        if anchor and "faster" in r["target"]:
            ratio = f"{anchor['ns'] and r['ns'] / anchor['ns']:.1f}x slower than dlbind"
        return (
            f"| {r['build']} | `{r['path']}` | {r['ns']:,.0f} | {('`' + r['anchor'] + '`') if r['anchor'] else ''} "
            f"| {ratio} | {r['target']} | {r['rss_growth_kib']} KiB |"
        )

    return markdown_table(
        "| build | path | ns/exchange | anchor (same run) | ratio | target | RSS growth |", all_rows, line
    )


def versions() -> str:
    import platform

    dists = ("dlbind", "numpy", "torch", "apache-tvm-ffi", "pydlpack", "ctypes-dlpack", "tensorflow-cpu", "onnxruntime")
    found = installed((*dists, "ml_dtypes", "cffi"))
    return f"Python {platform.python_version()}, {os.cpu_count()} cores ({platform.machine()}); " + found


def notes(all_rows: list[dict[str, Any]]) -> str:
    """What the table cannot show: the calls per legacy import, the rows skipped here."""
    found = [
        f"{r['build']} `{r['path']}`: {r['dlpack_calls']:g}" for r in all_rows if r.get("dlpack_calls") is not None
    ]
    text = ""
    if found:
        text += (
            "`__dlpack__` calls per import of a legacy producer (its `__dlpack__(self, stream=None)` takes no "
            "`max_version`), refused calls included, after the first import from its type: "
            + "; ".join(found)
            + ".\n\n"
        )
    for reason in SKIPPED:
        text += f"Skipped here: {reason}.\n\n"
    return text


def page(markdown_table: str, all_rows: list[dict[str, Any]]) -> str:
    """The page: the summary of the tables (:mod:`summary`, once the other scripts append theirs, all of them),
    how they were measured, and the exchanges."""
    return summarized(
        "# Benchmarks\n\n## How these were measured\n\n"
        "Written by `nox -s bench` (`benchmarks/exchange.py --markdown docs/benchmarks.md`, then "
        "`benchmarks/copies.py`, `benchmarks/chart.py`, `benchmarks/startup.py` and `benchmarks/instructions.py`, "
        "each with `--markdown-append docs/benchmarks.md`) on "
        f"{time.strftime('%Y-%m-%d')}: {versions()}.\n\n"
        "## Exchanges\n\n"
        "ns per exchange, fastest of several timed batches in two rounds; each ratio is against the "
        "anchor measured in the same run. The 1 GiB rows use an array that is allocated but never "
        "touched: a zero-copy path costs the same as on one element, and the process's peak RSS does "
        "not grow. Both builds are measured: the pure one in a child process with `DLBIND_PURE=1`. "
        "The targets are the compiled build's; the pure build (cffi's ABI mode, Python deleters: the tens of "
        "microseconds an exchange that *In short* gives) has one of its own, "
        "`np.from_dlpack(dlbind.asdlpack(ndarray))` against ctypes-dlpack, and shows the others as "
        "`compiled: ...` for comparison. "
        "`dlbind.convert(tf.Tensor, to='torch')` copies (one element here): TensorFlow's tensors are "
        "immutable and torch imports read-only data writable, so a zero-copy import, as "
        "`torch.from_dlpack(tf.Tensor)` makes, would be a writable alias.\n\n" + notes(all_rows) + markdown_table + "\n"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the rows here")
    parser.add_argument("--markdown", help="also write a docs page with the table, the date and the versions")
    parser.add_argument("--quick", action="store_true", help="fewer, shorter batches")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        json.dump(rounds(args.quick), sys.stdout)
        return 0
    all_rows = rounds(args.quick) + pure_rows(args.quick)
    print(table(all_rows))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(page(table(all_rows), all_rows))
    if args.json:
        write_json(args.json, all_rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
