"""The one front door of dlbind. ``nox -l`` lists the sessions; each says what it does."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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


def _interpreter(version: str) -> str:
    """pyenv's interpreter of ``version`` where there is one (pyenv's shims answer only the global version,
    so nox's discovery misses the others); else ``python<version>`` on PATH (a CI runner's, from setup-python);
    else ``version`` for nox to find."""
    import glob
    import os

    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    found = sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}"))
    return found[-1] if found else shutil.which(f"python{version}") or version


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


JUNIT = ROOT / ".cache" / "junit"  # tests-compiled.xml, tests-pure.xml: what `nox -s bump_gate` compares


@nox.session
def tests(session: nox.Session) -> None:
    """Run the tests on the compiled cffi build, then the core's again on the pure build (DLBIND_PURE=1).

    `nox -s tests -- PATHS/ARGS` runs those on both builds (the generator's tests, `generator/...`, once).
    Each run writes a JUnit report to .cache/junit/tests-<build>.xml (`nox -s bump_gate` compares a bumped
    tree's reports with these)."""
    _install_generator(session)
    session.install(*_group("test"))
    # Reinstall the core every time: its compiled module is built from the generated code.
    session.install("--force-reinstall", "--no-deps", CORE)
    session.install(CORE)
    session.run("python", "-m", "dlbind_generator", "fetch", silent=True)
    JUNIT.mkdir(parents=True, exist_ok=True)
    for build, pure in (("compiled", "0"), ("pure", "1")):
        args = list(session.posargs)
        if build == "pure":  # the generator's tests do not depend on the build: the pure run leaves them out
            args = [a for a in args if not a.startswith(GENERATOR)] if args else ["packages/core/tests", "tests"]
            if session.posargs and not args:
                break
        junit = f"--junitxml={JUNIT / f'tests-{build}.xml'}"
        session.run("pytest", *args, junit, env={"DLBIND_PURE": pure})


# The core's tests on every Python it claims besides 3.11 (`nox -s tests`, the only one with torch here), with
# the anchors that publish wheels for each (looked up on the package index, 2026-11-26). Tests of other
# libraries skip naming them. 3.10, 3.12 and 3.13 are pyenv's; 3.14 and 3.15 are Debian unstable's, in a
# root of their own (.ci/sidroot.py, session tests_sid).
PYTHONS = {
    "3.10": ["numpy==2.2.6", "ml_dtypes==0.6.0", "jax==0.6.2", "jaxlib==0.6.2", "tomli"],
    "3.12": ["numpy==2.5.5", "ml_dtypes==0.6.0", "jax==0.10.2"],
    "3.13": ["numpy==2.5.5", "ml_dtypes==0.6.0", "jax==0.10.2"],
}
# 3.14 and 3.15 (Debian unstable's): the core's tests with the same anchors as above where they have wheels
# (jaxlib starts at 0.11 on 3.15, whose jax sends max_version, unlike the 0.10 that tests/test_adapters.py
# describes: there jax runs in the interop venv only).
SID_PYTHONS = {
    "3.14": ["numpy==2.5.5", "ml_dtypes==0.6.0", "jax==0.10.2", "jaxlib==0.10.2"],
    "3.15": ["numpy==2.5.5", "ml_dtypes==0.6.0"],
}
# ... and tests/interop with every anchor that has a wheel for that Python, together in one venv (as the
# matrix's cells, each suite on both builds; the suites set NUMBA_ENABLE_CUDASIM and DEV=PYTHON themselves,
# dpnp's OpenCL CPU driver is named by the session). The matrix's pins where they have a wheel.
_INTEROP_NEWEST = ["numpy==2.5.5", "ml_dtypes==0.6.0", "jax==0.12.0.1", "jaxlib==0.12.0.1",
                   "array-api-strict==2.6.1", "apache-tvm-ffi==0.1.15.post2", "mlx[cpu]==0.32.4", "numba==0.68.1",
                   "tinygrad==0.14.0"]  # fmt: skip
SID_INTEROP = {
    "3.14": [*_INTEROP_NEWEST, "onnxruntime==1.31.1", "dpnp==0.20.0"],
    "3.15": _INTEROP_NEWEST,
}
# What each leaves out, and why (the session logs it; docs/pythons.md keeps the table).
_TORCH_WHY = ("the index's Linux wheels of torch for this Python (2.15.0) are CUDA builds of several GB; the CPU "
              "build lies only on PyTorch's own index, which cannot be reached here")  # fmt: skip
SID_SKIPPED = {
    version: {
        "torch": _TORCH_WHY,
        "tensorflow": f"no tensorflow-cpu wheel for Python {version}",
        "paddle": f"no paddlepaddle wheel for Python {version}",
        "mindspore": f"no mindspore wheel for Python {version}",
        "mxnet": f"mxnet 1.9.1 needs numpy < 2, which has no wheel for Python {version}",
        **({} if version == "3.14" else {
            "onnxruntime": f"no onnxruntime wheel for Python {version} (1.32.0 stops at 3.14)",
            "dpnp": f"no dpnp wheel for Python {version} (0.20.0 stops at 3.14)",
        }),
    }
    for version in SID_PYTHONS
}  # fmt: skip


# The pure build (DLBIND_PURE=1) runs on the Pythons where its Python code can behave differently: the oldest
# (3.10), 3.11 (`nox -s tests`), 3.12 (the first with `__buffer__`: a pure Tensor's buffer protocol) and the newest
# (3.15); the compiled build, whose C is built per Python, on every one. The two Pythons left out of the pure runs
# (3.13, 3.14) change nothing the pure build reads, and their runs cost about six minutes of .ci/run's 60 on two
# cores. DLBIND_BOTH_BUILDS=1 runs both builds on every Python (the GitHub workflow's job per Python does).
PURE_PYTHONS = ("3.10", "3.12", "3.15")


def _builds(version: str) -> tuple[str, ...]:
    """The DLBIND_PURE values the core's tests run with on this Python (both builds, or the compiled one)."""
    both = version in PURE_PYTHONS or os.environ.get("DLBIND_BOTH_BUILDS") == "1"
    return ("0", "1") if both else ("0",)


@nox.session(name="tests_python", tags=["pythons"])
@nox.parametrize("python,version", [nox.param(_interpreter(v), v, id=v) for v in PYTHONS])
def tests_python(session: nox.Session, version: str) -> None:
    """The core's tests on Python 3.10, 3.12 and 3.13, the compiled build, and the pure one where PURE_PYTHONS
    says (``nox -t pythons`` adds 3.14 and 3.15)."""
    _core_tests(session, version, PYTHONS[version])


@nox.session(name="tests_host")
@nox.parametrize("python,version", [nox.param(_interpreter(v), v, id=v) for v in SID_PYTHONS])
def tests_host(session: nox.Session, version: str) -> None:
    """The core's tests on Python 3.14 and 3.15 of the machine itself (a CI runner's), the builds of _builds, with
    the anchors of tests_sid, which runs them here in Debian unstable's root (no such interpreter runs on this
    libc)."""
    _core_tests(session, version, SID_PYTHONS[version])


def _core_tests(session: nox.Session, version: str, anchors: list[str]) -> None:
    session.install("pytest>=8", "hypothesis>=6.100", "setuptools", *anchors)
    if version != "3.10":  # the generator, a tool of this repository, needs 3.11 (its tests skip without it)
        with _clean_copy(GENERATOR) as generator:  # not in place: .ci/run runs other sessions meanwhile
            session.install("--upgrade", generator)  # --upgrade: the same version with other sources is reinstalled
    _install_core(session)
    session.run("python", "-c", "import sys, dlbind; print(sys.version.split()[0], dlbind.ffi_build())")
    # what `import dlbind` costs on this Python, beside numpy (a report: issue 23's target is <= 5 ms after numpy)
    session.run("python", "benchmarks/startup.py", "--imports-only", "--runs", "7")
    for pure in _builds(version):
        session.run("pytest", "packages/core/tests", "tests", "-q", *session.posargs, env={"DLBIND_PURE": pure})


def _sidroot() -> Any:
    """.ci/sidroot.py: Debian unstable's Python 3.14 and 3.15 in a root of their own, run through chroot."""
    import importlib.util
    import sys

    if "dlbind_sidroot" not in sys.modules:
        spec = importlib.util.spec_from_file_location("dlbind_sidroot", ROOT / ".ci" / "sidroot.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["dlbind_sidroot"] = module
        spec.loader.exec_module(module)
    return sys.modules["dlbind_sidroot"]


class _SidVenv:
    """A venv of one of the root's Pythons under .nox/_debian-sid/venvs/NAME (kept like nox's own), run inside
    the root: the repository, /tmp and pip's cache are at the same paths there as here."""

    def __init__(self, session: nox.Session, version: str, name: str) -> None:
        self.session, self.version = session, version
        self.sid = _sidroot()
        self.sid.ensure(log=session.log)
        self.path = ROOT / ".nox" / "_debian-sid" / "venvs" / name
        self.python = str(self.path / "bin" / "python")
        if not (self.path / "bin" / "python").is_symlink():  # (to the root's /usr/bin/python3.X: absent here)
            self.run(f"python{version}", "-m", "venv", "--clear", str(self.path))

    def run(self, *args: str, env: dict[str, str] | None = None, silent: bool = False) -> Any:
        return self.session.run(*self.sid.command(list(args), env=env, cwd=ROOT), external=True, silent=silent)

    def install(self, *args: str) -> None:
        self.run(self.python, "-m", "pip", "install", "-q", *args)

    def install_core(self) -> str:
        tag = f"cp{self.version.replace('.', '')}"
        wheel = _cached_core_wheel(
            tag, lambda out, src: self.run(self.python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src)
        )
        self.install("--force-reinstall", "--no-deps", wheel)
        self.install(wheel)  # its dependencies (cffi)
        return wheel


@nox.session(name="tests_sid", python=False, tags=["pythons"])
@nox.parametrize("version", [nox.param(v, id=v) for v in SID_PYTHONS])
def tests_sid(session: nox.Session, version: str) -> None:
    """The core's tests on Python 3.14 and 3.15 (the builds of _builds): Debian unstable's interpreters, run
    through chroot in a root of their own (.ci/sidroot.py builds it on first use, ~4 min; cached under .nox/)."""
    import time

    start = time.monotonic()
    venv = _SidVenv(session, version, f"tests-{version}")
    # the generator (the tests use it) from a copy: `nox` may be installing it at the same time in CI
    with _clean_copy(GENERATOR) as generator:
        venv.install("pytest>=8", "hypothesis>=6.100", "setuptools", *SID_PYTHONS[version])
        venv.install("--upgrade", generator)  # the same version with other sources is reinstalled
    venv.install_core()
    venv.run(venv.python, "-c", "import sys, dlbind; print(sys.version.split()[0], dlbind.ffi_build())")
    for pure in _builds(version):
        venv.run(venv.python, "-m", "pytest", "packages/core/tests", "tests", "-q", "-p", "no:cacheprovider",
                 *session.posargs, env={"DLBIND_PURE": pure})  # fmt: skip
    session.log(f"tests_sid {version}: {time.monotonic() - start:.1f} s wall")


@nox.session(name="interop_sid", python=False, tags=["pythons"])
@nox.parametrize("version", [nox.param(v, id=v) for v in SID_PYTHONS])
def interop_sid(session: nox.Session, version: str) -> None:
    """tests/interop on Python 3.14 and 3.15, both builds, with every anchor that has a wheel there (one venv in
    the root of tests_sid); the log names the anchors left out and why."""
    import time

    start = time.monotonic()
    for system, why in SID_SKIPPED[version].items():
        session.log(f"Python {version}: {system} left out: {why}")
    venv = _SidVenv(session, version, f"interop-{version}")
    venv.install("pytest>=8", *SID_INTEROP[version])
    venv.install_core()
    venv.run(venv.python, "-m", "pip", "check")
    env = {"OCL_ICD_FILENAMES": f"{venv.path}/lib/libintelocl.so"}  # dpnp's OpenCL CPU device, where installed
    for pure in ("0", "1"):
        venv.run(venv.python, "-m", "pytest", INTEROP_TESTS, "-q", "-p", "no:cacheprovider", *session.posargs,
                 env={**env, "DLBIND_PURE": pure})  # fmt: skip
    session.log(f"interop_sid {version}: {time.monotonic() - start:.1f} s wall")


@nox.session(name="bump_gate")
def bump_gate(session: nox.Session) -> None:
    """The header bump, gated: the suite in two clones of HEAD bumped to the rehearsal headers (.ci/bump_gate.py).

    drift (the canonical header plus the names it lacks, version kept: upstream's main) runs the README's
    `python3 -m nox`; minor (that, then the next minor with a name of its own) the generator's and the core's
    tests on both builds and the docs' doctests. No test that passed here may skip there; the way back
    (`canonical`) must leave HEAD's tree. `-- --only drift|minor`, `-- --keep` pass on to the script.
    """
    _install_generator(session)
    session.install(*_group("gate"))  # nox itself: the clones run their own sessions
    session.run("python", ".ci/bump_gate.py", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check over the hand-written code (generated code is formatted by the generator), every name the
    comments, docstrings and docs cite resolves (.ci/names.py: the packages installed, numpy for its names),
    no function grows past what a reader can hold (.ci/lengths.py), no model field with a closed set of values is
    compared with a string literal (.ci/closed_sets.py), and the GitHub workflows pass GitHub's schema
    and zizmor's audits (.ci/workflows.py)."""
    session.install(*_group("lint"))
    session.run("ruff", "check", ".")
    _install_generator(session)
    _install_core(session, "numpy", "pytest", "packages/cuda", "packages/rocm", "packages/metal", "packages/vulkan")
    session.run("python", ".ci/names.py")
    session.run("python", ".ci/lengths.py")
    session.run("python", ".ci/closed_sets.py")  # a closed-set field compared with a literal: name the constant
    # the GitHub workflows: GitHub's schema, zizmor's offline audits, actions pinned by commit; then the test that
    # plants each kind of error (tests/test_workflows.py: required here, where the tools are installed)
    session.run("python", ".ci/workflows.py")
    session.run("pytest", "tests/test_workflows.py", "-q", "-p", "no:cacheprovider",
                env={"DLBIND_WORKFLOW_TOOLS": "required"})  # fmt: skip


#: stubtest of the installed core: its stubs (the typed .py files, _fastpath.pyi, the generated _abi.pyi) against the
#: runtime, read at the running Python's version (not the configuration's 3.11: 3.13's NamedTuples have
#: __replace__); the allowlist names only what a stub cannot say, with why.
STUBTEST = ["python", "-m", "mypy.stubtest", "dlbind", "--allowlist", f"{CORE}/stubtest-allowlist.txt"]


@nox.session
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the core and the generator, then stubtest of the core's stubs against both builds."""
    _install_generator(session)
    session.install(*_group("typecheck"))
    _install_core(session)
    session.run("mypy")
    for pure in ("0", "1"):  # the compiled build (the C core and exporter) and the pure one (their Python twins)
        session.run(*STUBTEST, env={"DLBIND_PURE": pure})


@nox.session
def docs(session: nox.Session) -> None:
    """Build the Sphinx site into docs/_build/html (warnings are errors) and run its examples as doctests.

    `nox -s docs -- doctest` runs the examples only (`-- html`: the site only)."""
    session.run("python", ".ci/links.py")
    session.install(*_group("docs"))
    _install_core(session)
    builders = session.posargs or ["html", "doctest"]
    if "html" in builders:
        session.run("sphinx-build", "-W", "--keep-going", "-q", "-b", "html", "docs", "docs/_build/html")
    if "doctest" in builders:
        session.run("sphinx-build", "-W", "-q", "-b", "doctest", "docs", "docs/_build/doctest")


@nox.session(name="docs_screenshots")
def docs_screenshots(session: nox.Session) -> None:
    """Build the site afresh and check it in headless Chromium (Debian's ``chromium``, installed if missing):
    index, quickstart and API render with working navigation; screenshots in docs/_build/screenshots.

    ``-- --built`` checks the site `nox -s docs` built (docs/_build/html) instead of building it again: what CI
    does, whose `nox` has just built it from a fresh clone with warnings as errors. `nox -s docs` builds
    incrementally (no ``-E``), so in a tree with an older docs/_build only the fresh build checks every page."""
    _install_debs(session, ["chromium"])
    if session.posargs == ["--built"]:
        out = "docs/_build/html"
        if not (ROOT / out / "index.html").is_file():
            session.error(f"no site in {out}: run `nox -s docs` first")
    elif session.posargs:
        session.error(f"docs_screenshots takes only --built, not {' '.join(session.posargs)}")
    else:
        session.install(*_group("docs"))
        _install_core(session)
        out = "docs/_build/fresh-html"
        session.run("sphinx-build", "-W", "--keep-going", "-q", "-E", "-b", "html", "docs", out)
    session.run("python", "docs/screenshots.py", "--html", out, "--out", "docs/_build/screenshots")


# Every distribution: the core, each backend under packages/, the generator.
BACKENDS = sorted(
    p.parent.relative_to(ROOT).as_posix()
    for p in (ROOT / "packages").glob("*/pyproject.toml")
    if p.parent.name != "core"
)
DISTRIBUTIONS = [CORE, *BACKENDS, GENERATOR]

# The CPythons the core ships a binary wheel for (issue 23): pyenv's 3.10-3.13 here, Debian unstable's 3.14 and
# 3.15 in their root (.ci/sidroot.py). auditwheel (in that root: bookworm's patchelf is older than it needs)
# gives each the manylinux tag its symbols allow.
WHEEL_PYTHONS = ["3.10", "3.11", "3.12", "3.13", *SID_PYTHONS]
AUDITWHEEL = "auditwheel==6.8.2"


@nox.session
def build(session: nox.Session) -> None:
    """Build every distribution into dist/ and check it: sdists, pure wheels, and the core's binary wheel for
    each CPython 3.10-3.15 built from its sdist and repaired by auditwheel to a manylinux tag; then
    `twine check` and .ci/check_dist.py (contents, tags, fresh venvs of every Python, the README tour)."""
    import time

    session.install(*_group("build"))
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)  # only this run's files, so the check sees one of each
    for project in DISTRIBUTIONS:
        only = ["--sdist"] if project == CORE else []  # the core's wheels: one per Python, below
        session.run("python", "-m", "build", *only, "--outdir", str(dist), project)
    sdist = str(next(dist.glob("dlbind-*.tar.gz")))
    tools = _SidVenv(session, "3.14", "tools-3.14")
    tools.install(AUDITWHEEL)
    raw = ROOT / ".cache" / "raw-wheels"
    shutil.rmtree(raw, ignore_errors=True)
    for version in WHEEL_PYTHONS:
        start = time.monotonic()
        out = raw / version
        if version in SID_PYTHONS:
            venv = tools if version == tools.version else _SidVenv(session, version, f"tools-{version}")
            venv.run(venv.python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(out), sdist)
        else:
            python = _interpreter(version)
            session.run(python, "-m", "pip", "wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(out), sdist,
                        external=True)  # fmt: skip
        (wheel,) = out.glob("dlbind-*.whl")
        # the sessions of this Python reuse it (same sources: the sdist is made from them)
        _cached_core_wheel(f"cp{version.replace('.', '')}", lambda d, _, w=wheel: shutil.copy(w, d))
        tools.run(tools.python, "-m", "auditwheel", "repair", "-w", str(dist), str(wheel))
        session.log(f"core wheel for Python {version}: {time.monotonic() - start:.1f} s")
    session.run("python", "-m", "twine", "check", "--strict", *sorted(str(p) for p in dist.iterdir()))
    session.run("python", ".ci/check_dist.py", str(dist), *_check_dist_pythons())


@nox.session(name="dist_check", python=False)
def dist_check(session: nox.Session) -> None:
    """.ci/check_dist.py alone, against the dist/ that `nox -s build` made: `-- --only vulkan` runs one part (what
    .ci/run does with `VK_ICD_FILENAMES` pointed at nothing: the lavapipe checks skipped and named, no rebuild)."""
    import sys

    session.run(sys.executable, ".ci/check_dist.py", str(ROOT / "dist"), *_check_dist_pythons(), *session.posargs,
                external=True)  # fmt: skip


def _check_dist_pythons() -> list[str]:
    """check_dist.py's interpreters: pyenv's 3.12 for the numpy 2.5 run, and each pyenv CPython for its tour."""
    return ["--python-3.12", _interpreter("3.12"),
            *(f"--python={v}={_interpreter(v)}" for v in WHEEL_PYTHONS if v not in SID_PYTHONS)]  # fmt: skip


RELEASE_DIST = ROOT / ".cache" / "release-dist"


@nox.session(name="release_dry_run")
def release_dry_run(session: nox.Session) -> None:
    """What the release workflow does on Linux (.github/workflows/release.yml), without publishing: .ci/release.py
    builds the five published distributions' sdists and the backends' wheels (each from its sdist) into
    .cache/release-dist, takes the core's manylinux wheels of `nox -s build` (each built from the core's sdist;
    run it first: the release makes them with cibuildwheel), then checks the set (one version by name and
    metadata, the pins both ways, `twine check --strict`, a core wheel per CPython 3.10-3.15) and runs the
    README tour from it in a fresh venv of each CPython 3.10-3.13 (`nox -s build` toured 3.14 and 3.15)."""
    session.install(*_group("build"))
    shutil.rmtree(RELEASE_DIST, ignore_errors=True)
    session.run("python", ".ci/release.py", "build", "--outdir", str(RELEASE_DIST))
    built = sorted((ROOT / "dist").glob("dlbind-*-cp3*-manylinux*.whl"))
    if not built:
        session.error("no manylinux wheel of the core in dist/: run `nox -s build` first")
    (sdist,) = RELEASE_DIST.glob("dlbind-*.tar.gz")
    differ = _sdist_differences(sdist, ROOT / "dist" / sdist.name)
    if differ:
        session.error(f"dist/{sdist.name}, which the wheels were built from, differs from the one built now "
                      f"({', '.join(differ[:5])}): run `nox -s build` again")  # fmt: skip
    for wheel in built:
        shutil.copy(wheel, RELEASE_DIST)
    session.run("python", ".ci/release.py", "check", str(RELEASE_DIST), f"--pythons={','.join(WHEEL_PYTHONS)}",
                "--platforms=manylinux_x86_64")  # fmt: skip
    hosts = [f"--python={_interpreter(v)}" for v in WHEEL_PYTHONS if v not in SID_PYTHONS]
    session.run("python", ".ci/release.py", "tour", str(RELEASE_DIST), *hosts)


def _sdist_differences(a: Path, b: Path) -> list[str]:
    """The files two sdists do not hold alike (their archives' dates and setuptools' egg-info aside)."""
    import tarfile

    def files(path: Path) -> dict[str, bytes]:
        if not path.is_file():
            return {}
        with tarfile.open(path) as tf:
            return {
                m.name: tf.extractfile(m).read()  # type: ignore[union-attr]
                for m in tf.getmembers()
                if m.isfile() and ".egg-info/" not in m.name
            }

    ours, theirs = files(a), files(b)
    return sorted(name for name in ours.keys() | theirs.keys() if ours.get(name) != theirs.get(name))


VULKAN_DEBS = ["mesa-vulkan-drivers", "libvulkan1", "libvulkan-dev"]
# Debian's HIP runtime and header: dlbind-rocm's probe answers "no device" for real without a GPU, and the
# generator selects from the header. gcc builds the recording runtimes of dlbind-cuda's and dlbind-rocm's tests.
ROCM_DEBS = ["libamdhip64-5", "libamdhip64-dev"]


def _install_debs(session: nox.Session, debs: list[str]) -> None:
    """Install Debian packages that are missing (as root, with apt-get update first); say so otherwise."""
    import subprocess

    missing = [d for d in debs if subprocess.run(["dpkg", "-s", d], capture_output=True).returncode != 0]
    if not missing:
        return
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        session.warn(f"not installing {missing} (needs apt-get as root): tests that need them will skip")
        return
    session.run("apt-get", "update", "-qq", external=True)
    session.run("apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing, external=True,
                env={"DEBIAN_FRONTEND": "noninteractive"})  # fmt: skip


@nox.session
def backends(session: nox.Session) -> None:
    """The device backends' tests on both core builds; installs Mesa's lavapipe and Debian's HIP runtime first.

    CUDA and ROCm run on recording fakes of their runtimes (built with gcc) and on the real runtimes where
    they load; their GPU tests skip naming what is missing. Metal's code paths run on a fake of libobjc and
    Metal (built with gcc); off macOS its real probe says "wrong platform" and its Metal tests skip.
    """
    _install_debs(session, VULKAN_DEBS + ROCM_DEBS + ["gcc", "libc6-dev"])
    session.install(*_group("backends"))
    _install_generator(session)  # dlbind-cuda compares its selection with the CUDA 12 header
    _install_core(session, *BACKENDS)
    tests = [f"{b}/tests" for b in BACKENDS] + ["packages/core/tests/test_backends.py"]
    for pure in ("0", "1"):
        session.run("pytest", *tests, *session.posargs, env={"DLBIND_PURE": pure})


# The demo's libraries: those that install in reasonable time (mlx's CPU build is 40 MB installed).
# paddlepaddle is verified in its interop cell but left out here: its CPU wheel installs 720 MB
# (`pip install paddlepaddle==3.3.1`, then `python -m dlbind check --libs paddle`).
# MAX (1.7 GB) is checked in its interop cell only
DEMO_LIBS = ["numpy>=2.0", "ml_dtypes==0.6.0", "torch==2.13.0", "jax==0.10.2", "array-api-strict==2.6.1",
             "apache-tvm-ffi==0.1.15.post2", "mlx[cpu]==0.32.4", "pyarrow==26.0.1", "drjit==1.5.0", "awkward==2.14.0",
             "cuda-core==1.2.2"]  # fmt: skip
# what a system of DEMO_LIBS needs to import that its own requirements leave out (cuda.core: its CUDA bindings,
# whose cu13 extra would pull the whole toolkit)
DEMO_NEEDS = ["cuda-bindings==13.5.0"]


@nox.session
def demo(session: nox.Session) -> None:
    """The main job: install numpy, torch, jax, array-api-strict, tvm-ffi, mlx (CPU builds), pyarrow, Dr.Jit,
    awkward and cuda.core; print the matrix."""
    session.install(*DEMO_LIBS, *DEMO_NEEDS)
    session.install(CORE)
    session.run("python", "-m", "dlbind", "info")
    session.run("python", "-m", "dlbind", "check", *session.posargs)


@nox.session
def matrix(session: nox.Session) -> None:
    """Regenerate docs/matrix.md (the conformance matrix of a real run, with date and library versions)."""
    session.install(*DEMO_LIBS, *DEMO_NEEDS)
    session.install(CORE)
    session.run("python", "-m", "dlbind", "check", "--markdown", "docs/matrix.md", "--json", ".cache/matrix.json")


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks (reports, never pass/fail): ns per exchange, instructions per exchange (valgrind) and start-up,
    beside anchors in the same run."""
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
    session.run(
        "python", "benchmarks/chart.py", "--exchange", ".cache/bench/exchange.json", "--copies",
        ".cache/bench/copies.json", "--png", "docs/benchmarks.png", "--markdown-append", "docs/benchmarks.md",
    )  # fmt: skip
    startup = ["--json", ".cache/bench/startup.json", "--markdown-append", "docs/benchmarks.md"]
    session.run("python", "benchmarks/startup.py", *startup)
    # instruction counts (valgrind's callgrind; skipped, saying so, where valgrind is not installed)
    counts = ["--json", ".cache/bench/instructions.json", "--markdown-append", "docs/benchmarks.md"]
    session.run("python", "benchmarks/instructions.py", *counts)
    # the GPU rows: no GPU here, so the last run on one (.ci/gpu's bench.json, kept in benchmarks/results/)
    gpu = ["--from-json", str(GPU_RESULTS / "bench.json"), "--markdown-append", "docs/benchmarks.md"]
    session.run("python", "benchmarks/gpu.py", *gpu)


@nox.session
def vendor(session: nox.Session) -> None:
    """Vendoring's acceptance (issue 10): docs/vendoring.md's two libraries, built once, in a venv without dlbind.

    hostlib vendors the compiled build at DLPack 1.0, purelib the pure build at the canonical header;
    both install into a fresh venv (numpy, torch; no dlbind) and exchange with numpy, torch and each
    other; dlbind.testing checks them from this session; re-vendoring refuses a host edit, --force
    overwrites it (tests/vendoring). pip's cache is reused. Prints the steps' and the session's times.
    """
    import time

    start = time.monotonic()
    _install_generator(session)
    session.install("pytest>=8", "numpy==2.4.6", "ml_dtypes==0.6.0", "cffi>=1.17")
    session.install(CORE)
    session.run("python", "-m", "dlbind_generator", "fetch", silent=True)
    session.run(
        "python", "-m", "pytest", "tests/vendoring", "-q", "-s", "-p", "no:cacheprovider", *session.posargs,
        env={"DLBIND_VENDOR_ACCEPTANCE": "1"},
    )  # fmt: skip
    session.log(f"vendor acceptance: {time.monotonic() - start:.1f} s wall")


# mpi4py from the registry, built from its sdist against Debian's MPICH: the registry's binary wheel needs
# libmpi.so.12 (MPICH's upstream name), which Debian ships as libmpich.so.12. pip caches the built wheel.
MPI_DEBS = ["mpich", "libmpich-dev", "gcc", "libc6-dev"]
MPI4PY = "mpi4py==4.1.2"


@nox.session
def mpi(session: nox.Session) -> None:
    """Two MPI ranks exchange dlbind exports through mpi4py (tests/mpi, issue 11), on both core builds.

    Installs Debian's MPICH (apt-get as root), builds mpi4py against its mpicc, then runs
    `mpiexec -n 2 python tests/mpi/exchange.py` through tests/mpi/test_mpi.py: sends of an asdlpack export
    and a Tensor from numpy's memory, receives into dlbind-wrapped buffers, Allreduce, the read-only refusal.
    """
    import time

    start = time.monotonic()
    _install_debs(session, MPI_DEBS)
    if shutil.which("mpicc") is None or shutil.which("mpiexec") is None:
        session.error("mpicc/mpiexec not found: install Debian's mpich and libmpich-dev (as root: nox does it)")
    session.install("pytest>=8", "numpy==2.4.6")
    session.install("--no-binary", "mpi4py", MPI4PY, env={"MPICC": shutil.which("mpicc") or "mpicc"})
    _install_core(session)
    session.run("python", "-c", "import mpi4py; from mpi4py import MPI; print('mpi4py', mpi4py.__version__, "
                "MPI.__file__); print(MPI.Get_library_version().splitlines()[0])")  # fmt: skip
    for pure in ("0", "1"):
        session.run("pytest", "tests/mpi", "-q", "-rA", "-p", "no:cacheprovider", *session.posargs,
                    env={"DLBIND_PURE": pure})  # fmt: skip
    session.log(f"mpi: {time.monotonic() - start:.1f} s wall")


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
    """Fuzz long: 1,000,000 malformed capsules and 200,000 lying producer objects per build (both), crashes, deleter
    counts and build divergences.

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
    # producer objects (issue 38): lying __array_interface__, buffers and CUDA interfaces, both builds compared
    producers = out / "producers"
    session.run(
        "python", f"{FUZZ}/producers.py", "--both", str(producers), "--count",
        session.env.get("DLBIND_FUZZ_PRODUCERS", "200000"), "--seed", "0", success_codes=[0, 1],
    )  # fmt: skip
    findings = sorted(out.glob("atheris-*"))
    summary = json.loads((out / "summary.json").read_text())
    objects = json.loads((producers / "summary.json").read_text())
    session.log(f"atheris findings: {[f.name for f in findings]}; corpus: {summary}")
    crashed = any(objects["crashes"].values()) or any(objects["violations"].values()) or objects["divergences"]
    session.log(f"producer objects: {objects['inputs']} per build, crashes {objects['crashes']}, violations "
                f"{objects['violations']}, {len(objects['divergences'])} divergences")  # fmt: skip
    if findings or summary["crashes"] or summary["violations"] or summary["divergences"] or crashed:
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
        # exit code 86 on a report, so that a report is never mistaken for a test failure (1); an allocation too
        # large returns NULL, as malloc does (a failed huge copy is a MemoryError: test_descriptions)
        "ASAN_OPTIONS": "detect_leaks=0:halt_on_error=0:exitcode=86:allocator_may_return_null=1",
        "UBSAN_OPTIONS": "halt_on_error=0:print_stacktrace=1:exitcode=86",
    }
    # The extension must carry the sanitiser runtime, or the run proves nothing.
    session.run("python", "-c", _ASAN_CHECK, env=env)
    counts = logs / "counts.json"
    sanrun = ["python", f"{FUZZ}/sanrun.py", str(counts), "--"]
    # -s: pytest must not capture the reports (those of the tests' own subprocesses are not counted).
    # (the pytest plugin's test of a deliberate crash expects the process killed by SIGSEGV: under the sanitiser
    # it reports and exits 86 instead, so it runs in `nox -s tests` only)
    crash = "packages/core/tests/test_pytest_plugin.py::test_isolate_turns_a_crash_into_a_failed_item"
    session.run(*sanrun, "python", "-m", "pytest", "packages/core/tests", "-q", "-s", "-p", "no:cacheprovider",
                "--deselect", crash, env=env)  # fmt: skip
    count = "20000"
    if "--count" in session.posargs:
        count = session.posargs[session.posargs.index("--count") + 1]
    session.run(
        *sanrun, "python", f"{FUZZ}/drive.py", "--builds", "compiled", "--count", count, "--chunk", "5000",
        "--convert-every", "20", "--out", ".cache/asan-fuzz", env=env,
    )  # fmt: skip
    # producer objects (issue 38) through every entry point and copy path, under the sanitisers
    session.run(*sanrun, "python", f"{FUZZ}/producers.py", "--seed", "0", "--count", count, env=env)
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
    """Leaks, threads, signals and exit, long: 1,000,000 round trips per path, 10 s of 8 threads and 20,000 timer
    interrupts mid-exchange, on both builds."""
    _install_core_for_tests(session)
    env = {"DLBIND_LEAK_N": "1000000", "DLBIND_THREAD_SECONDS": "10", "DLBIND_SIGNALS": "20000"}
    tests = ["packages/core/tests/test_leaks.py", "packages/core/tests/test_threads_exit.py",
             "packages/core/tests/test_signals.py", "-s", "-q"]  # fmt: skip
    session.run("pytest", *tests, *session.posargs, env={**env, "DLBIND_PURE": "0"})
    session.run("pytest", *tests, *session.posargs, env={**env, "DLBIND_PURE": "1"})


# -- the interop version matrix (issue 13) ------------------------------------------------------------------


class _System:
    """One cell of the matrix: a system at one version, the pins that install it and how to run it."""

    def __init__(
        self, system: str, version: str, pins: list[str], *, python: str = "3.11", check: str | None = None,
        env: dict[str, str] | None = None, numpy_suite: bool = False, tools: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        self.system, self.version, self.pins, self.python = system, version, pins, python
        self.check = check if check is not None else system  # the name given to `python -m dlbind check --libs`
        self.env = env or {}  # "{venv}" is replaced by the session's virtualenv
        self.numpy_suite = numpy_suite  # run numpy's own test_dlpack.py with dlbind in both roles
        self.tools = tools  # programs the system runs (.ci/run installs them with apt-get)


# Exact pins only (torch: any other spec pulls a multi-GB CUDA build). numpy's newest needs Python 3.12.
# torch joins the cells where it installs beside the system, for the system <-> torch pairs (tests/interop).
TORCH = "torch==2.13.0"
INTEROP_SYSTEMS = [
    _System("numpy", "1.24", ["numpy==1.24.4"], numpy_suite=True),
    _System("numpy", "1.26", ["numpy==1.26.4"], numpy_suite=True),
    _System("numpy", "2.0", ["numpy==2.0.2"], numpy_suite=True),
    _System("numpy", "newest", ["numpy==2.5.5"], python="3.12", numpy_suite=True),
    _System("jax", "0.10", ["jax==0.10.2", "jaxlib==0.10.2"]),
    _System("jax", "newest", ["jax==0.12.0.1", "jaxlib==0.12.0.1"], python="3.12"),
    _System("torch", "2.13", ["torch==2.13.0", "numpy==2.4.6"]),
    _System("tvm_ffi", "0.1", ["apache-tvm-ffi==0.1.15.post2", "numpy==2.4.6"]),
    _System("array_api_strict", "2.6", ["array-api-strict==2.6.1", "numpy==2.4.6"]),
    _System("paddle", "3.3", ["paddlepaddle==3.3.1", TORCH]),
    _System("mlx", "0.32", ["mlx[cpu]==0.32.4", "numpy==2.4.6", TORCH]),
    _System("tensorflow", "2.21", ["tensorflow-cpu==2.21.0", TORCH]),
    _System("onnxruntime", "1.31", ["onnxruntime==1.31.1", TORCH]),
    _System("mxnet", "1.9", ["mxnet==1.9.1", "numpy==1.23.5"]),
    _System("numba", "0.68", ["numba==0.68.1"], env={"NUMBA_ENABLE_CUDASIM": "1"}),
    _System("mindspore", "2.10", ["mindspore==2.10.0", "numpy==1.26.4"]),
    _System("tinygrad", "0.14", ["tinygrad==0.14.0", "numpy==2.4.6"], env={"DEV": "PYTHON"}, tools=("clang",)),
    _System("dpnp", "0.20", ["dpnp==0.20.0"], env={"OCL_ICD_FILENAMES": "{venv}/lib/libintelocl.so"}),
    _System("pyarrow", "15", ["pyarrow==15.0.2", "numpy==1.26.4"]),  # its first __dlpack__; it needs numpy<2
    _System("pyarrow", "newest", ["pyarrow==26.0.1", "numpy==2.4.6", TORCH]),
    # warp beside Arrow: `dlbind check --libs numpy,pyarrow,warp` (issue 30)
    _System("warp", "1.19", ["warp-lang==1.19.0", "pyarrow==26.0.1", "numpy==2.4.6", TORCH],
            check="numpy,pyarrow,warp"),
    _System("drjit", "1.5", ["drjit==1.5.0", "numpy==2.4.6", TORCH]),
    _System("awkward", "2.14", ["awkward==2.14.0", "numpy==2.4.6", TORCH]),
    # cuda.core imports on a machine without a GPU: its views of host memory are checked here
    _System("cuda_core", "1.2", ["cuda-core==1.2.2", "cuda-bindings==13.5.0", "cuda-pathfinder==1.9.1",
                                 "numpy==2.4.6", TORCH]),
    # CuPy imports on a machine without a GPU: its dtypes and device objects are checked here; its arrays need a
    # GPU (.ci/gpu)
    _System("cupy", "14.2", ["cupy-cuda13x==14.2.0", "numpy==2.4.6"]),
    # MAX installs 1.7 GB (max-core, the Mojo libraries): its own cell, its venv discarded after it in CI
    _System("max", "26.7", ["max==26.7.0", "numpy==2.4.6", TORCH]),
]
INTEROP_TESTS = "tests/interop"


@nox.session(tags=["interop"])
@nox.parametrize(
    "python,cell",
    [
        nox.param(_interpreter(c.python), c, id=f"system={c.system!r}, version={c.version!r}")
        for c in INTEROP_SYSTEMS
    ],
)
def interop(session: nox.Session, cell: _System) -> None:
    """One system at one version (issue 13): tests/interop/ and `dlbind check --libs NAME` on both builds.

    numpy sessions also run numpy's own test_dlpack.py from the installed wheel with dlbind as producer
    and as consumer (tests/interop/numpy_suite.py). ``nox -s interop`` runs every cell; ``-- ARGS`` go
    to pytest. Prints each run's test counts and the session's wall time.
    """
    import time

    start = time.monotonic()
    venv = str(session.virtualenv.location)
    try:
        _interop_cell(session, cell, venv)
    finally:
        # CI (.ci/interop sets it) keeps one cell's venv on disk at a time: the 21 together take ~16 GB,
        # more than a CI machine's free disk may hold beside the other sessions.
        if os.environ.get("DLBIND_INTEROP_DISCARD") == "1":
            shutil.rmtree(venv, ignore_errors=True)
            session.log(f"removed {venv} (DLBIND_INTEROP_DISCARD=1)")
    session.log(f"interop {cell.system} {cell.version}: {time.monotonic() - start:.1f} s wall")


def _interop_cell(session: nox.Session, cell: _System, venv: str) -> None:
    missing = [tool for tool in cell.tools if shutil.which(tool) is None]
    if missing:
        session.error(f"{cell.system} needs {', '.join(missing)} on PATH: apt-get install {' '.join(missing)}")
    env = {k: v.replace("{venv}", venv) for k, v in cell.env.items()}
    session.install("pytest>=8", "cffi>=1.17", *cell.pins)
    # The core from this tree (its compiled module comes from the generated code), as a wheel built once
    # per interpreter and source state, so the cells do not compile it 18 times; --no-deps: the pins stay.
    session.install("--force-reinstall", "--no-deps", _core_wheel(session))
    out = ROOT / ".cache" / "interop" / f"{cell.system}-{cell.version}"
    out.mkdir(parents=True, exist_ok=True)
    session.run("python", "-m", "pip", "check")
    counts: list[str] = []
    for pure in ("0", "1"):
        summary = out / f"tests-pure{pure}.json"
        session.run(
            "python", "-m", "pytest", INTEROP_TESTS, "-q", "-p", "no:cacheprovider", *session.posargs,
            env={**env, "DLBIND_PURE": pure, "DLBIND_INTEROP_SUMMARY": str(summary),
                 "DLBIND_INTEROP_SYSTEM": cell.system},
        )  # fmt: skip
        counts.append(f"tests/interop, pure={pure}: {_counts(summary)}")
        session.run(
            "python", f"{INTEROP_TESTS}/run_check.py", cell.check, env={**env, "DLBIND_PURE": pure}
        )  # fmt: skip
        if cell.numpy_suite:
            for role in ("producer", "consumer"):
                summary = out / f"numpy-suite-{role}-pure{pure}.json"
                session.run(
                    "python", f"{INTEROP_TESTS}/numpy_suite.py", "--role", role, "--summary", str(summary),
                    env={**env, "DLBIND_PURE": pure},
                )  # fmt: skip
                counts.append(f"numpy's test_dlpack.py, dlbind as {role}, pure={pure}: {_counts(summary)}")
    for line in counts:
        session.log(line)


def _core_digest() -> str:
    """A hash of the core's sources: what its compiled build is made from (build outputs left out)."""
    import hashlib

    digest = hashlib.sha256()
    core = ROOT / CORE
    for path in sorted(core.rglob("*")):
        rel = path.relative_to(core)
        if not path.is_file() or rel.parts[0] == "build" or path.suffix in (".so", ".pyc", ".o"):
            continue
        if any(part.endswith(".egg-info") or part == "__pycache__" for part in rel.parts):
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# One compiled core wheel per Python and source state, shared by every session of that Python (the tests,
# typecheck, docs, backends, mpi and the interop cells) instead of each compiling its own; `nox -s build` puts
# the wheels it builds from the sdist here too.
CORE_WHEELS = ROOT / ".cache" / "core-wheels"


@contextlib.contextmanager
def _clean_copy(project: str) -> Iterator[str]:
    """A copy of ``project`` in a new folder under /tmp (also seen inside Debian unstable's root), without build
    outputs: pip builds a local project in place (egg-info, build folders), which two sessions running at once
    (.ci/run's lanes) must not share."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dlbind-src-") as tmp:
        dest = Path(tmp) / Path(project).name
        ignore = shutil.ignore_patterns("build", "*.egg-info", "*.so", "__pycache__", "dist")
        shutil.copytree(ROOT / project, dest, ignore=ignore)
        yield str(dest)


def _cached_core_wheel(tag: str, build: Callable[[str, str], object]) -> str:
    """The core's wheel for CPython ``tag`` (``cp311``) at the current sources; ``build(DIR, SOURCE)`` makes it
    once into DIR from SOURCE, a clean copy of the core."""
    import tempfile

    out = CORE_WHEELS / f"{_core_digest()}-{tag}"
    if not list(out.glob("*.whl")):
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=out.parent) as tmp, _clean_copy(CORE) as src:
            build(tmp, src)
            if not list(Path(tmp).glob("*.whl")):  # nox --no-install skips run_install's command
                return str(ROOT / CORE)
            try:
                Path(tmp).rename(out)  # atomic; refused when another session (.ci/run runs two) was first
                Path(tmp).mkdir()  # for TemporaryDirectory's cleanup
            except OSError:
                pass  # theirs is the same build
    return str(next(out.glob("*.whl")))


def _core_wheel(session: nox.Session) -> str:
    """The core's wheel for the session's interpreter, built from the current sources (cached by their hash)."""
    tag = session.run_install("python", "-c", "import sys; print('cp%d%d' % sys.version_info[:2])", silent=True)
    return _cached_core_wheel(
        str(tag).strip(),
        lambda out, src: session.run_install("python", "-m", "pip", "wheel", "-q", "--no-deps", "-w", out, src),
    )


def _install_core(session: nox.Session, *extra: str) -> None:
    """Install the core (the shared wheel of this Python, reinstalled whatever the venv held) and ``extra``."""
    wheel = _core_wheel(session)
    session.install("--force-reinstall", "--no-deps", wheel)
    session.install(wheel, *extra)  # the core's dependencies (cffi) and the rest


@nox.session(name="interop_report", python=False)
def interop_report(session: nox.Session) -> None:
    """Write docs/interop.md from spec/adapters.toml and the last matrix run (.cache/interop); `-- --check` diffs.

    Fails when a cell of the matrix has not run (run `nox -t interop` first) or, with --check, when the
    committed page differs from what the run gives.
    """
    cells = [f"{c.system}|{c.version}|{' '.join(c.pins)}" for c in INTEROP_SYSTEMS]
    session.run("python3", "tests/interop/report.py", "--cells", *cells, "--", *session.posargs)


def _counts(summary: Path) -> str:
    import json

    if not summary.exists():  # --install-only: nothing ran
        return "not run"
    data = json.loads(summary.read_text())
    parts = ", ".join(f"{n} {k}" for k, n in sorted(data.items()) if k not in ("ran", "gaps") and n)
    return f"{data.get('ran', 0)} ran: {parts}"


# -- the GPU run (issue 21) -----------------------------------------------------------------------------------

# the last .ci/gpu run on a GPU, kept (bench.json, summary.txt, torch-dlpack-*.json): docs/benchmarks.md's GPU
# section (nox -s bench) and docs/interop.md's (nox -s interop_report) are rendered from it
GPU_RESULTS = ROOT / "benchmarks" / "results" / "gpu-h200"


@nox.session(venv_params=["--system-site-packages"])
def gpu(session: nox.Session) -> None:
    """The GPU run: build the core (for this session's Python) and dlbind-cuda wheels into .cache/gpu-dist,
    then `bash .ci/gpu` with them.

    .ci/gpu installs the wheels into a temporary folder, prints the GPU, the libraries and the backends,
    then runs packages/cuda/tests and tests/gpu on both builds, compute-sanitizer memcheck of
    tests/gpu/sanitize.py and benchmarks/gpu.py, in under 5 minutes, with logs, the summary and the
    benchmark's JSON and Markdown in $OUT (else .cache/gpu). The venv sees the interpreter's own packages
    (torch, CuPy, JAX, numba-cuda). Without a GPU it says why and skips everything (exit 0). A GPU machine
    without network or nox: `bash .ci/gpu-wheels DIR` here, carry DIR, `bash .ci/gpu DIR` there (docs/gpu.md).
    """
    session.install("setuptools>=77", "cffi>=1.17", "wheel")
    dist = ROOT / ".cache" / "gpu-dist"
    shutil.rmtree(dist, ignore_errors=True)
    dist.mkdir(parents=True)
    session.run(
        "python", "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(dist), CORE,
        "packages/cuda",
    )  # fmt: skip
    python = str(Path(session.bin) / "python")
    session.run("bash", ".ci/gpu", str(dist), external=True, env={"PYTHON": python})
