"""The one front door of dlbind. ``nox -l`` lists the sessions; each says what it does."""

from __future__ import annotations

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
    session.run("python", "benchmarks/startup.py", "--json", ".cache/bench/startup.json")
