"""Every distribution ships the project's license, writes its version once, and pins the others' release.

An sdist only holds files under its own folder, so ``packages/core/LICENSE`` and ``generator/LICENSE`` are
copies of the root ``LICENSE`` (named in ``license-files`` of each pyproject); this keeps them identical.
Each distribution's version is its package's ``__version__`` (``dynamic`` in the pyproject, read by
setuptools without importing); the core's extras and each backend's dependency pin the same release.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = sorted(p.parent.name for p in ROOT.glob("packages/*/pyproject.toml") if p.parent.name != "core")
DISTRIBUTIONS = ["packages/core", *(f"packages/{b}" for b in BACKENDS), "generator"]


def _pyproject(dist: str) -> dict:
    return tomllib.loads((ROOT / dist / "pyproject.toml").read_text(encoding="utf-8"))


def _project(dist: str) -> dict:
    """The ``[project]`` table, with its version read from where the pyproject says it is."""
    data = _pyproject(dist)
    project = dict(data["project"])
    attr = data["tool"]["setuptools"]["dynamic"]["version"]["attr"]
    module, _, name = attr.rpartition(".")
    init = ROOT / dist / "src" / module.replace(".", "/") / "__init__.py"
    tree = ast.parse(init.read_text(encoding="utf-8"))
    values = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == [name]
        and isinstance(node.value, ast.Constant)
    ]
    assert len(values) == 1, f"{init} must assign {name} a literal exactly once (setuptools reads it statically)"
    project["version"] = values[0]
    return project


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_the_version_is_written_once(dist: str) -> None:
    data = _pyproject(dist)
    assert "version" not in data["project"] and data["project"]["dynamic"] == ["version"]
    assert _project(dist)["version"].count(".") == 2


def test_root_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text.splitlines()[0]
    assert "Version 2.0, January 2004" in text
    assert "Copyright 2026 The dlbind developers" in text


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_license_copy_matches_root(dist: str) -> None:
    copy = ROOT / dist / "LICENSE"
    assert copy.is_file(), f"{dist}/LICENSE is missing: copy the root LICENSE there"
    assert copy.read_bytes() == (ROOT / "LICENSE").read_bytes(), f"{dist}/LICENSE differs from the root LICENSE"


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_pyproject_names_the_license(dist: str) -> None:
    project = tomllib.loads((ROOT / dist / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]


def test_core_declares_one_extra_per_backend_pinning_the_same_release() -> None:
    core = _project("packages/core")
    extras = core["optional-dependencies"]
    names = {"cuda", "rocm", "vulkan", "metal"}
    assert set(extras) == names | {"all"}
    for name in names:
        assert extras[name] == [f"dlbind-{name}=={core['version']}"]
    assert sorted(extras["all"]) == sorted(f"dlbind-{n}=={core['version']}" for n in names)
    assert "dependencies" in core and not any("dlbind-" in d for d in core["dependencies"])  # core alone: no backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_pins_the_core_and_registers(backend: str) -> None:
    core, project = _project("packages/core"), _project(f"packages/{backend}")
    assert project["name"] == f"dlbind-{backend}" and project["version"] == core["version"]
    assert f"dlbind=={core['version']}" in project["dependencies"]
    assert project["entry-points"]["dlbind.backends"] == {backend: f"dlbind_{backend}._backend:backend"}
    assert (ROOT / "packages" / backend / "src" / f"dlbind_{backend}" / "py.typed").is_file()
