"""Every distribution ships the project's license: the copies beside each pyproject match the root LICENSE.

An sdist only holds files under its own folder, so ``packages/core/LICENSE`` and ``generator/LICENSE`` are
copies of the root ``LICENSE`` (named in ``license-files`` of each pyproject); this keeps them identical.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
DISTRIBUTIONS = ["packages/core", "generator"]


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
