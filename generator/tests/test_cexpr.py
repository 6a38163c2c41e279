"""C integer constant expressions, evaluated by C's rules rather than Python's."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pycparser import CParser

from dlbind_generator.cexpr import NotConstant, eval_node, eval_text, int_literal


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("030", 24),
        ("010", 8),
        ("60", 60),
        ("1U", 1),
        ("1UL", 1),
        ("2ull", 2),
        ("0x1F", 31),
        ("0b101", 5),
        ("17U", 17),
    ],
)
def test_int_literal(text: str, value: int) -> None:
    assert int_literal(text) == value


@pytest.mark.parametrize("text", ["", "08", "1.5", "0x", "abc", "1UUL"])
def test_int_literal_refuses(text: str) -> None:
    with pytest.raises(NotConstant):
        int_literal(text)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("(1UL << 2UL)", 4),
        ("-7 / 2", -3),
        ("-7 % 2", -1),
        ("~0", -1),
        ("A | B", 3),
        ("(A + B) * 2", 6),
        ("!0 && 1", 1),
        ("1 + 2 * 3", 7),
    ],
)
def test_eval_text(text: str, value: int) -> None:
    assert eval_text(text, {"A": 1, "B": 2}) == value


@pytest.mark.parametrize("text", ["", "__declspec(dllexport)", '"str"', "(1", "1 +", "UNKNOWN"])
def test_eval_text_refuses(text: str) -> None:
    with pytest.raises(NotConstant):
        eval_text(text, {})


@given(st.integers(0, 2**20), st.integers(0, 2**20), st.sampled_from(["+", "-", "*", "|", "&", "^", "<<", ">>"]))
def test_text_and_ast_evaluators_agree(a: int, b: int, op: str) -> None:
    if op in ("<<", ">>"):
        b %= 31
    text = f"({a}U {op} {b})"
    enum = CParser().parse(f"enum {{ X = {text} }};").ext[0].type.values.enumerators[0].value
    assert eval_text(text, {}) == eval_node(enum, {})
