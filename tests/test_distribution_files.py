"""Every distribution ships the project's license, writes its version once, and pins the others' release.

An sdist only holds files under its own folder, so ``packages/core/LICENSE`` and ``generator/LICENSE`` are
copies of the root ``LICENSE`` (named in ``license-files`` of each pyproject); this keeps them identical.
The five published distributions have one version, written once: the core's ``__version__``
(``packages/core/src/dlbind/__init__.py``, read by setuptools without importing). The core's setup.py pins
each backend at it in the extras; each backend's setup.py (one file, copied into each backend) takes it for
its own version and its pin of the core, from the core's source in the repository and from its PKG-INFO in
an sdist (docs/releasing.md). The generator, never published, keeps a version of its own.
"""

from __future__ import annotations

import ast
import re
import runpy
import shutil
from pathlib import Path
from typing import Any

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


def _literal(init: Path, name: str) -> str:
    tree = ast.parse(init.read_text(encoding="utf-8"))
    values = [
        node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        and [t.id for t in node.targets if isinstance(t, ast.Name)] == [name]
        and isinstance(node.value, ast.Constant)
    ]
    assert len(values) == 1, f"{init} must assign {name} a literal exactly once (setuptools reads it statically)"
    return str(values[0])


def _setup_keywords(setup_py: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What ``setup_py`` hands setuptools' ``setup()`` (run without building anything)."""
    import setuptools

    seen: dict[str, Any] = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kw: seen.update(kw))
    monkeypatch.setenv("DLBIND_NO_COMPILE", "1")  # the core's: no compiler probe
    monkeypatch.chdir(setup_py.parent)  # the core's chdirs there itself; restored afterwards
    runpy.run_path(str(setup_py), run_name="__main__")
    return seen


def _project(dist: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The ``[project]`` table, with what is dynamic in it (version, pins) from where setuptools takes it."""
    data = _pyproject(dist)
    project = dict(data["project"])
    attr = data["tool"].get("setuptools", {}).get("dynamic", {}).get("version", {}).get("attr")
    if attr is not None:  # the core, the generator
        module, _, name = attr.rpartition(".")
        project["version"] = _literal(ROOT / dist / "src" / module.replace(".", "/") / "__init__.py", name)
    if (ROOT / dist / "setup.py").is_file():
        keywords = _setup_keywords(ROOT / dist / "setup.py", monkeypatch)
        project.setdefault("version", keywords.get("version"))
        if "install_requires" in keywords:
            project["dependencies"] = keywords["install_requires"]
        if "extras_require" in keywords:
            project["optional-dependencies"] = keywords["extras_require"]
    return project


def test_the_version_is_written_once() -> None:
    """One literal ``__version__`` among the five published packages: the core's."""
    assigned = sorted(
        init.relative_to(ROOT).as_posix()
        for init in ROOT.glob("packages/*/src/*/__init__.py")
        if re.search(r"^__version__\s*=", init.read_text(encoding="utf-8"), re.M)
    )
    assert assigned == ["packages/core/src/dlbind/__init__.py"]
    assert _literal(ROOT / assigned[0], "__version__").count(".") == 2


@pytest.mark.parametrize("dist", DISTRIBUTIONS)
def test_the_pyproject_leaves_the_version_to_its_one_source(dist: str) -> None:
    project = _pyproject(dist)["project"]
    assert "version" not in project and "version" in project["dynamic"]
    pins = {"packages/core": "optional-dependencies", "generator": None}.get(dist, "dependencies")
    assert sorted(project["dynamic"]) == sorted(["version", *([pins] if pins else [])])
    assert pins is None or pins not in project  # written by setup.py, from the version


@pytest.mark.parametrize("backend", BACKENDS)
def test_backends_share_one_setup_py(backend: str) -> None:
    first = (ROOT / "packages" / BACKENDS[0] / "setup.py").read_bytes()
    assert (ROOT / "packages" / backend / "setup.py").read_bytes() == first


def test_a_backend_sdist_takes_its_version_from_its_pkg_info(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An sdist holds no core: the version (and the pin) is the one its PKG-INFO was written with."""
    sdist = tmp_path / "dlbind_cuda-9.8.7"
    sdist.mkdir()
    shutil.copy(ROOT / "packages" / "cuda" / "setup.py", sdist / "setup.py")
    (sdist / "PKG-INFO").write_text("Metadata-Version: 2.4\nName: dlbind-cuda\nVersion: 9.8.7\n", encoding="utf-8")
    keywords = _setup_keywords(sdist / "setup.py", monkeypatch)
    assert keywords["version"] == "9.8.7" and keywords["install_requires"] == ["dlbind==9.8.7", "cffi>=1.17"]
    (sdist / "PKG-INFO").unlink()
    with pytest.raises(SystemExit, match="no PKG-INFO"):
        _setup_keywords(sdist / "setup.py", monkeypatch)


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


def test_core_declares_one_extra_per_backend_pinning_the_same_release(monkeypatch: pytest.MonkeyPatch) -> None:
    core = _project("packages/core", monkeypatch)
    extras = core["optional-dependencies"]
    names = {"cuda", "rocm", "vulkan", "metal"}
    assert set(extras) == names | {"all"}
    for name in names:
        assert extras[name] == [f"dlbind-{name}=={core['version']}"]
    assert sorted(extras["all"]) == sorted(f"dlbind-{n}=={core['version']}" for n in names)
    assert "dependencies" in core and not any("dlbind-" in d for d in core["dependencies"])  # core alone: no backend


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_pins_the_core_and_registers(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    core, project = _project("packages/core", monkeypatch), _project(f"packages/{backend}", monkeypatch)
    assert project["name"] == f"dlbind-{backend}" and project["version"] == core["version"]
    assert f"dlbind=={core['version']}" in project["dependencies"]
    assert project["entry-points"]["dlbind.backends"] == {backend: f"dlbind_{backend}._backend:backend"}
    assert (ROOT / "packages" / backend / "src" / f"dlbind_{backend}" / "py.typed").is_file()
