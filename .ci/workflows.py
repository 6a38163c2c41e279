"""The GitHub Actions workflows (``.github/workflows/*.yml``) are valid and pass the security lints: GitHub's
workflow schema (``check-jsonschema --builtin-schema vendor.github-workflows``), zizmor's offline audits
(template injection, actions not pinned by hash, credentials left in a checkout, broad permissions, dangerous
triggers, ...), and this repository's rule that an action is pinned by its full commit SHA with the release
that commit is in written beside it (``uses: actions/checkout@<40 hex digits> # v7.0.1``).

    python .ci/workflows.py [ROOT]      (nox -s lint runs it; exit status 1 lists each finding)

Both tools come from the package index (pyproject.toml's lint group); they are looked for beside this Python,
then on PATH, and a missing one is a finding. zizmor runs ``--offline``: its audits that ask GitHub's API
(impostor commits, known-vulnerable actions, ref confusion) do not run here. The workflows themselves have not
run on a forge (docs/releasing.md).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from _checks import Finding, main_of  # Finding.kind: the tool (check-jsonschema, zizmor, pinning)

FOUND = "{count} workflow finding(s): fix them in .github/workflows (docs/releasing.md says what the workflows do)"
PASSED = "workflows: GitHub's schema and zizmor's offline audits pass, every action pinned by commit"

SCHEMA = "vendor.github-workflows"
# `uses: OWNER/REPO[/PATH]@REF  # COMMENT` (a step's or a reusable workflow's)
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*['\"]?([^'\"\s#]+)['\"]?\s*(?:#\s*(.*))?$")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")
RELEASE = re.compile(r"^v\d+(\.\d+)*\b")




def workflows(root: Path) -> list[str]:
    """The workflow files under ``root``, relative to it."""
    folder = root / ".github" / "workflows"
    return sorted(p.relative_to(root).as_posix() for p in (*folder.glob("*.yml"), *folder.glob("*.yaml")))


def tool(name: str) -> str | None:
    """The program ``name`` beside this Python (the nox session's venv), else on PATH."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which(name)


def _run(root: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=root, capture_output=True, text=True, check=False)


def _said(proc: subprocess.CompletedProcess[str]) -> str:
    """What a tool that failed said: its messages, without its log lines and its stack trace."""
    text = (proc.stdout + proc.stderr).split("Stack backtrace:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("INFO")]
    return " | ".join(lines[:6])


def schema(root: Path, files: list[str]) -> list[Finding]:
    """GitHub's workflow schema (check-jsonschema's vendored copy: no network)."""
    program = tool("check-jsonschema")
    if program is None:
        return [Finding(".github/workflows", 0, "check-jsonschema", "not installed (nox -s lint installs it)")]
    proc = _run(root, [program, "--builtin-schema", SCHEMA, "--output-format", "json", *files])
    try:
        report = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return [Finding(".github/workflows", 0, "check-jsonschema", f"exit {proc.returncode}: {_said(proc)}")]
    found = [
        Finding(e["filename"], 0, "check-jsonschema", f"{e['path']}: {e.get('best_deep_match', e)['message']}")
        for e in report.get("errors", [])
    ]
    unread = report.get("parse_errors", [])
    found += [Finding(e.get("filename", "?"), 0, "check-jsonschema", e["message"]) for e in unread]
    if proc.returncode != 0 and not found:
        found.append(Finding(".github/workflows", 0, "check-jsonschema", f"exit {proc.returncode}: {_said(proc)}"))
    return found


def audits(root: Path, files: list[str]) -> list[Finding]:
    """zizmor's offline audits, each finding at its first location; a file at a time (one zizmor cannot load,
    which it refuses whole, leaves the others audited)."""
    program = tool("zizmor")
    if program is None:
        return [Finding(".github/workflows", 0, "zizmor", "not installed (nox -s lint installs it)")]
    found = []
    for path in files:
        proc = _run(root, [program, "--offline", "--strict-collection", "--format", "json", "--no-progress", path])
        try:
            report = json.loads(proc.stdout)
        except json.JSONDecodeError:
            found.append(Finding(path, 0, "zizmor", f"exit {proc.returncode}: {_said(proc)}"))
            continue
        for item in report:
            where = item["locations"][0]
            line = where["concrete"]["location"]["start_point"]["row"] + 1
            note = where["symbolic"].get("annotation", "")
            what = f"{item['ident']}: {item['desc']}" + (f" ({note})" if note else "")
            found.append(Finding(path, line, "zizmor", what))
        if proc.returncode not in (0, *range(10, 15)) and not report:  # 10-14: findings, by their highest severity
            found.append(Finding(path, 0, "zizmor", f"exit {proc.returncode}: {_said(proc)}"))
    return found


def pinning(root: Path, files: list[str]) -> list[Finding]:
    """Every action used from elsewhere is pinned by a full commit SHA, with its release in a comment."""
    found = []
    for path in files:
        for number, text in enumerate((root / path).read_text(encoding="utf-8").splitlines(), 1):
            match = USES.match(text)
            if match is None or match.group(1).startswith(("./", "docker://")):
                continue
            ref, comment = match.group(1), (match.group(2) or "").strip()
            if not PINNED.match(ref):
                found.append(Finding(path, number, "pinning", f"{ref}: not pinned by a full commit SHA"))
            elif not RELEASE.match(comment):
                found.append(Finding(path, number, "pinning", f"{ref}: no `# vX.Y.Z` naming the pinned release"))
    return found


def check(root: Path) -> list[Finding]:
    files = workflows(root)
    if not files:
        return [Finding(".github/workflows", 0, "workflows", "no workflow (*.yml) found")]
    invalid = schema(root, files)
    audited = [path for path in files if path not in {f.path for f in invalid}]  # zizmor refuses an invalid file
    return [*invalid, *audits(root, audited), *pinning(root, files)]


main = main_of(check, FOUND, PASSED)

if __name__ == "__main__":
    sys.exit(main(sys.argv))
