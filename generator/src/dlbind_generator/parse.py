"""Stage 3: pycparser AST -> :class:`~.model.HeaderModel`.

Semantics come from declarations only; doc comments are attached by line number as text and
never interpreted. Anything outside the constructs a DLPack header may use (typedef'd or bare
structs and enums, function-pointer typedefs, integer macros, function prototypes) is refused
with ``FILE:LINE: unsupported construct``.
"""

from __future__ import annotations

import copy
import hashlib
import re
from pathlib import Path

from pycparser import CParser, c_ast, c_generator
from pycparser.c_parser import ParseError

from . import layout
from .cexpr import NotConstant, eval_node, eval_text
from .errors import GeneratorError
from .model import Enum, Field, HeaderModel, Struct
from .preprocess import Preprocessed, RawMacro, preprocess

_GEN = c_generator.CGenerator()
_SKIPPABLE = re.compile(r"^\s*(#.*|typedef\s+(enum|struct)\b[^;]*\{\s*)$")

# Which types make a header a DLPack header, whatever its version.
REQUIRED = (("struct", "DLTensor"), ("struct", "DLDataType"), ("enum", "DLDeviceType"), ("enum", "DLDataTypeCode"))


def type_text(node: c_ast.Node) -> str:
    """The abstract C type of a declarator: ``int64_t *``, ``void (*)(struct X *self)``."""
    node = copy.deepcopy(node)
    inner = node
    while not isinstance(inner, c_ast.TypeDecl):
        inner = inner.type
    inner.declname = None
    return " ".join(_GEN.visit(c_ast.Typename(None, [], None, node)).split())


def _clean_doc(body: str) -> str:
    lines = [re.sub(r"^\s*\*+ ?", "", ln).rstrip() for ln in body.splitlines()]
    paragraph: list[str] = []
    for ln in lines:
        stripped = ln.strip()
        if not stripped:
            if paragraph:
                break
            continue
        if stripped.startswith(("\\", "@")) and not stripped.startswith(("\\brief", "@brief")):
            if paragraph:
                break
            continue
        paragraph.append(re.sub(r"^[\\@]brief\s*", "", stripped))
    return " ".join(" ".join(paragraph).split())


_DOC = re.compile(r"/\*[*!](<?)(.*?)\*/|//[/!](<?)([^\n]*)", re.S)


def doc_comments(source: str) -> tuple[dict[int, str], dict[int, str]]:
    """Doxygen comments of the raw header: (comments ending on a line, trailing ``<`` comments by line)."""
    before: dict[int, str] = {}
    trailing: dict[int, str] = {}
    for m in _DOC.finditer(source):
        start = source.count("\n", 0, m.start()) + 1
        end = source.count("\n", 0, m.end()) + 1
        text = _clean_doc(m.group(2) if m.group(2) is not None else m.group(4))
        if not text:
            continue
        if m.group(1) or m.group(3):
            trailing[start] = text
        elif end in before and m.group(4) is not None:  # consecutive /// lines
            before[end] += " " + text
        else:
            before[end] = text
    # join runs of /// comments: a /// block ending on line n continues one ending on line n-1
    for line in sorted(before):
        if line - 1 in before and source.splitlines()[line - 1].lstrip().startswith(("///", "//!")):
            before[line] = before.pop(line - 1) + " " + before[line]
    return before, trailing


class _Builder:
    def __init__(self, path: Path, pre: Preprocessed) -> None:
        self.path = path
        self.file = str(path)
        self.enums: dict[str, Enum] = {}
        self.structs: dict[str, Struct] = {}
        self.struct_by_tag: dict[str, Struct] = {}
        self.typedefs: dict[str, str] = {}
        self.typedef_nodes: dict[str, c_ast.Node] = {}
        self.functions: dict[str, str] = {}
        self.declarations: list[tuple[str, str]] = []
        self.constants: dict[str, int] = {}
        self.lines: dict[str, int] = {}
        source = path.read_text(encoding="utf-8", errors="replace")
        self.source_lines = source.splitlines()
        self.doc_before, self.doc_trailing = doc_comments(source)
        self.docs: dict[str, str] = {}
        self.pre = pre

    # -- errors and docs ---------------------------------------------------------------------
    def fail(self, node: c_ast.Node | None, message: str) -> GeneratorError:
        line = node.coord.line if node is not None and node.coord is not None else None
        return GeneratorError(message, file=self.file, line=line)

    def attach_doc(self, key: str, line: int | None) -> None:
        if line is None:
            return
        text = self.doc_trailing.get(line)
        prev = line - 1
        # Step over conditional lines between a comment and its declaration: v0.7+ declares
        # DLDeviceType under `#ifdef __cplusplus typedef enum : int32_t { #else typedef enum { #endif`.
        while not text and prev > 0 and prev not in self.doc_before and _SKIPPABLE.match(self.source_lines[prev - 1]):
            prev -= 1
        text = text or self.doc_before.get(prev)
        if text:
            self.docs[key] = text

    # -- layout ------------------------------------------------------------------------------
    def size_align(self, node: c_ast.Node, where: str) -> tuple[int, int]:
        if isinstance(node, c_ast.PtrDecl):
            return layout.POINTER, layout.POINTER
        if isinstance(node, c_ast.ArrayDecl):
            if node.dim is None:
                raise self.fail(node, f"unsupported construct: flexible array in {where}")
            try:
                count = eval_node(node.dim, self.constants)
            except NotConstant as exc:
                raise self.fail(node, f"array size in {where} is not a constant ({exc})") from None
            size, align = self.size_align(node.type, where)
            return size * count, align
        if isinstance(node, c_ast.TypeDecl):
            inner = node.type
            if isinstance(inner, c_ast.IdentifierType):
                name = " ".join(inner.names)
                if name in layout.SCALARS:
                    size = layout.SCALARS[name]
                    return size, size
                if name in self.structs:
                    return self.structs[name].size, self.structs[name].align
                if name in self.enums:
                    return layout.ENUM, layout.ENUM
                if name in self.typedef_nodes:
                    return self.size_align(self.typedef_nodes[name], where)
                raise self.fail(node, f"unknown type {name!r} in {where}")
            if isinstance(inner, c_ast.Struct):
                if inner.decls is not None:
                    raise self.fail(node, f"unsupported construct: nested struct definition in {where}")
                if inner.name not in self.struct_by_tag:
                    raise self.fail(node, f"incomplete type 'struct {inner.name}' in {where}")
                s = self.struct_by_tag[inner.name]
                return s.size, s.align
            if isinstance(inner, c_ast.Enum):
                return layout.ENUM, layout.ENUM
            if isinstance(inner, c_ast.Union):
                raise self.fail(node, f"unsupported construct: union in {where}")
        if isinstance(node, c_ast.FuncDecl):
            raise self.fail(node, f"unsupported construct: function type used as a value in {where}")
        raise self.fail(node, f"unsupported construct: {type(node).__name__} in {where}")

    # -- declarations ------------------------------------------------------------------------
    def add_struct(self, name: str, node: c_ast.Struct, *, typedef: bool) -> None:
        if node.decls is None or len(node.decls) == 0:
            raise self.fail(node, f"unsupported construct: empty struct {name}")
        members, fields_meta = [], []
        for decl in node.decls:
            where = f"struct {name} field {decl.name}"
            if decl.bitsize is not None:
                raise self.fail(decl, f"unsupported construct: bit-field in {where}")
            if decl.name is None:
                raise self.fail(decl, f"unsupported construct: anonymous member in struct {name}")
            members.append(self.size_align(decl.type, where))
            fields_meta.append((decl.name, type_text(decl.type)))
            self.attach_doc(f"{name}.{decl.name}", decl.coord.line if decl.coord else None)
        offsets, size, align = layout.struct_layout(members)
        fields = tuple(
            Field(fname, ftype, off, msize)
            for (fname, ftype), off, (msize, _) in zip(fields_meta, offsets, members, strict=True)
        )
        if name in self.structs:
            raise self.fail(node, f"struct {name} is declared twice")
        struct = Struct(name, node.name, typedef, fields, size, align)
        self.structs[name] = struct
        if node.name:
            self.struct_by_tag[node.name] = struct
        self.declarations.append(("struct", name))
        self.attach_doc(name, node.coord.line if node.coord else None)

    def add_enum(self, name: str, node: c_ast.Enum, *, typedef: bool) -> None:
        members: list[tuple[str, int]] = []
        nxt = 0
        for e in node.values.enumerators:
            if e.value is not None:
                try:
                    nxt = eval_node(e.value, self.constants)
                except NotConstant as exc:
                    raise self.fail(
                        e, f"enum {name} member {e.name}: value is not an integer constant ({exc})"
                    ) from None
            members.append((e.name, nxt))
            self.constants[e.name] = nxt
            self.attach_doc(f"{name}.{e.name}", e.coord.line if e.coord else None)
            nxt += 1
        if name in self.enums:
            raise self.fail(node, f"enum {name} is declared twice")
        self.enums[name] = Enum(name, node.name, typedef, tuple(members))
        self.declarations.append(("enum", name))
        self.attach_doc(name, node.coord.line if node.coord else None)

    def add_typedef(self, node: c_ast.Typedef) -> None:
        t = node.type
        inner = t.type if isinstance(t, c_ast.TypeDecl) else None
        if isinstance(inner, c_ast.Struct) and inner.decls is not None:
            self.add_struct(node.name, inner, typedef=True)
        elif isinstance(inner, c_ast.Enum) and inner.values is not None:
            self.add_enum(node.name, inner, typedef=True)
        elif isinstance(inner, c_ast.Union):
            raise self.fail(node, f"unsupported construct: union typedef {node.name}")
        else:
            self.size_align(t, f"typedef {node.name}")  # refuses unknown or unsupported types
            self.typedefs[node.name] = type_text(t)
            self.typedef_nodes[node.name] = t
            self.declarations.append(("typedef", node.name))
            self.attach_doc(node.name, node.coord.line if node.coord else None)

    def add_decl(self, node: c_ast.Decl) -> None:
        t = node.type
        if isinstance(t, c_ast.Struct) and node.name is None:
            if t.decls is None:  # forward declaration `struct X;`
                return
            self.add_struct(t.name, t, typedef=False)
        elif isinstance(t, c_ast.Enum) and node.name is None and t.values is not None:
            self.add_enum(t.name, t, typedef=False)
        elif isinstance(t, c_ast.FuncDecl):
            self.functions[node.name] = type_text(t)
            self.declarations.append(("function", node.name))
        elif isinstance(t, c_ast.Union):
            raise self.fail(node, "unsupported construct: union")
        else:
            raise self.fail(node, f"unsupported construct: variable {node.name!r}")

    def visit(self, ast: c_ast.FileAST) -> None:
        for ext in ast.ext:
            if ext.coord is not None and ext.coord.file != self.file:
                continue  # the generator's own stub headers
            if isinstance(ext, c_ast.Typedef):
                self.add_typedef(ext)
            elif isinstance(ext, c_ast.Decl):
                self.add_decl(ext)
            elif isinstance(ext, c_ast.Pragma):
                continue
            elif isinstance(ext, c_ast.FuncDef):
                raise self.fail(ext, f"unsupported construct: function definition {ext.decl.name!r}")
            else:
                raise self.fail(ext, f"unsupported construct: {type(ext).__name__}")

    # -- macros and version ----------------------------------------------------------------
    def macros(self, raw: tuple[RawMacro, ...]) -> dict[str, int]:
        values: dict[str, int] = {}
        for m in raw:
            try:
                values[m.name] = eval_text(m.text, values)
            except NotConstant:
                continue  # empty, string or attribute macros: not integers
            self.attach_doc(f"#{m.name}", m.line)
        return values

    def version(self, raw: tuple[RawMacro, ...], values: dict[str, int]) -> tuple[int, int]:
        if "DLPACK_MAJOR_VERSION" in values and "DLPACK_MINOR_VERSION" in values:
            return values["DLPACK_MAJOR_VERSION"], values["DLPACK_MINOR_VERSION"]
        text = next((m.text for m in raw if m.name == "DLPACK_VERSION"), None)
        if text is None:
            raise GeneratorError(
                "not a DLPack header: no DLPACK_MAJOR_VERSION/DLPACK_MINOR_VERSION or DLPACK_VERSION macro",
                file=self.file,
            )
        # Pre-1.0 headers write MAJOR, MINOR, 0 as digits: 010 (an octal literal in C!), 030, 60, 80.
        if not re.fullmatch(r"\d+", text):
            raise GeneratorError(f"DLPACK_VERSION {text!r} is not a plain number", file=self.file)
        digits = int(text.lstrip("0") or "0")
        return digits // 100, digits // 10 % 10


def parse_header(path: Path, *, require_dlpack_types: bool = True) -> HeaderModel:
    """Parse one ``dlpack.h`` (any version) into its model; raises :class:`GeneratorError`.

    ``require_dlpack_types=False`` lets the generator's golden tests parse one construct at a time.
    """
    path = Path(path)
    pre = preprocess(path)
    builder = _Builder(path, pre)
    try:
        ast = CParser().parse(pre.text, filename=str(path))
    except ParseError as exc:
        m = re.match(r"^(.*?):(\d+):(?:\d+:)?\s*(.*)$", str(exc))
        if m:
            raise GeneratorError(f"not valid C: {m.group(3)}", file=m.group(1), line=int(m.group(2))) from None
        # pycparser names only the file for some syntax errors ("Invalid expression"): no line to give
        what = str(exc).removeprefix(f"{path}: ")
        raise GeneratorError(f"not valid C: {what} (the parser names no line)", file=str(path)) from None
    values = builder.macros(pre.macros)
    builder.constants.update(values)
    builder.visit(ast)
    for kind, name in REQUIRED if require_dlpack_types else ():
        table = builder.structs if kind == "struct" else builder.enums
        if name not in table:
            raise GeneratorError(f"not a DLPack header: no {kind} {name}", file=builder.file, line=1)
    version = builder.version(pre.macros, values)
    return HeaderModel(
        version=version,
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        enums=tuple(builder.enums.values()),
        structs=tuple(builder.structs.values()),
        macros=tuple(values.items()),
        typedefs=tuple(builder.typedefs.items()),
        functions=tuple(builder.functions.items()),
        declarations=tuple(builder.declarations),
        docs=tuple(builder.docs.items()),
        abi=layout.ABI,
    )
