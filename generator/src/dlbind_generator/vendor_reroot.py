"""Re-roots the imports of dlbind's runtime modules to a vendored package name.

Only import statements change: every ``import dlbind...`` and ``from dlbind... import`` (at module
level or inside a function, class or ``if``), found with :mod:`ast` and rewritten at the positions
:mod:`tokenize` gives for the dotted name. Strings, comments and docstrings keep the word ``dlbind``
(messages say whose code this is). A string that is exactly the dotted path of a runtime module (a
dynamic import the rewriting cannot see) is an error, as is an import form that cannot be re-rooted.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

from .errors import GeneratorError

OLD = "dlbind"
_MODULE_PATH = re.compile(rf"^{OLD}(\.\w+)+$")


def _rerooted(name: str, new: str) -> str | None:
    """``dlbind.x.y`` -> ``NEW.x.y``; None for a name outside dlbind (``dlbind_cuda`` included)."""
    if name == OLD or name.startswith(OLD + "."):
        return new + name[len(OLD) :]
    return None


def _dotted_span(tokens: list[tokenize.TokenInfo], start: int) -> tuple[int, str, tuple[int, int], tuple[int, int]]:
    """From ``tokens[start]`` (the first token of a dotted name): (index after it, name, start, end)."""
    i, parts = start, list[str]()
    begin = tokens[i].start
    end = tokens[i].end
    while i < len(tokens):
        tok = tokens[i]
        if tok.type in (tokenize.NL, tokenize.COMMENT):
            i += 1
            continue
        if tok.type == tokenize.NAME and (not parts or parts[-1] == "."):
            parts.append(tok.string)
        elif tok.type == tokenize.OP and tok.string == "." and parts and parts[-1] != ".":
            parts.append(".")
        else:
            break
        end = tok.end
        i += 1
    return i, "".join(parts), begin, end


def reroot(source: str, new: str, filename: str) -> str:
    """``source`` with every import of dlbind re-rooted to the package ``new``."""
    try:
        tree = ast.parse(source, filename)
    except SyntaxError as exc:
        raise GeneratorError(f"cannot parse: {exc.msg}", file=filename, line=exc.lineno) from None
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    index = {tok.start: i for i, tok in enumerate(tokens)}
    lines = source.splitlines(keepends=True)

    def token_at(line: int, col_offset: int) -> int:
        """The token at an ast position (ast counts UTF-8 bytes, tokenize characters)."""
        return index[(line, len(lines[line - 1].encode()[:col_offset].decode()))]

    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level or node.module is None or _rerooted(node.module, new) is None:
                continue
            i = token_at(node.lineno, node.col_offset) + 1  # the token after `from`
            while tokens[i].type in (tokenize.NL, tokenize.COMMENT):
                i += 1
            _, name, begin, end = _dotted_span(tokens, i)
            if name != node.module:
                raise GeneratorError(f"cannot find the module name {node.module!r}", file=filename, line=node.lineno)
            edits.append((begin, end, _rerooted(name, new) or name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                target = _rerooted(alias.name, new)
                if target is None:
                    continue
                if alias.asname is None:
                    if alias.name != OLD:  # `import dlbind.x` binds `dlbind`: no re-rooted spelling keeps that
                        raise GeneratorError(
                            f"`import {alias.name}` cannot be re-rooted: write `from {alias.name.rpartition('.')[0]} "
                            f"import {alias.name.rpartition('.')[2]}` or `import {alias.name} as NAME`",
                            file=filename,
                            line=node.lineno,
                        )
                    target = f"{new} as {OLD}"
                _, name, begin, end = _dotted_span(tokens, token_at(alias.lineno, alias.col_offset))
                if name != alias.name:
                    raise GeneratorError(f"cannot find the module name {alias.name!r}", file=filename, line=node.lineno)
                edits.append((begin, end, target))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _MODULE_PATH.match(node.value):
            raise GeneratorError(
                f"the string {node.value!r} names a dlbind module (a dynamic import?): the vendored copy "
                "would import dlbind; import relative to __package__ instead",
                file=filename,
                line=node.lineno,
            )
    out = _edited(source, lines, edits)
    left = imports_of(out, OLD, filename)
    if left:
        raise GeneratorError(f"imports of dlbind left after re-rooting: {', '.join(left)}", file=filename)
    return out


def _edited(source: str, lines: list[str], edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """``source`` with each ``(begin, end, text)`` edit made (positions as tokenize gives them: line, column)."""
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[pos[0] - 1] + pos[1]

    out = source
    for begin, end, text in sorted(edits, key=lambda e: at(e[0]), reverse=True):
        out = out[: at(begin)] + text + out[at(end) :]
    return out


def imports_of(source: str, package: str, filename: str) -> list[str]:
    """Every import (any depth, relative ones resolved no further) of ``package`` or its modules in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        else:
            continue
        found += [f"{n} (line {node.lineno})" for n in names if n == package or n.startswith(package + ".")]
    return found
