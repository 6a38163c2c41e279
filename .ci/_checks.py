"""What the repository checks of .ci share: the files git tracks, and how a check reports."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path


def tracked(root: Path) -> list[str]:
    """The paths git tracks under ``root``, relative to it; where ``root`` is no git work tree (or git is not
    installed: the Debian root of the newest Pythons has none), every file below it but in hidden folders."""
    if shutil.which("git") is not None and (root / ".git").exists():
        out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if line]
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts[:-1])
    )


def root_of(argv: Sequence[str]) -> Path:
    """The tree a check's command line names (its first argument; else the current folder)."""
    return Path(argv[1] if len(argv) > 1 else ".").resolve()


def report(found: Sequence[object], failed: str, passed: str) -> int:
    """Each finding on a line, then ``failed`` (exit status 1); ``passed`` where there is none (0)."""
    for item in found:
        print(item)
    print(failed if found else passed)
    return 1 if found else 0
