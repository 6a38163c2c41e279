"""What the repository checks of .ci share: the files git tracks, and how a check reports and prints a finding."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple


class Finding(NamedTuple):
    """What a check found at ``path:line`` (0: the file as a whole): ``kind``, what kind of finding (the check's
    own words; "" where a check has one kind), and ``what``, the name or message."""

    path: str
    line: int
    kind: str
    what: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.kind + ': ' if self.kind else ''}{self.what}"


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


def printed_as(line: str) -> Callable[[Any], str]:
    """The ``__str__`` of a check's finding (a NamedTuple): ``line`` formatted with its fields by name."""

    def __str__(self: Any) -> str:
        return line.format(**self._asdict())

    return __str__


def main_of(check: Callable[[Path], Sequence[object]], found: str, passed: str) -> Callable[[Sequence[str]], int]:
    """A check's command line: the findings of ``check`` over the tree the arguments name, each on a line, then
    ``found`` (its ``{count}`` formatted) and exit status 1; ``passed`` and 0 where there is none."""

    def main(argv: Sequence[str]) -> int:
        findings = check(root_of(argv))
        return report(findings, found.format(count=len(findings)), passed)

    return main
