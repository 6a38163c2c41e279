"""What the benchmark scripts share: their options, the rounds of timings, their Markdown tables, the versions
they name, their JSON files.

A script of this folder run by its path (``python benchmarks/exchange.py``) has this folder on ``sys.path``
and imports it as ``common``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

Row = TypeVar("Row")


def arguments(
    doc: str | None, markdown_append: str, json_help: str = "also write the rows here"
) -> argparse.ArgumentParser:
    """A script's command line, described by the first paragraph of ``doc``, with the options that write what it
    found: ``--json`` (its help ``json_help``) and ``--markdown-append`` (its help ``markdown_append``)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("--json", help=json_help)
    parser.add_argument("--markdown-append", help=markdown_append)
    return parser


def markdown_table(header: str, rows: Iterable[Row], line: Callable[[Row], str]) -> str:
    """A Markdown table: ``header`` (its first line, ``| a | b |``), the separator under it, ``line`` of each row."""
    columns = header.count("|") - 1
    return "\n".join([header, "|" + "---|" * columns, *map(line, rows)])


def fastest(rows: Callable[[], list[dict[str, Any]]], count: int) -> list[dict[str, Any]]:
    """``rows()`` ``count`` times, each row's fastest ``ns`` kept (rows matched by ``path``): a row and its anchor
    are timed apart, and on a shared machine one of them may meet a busy moment that another round misses."""
    found = rows()
    for _ in range(count - 1):
        again = {r["path"]: r["ns"] for r in rows()}
        for r in found:
            r["ns"] = min(r["ns"], again.get(r["path"], r["ns"]))
    return found


def installed(dists: Iterable[str]) -> str:
    """``NAME VERSION`` of each distribution of ``dists`` installed here, comma-separated."""
    from importlib.metadata import PackageNotFoundError, version

    found = []
    for dist in dists:
        with contextlib.suppress(PackageNotFoundError):
            found.append(f"{dist} {version(dist)}")
    return ", ".join(found)


def write_json(path: str, data: Any) -> None:
    """``data`` as indented JSON in the file ``path``, its folder made where missing."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(data, f, indent=2)
