"""The bump gate's comparison of JUnit reports (.ci/bump_gate.py): what counts as a test lost to a bump."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _gate():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("bump_gate", ROOT / ".ci/bump_gate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bump_gate", module)
    spec.loader.exec_module(module)
    return module


def _report(path: Path, cases: dict[str, str]) -> Path:
    body = []
    for key, outcome in cases.items():
        classname, name = key.split("::")
        inner = {"passed": "", "skipped": '<skipped message="why"/>', "failed": '<failure message="boom"/>'}[outcome]
        body.append(f'<testcase classname="{classname}" name="{name}" time="0.1">{inner}</testcase>')
    suite = f'<testsuite name="pytest">{"".join(body)}</testsuite>'
    path.write_text(f'<?xml version="1.0"?><testsuites>{suite}</testsuites>')
    return path


def test_outcomes_read_from_junit(tmp_path: Path) -> None:
    cases = {"a.test_x::test_1": "passed", "a.test_x::test_2": "skipped", "a.test_x::test_3": "failed"}
    assert _gate().outcomes(_report(tmp_path / "r.xml", cases)) == cases


def test_a_test_that_passed_and_skips_after_the_bump_is_a_problem(tmp_path: Path) -> None:
    before = _report(tmp_path / "before.xml", {
        "generator.tests.t::a": "passed", "generator.tests.t::b": "passed", "packages.core.tests.t::c": "passed",
        "packages.core.tests.t::d": "skipped", "tests.t::e": "passed", "generator.tests.t::g[1.3]": "passed",
    })  # fmt: skip
    after = _report(tmp_path / "after.xml", {
        "generator.tests.t::a": "passed", "generator.tests.t::b": "skipped", "packages.core.tests.t::c": "failed",
        "packages.core.tests.t::d": "skipped", "generator.tests.t::g[1.3.post1]": "passed",
    })  # fmt: skip
    problems, notes = _gate().compare(before, after)
    assert problems == [
        "generator.tests.t::b: passed in the unbumped tree, skipped in the bumped one",
        "packages.core.tests.t::c: passed in the unbumped tree, failed in the bumped one",
    ]
    assert len(notes) == 1 and notes[0].startswith("2 test(s) that passed here are not in the bumped run")
    assert "generator.tests.t::g[1.3]" in notes[0] and "tests.t::e" in notes[0]
    # only the paths a run covers: tests/ is not in it, so its case is neither a problem nor a note
    problems, notes = _gate().compare(before, after, ("generator.tests.", "packages.core.tests."))
    assert len(problems) == 2 and "tests.t::e" not in notes[0].split(": ", 1)[1].split(", ")


def _git(tree: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tree, check=True,
                   capture_output=True)  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git (the gate's clones are git repositories)")
def test_the_way_back_may_leave_the_ledger_and_its_count_only(tmp_path: Path) -> None:
    tree = tmp_path / "clone"
    for rel, text in {"spec/models/ledger.toml": "a\n", "generator/REPORT.md": "| ledger.toml (6 releases) |\nx\n",
                      "spec/devices.toml": "d\n"}.items():  # fmt: skip
        (tree / rel).parent.mkdir(parents=True, exist_ok=True)
        (tree / rel).write_text(text)
    _git(tree, "init", "-q")
    _git(tree, "add", "-A")
    _git(tree, "commit", "-q", "-m", "HEAD")
    gate = _gate()
    assert gate.leftovers(tree) == []
    (tree / "spec/models/ledger.toml").write_text("a\nb\n")  # appended
    (tree / "generator/REPORT.md").write_text("| ledger.toml (7 releases) |\nx\n")
    (tree / ".cache").mkdir()
    (tree / ".cache/anything").write_text("")  # caches and venvs are not the tree
    assert gate.leftovers(tree) == []
    (tree / "generator/REPORT.md").write_text("| ledger.toml (7 releases) |\ny\n")
    (tree / "spec/devices.toml").write_text("d\n[devices.kDLRehearsalDevice22]\n")
    (tree / "spec/models/dlpack-1.3.post1.json").write_text("{}")
    assert gate.leftovers(tree) == [
        "spec/devices.toml differs from HEAD after the way back",
        "spec/models/dlpack-1.3.post1.json differs from HEAD after the way back",
        "generator/REPORT.md differs from HEAD after the way back: -x",
        "generator/REPORT.md differs from HEAD after the way back: +y",
    ]
