"""No hand-written function longer than a reader can hold: Python at most 60 lines, C at most 100.

    python .ci/lengths.py [ROOT]     (nox -s lint runs it; exit status 1 names each function over its limit)

Generated code (``_generated/``, what the generator writes) is the generator's. :data:`LONGER` lists a function
allowed past the limit, with its length then: it may shrink, never grow, and a function not listed may not pass
the limit. The 18 that were longer when the rule came are all split; the list is empty.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from _checks import printed_as, report, root_of, tracked

PYTHON_LIMIT, C_LIMIT = 60, 100

# (path, function) -> its length when the rule came (issue 42): to be split, never to grow.
LONGER: dict[tuple[str, str], int] = {}


class Long(NamedTuple):
    """A function over its limit: ``lines`` long where ``limit`` is the most."""

    path: str
    function: str
    lines: int
    limit: int

    __str__ = printed_as("{path}: {function} is {lines} lines (at most {limit})")


def python_functions(source: str) -> Iterator[tuple[str, int]]:
    """(name, lines) of every function of a Python source, methods and nested functions included."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            yield node.name, (node.end_lineno or node.lineno) - first + 1


_C_START = re.compile(r"^(?!(?:if|for|while|switch|return|else)\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*\([^;]*$")


def c_functions(source: str) -> Iterator[tuple[str, int]]:
    """(name, lines) of every function defined in a C source: from the line that names it to its closing brace
    (comments and strings with braces are not expected between)."""
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        found = _C_START.match(lines[i])
        if found is None:
            i += 1
            continue
        j = i
        while j < len(lines) and "{" not in lines[j] and not lines[j].rstrip().endswith(";"):
            j += 1
        if j == len(lines) or "{" not in lines[j]:
            i = j + 1
            continue
        depth, k = 0, j
        while k < len(lines):
            depth += lines[k].count("{") - lines[k].count("}")
            if depth == 0:
                break
            k += 1
        yield found.group(1), k - i + 1
        i = k + 1


def check(root: Path) -> list[Long]:
    found: list[Long] = []
    for path in tracked(root):
        if "/_generated/" in path or not path.endswith((".py", ".c")) or not (root / path).is_file():
            continue
        source = (root / path).read_text(encoding="utf-8", errors="replace")
        try:
            functions = python_functions(source) if path.endswith(".py") else c_functions(source)
            measured = list(functions)
        except SyntaxError:  # a template or fixture that is not Python
            continue
        default = PYTHON_LIMIT if path.endswith(".py") else C_LIMIT
        for name, length in measured:
            limit = max(default, LONGER.get((path, name), 0))
            if length > limit:
                found.append(Long(path, name, length, limit))
    return found


def main(argv: list[str]) -> int:
    long = check(root_of(argv))
    listed = f"lengths: no function over {PYTHON_LIMIT} lines (Python) or {C_LIMIT} (C)"
    listed += f" but the {len(LONGER)} listed" if LONGER else ""
    return report(long, f"{len(long)} function(s) over the limit: split them by what they do", listed)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
