"""The one front door of dlbind. ``nox -l`` lists the sessions; each says what it does."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import nox

ROOT = Path(__file__).parent
PYPROJECT = nox.project.load_toml("pyproject.toml")
CORE = "packages/core"
GENERATOR = "generator"

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["generate_check", "tests", "lint", "typecheck", "docs"]
nox.options.reuse_venv = "yes"


def _group(name: str) -> list[str]:
    return nox.project.dependency_groups(PYPROJECT, name)


def _install_generator(session: nox.Session) -> None:
    session.install("-e", GENERATOR)


@nox.session
def headers(session: nox.Session) -> None:
    """Download the DLPack headers listed in spec/headers.toml, verify their sha256, cache them in .cache/headers."""
    _install_generator(session)
    session.run("python", "-m", "dlbind_generator", "fetch")


@nox.session
def generate(session: nox.Session) -> None:
    """Regenerate everything from dlpack.h (pass `-- --check` to diff instead of writing; exit 1 if stale)."""
    _install_generator(session)
    session.run("python", "-m", "dlbind_generator", "generate", *session.posargs)


@nox.session
def bump(session: nox.Session) -> None:
    """Header bump: `nox -s bump -- SOURCE`, SOURCE a dlpack.h path (rehearsal) or PACKAGE==VERSION:PATH/IN/ARCHIVE.

    Reads the version from the header's macros, records source and sha256 in spec/headers.toml (a path as
    a `local =` entry: never commit it), makes it canonical when it is the newest, regenerates everything
    like `nox -s generate` and prints the summary of generator/REPORT.md. Refuses a version listed already
    with another sha256.
    """
    _install_generator(session)
    if len(session.posargs) != 1:
        session.error("usage: nox -s bump -- SOURCE  (PATH/TO/dlpack.h or PACKAGE==VERSION:PATH/IN/ARCHIVE)")
    session.run("python", "-m", "dlbind_generator", "bump", *session.posargs)


@nox.session(name="generate_check")
def generate_check(session: nox.Session) -> None:
    """Fail if any generated file differs from what the generator makes now (the staleness gate)."""
    _install_generator(session)
    session.run("python", "-m", "dlbind_generator", "generate", "--check")


@nox.session
def tests(session: nox.Session) -> None:
    """Run the tests on the compiled cffi build, then the core's again on the pure build (DLBIND_PURE=1)."""
    _install_generator(session)
    session.install(*_group("test"))
    # Reinstall the core every time: its compiled module is built from the generated code.
    session.install("--force-reinstall", "--no-deps", CORE)
    session.install(CORE)
    session.run("python", "-m", "dlbind_generator", "fetch", silent=True)
    if session.posargs:
        session.run("pytest", *session.posargs, env={"DLBIND_PURE": "0"})
        session.run("pytest", *session.posargs, env={"DLBIND_PURE": "1"})
        return
    session.run("pytest", env={"DLBIND_PURE": "0"})
    # The generator's tests do not depend on the build; the rest runs again on the pure build.
    session.run("pytest", "packages/core/tests", "tests", env={"DLBIND_PURE": "1"})


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the hand-written code (generated code is formatted by the generator)."""
    session.install(*_group("lint"))
    session.run("ruff", "check", ".")


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the core and the generator."""
    _install_generator(session)
    session.install(*_group("typecheck"))
    session.install(CORE)
    session.run("mypy")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx site into docs/_build/html (warnings are errors) and run its examples as doctests."""
    session.install(*_group("docs"))
    session.install(CORE)
    session.run("sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html")
    session.run("sphinx-build", "-W", "-q", "-b", "doctest", "docs", "docs/_build/doctest")


@nox.session
def build(session: nox.Session) -> None:
    """Build the sdist and the wheel (from the sdist) of core and generator into dist/, then check them installed."""
    session.install(*_group("build"))
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)  # only this run's files, so the check sees one of each
    for project in (CORE, GENERATOR):
        session.run("python", "-m", "build", "--outdir", str(dist), project)
    session.run("python", ".ci/check_dist.py", str(dist))


DEMO_LIBS = ["numpy>=2.0", "ml_dtypes==0.6.0", "torch==2.13.0", "jax==0.10.2", "array-api-strict==2.6.1",
             "apache-tvm-ffi==0.1.15.post2"]  # fmt: skip


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: install numpy, torch, jax (CPU), array-api-strict, tvm-ffi; print the conformance matrix."""
    session.install(*DEMO_LIBS)
    session.install(CORE)
    session.run("python", "-m", "dlbind", "info")
    session.run("python", "-m", "dlbind", "check", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """Regenerate docs/matrix.md (the conformance matrix of a real run, with date and library versions)."""
    session.install(*DEMO_LIBS)
    session.install(CORE)
    session.run("python", "-m", "dlbind", "check", "--markdown", "docs/matrix.md", "--json", ".cache/matrix.json")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (reports, never pass/fail): ns per exchange and start-up, beside anchors in the same run."""
    _install_generator(session)
    session.install(*_group("bench"))
    session.install("--force-reinstall", "--no-deps", CORE)
    session.install(CORE)
    session.run("python", "-m", "dlbind_generator", "fetch", silent=True)
    session.run(
        "python", "benchmarks/exchange.py", "--json", ".cache/bench/exchange.json", "--markdown", "docs/benchmarks.md",
        *session.posargs,
    )  # fmt: skip
    copies = ["--json", ".cache/bench/copies.json", "--markdown-append", "docs/benchmarks.md"]
    session.run("python", "benchmarks/copies.py", *copies)
    session.run("python", "benchmarks/startup.py", "--json", ".cache/bench/startup.json")


# -- reliability (issue 8): fuzzing, sanitisers, leaks ------------------------------------------------------

FUZZ = "packages/core/tests/fuzz"


def _install_core_for_tests(session: nox.Session, env: dict[str, str] | None = None) -> None:
    import shutil
    import tempfile

    session.install(*_group("test"))
    session.install(CORE)  # the dependencies (cffi, ...)
    # Then the core itself, compiled afresh with the session's flags: from a clean copy, because pip
    # builds in-tree and setuptools would reuse object files of another build in packages/core/build.
    with tempfile.TemporaryDirectory() as tmp:
        src = shutil.copytree(ROOT / CORE, f"{tmp}/core", ignore=shutil.ignore_patterns("build", "*.egg-info", "*.so"))
        session.install("--force-reinstall", "--no-deps", "--no-cache-dir", src, env=env)


@nox.session
def fuzz(session: nox.Session) -> None:
    """Fuzz long: 1,000,000 malformed capsules per build (both), crashes, deleter counts and build divergences.

    ``-- --count N --seed S`` change the corpus; atheris (libFuzzer) runs the same generator first,
    ``DLBIND_ATHERIS_RUNS`` inputs per build (default 100000).
    """
    import json
    import shutil

    _install_core_for_tests(session)
    session.install("atheris")
    out = ROOT / ".cache" / "fuzz"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    runs = session.env.get("DLBIND_ATHERIS_RUNS", "100000")
    for pure in ("0", "1"):  # a finding stops that build's atheris run (exit 77) and is saved as a crash-* file
        session.run(
            "python", f"{FUZZ}/atheris_harness.py", f"-runs={runs}", "-max_len=512", "-print_final_stats=1",
            "-error_exitcode=77", f"-artifact_prefix={out}/atheris-{pure}-", env={"DLBIND_PURE": pure},
            success_codes=[0, 77],
        )  # fmt: skip
    session.run(
        "python", f"{FUZZ}/drive.py", "--count", "1000000", "--chunk", "50000", "--convert-every", "20",
        "--jobs", str(min(2, os.cpu_count() or 1)), "--out", str(out), *session.posargs, success_codes=[0, 1],
    )  # fmt: skip
    findings = sorted(out.glob("atheris-*"))
    summary = json.loads((out / "summary.json").read_text())
    session.log(f"atheris findings: {[f.name for f in findings]}; corpus: {summary}")
    if findings or summary["crashes"] or summary["violations"] or summary["divergences"]:
        session.error("fuzzing found problems (see above)")


@nox.session
def asan(session: nox.Session) -> None:
    """Build the compiled core with AddressSanitizer and UBSan; run the core tests and the fuzz corpus under it.

    ``-- --count N`` sets the corpus size (default 20000). Reports are counted from the output; any report fails.
    """
    import json
    import shutil
    import subprocess

    # Recover mode: every report is printed and counted, and the run goes on (one halted test would hide the rest).
    flags = "-fsanitize=address,undefined -fsanitize-recover=address,undefined -fno-omit-frame-pointer -g -O1"
    _install_core_for_tests(session, env={"CFLAGS": flags, "LDFLAGS": "-fsanitize=address,undefined"})
    def gcc_lib(name: str) -> str:
        return subprocess.run(["gcc", f"-print-file-name={name}"], capture_output=True, text=True).stdout.strip()

    # libstdc++ preloaded too: otherwise ASan cannot find the real __cxa_throw of libraries loaded later
    # (torch, jaxlib) and aborts on their first C++ exception ("CHECK failed: real___cxa_throw").
    preload = f"{gcc_lib('libasan.so')} {gcc_lib('libstdc++.so.6')}"
    logs = ROOT / ".cache" / "asan"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir(parents=True)
    env = {
        "DLBIND_PURE": "0",
        "LD_PRELOAD": preload,
        # exit code 86 on a report, so that a report is never mistaken for a test failure (1)
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=0:exitcode=86",
        "UBSAN_OPTIONS": "halt_on_error=0:print_stacktrace=1:exitcode=86",
    }
    # The extension must carry the sanitiser runtime, or the run proves nothing.
    session.run("python", "-c", _ASAN_CHECK, env=env)
    counts = logs / "counts.json"
    sanrun = ["python", f"{FUZZ}/sanrun.py", str(counts), "--"]
    # -s: pytest must not capture the reports (those of the tests' own subprocesses are not counted).
    session.run(*sanrun, "python", "-m", "pytest", "packages/core/tests", "-q", "-s", "-p", "no:cacheprovider", env=env)
    count = "20000"
    if "--count" in session.posargs:
        count = session.posargs[session.posargs.index("--count") + 1]
    session.run(
        *sanrun, "python", f"{FUZZ}/drive.py", "--builds", "compiled", "--count", count, "--chunk", "5000",
        "--convert-every", "20", "--out", ".cache/asan-fuzz", env=env,
    )  # fmt: skip
    runs = json.loads(counts.read_text())
    total = sum(run["reports"] for run in runs)
    session.log(f"sanitizer reports: {total} ({runs})")
    if total:
        session.error(f"{total} AddressSanitizer/UBSan report(s)")


_ASAN_CHECK = """
import subprocess, dlbind, dlbind._ffi as f
assert dlbind.ffi_build() == "compiled", dlbind.ffi_build()
so = f.native.__file__
deps = subprocess.run(["ldd", so], capture_output=True, text=True).stdout
assert "libasan" in deps and "libubsan" in deps, deps
print("sanitised:", so)
"""


@nox.session
def leaks(session: nox.Session) -> None:
    """Leaks, threads and exit, long: 1,000,000 round trips per path and 10 s of 8 threads, on both builds."""
    _install_core_for_tests(session)
    env = {"DLBIND_LEAK_N": "1000000", "DLBIND_THREAD_SECONDS": "10"}
    tests = ["packages/core/tests/test_leaks.py", "packages/core/tests/test_threads_exit.py", "-s", "-q"]
    session.run("pytest", *tests, *session.posargs, env={**env, "DLBIND_PURE": "0"})
    session.run("pytest", *tests, *session.posargs, env={**env, "DLBIND_PURE": "1"})
