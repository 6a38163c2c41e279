"""Draw the charts of a ``nox -s bench`` run: each exchange's ratio to its anchor, each copy's bandwidth.

``python benchmarks/chart.py --exchange .cache/bench/exchange.json --copies .cache/bench/copies.json
--png docs/benchmarks.png --markdown-append docs/benchmarks.md`` (``nox -s bench`` runs it last). The
chart shows what the run measured, nothing else: one bar per compiled-build row that has an anchor timed in
the same run (ratio of times; the row's target as a tick where it names one) and one per copy (numpy's time
over dlbind's, so higher is faster; the 0.8 target as a line). The page gets the image, dated, with the
versions line the run wrote at its top.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
from pathlib import Path
from typing import Any

_TARGET = re.compile(r"<=\s*([0-9.]+)x")


def exchange_bars(rows: list[dict[str, Any]]) -> list[tuple[str, float, float | None]]:
    """(label, ratio to the anchor, target ratio or None) of every compiled row with an anchor."""
    by_path = {(r["build"], r["path"]): r for r in rows}
    bars = []
    for r in rows:
        if r["build"] != "compiled" or not r.get("anchor"):
            continue
        anchor = by_path.get((r["build"], r["anchor"]))
        if anchor is None or not anchor["ns"]:
            continue
        target = _TARGET.search(r.get("target") or "")
        bars.append((r["path"], r["ns"] / anchor["ns"], float(target.group(1)) if target else None))
    return bars


def copy_bars(rows: list[dict[str, Any]]) -> list[tuple[str, float]]:
    """(label, numpy's time / dlbind's) of every compiled copy."""
    return [
        (f"{r['path']} ({r['layout']})", r["anchor_seconds"] / r["seconds"])
        for r in rows
        if r["build"] == "compiled" and r["seconds"]
    ]


def draw(exchange: list[tuple[str, float, float | None]], copies: list[tuple[str, float]], png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    height = 0.28 * (len(exchange) + len(copies)) + 2.5
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(12, height), gridspec_kw={"height_ratios": [max(len(exchange), 1), max(len(copies), 1)]}
    )
    labels = [b[0] for b in exchange]
    top.barh(range(len(exchange)), [b[1] for b in exchange], color="#4c72b0")
    for i, (_, _, target) in enumerate(exchange):
        if target is not None:
            top.plot([target, target], [i - 0.4, i + 0.4], color="#c44e52", linewidth=2)
    top.axvline(1.0, color="grey", linewidth=0.8)
    top.set_xscale("log")  # pydlpack's ~100x beside dlbind's ratios near 1
    top.set_yticks(range(len(exchange)), labels, fontsize=7)
    top.invert_yaxis()
    top.set_xlabel("time / anchor's time in the same run, log scale (lower is faster; red: the target)")
    top.set_title("Exchanges, compiled build")
    bottom.barh(range(len(copies)), [c[1] for c in copies], color="#55a868")
    bottom.axvline(0.8, color="#c44e52", linewidth=1.5)
    bottom.axvline(1.0, color="grey", linewidth=0.8)
    bottom.set_yticks(range(len(copies)), [c[0] for c in copies], fontsize=7)
    bottom.invert_yaxis()
    bottom.set_xlabel("numpy's time / dlbind's (higher is faster; red: the 0.8 target)")
    bottom.set_title("Copies of 256 MiB, compiled build")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchange", type=Path, required=True)
    parser.add_argument("--copies", type=Path, required=True)
    parser.add_argument("--png", type=Path, required=True)
    parser.add_argument("--markdown-append", type=Path, help="append the image, dated, to this page")
    args = parser.parse_args(argv)
    exchange = exchange_bars(json.loads(args.exchange.read_text(encoding="utf-8")))
    copies = copy_bars(json.loads(args.copies.read_text(encoding="utf-8")))
    if not exchange or not copies:
        raise SystemExit(f"nothing to draw: {len(exchange)} exchange rows, {len(copies)} copies")
    draw(exchange, copies, args.png)
    print(f"wrote {args.png}: {len(exchange)} exchanges, {len(copies)} copies")
    if args.markdown_append:
        page = args.markdown_append
        day = datetime.date.today().isoformat()
        rel = Path(os.path.relpath(args.png, page.parent))
        with page.open("a", encoding="utf-8") as f:
            f.write(
                f"\n## Charts\n\nDrawn by `benchmarks/chart.py` from the rows above (this run, {day}; the versions "
                f"are under *How these were measured*).\n\n![Exchange ratios and copy bandwidth]({rel.as_posix()})\n"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
