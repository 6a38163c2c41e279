"""What the nox sessions install: the tests run against every library the demo shows, and torch stays the CPU
build (pinned exactly: any other spec pulls a multi-GB CUDA build)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"


def _name(requirement: str) -> str:
    """A requirement's distribution name, normalised (``mlx[cpu]==0.32.4`` -> ``mlx``)."""
    return re.split(r"[\[=<>!~ ;]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _groups() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: [r for r in reqs if isinstance(r, str)] for name, reqs in data["dependency-groups"].items()}


def _nox_strings() -> list[str]:
    """Every string literal of noxfile.py (read, never imported)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def _demo_libs() -> list[str]:
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "DEMO_LIBS" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError("noxfile.py has no DEMO_LIBS")


def test_the_tests_install_what_the_demo_installs() -> None:
    """`nox -s tests` installs the dependency group `test`: every library of `nox -s demo`, at the same pin (the
    matrix the demo prints is then one the tests have seen)."""
    test = {_name(r): r for r in _groups()["test"]}
    missing = [r for r in _demo_libs() if _name(r) not in test]
    assert not missing, f"the demo installs {missing}; the tests do not (pyproject.toml, dependency group test)"
    differ = [(r, test[_name(r)]) for r in _demo_libs() if test[_name(r)] != r]
    assert not differ, f"the demo and the tests pin these differently: {differ}"


def test_torch_is_pinned_exactly_everywhere() -> None:
    found = [r for reqs in _groups().values() for r in reqs if _name(r) == "torch"]
    found += [s for s in _nox_strings() if re.fullmatch(r"torch\s*[=<>!~].*", s)]
    assert found and all(r == TORCH for r in found), found
