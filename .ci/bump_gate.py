"""The header bump's gate (`nox -s bump_gate`): the suite in bumped clones, the way a maintainer bumps.

Two clones of the committed tree (HEAD), each bumped with the generator's own rehearsal headers, which are
derived from whatever header is canonical:

- **drift**: the canonical header plus the names it lacks, version macros kept (from the released 1.3:
  upstream's main today, kDLTPU/kDLTPUHost/kDLAscend/kDLBcomplex, recorded as 1.3.post1). Then the README's
  whole test command, `python3 -m nox` (the staleness gate, both builds, lint, mypy --strict, docs with
  their doctests).
- **minor**: the same drift bump, then the next minor on top of it (it carries upstream's additions and a
  device type and a dtype code of its own, with policy rows written as the generator manual says: 1.4).
  Then the generator's tests and the core's tests on both builds (`nox -s tests -- generator/tests
  packages/core/tests`: the generator's once) and the docs' examples as doctests (`nox -s docs -- doctest`).

In each clone no test that passed in this tree may skip there (the JUnit reports of this tree's `nox -s
tests`, in .cache/junit, against the clone's: made first when missing), and the way back (the policy rows
taken out, `canonical <the canonical before>`) gives `generate --check` clean and a tree that differs from
HEAD only in the ABI ledger's new lines (append-only). A table of every step's time closes the run.

    python .ci/bump_gate.py [--only drift|minor] [--keep] [--work DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUNIT = Path(".cache/junit")
# The ledger is append-only: a bumped header's ABI line stays after the way back (and the report counts it).
AFTER_THE_WAY_BACK = {"spec/models/ledger.toml", "generator/REPORT.md"}


class GateError(Exception):
    """A step of the gate failed: the message says which and why."""


@dataclass
class Step:
    clone: str
    name: str
    seconds: float = 0.0
    result: str = "ok"


@dataclass
class Run:
    steps: list[Step] = field(default_factory=list)

    def step(self, clone: str, name: str, *cmd: str, cwd: Path, quiet: bool = False) -> str:
        """Run ``cmd`` as one timed step, its output shown (or kept, when ``quiet``, and shown on failure)."""
        step = Step(clone, name)
        self.steps.append(step)
        print(f"\n=== [{clone}] {name}: {' '.join(cmd)}", flush=True)
        start = time.monotonic()
        proc = subprocess.run(
            cmd, cwd=cwd, text=True, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if quiet else None, stderr=subprocess.STDOUT if quiet else None,
        )  # fmt: skip
        step.seconds = time.monotonic() - start
        if proc.returncode != 0:
            step.result = f"FAILED (exit {proc.returncode})"
            if quiet:
                print(proc.stdout[-8000:])
            raise GateError(f"[{clone}] {name} failed (exit {proc.returncode}): {' '.join(cmd)}")
        print(f"=== [{clone}] {name}: ok ({step.seconds:.0f} s)", flush=True)
        return proc.stdout or ""

    def check(self, clone: str, name: str, problems: list[str]) -> None:
        """Record a check made here (no command): failed when ``problems`` is not empty."""
        step = Step(clone, name, 0.0, "ok" if not problems else f"FAILED ({len(problems)})")
        self.steps.append(step)
        print(f"\n=== [{clone}] {name}: {'ok' if not problems else 'FAILED'}")
        for p in problems:
            print(f"  - {p}")
        if problems:
            raise GateError(f"[{clone}] {name}: {len(problems)} problem(s)")

    def table(self) -> str:
        lines = ["bump gate steps (wall seconds):", f"  {'clone':<6} {'step':<58} {'wall':>6}  result"]
        lines += [f"  {s.clone:<6} {s.name:<58} {s.seconds:>6.0f}  {s.result}" for s in self.steps]
        return "\n".join(lines)


def outcomes(report: Path) -> dict[str, str]:
    """Each test case of a JUnit report (``file::name``) and its outcome: passed, skipped, failed."""
    result: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            result[key] = "failed"
        elif "skipped" in tags:
            result[key] = "skipped"
        else:
            result[key] = "passed"
    return result


def compare(before: Path, after: Path, within: tuple[str, ...] | None = None) -> tuple[list[str], list[str]]:
    """(problems, notes) of ``after`` against ``before``: a test that passed before and skips or fails after is
    a problem; one that passed before and is not in ``after`` is a note (ids made from the canonical release
    change with it). ``within``: compare only test cases whose dotted classname starts with one of these."""
    old, new = outcomes(before), outcomes(after)
    problems, gone = [], []
    for key, outcome in sorted(old.items()):
        if outcome != "passed" or (within and not key.startswith(within)):
            continue
        if key not in new:
            gone.append(key)
        elif new[key] != "passed":
            problems.append(f"{key}: passed in the unbumped tree, {new[key]} in the bumped one")
    if not gone:
        return problems, []
    return problems, [f"{len(gone)} test(s) that passed here are not in the bumped run: {', '.join(gone[:8])}"]


def clone_of(work: Path, name: str) -> Path:
    """A clone of HEAD with this tree's fetched headers (no download)."""
    tree = work / name
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(tree)], check=True)
    headers = ROOT / ".cache/headers"
    if headers.is_dir():
        shutil.copytree(headers, tree / ".cache/headers")
    return tree


def generator(tree: Path, *args: str) -> list[str]:
    """The generator's command line over the clone (the generator of HEAD, installed where this runs)."""
    return [sys.executable, "-m", "dlbind_generator", args[0], "--root", str(tree), *args[1:]]


def canonical_of(tree: Path) -> str:
    """The clone's canonical header as the generator names it (``1.3``, ``1.3.post1``)."""
    from dlbind_generator.sources import format_version, load_sources

    return format_version(load_sources(tree / "spec/headers.toml").canonical)


def bump(run: Run, clone: str, tree: Path, kind: str) -> str:
    """Derive the rehearsal header of ``kind`` from the clone's canonical, write its policy rows, bump."""
    header = tree.parent / f"{clone}-{kind}-dlpack.h"
    run.step(clone, f"rehearsal-header --kind {kind} --policy", *generator(tree, "rehearsal-header", str(header),
             "--kind", kind, "--policy"), cwd=tree)  # fmt: skip
    out = run.step(clone, f"bump ({kind})", *generator(tree, "bump", str(header)), cwd=tree, quiet=True)
    print(out.strip())
    return canonical_of(tree)


def the_way_back(run: Run, clone: str, tree: Path, before: str) -> None:
    """The policy rows out again, `canonical <before>`, `generate --check` clean, HEAD's tree but the ledger."""
    run.step(clone, "git checkout the policy tables", "git", "checkout", "--", "spec/devices.toml",
             "spec/dtypes.toml", cwd=tree)  # fmt: skip
    run.step(clone, f"canonical {before}", *generator(tree, "canonical", before), cwd=tree, quiet=True)
    run.step(clone, "generate --check after the way back", *generator(tree, "generate", "--check"), cwd=tree)
    problems = leftovers(tree)
    run.check(clone, "the way back leaves HEAD's tree (the ledger appended)", problems)


def leftovers(tree: Path) -> list[str]:
    """What differs from HEAD in the clone ``tree`` after the way back, beyond the ledger's appended lines
    (and the report's count of them)."""
    status = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all", "--", ".", ":!.nox", ":!.cache"],
        cwd=tree, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    changed = {line[3:] for line in status.splitlines()}
    problems = [f"{path} differs from HEAD after the way back" for path in sorted(changed - AFTER_THE_WAY_BACK)]
    if "generator/REPORT.md" in changed:  # only the ledger's count of releases may differ there
        diff = subprocess.run(["git", "diff", "-U0", "--", "generator/REPORT.md"], cwd=tree, capture_output=True,
                              text=True, check=True).stdout  # fmt: skip
        lines = [x for x in diff.splitlines() if x[:1] in "+-" and not x.startswith(("+++", "---"))]
        problems += [f"generator/REPORT.md differs from HEAD after the way back: {x}" for x in lines
                     if "ledger.toml (" not in x]  # fmt: skip
    return problems


def reference(run: Run) -> Path:
    """This tree's JUnit reports of `nox -s tests`, made now when missing."""
    junit = ROOT / JUNIT
    if not all((junit / f"tests-{b}.xml").is_file() for b in ("compiled", "pure")):
        print(f"no JUnit reports of this tree in {junit}: running `nox -s tests` here first (the README's `nox` "
              "makes them)")  # fmt: skip
        run.step("here", "nox -s tests (the reports to compare with)", sys.executable, "-m", "nox", "-s", "tests",
                 cwd=ROOT)  # fmt: skip
    return junit


def gate_drift(run: Run, work: Path, junit: Path) -> None:
    tree = clone_of(work, "drift")
    before = canonical_of(tree)
    after = bump(run, "drift", tree, "drift")
    print(f"[drift] canonical {before} -> {after}")
    run.step("drift", "python3 -m nox (the README's test command)", sys.executable, "-m", "nox", cwd=tree)
    problems, notes = [], []
    for build in ("compiled", "pure"):
        p, n = compare(junit / f"tests-{build}.xml", tree / JUNIT / f"tests-{build}.xml")
        problems += [f"{build}: {x}" for x in p]
        notes += [f"{build}: {x}" for x in n]
    for note in notes:
        print(f"[drift] note: {note}")
    run.check("drift", "no test that passed here skips in the bumped tree", problems)
    the_way_back(run, "drift", tree, before)


def gate_minor(run: Run, work: Path, junit: Path) -> None:
    tree = clone_of(work, "minor")
    before = canonical_of(tree)
    drifted = bump(run, "minor", tree, "drift")
    after = bump(run, "minor", tree, "minor")
    print(f"[minor] canonical {before} -> {drifted} -> {after}")
    paths = ("generator/tests", "packages/core/tests")
    run.step("minor", "nox -s tests -- generator/tests packages/core/tests", sys.executable, "-m", "nox", "-s",
             "tests", "--", *paths, cwd=tree)  # fmt: skip
    run.step("minor", "nox -s docs -- doctest (the docs' examples)", sys.executable, "-m", "nox", "-s", "docs", "--",
             "doctest", cwd=tree)  # fmt: skip
    within = tuple(p.replace("/", ".") + "." for p in paths)
    problems = []
    for build in ("compiled", "pure"):
        # the reference's pure run has no generator tests: compare each build's paths that both runs have
        p, notes = compare(junit / f"tests-{build}.xml", tree / JUNIT / f"tests-{build}.xml", within)
        problems += [f"{build}: {x}" for x in p]
        for note in notes:
            print(f"[minor] note: {build}: {note}")
    run.check("minor", "no test that passed here skips in the bumped tree", problems)
    the_way_back(run, "minor", tree, before)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("drift", "minor"), help="run one clone's gate")
    parser.add_argument("--work", type=Path, help="where the clones go (default: a new temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the clones (default: removed when green)")
    args = parser.parse_args(argv)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout  # fmt: skip
    if dirty:
        print("note: the gate tests the committed HEAD; this tree's uncommitted changes are not in its clones")
    work = args.work or Path(tempfile.mkdtemp(prefix="dlbind-bump-gate-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"bump gate: clones of {ROOT} at HEAD in {work}")
    run = Run()
    rc = 0
    try:
        junit = reference(run)
        if args.only in (None, "drift"):
            gate_drift(run, work, junit)
        if args.only in (None, "minor"):
            gate_minor(run, work, junit)
    except GateError as exc:
        print(f"\nbump gate FAILED: {exc} (the clones are kept in {work})", file=sys.stderr)
        rc = 1
    print("\n" + run.table())
    if rc == 0:
        print("bump gate: green (the suite passes in bumped trees, and the way back is clean)")
        if not args.keep and not args.work:
            shutil.rmtree(work, ignore_errors=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
