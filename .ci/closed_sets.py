"""Fail on a comparison of a model field with a string literal, where the field's values are a closed set.

A record's field is a closed set where its annotation is ``Literal[...]`` of strings: the adapter rows'
(``dlbind._generated.adapters``, from the allowed values of spec/adapters.toml), and dlbind's own records
(``Explanation.kind``, ``Bridge.kind``, the checker's statuses, ...). Code outside ``_generated/`` names such a
value by the constant its model defines (``Takes.CAPSULE``, ``ZERO_COPY``), never by a literal: a literal
compared with a field is a typo waiting (``adapter.takes == "capsules"`` is never true) and one more writer of a
fact the model holds.

A comparison is flagged where one side is an attribute named like a closed field and the other a string literal
(or a tuple, list or set of them, for ``in``) that is one of that field's values: ``dtype.kind == "V"`` (numpy's
own field, a value no dlbind record has) passes. Run: ``python .ci/closed_sets.py [ROOT]`` (exit 1 on a finding).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

#: Where the records are declared (their Literal annotations are read from every file here, generated ones too).
MODELS = ("packages/*/src",)
#: The hand-written code that is checked.
CHECKED = ("packages/*/src", "packages/*/tests", "tests", "benchmarks", ".ci", "noxfile.py")
_SKIPPED = ("_generated", "/build/", "/.nox/", "__pycache__")
_COMPARE = (ast.Eq, ast.NotEq, ast.In, ast.NotIn, ast.Is, ast.IsNot)


def _files(root: Path, patterns: tuple[str, ...]) -> Iterator[Path]:
    for pattern in patterns:
        for found in sorted(root.glob(pattern)):
            paths = [found] if found.is_file() else sorted(found.rglob("*.py"))
            yield from (p for p in paths if p.suffix == ".py")


def _literal_values(annotation: ast.expr) -> frozenset[str] | None:
    """The strings of ``Literal["a", "b"]`` (``typing.Literal`` too); None for any other annotation."""
    if not isinstance(annotation, ast.Subscript):
        return None
    name = annotation.value
    if not (isinstance(name, ast.Name) and name.id == "Literal") and not (
        isinstance(name, ast.Attribute) and name.attr == "Literal"
    ):
        return None
    items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    if not all(isinstance(i, ast.Constant) and isinstance(i.value, str) for i in items):
        return None
    return frozenset(i.value for i in items)  # type: ignore[attr-defined]


def closed_fields(root: Path) -> dict[str, frozenset[str]]:
    """Every record field annotated ``Literal[...]`` of strings in the models: name -> its values (merged
    across records that share a name)."""
    fields: dict[str, frozenset[str]] = {}
    for path in _files(root, MODELS):
        if "/build/" in str(path):
            continue
        module = ast.parse(path.read_text(encoding="utf-8"))
        aliases = dict(_aliases(module))
        for node in ast.walk(module):
            if isinstance(node, ast.ClassDef):
                for stmt in node.body:
                    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                        annotation = stmt.annotation
                        values = aliases.get(annotation.id) if isinstance(annotation, ast.Name) else None
                        values = values or _literal_values(annotation)
                        if values:
                            fields[stmt.target.id] = fields.get(stmt.target.id, frozenset()) | values
    return fields


def _aliases(module: ast.Module) -> Iterator[tuple[str, frozenset[str]]]:
    """The module's type aliases of string literals: ``Kind = Literal["a", "b"]`` (or ``Kind: TypeAlias = ...``)."""
    for stmt in module.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        values = _literal_values(value)
        if values:
            yield target.id, values


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _findings(tree: ast.AST, fields: dict[str, frozenset[str]]) -> Iterator[tuple[int, str]]:
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands[:-1], operands[1:], strict=True):
            if not isinstance(op, _COMPARE):
                continue
            for side, other in ((left, right), (right, left)):
                if isinstance(side, ast.Attribute) and side.attr in fields:
                    hits = [s for s in _strings(other) if s in fields[side.attr]]
                    if hits:
                        yield node.lineno, f"`.{side.attr}` compared with {', '.join(map(repr, hits))}"


def check(root: Path) -> list[str]:
    """Every finding under ``root``, as ``path:line: message``."""
    fields = closed_fields(root)
    found = []
    for path in _files(root, CHECKED):
        where = str(path)
        if any(s in where for s in _SKIPPED) or path.name == "closed_sets.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for line, message in _findings(tree, fields):
            found.append(f"{path.relative_to(root)}:{line}: {message}: name the model's constant")
    return found


def main(argv: list[str]) -> int:
    root = Path(argv[1] if len(argv) > 1 else Path(__file__).resolve().parents[1])
    fields = closed_fields(root)
    found = check(root)
    for line in found:
        print(line)
    print(f"closed sets: {len(fields)} closed fields, {len(found)} comparison(s) with a literal")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
