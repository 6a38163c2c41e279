"""The examples of the backends' docs pages, as the docs show them (between ``<!-- example: NAME -->`` and
``<!-- end example -->``), for the tests that run them."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

DOCS = Path(__file__).resolve().parents[2] / "docs"

__all__ = ["DOCS", "example", "run_doctest", "run_example"]


def example(page: str, name: str) -> str:
    """The python block of ``docs/<page>`` between the markers of example ``name``."""
    path = DOCS / page
    text = path.read_text(encoding="utf-8")
    marked = rf"<!-- example: {re.escape(name)} -->\n```python\n(.*?)```\n<!-- end example -->"
    found = re.search(marked, text, re.DOTALL)
    assert found, f"{path} has no {name} example between its markers"
    return found.group(1)


def run_example(page: str, name: str) -> dict[str, Any]:
    """Run the example as written; its names afterwards, for the test to check."""
    namespace: dict[str, Any] = {}
    exec(compile(example(page, name), str(DOCS / page), "exec"), namespace)
    return namespace


def run_doctest(page: str, name: str) -> None:
    """Run an example written as a doctest (``>>>``), with ``...`` matching anything; AssertionError on a
    difference, with the report."""
    import doctest

    test = doctest.DocTestParser().get_doctest(example(page, name), {}, f"{page}:{name}", str(DOCS / page), 0)
    out: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    result = runner.run(test, out=out.append)
    assert result.failed == 0 and result.attempted > 0, "".join(out)
