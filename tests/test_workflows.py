"""The workflow check of ``nox -s lint`` (.ci/workflows.py) fails where it should: a workflow GitHub's schema
refuses, each kind of zizmor finding the repository's workflows avoid (template injection, an action pinned by
tag, a checkout keeping its credentials, default permissions, a dangerous trigger), and a commit pin without
its release, each planted in a small tree; a clean tree passes, and so do the repository's workflows.

The check runs check-jsonschema and zizmor, which come from the package index: where they are not installed
(the Pythons of ``nox -t pythons``) these tests skip, naming them; ``nox -s lint`` installs both and runs this
file with ``DLBIND_WORKFLOW_TOOLS=required``, where a missing tool fails instead.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from file_trees import tree

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"

CHECKOUT = "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1"  # v7.0.1

CLEAN = f"""name: clean
on:
  push:
    branches: [main]
permissions: {{}}
jobs:
  test:
    runs-on: ubuntu-24.04
    permissions:
      contents: read
    steps:
      - uses: {CHECKOUT} # v7.0.1
        with:
          persist-credentials: false
      - name: say the branch
        env:
          REF: ${{{{ github.ref_name }}}}
        run: echo "$REF"
"""

PLANTED = {
    # GitHub's schema: a job without runs-on, with a key jobs do not have
    ".github/workflows/schema.yml": CLEAN.replace("    runs-on: ubuntu-24.04\n", "    timeout: 5\n"),
    # zizmor: an untrusted value expanded into a script, on a trigger that runs forks' code with secrets
    ".github/workflows/injection.yml": CLEAN.replace("  push:\n    branches: [main]\n", "  pull_request_target:\n")
    .replace("${{ github.ref_name }}", "${{ github.event.pull_request.title }}")
    .replace('run: echo "$REF"', 'run: echo "${{ github.event.pull_request.title }}"'),
    # zizmor: an action by tag, its checkout keeping the token, the default (broad) permissions
    ".github/workflows/unpinned.yml": CLEAN.replace(f"{CHECKOUT} # v7.0.1", "actions/checkout@v7")
    .replace("\n        with:\n          persist-credentials: false", "")
    .replace("permissions: {}\n", "")
    .replace("    permissions:\n      contents: read\n", ""),
    # this repository's rule: a commit pin says which release it is
    ".github/workflows/uncommented.yml": CLEAN.replace(" # v7.0.1", ""),
}


@pytest.fixture(scope="module")
def workflows() -> Iterator[ModuleType]:
    sys.path.insert(0, str(CI))
    try:
        module = importlib.import_module("workflows")
        missing = [name for name in ("check-jsonschema", "zizmor") if module.tool(name) is None]
        if missing and os.environ.get("DLBIND_WORKFLOW_TOOLS") == "required":
            pytest.fail(f"{', '.join(missing)} not installed (pyproject.toml's lint group)")
        if missing:
            pytest.skip(f"{', '.join(missing)} not installed here (nox -s lint and nox -s tests install them)")
        yield module
    finally:
        sys.path.remove(str(CI))


def _found(workflows: ModuleType, root: Path) -> set[tuple[str, str, str]]:
    """(file, tool, what: the schema's message, zizmor's audit, the pinning rule's complaint) of each finding."""
    return {(Path(f.path).name, f.kind, f.what.split(":")[0] if f.kind == "zizmor" else f.what) for f in
            workflows.check(root)}  # fmt: skip


def test_every_planted_error_is_found(workflows: ModuleType, tmp_path: Path) -> None:
    found = _found(workflows, tree(tmp_path, PLANTED))
    assert found == {
        ("schema.yml", "check-jsonschema", "$.jobs.test: 'runs-on' is a required property"),
        ("injection.yml", "zizmor", "dangerous-triggers"),
        ("injection.yml", "zizmor", "template-injection"),
        ("unpinned.yml", "zizmor", "unpinned-uses"),
        ("unpinned.yml", "zizmor", "artipacked"),
        ("unpinned.yml", "zizmor", "excessive-permissions"),
        ("unpinned.yml", "pinning", "actions/checkout@v7: not pinned by a full commit SHA"),
        ("uncommented.yml", "pinning", f"{CHECKOUT}: no `# vX.Y.Z` naming the pinned release"),
    }


def test_each_finding_names_its_line(workflows: ModuleType, tmp_path: Path) -> None:
    root = tree(tmp_path, {".github/workflows/uncommented.yml": PLANTED[".github/workflows/uncommented.yml"]})
    assert [str(f) for f in workflows.check(root)] == [
        f".github/workflows/uncommented.yml:12: pinning: {CHECKOUT}: no `# vX.Y.Z` naming the pinned release"
    ]


def test_main_fails_on_a_planted_tree(
    workflows: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert workflows.main(["workflows.py", str(tree(tmp_path, PLANTED))]) == 1
    assert "workflow finding(s)" in capsys.readouterr().out


def test_a_clean_tree_passes_and_main_says_so(
    workflows: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tree(tmp_path, {".github/workflows/clean.yml": CLEAN})
    assert workflows.main(["workflows.py", str(root)]) == 0
    assert "every action pinned by commit" in capsys.readouterr().out


def test_a_tree_without_workflows_fails(workflows: ModuleType, tmp_path: Path) -> None:
    assert [f.what for f in workflows.check(tree(tmp_path, {"README.md": "no workflows\n"}))] == [
        "no workflow (*.yml) found"
    ]


def test_the_repositorys_workflows_pass(workflows: ModuleType) -> None:
    assert {p.rsplit("/", 1)[1] for p in workflows.workflows(ROOT)} == {"ci.yml", "release.yml"}
    found = workflows.check(ROOT)
    assert not found, "\n".join(map(str, found))
