"""The top of docs/benchmarks.md: what dlbind costs in short, every figure read from the page's own tables.

    python benchmarks/summary.py docs/benchmarks.md     (each script that writes a section of the page runs it)

The page is written section by section (``benchmarks/exchange.py`` writes it, the other scripts append to it);
each script, once its section is written, renders the opening paragraph and "In short" again from the tables the
page holds by then (:func:`refresh`), so the figures there are the tables' own, rounded as the tables round
them. A bullet whose table is not on the page yet is left out, and so is a missed target that its table says
is met.
"""

from __future__ import annotations

import contextlib
import re
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

TITLE = "# Benchmarks\n\n"
MEASURED = "## How these were measured\n\n"  # the first section that a script writes; the summary stands above it
WIDTH = 107  # the summary's lines, as the docs editor wrapped them
# a number and its unit stay on one line
_UNIT = re.compile(r"(\d) (?=ns\b|µs\b|ms\b|MiB\b|GiB\b|GB/s|x86-64)")
_DAY = r"(\d{4}-\d{2}-\d{2})"

Rows = list[dict[str, str]]
# what a table or a row not on the page (yet) raises: the part of the summary that quotes it is left out
ABSENT = (KeyError, ValueError, StopIteration)
# the start-up table's rows of the summary: dlbind alone, after numpy, the first call
STARTUP = ("import dlbind", "import dlbind after import numpy", "first dlbind.from_dlpack(ndarray) (loads the runtime)")


class Page:
    """The sections of a benchmarks page (heading -> text; the last of a heading wins) and their tables."""

    def __init__(self, text: str) -> None:
        self.sections: dict[str, str] = {}
        for part in re.split(r"^## ", text, flags=re.M)[1:]:
            heading, _, body = part.partition("\n")
            self.sections[heading.strip()] = body

    def rows(self, section: str) -> Rows:
        """The first table of ``section``: one dict a row, its cells by the header's names, code spans unquoted."""
        lines = [line for line in self.sections.get(section, "").splitlines() if line.startswith("|")]
        if len(lines) < 2:
            return []
        header = _cells(lines[0])
        return [dict(zip(header, _cells(line), strict=False)) for line in lines[2:]]

    def find(self, section: str, pattern: str) -> str:
        """The first group of ``pattern`` in ``section``'s text ("" where absent)."""
        found = re.search(pattern, self.sections.get(section, ""))
        return found.group(1) if found else ""


def _cells(line: str) -> list[str]:
    return [cell.strip().replace("`", "") for cell in line.strip().strip("|").split("|")]


def _row(rows: Rows, path: str, anchor: str = "", build: str = "compiled") -> dict[str, str]:
    """The row of ``path`` (compared with ``anchor``, where given) in ``build``: KeyError where there is none."""
    for r in rows:
        if r.get("build") == build and r.get("path") == path and anchor in (r.get("anchor (same run)") or ""):
            return r
    raise KeyError(path)


def _ratio(text: str) -> float:
    return float(text.rstrip("x"))


def _exchange(page: Page) -> str:
    rows = page.rows("Exchanges")
    ours, torch = _row(rows, "dlbind.from_dlpack(ndarray)"), _row(rows, "dlbind.from_dlpack(torch.Tensor)")
    numpy, torch_anchor = _row(rows, "np.from_dlpack(ndarray)"), _row(rows, "np.from_dlpack(torch.Tensor)")
    asdlpack = _row(rows, "np.from_dlpack(dlbind.asdlpack(ndarray))")
    return (
        "**An exchange costs well under a microsecond, whatever the array's size.** `dlbind.from_dlpack(ndarray)` "
        f"{ours['ns/exchange']} ns (numpy's own `np.from_dlpack` {numpy['ns/exchange']} ns: {ours['ratio']}); "
        f"`np.from_dlpack(dlbind.asdlpack(ndarray))` {asdlpack['ns/exchange']} ns ({asdlpack['ratio']}); "
        f"`dlbind.from_dlpack(torch.Tensor)` {torch['ns/exchange']} ns where `np.from_dlpack` takes "
        f"{torch_anchor['ns/exchange']} ns ({torch['ratio']}). The 1 GiB rows cost what one element does, and the "
        "process's memory does not grow."
    )


def _conversion(page: Page) -> str:
    rows = page.rows("Exchanges")
    to_torch = _row(rows, "dlbind.convert(ndarray, to='torch')")
    to_numpy = _row(rows, "dlbind.convert(torch.Tensor, to='numpy')")
    from_numpy, numpy = _row(rows, "torch.from_numpy(ndarray)"), _row(rows, "tensor.numpy()")
    return (
        f"**A conversion costs about a microsecond.** `dlbind.convert(ndarray, to='torch')` {to_torch['ns/exchange']} "
        f"ns against `torch.from_numpy` {from_numpy['ns/exchange']} ns ({to_torch['ratio']}); "
        f"`dlbind.convert(torch.Tensor, to='numpy')` {to_numpy['ns/exchange']} ns against `tensor.numpy()` "
        f"{numpy['ns/exchange']} ns ({to_numpy['ratio']})."
    )


def _copy(page: Page) -> str:
    rows = [r for r in page.rows("Copies") if r.get("build") == "compiled" and r.get("bandwidth ratio")]
    if not rows:
        raise KeyError("Copies")
    ratios = sorted(_ratio(r["bandwidth ratio"]) for r in rows)
    peaks = sorted(float(r["peak / size"]) for r in rows)
    peak = f"{peaks[0]:.2f}x" if peaks[0] == peaks[-1] else f"{peaks[0]:.2f}x to {peaks[-1]:.2f}x"
    size = page.find("Copies", r"(\d+ MiB) per copy")
    return (
        f"**A copy runs at numpy's speed or better, in one copy's memory.** {ratios[0]:.2f}x to {ratios[-1]:.2f}x "
        f"numpy's bandwidth on {size} (the faster end for transposed and bfloat16 data), peak memory {peak} the "
        "copy's size."
    )


def _startup(page: Page) -> str:
    median = {r["what"]: r["median"] for r in page.rows("Start-up")}
    alone, after, first = (median[what] for what in STARTUP)
    return f"**`import dlbind` takes {alone}** ({after} after `import numpy`); the first call loads the rest ({first})."


def _gpu(page: Page) -> str:
    rows = page.rows("GPU")
    exchange = _row(rows, "dlbind.from_dlpack(torch_cuda)")
    copy = next(r["path"] for r in rows if r.get("build") == "compiled" and "copy=True" in r.get("path", ""))
    pinned, cupy = _row(rows, copy, "pinned copy_"), _row(rows, copy, "cupy.asnumpy")
    size, anchors = copy.rpartition("(")[2].rstrip(")"), exchange["anchor's"]
    return (
        f"**On a GPU**, `dlbind.from_dlpack(torch_cuda)` takes {exchange['value']} where `torch.from_dlpack` takes "
        f"{anchors}, and a {size} device-to-host copy runs at {pinned['value']}: {_short(pinned['ratio'])} torch's "
        f"pinned `copy_`, {_short(cupy['ratio'])} `cupy.asnumpy`."
    )


def _short(ratio: str) -> str:
    """A ratio as the summary writes it: to two decimals, or a whole number from 10 on."""
    value = _ratio(ratio)
    return f"{value:.0f}x" if value >= 10 else f"{value:.2f}x"


def _pure(page: Page) -> str:
    ns = [
        float(r["ns/exchange"].replace(",", ""))
        for r in page.rows("Exchanges")
        if r.get("build") == "pure" and "dlbind." in r.get("path", "") and "convert(" not in r.get("path", "")
    ]
    if not ns:
        raise KeyError("pure")
    return (
        f"**The pure build** (no C compiler at install time) spends about {min(ns) / 1e3:.0f} to "
        f"{max(ns) / 1e3:.0f} µs an exchange."
    )


BULLETS: tuple[Callable[[Page], str], ...] = (_exchange, _conversion, _copy, _startup, _gpu, _pure)


def _missed(page: Page) -> str:
    """The targets missed, each with its cause: a clause for each that its table says is missed."""
    clauses = []
    with contextlib.suppress(*ABSENT):
        gpu = _row(page.rows("GPU"), "dlbind.convert(cupy_array, 'torch')")
        if gpu["meets"] == "no":
            clauses.append(
                f"`dlbind.convert(cupy_array, 'torch')` ({gpu['ratio']} torch's own import on the GPU) checks every "
                "CuPy array's strides, since torch aborts the process on negative ones"
            )
    counts, counted = page.rows("Instructions per exchange"), page.find("Instructions per exchange", _COUNTED)
    with contextlib.suppress(*ABSENT):
        ort = _row(counts, "dlbind.convert(OrtValue, to='numpy')")
        if ort["target"].endswith("(not met)"):
            clauses.append(
                f"`dlbind.convert(OrtValue, to='numpy')` ({ort['ratio (instructions)']} numpy's instructions) asks "
                "the OrtValue its device first, which onnxruntime's Python wrapper makes cost 2,270 instructions"
            )  # that ask, counted alone: docs/design.md's performance history
    with contextlib.suppress(*ABSENT):
        made = _row(counts, ASDLPACK)
        if made["target"].endswith("(not met)"):
            clauses.append(
                f"`{ASDLPACK}` ({made['ratio (instructions)']} numpy's instructions) calls dlbind's public function,"
                " whose own type (`dlbind._fastpath.Function`, which makes `help()` show its annotations) costs 85 "
                "instructions a call over the builtin it wraps: CPython specialises calls of its own builtins only"
            )  # counted: `fd(a)` against `nfd(a)`, the builtin bound to a name (CHANGELOG, issue 45)
    with contextlib.suppress(*ABSENT):
        wall, count = _row(page.rows("Exchanges"), LEGACY), _row(counts, LEGACY)
        if _ratio(wall["ratio"]) > _ratio(wall["target"].removeprefix("<= ")):
            clauses.append(
                f"`{LEGACY}` is {wall['ratio']} numpy's in the wall-clock table of {_measured(page)[0]}, and "
                f"{count['ratio (instructions)']} numpy's in the instruction counts of {counted}, after the "
                "compiled import learned to ask older producers in C"
            )
    return "Where a target is missed, the row says why: " + "; ".join(clauses) + "." if clauses else ""


LEGACY = "dlbind.from_dlpack(legacy producer)"
ASDLPACK = "np.from_dlpack(dlbind.asdlpack(ndarray))"
_COUNTED = r"`benchmarks/instructions.py`, " + _DAY


def _measured(page: Page) -> tuple[str, str]:
    """The day of the exchanges and the machine's cores (``2 x86-64``), from "How these were measured"."""
    found = re.search(_DAY + r": Python [^,]+, (\d+) cores \(([^)]+)\)", page.sections.get(MEASURED[3:-2], ""))
    return (found.group(1), f"{found.group(2)} {found.group(3).replace('_', '-')}") if found else ("", "")


def _opening(page: Page) -> str:
    """What the page measures, and where and when each table was measured."""
    day, cores = _measured(page)
    copied = page.find("Copies", r" on " + _DAY)
    where = []
    if day and copied == day:
        where.append(f"exchanges and copies on {cores} cores, {day}")
    elif day:
        where.append(f"exchanges on {cores} cores, {day}" + (f"; copies {copied}" if copied else ""))
    counted = page.find("Instructions per exchange", _COUNTED)
    if counted:
        where.append(f"instruction counts {counted}")
    card, on = page.find("GPU", r"on one \*\*([^*(]+?)(?: \(|\*\*)"), page.find("GPU", r" on " + _DAY)
    if card:
        where.append(f"the GPU on {'an' if card[0] in 'AEFHILMNORSX' else 'a'} {card}, {on}")
    return (
        "What dlbind costs, beside what the libraries' own calls cost on the same machine in the same run. Every "
        "figure below comes from the tables further down (compiled build unless the row says pure"
        + "".join(f"; {w}" for w in where)
        + ")."
    )


def _fill(text: str, indent: str = "") -> str:
    glued = _UNIT.sub("\\1\u00a0", text)
    lines = textwrap.fill(glued, WIDTH, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
    return lines.replace("\u00a0", " ")


def render(text: str) -> str:
    """The opening and "In short" of a page whose sections are ``text``'s, each figure from its tables."""
    page = Page(text)
    bullets = []
    for bullet in BULLETS:
        with contextlib.suppress(*ABSENT):
            bullets.append(_fill("- " + bullet(page), "  "))
    out = _fill(_opening(page)) + "\n\n"
    if bullets:
        out += "## In short\n\n" + "\n".join(bullets) + "\n\n"
    missed = _missed(page)
    return out + (_fill(missed) + "\n\n" if missed else "")


def summarized(text: str) -> str:
    """``text``, a benchmarks page, with its opening and "In short" rendered again from its tables."""
    _, found, rest = text.partition(MEASURED)
    return TITLE + render(text) + found + rest if found else text


def refresh(path: str | Path) -> None:
    """Render the opening and "In short" of the page at ``path`` again from its tables."""
    page = Path(path)
    page.write_text(summarized(page.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        refresh(name)
