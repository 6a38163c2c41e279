"""What the repository checks of .ci share: the files git tracks, and how a check reports."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path


def tracked(root: Path) -> list[str]:
    """The paths git tracks under ``root`` (a work tree), relative to it."""
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line]


def root_of(argv: Sequence[str]) -> Path:
    """The tree a check's command line names (its first argument; else the current folder)."""
    return Path(argv[1] if len(argv) > 1 else ".").resolve()


def report(found: Sequence[object], failed: str, passed: str) -> int:
    """Each finding on a line, then ``failed`` (exit status 1); ``passed`` where there is none (0)."""
    for item in found:
        print(item)
    print(failed if found else passed)
    return 1 if found else 0
