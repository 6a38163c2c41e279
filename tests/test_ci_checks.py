"""The repository's checks of ``nox -s lint`` fail where they should: a stale name (.ci/names.py) and a function
past its length (.ci/lengths.py), each planted in a small tree; and a finding prints as its check says
(.ci/_checks.py)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import NamedTuple

import pytest
from file_trees import tree

CI = Path(__file__).resolve().parents[1] / ".ci"


def _load(name: str) -> Iterator[ModuleType]:
    sys.path.insert(0, str(CI))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(CI))


@pytest.fixture(scope="module")
def names() -> Iterator[ModuleType]:
    yield from _load("names")


@pytest.fixture(scope="module")
def lengths() -> Iterator[ModuleType]:
    yield from _load("lengths")


@pytest.fixture(scope="module")
def checks() -> Iterator[ModuleType]:
    yield from _load("_checks")


PLANTED = {
    "src/pkg/mod.py": '''"""Cites dlbind.convert and dlbind.routes.Route (both real), dlbind.no_such_name (stale),
:func:`dlbind.routes.plan` (stale), dlbind.producer.export_view (imported there, defined in dlbind.export:
stale), present.c:real_fn (real), present.c:gone_fn (stale), missing.h (stale), present.h (real) and test_gone.py
(stale)."""

# a comment citing dlbind.Tensor.copy (real) and dlbind.Tensor.paste (stale)
''',
    "src/pkg/present.c": "/* present.h */\nint real_fn(void) { return 0; }\n",
    "src/pkg/present.h": "int real_fn(void);\n",
    "docs/page.md": "A page citing `dlbind.from_dlpack` (real) and `dlbind.nothing_here` (stale).\n",
    "CHANGELOG.md": "- Removed `dlbind.old_name` (the changelog records what was: never checked).\n",
}


def test_every_planted_stale_name_is_found(names: ModuleType, tmp_path: Path) -> None:
    found = {(s.kind, s.what) for s in names.check(tree(tmp_path, PLANTED))}
    assert found == {
        ("name", "dlbind.no_such_name"),
        ("role", "dlbind.routes.plan"),
        ("name", "dlbind.routes.plan"),
        ("name", "dlbind.producer.export_view"),
        ("file:function", "present.c:gone_fn"),
        ("file", "missing.h"),
        ("file", "test_gone.py"),
        ("name", "dlbind.Tensor.paste"),
        ("name", "dlbind.nothing_here"),
    }


def test_a_clean_tree_passes_and_main_says_so(
    names: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = {path: text for path, text in PLANTED.items() if path != "src/pkg/mod.py"}
    clean["docs/page.md"] = "A page citing `dlbind.from_dlpack` and dlbind.routes.Route.adapter (a field).\n"
    assert names.main(["names.py", str(tree(tmp_path, clean))]) == 0
    assert "every cited name resolves" in capsys.readouterr().out


def test_a_rename_leaves_the_old_name_stale(names: ModuleType, tmp_path: Path) -> None:
    """A function renamed in a C file while a comment still cites it by ``file:function``."""
    root = tree(
        tmp_path, {"a.c": "/* b.c:helper does the work */\n", "b.c": "static int helper2(void) { return 1; }\n"}
    )
    assert [str(s) for s in names.check(root)] == ["a.c:1: file:function: b.c:helper"]
    assert names.main(["names.py", str(root)]) == 1


def _python(name: str, lines: int) -> str:
    """A function of ``lines`` lines, its def and docstring included."""
    body = "".join(f"    x{i} = {i}\n" for i in range(lines - 2))
    return f'def {name}() -> None:\n    """A function."""\n{body}\n'


def _c(name: str, lines: int) -> str:
    body = "".join(f"    int x{i} = {i};\n" for i in range(lines - 4))
    return f"static int {name}(void)\n{{\n{body}    return 0;\n}}\n"


def test_each_function_past_its_limit_is_named(lengths: ModuleType, tmp_path: Path) -> None:
    root = tree(tmp_path, {
        "a.py": _python("fits", 60) + _python("too_long", 61),
        "b.c": _c("fits_c", 100) + _c("too_long_c", 101),
        "pkg/_generated/g.py": _python("generated", 200),  # the generator's, not measured
    })  # fmt: skip
    assert [str(x) for x in lengths.check(root)] == [
        "a.py: too_long is 61 lines (at most 60)",
        "b.c: too_long_c is 101 lines (at most 100)",
    ]
    assert lengths.main(["lengths.py", str(root)]) == 1


@pytest.mark.parametrize("path", ["pkg/listed.py", "pkg/listed.c"])
def test_a_listed_function_may_shrink_but_not_grow(
    lengths: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    # every function the rule found longer is split now (LONGER is empty): one listed here, as it would be
    name = "listed"
    was = (lengths.C_LIMIT if path.endswith(".c") else lengths.PYTHON_LIMIT) + 10
    monkeypatch.setitem(lengths.LONGER, (path, name), was)
    make = _c if path.endswith(".c") else _python
    assert lengths.check(tree(tmp_path / "shrunk", {path: make(name, was - 1)})) == []
    grown = lengths.check(tree(tmp_path / "grown", {path: make(name, was + 1)}))
    assert [(x.function, x.lines, x.limit) for x in grown] == [(name, was + 1, was)]


def test_a_finding_prints_its_fields_by_name(checks: ModuleType) -> None:
    """What a check found prints through the line its class names (fields' own braces are text, not fields)."""

    class Found(NamedTuple):
        path: str
        line: int
        what: str

        __str__ = checks.printed_as("{path}:{line}: {what}")

    assert str(Found("a.py", 3, "stale")) == "a.py:3: stale"
    assert str(Found("b.c", 10, "{path}")) == "b.c:10: {path}"
