"""Integer constant expressions of C: literals with suffixes, macros' token text, enum AST values.

C rules, not Python's: ``030`` is octal (24), ``1UL`` is 1, ``/`` truncates toward zero.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from pycparser import c_ast


class NotConstant(ValueError):
    """The text or node is not an integer constant expression this evaluator knows."""


_INT = re.compile(r"^(0[xX][0-9a-fA-F]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)([uU]?[lL]{0,2}|[lL]{1,2}[uU]?)$")


def int_literal(text: str) -> int:
    m = _INT.match(text.strip())
    if not m:
        raise NotConstant(f"not an integer literal: {text!r}")
    digits = m.group(1)
    if digits[:2] in ("0x", "0X"):
        return int(digits[2:], 16)
    if digits[:2] in ("0b", "0B"):
        return int(digits[2:], 2)
    if len(digits) > 1 and digits[0] == "0":
        return int(digits[1:], 8)
    return int(digits)


def _div(a: int, b: int) -> int:
    if b == 0:
        raise NotConstant("division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _mod(a: int, b: int) -> int:
    return a - _div(a, b) * b


_BINARY: dict[str, Callable[[int, int], int]] = {
    "*": lambda a, b: a * b,
    "/": _div,
    "%": _mod,
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
    "<": lambda a, b: int(a < b),
    ">": lambda a, b: int(a > b),
    "<=": lambda a, b: int(a <= b),
    ">=": lambda a, b: int(a >= b),
    "==": lambda a, b: int(a == b),
    "!=": lambda a, b: int(a != b),
    "&": lambda a, b: a & b,
    "^": lambda a, b: a ^ b,
    "|": lambda a, b: a | b,
    "&&": lambda a, b: int(bool(a) and bool(b)),
    "||": lambda a, b: int(bool(a) or bool(b)),
}
_UNARY: dict[str, Callable[[int], int]] = {
    "-": lambda a: -a,
    "+": lambda a: a,
    "~": lambda a: ~a,
    "!": lambda a: int(not a),
}
# Binary operators from loosest to tightest binding.
_LEVELS = [
    ("||",),
    ("&&",),
    ("|",),
    ("^",),
    ("&",),
    ("==", "!="),
    ("<", ">", "<=", ">="),
    ("<<", ">>"),
    ("+", "-"),
    ("*", "/", "%"),
]
_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|[A-Za-z_]\w*|<<|>>|<=|>=|==|!=|&&|\|\||[-+*/%&|^~!()<>])")


def eval_text(text: str, env: Mapping[str, int]) -> int:
    """Evaluate a macro's replacement text; names resolve through ``env`` (other integer macros)."""
    tokens: list[str] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise NotConstant(f"unexpected text at {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    if not tokens:
        raise NotConstant("empty")
    i = 0

    def primary() -> int:
        nonlocal i
        if i >= len(tokens):
            raise NotConstant("unexpected end")
        tok = tokens[i]
        i += 1
        if tok == "(":
            value = binary(0)
            if i >= len(tokens) or tokens[i] != ")":
                raise NotConstant("unbalanced parentheses")
            i += 1
            return value
        if tok in _UNARY:
            return _UNARY[tok](primary())
        if tok[0].isdigit():
            return int_literal(tok)
        if tok in env:
            return env[tok]
        raise NotConstant(f"unknown name {tok!r}")

    def binary(level: int) -> int:
        nonlocal i
        if level == len(_LEVELS):
            return primary()
        value = binary(level + 1)
        while i < len(tokens) and tokens[i] in _LEVELS[level]:
            op = tokens[i]
            i += 1
            value = _BINARY[op](value, binary(level + 1))
        return value

    result = binary(0)
    if i != len(tokens):
        raise NotConstant(f"trailing tokens {tokens[i:]}")
    return result


def eval_node(node: c_ast.Node, env: Mapping[str, int]) -> int:
    """Evaluate an enumerator's value expression from pycparser's AST."""
    if isinstance(node, c_ast.Constant):
        if node.type not in (
            "int",
            "unsigned int",
            "long int",
            "unsigned long int",
            "long long int",
            "unsigned long long int",
        ):
            raise NotConstant(f"{node.type} constant {node.value}")
        return int_literal(node.value)
    if isinstance(node, c_ast.ID):
        if node.name not in env:
            raise NotConstant(f"unknown name {node.name!r}")
        return env[node.name]
    if isinstance(node, c_ast.UnaryOp) and node.op in _UNARY:
        return _UNARY[node.op](eval_node(node.expr, env))
    if isinstance(node, c_ast.BinaryOp) and node.op in _BINARY:
        return _BINARY[node.op](eval_node(node.left, env), eval_node(node.right, env))
    if isinstance(node, c_ast.Cast):
        return eval_node(node.expr, env)
    raise NotConstant(f"unsupported expression {type(node).__name__}")
