"""The ten-line example of docs/backends.md runs as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "backends.md"
pytestmark = pytest.mark.vulkan


def example() -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: vulkan -->\n```python\n(.*?)```\n<!-- end example -->", text, re.DOTALL)
    assert found, f"{DOC} has no vulkan example between its markers"
    return found.group(1)


def test_the_example_is_short() -> None:
    lines = [ln for ln in example().splitlines() if ln.strip()]
    assert len(lines) <= 10


def test_the_example_runs() -> None:
    exec(compile(example(), str(DOC), "exec"), {})
