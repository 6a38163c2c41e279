"""The generator installs as a wheel: every subpackage is listed and the templates are package data.

``generator/pyproject.toml`` lists its packages explicitly (it maps ``generator/templates`` into the
package), so a new subpackage that is not listed would be missing from the wheel; this catches it.
``nox -s build`` proves the rest by running the installed wheel.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

import tomllib

from dlbind_generator.render import TEMPLATES, environment

GENERATOR = Path(__file__).resolve().parents[1]


def _setuptools() -> dict[str, object]:
    config = tomllib.loads((GENERATOR / "pyproject.toml").read_text(encoding="utf-8"))
    tool: dict[str, object] = config["tool"]["setuptools"]
    return tool


def test_every_subpackage_is_listed() -> None:
    src = GENERATOR / "src"
    found = {
        ".".join(p.parent.relative_to(src).parts) for p in src.rglob("__init__.py") if "__pycache__" not in p.parts
    }
    listed = set(_setuptools()["packages"])  # type: ignore[call-overload]
    missing = sorted(found - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in generator/pyproject.toml"


def test_templates_are_found_as_package_data() -> None:
    assert _setuptools()["package-dir"] == {"": "src", "dlbind_generator.templates": "templates"}
    on_disk = sorted(p.name for p in (GENERATOR / "templates").glob("*.j2"))
    assert on_disk, "generator/templates holds no templates"
    resources = importlib.resources.files("dlbind_generator.templates")
    assert sorted(r.name for r in resources.iterdir() if r.name.endswith(".j2")) == on_disk
    assert Path(str(resources)) == TEMPLATES
    assert sorted(n for n in environment().list_templates() if n.endswith(".j2")) == on_disk
