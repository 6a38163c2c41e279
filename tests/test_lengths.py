"""The length rule of ``nox -s lint`` (.ci/lengths.py) fails on a function past its limit, planted in a small tree."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

CHECKER = Path(__file__).resolve().parents[1] / ".ci" / "lengths.py"


@pytest.fixture(scope="module")
def lengths() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dlbind_lengths_check", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _python(name: str, lines: int) -> str:
    """A function of ``lines`` lines, its def and docstring included."""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f'def {name}() -> None:\n    """A function."""\n{body}\n'


def _c(name: str, lines: int) -> str:
    body = "".join(f"    int x{i} = {i};\n" for i in range(lines - 4))
    return f"static int {name}(void)\n{{\n{body}    return 0;\n}}\n"


def _tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


def test_each_function_past_its_limit_is_named(lengths: ModuleType, tmp_path: Path) -> None:
    root = _tree(tmp_path, {
        "a.py": _python("fits", 60) + _python("too_long", 61),
        "b.c": _c("fits_c", 100) + _c("too_long_c", 101),
        "pkg/_generated/g.py": _python("generated", 200),  # the generator's, not measured
    })  # fmt: skip
    assert [str(x) for x in lengths.check(root)] == [
        "a.py: too_long is 61 lines (at most 60)",
        "b.c: too_long_c is 101 lines (at most 100)",
    ]
    assert lengths.main(["lengths.py", str(root)]) == 1


def test_a_listed_function_may_shrink_but_not_grow(lengths: ModuleType, tmp_path: Path) -> None:
    (path, name), was = next(iter(lengths.LONGER.items()))
    assert was > lengths.PYTHON_LIMIT or path.endswith(".c")
    make = _c if path.endswith(".c") else _python
    assert lengths.check(_tree(tmp_path / "shrunk", {path: make(name, was - 1)})) == []
    grown = lengths.check(_tree(tmp_path / "grown", {path: make(name, was + 1)}))
    assert [(x.function, x.lines, x.limit) for x in grown] == [(name, was + 1, was)]
