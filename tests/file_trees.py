"""Plain trees of files for the tests of the repository's checks (.ci): no git work tree, so a check reads every
file of it."""

from __future__ import annotations

from pathlib import Path


def tree(root: Path, files: dict[str, str]) -> Path:
    """``root`` holding ``files`` (path relative to it -> text)."""
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root
