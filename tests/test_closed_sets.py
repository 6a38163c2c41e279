"""The closed-set lint of ``nox -s lint`` (.ci/closed_sets.py) fails where it should: a model field whose values are
a closed set (annotated ``Literal[...]``) compared with one of those values as a string literal, planted in a small
tree, in each form (``==``, ``!=``, ``in`` a tuple, the literal on the left); a constant, another record's field
of the same name with a value outside the set, and generated code pass; and the real tree is clean."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from file_trees import tree

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"


@pytest.fixture(scope="module")
def closed_sets() -> Iterator[ModuleType]:
    sys.path.insert(0, str(CI))
    try:
        yield importlib.import_module("closed_sets")
    finally:
        sys.path.remove(str(CI))


MODEL = (
    "from typing import Final, Literal, NamedTuple\n\n"
    'Asked = Literal["versioned", "legacy"]\n\n'
    "class Takes:\n"
    '    CAPSULE: Final = "capsule"\n\n'
    "class Row(NamedTuple):\n"
    '    takes: Literal["producer", "capsule"] = "producer"\n'
    "    asks: Asked\n"
    '    name: str = ""\n'
)
CLEAN = (
    "from lib._generated.rows import Takes\n\n"
    "def f(row, dtype):\n"
    "    if row.takes == Takes.CAPSULE:  # the model's constant\n"
    "        return 1\n"
    '    if row.name == "capsule":  # an open field\n'
    "        return 2\n"
    '    return dtype.takes == "V"  # a value no record of the model has\n'
)
PLANTED = {
    "eq": 'def f(row):\n    return row.takes == "capsule"\n',
    "ne": 'def f(row):\n    return row.takes != "producer"\n',
    "in": 'def f(row):\n    return row.takes in ("producer", "x")\n',
    "left": 'def f(route):\n    return "capsule" == route.adapter.takes\n',
    "chained": 'def f(row, a):\n    return a < 1 == 1 != row.takes == "capsule"\n',
    "alias": 'def f(row):\n    return row.asks == "legacy"\n',
}


def _tree(root: Path, checked: str) -> Path:
    return tree(
        root,
        {
            "packages/lib/src/lib/_generated/rows.py": MODEL + '\n\nASSERT = Row().takes == "producer"\n',
            "packages/lib/src/lib/code.py": checked,
        },
    )


def test_a_clean_tree_passes(closed_sets: ModuleType, tmp_path: Path) -> None:
    root = _tree(tmp_path, CLEAN)
    assert closed_sets.closed_fields(root) == {
        "takes": frozenset({"producer", "capsule"}),
        "asks": frozenset({"versioned", "legacy"}),  # through the module's alias
    }
    assert closed_sets.check(root) == []  # generated code compares freely; constants and open fields pass


@pytest.mark.parametrize("form", sorted(PLANTED))
def test_a_planted_comparison_fails(closed_sets: ModuleType, tmp_path: Path, form: str) -> None:
    root = _tree(tmp_path, PLANTED[form])
    found = closed_sets.check(root)
    assert len(found) == 1 and found[0].startswith("packages/lib/src/lib/code.py:2: `."), found
    assert closed_sets.main(["closed_sets.py", str(root)]) == 1


def test_the_repository_is_clean(closed_sets: ModuleType) -> None:
    fields = closed_sets.closed_fields(ROOT)
    assert {"takes", "asks", "copy", "bool_as", "status", "kind"} <= set(fields)  # the model was read
    assert closed_sets.check(ROOT) == []
