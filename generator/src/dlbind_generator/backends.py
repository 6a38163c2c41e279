"""The backends' runtime declarations, selected from the vendor's real header (as glad selects from a registry).

Per backend, ``spec/backends/<name>.toml`` names the header, how to find it, and what to select. The stages
are the core's: the header is preprocessed with ``cpp`` (C mode, the generator's stub ``stdint.h`` and
``stddef.h``, only the folders the spec exposes), parsed with pycparser, and the selection is closed
over its dependencies:

* a selected function or complete type needs every type it uses *by value* complete, and every type it
  only points to declared (an opaque ``typedef struct X X;`` unless that type is selected too);
* enums are always complete (cffi must know their size); ``[enums]`` may keep only some members, and the
  ``*_MAX_ENUM`` member that fixes the size is always kept;
* macros are evaluated after full expansion by the preprocessor itself, so function-like macros
  (``VK_MAKE_API_VERSION``) need no second implementation here.

The result is a cffi cdef (forward declarations, scalar typedefs, enums, function-pointer typedefs,
struct bodies in dependency order, prototypes, ``#define`` constants) rendered by pycparser's C
generator, sealed under ``packages/<name>/src/dlbind_<name>/_generated/``.

Where no header can be had (Metal: Apple's SDK is not on these machines), the spec is a *declaration
file* instead: ``[declarations]`` holds the cdef itself, written from the vendor's documentation, and
``[provenance]`` names, for every function it declares, where that declaration is documented. The stage
checks that every declared function has its provenance (and no provenance names a function not declared)
and seals the same files; nothing is selected, so the output is always regenerated and checked.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib
from pycparser import c_ast, c_generator, c_parser

from .cexpr import NotConstant, eval_node
from .errors import GeneratorError
from .preprocess import STUB_DIR, _cpp

_PROBE = "__dlbind_macro"
_ENV = re.compile(r"\$\{(\w+)\}")
_DECLARATION_KEYS = {"version", "cdef", "macros"}
_KEYS = {
    "header": {"include", "roots", "expose", "defines", "version", "sha256"},
    "library": {"env", "wheels", "linux", "darwin", "win32", "oldest"},
    "select": {"functions", "types", "macros"},
}


@dataclass(frozen=True)
class BackendSpec:
    name: str
    file: Path
    include: str
    roots: tuple[str, ...]
    expose: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]
    version_macro: str
    version_encoding: str
    sha256: str
    library: dict[str, Any]
    functions: tuple[str, ...]
    types: tuple[str, ...]
    macros: tuple[str, ...]
    enum_members: dict[str, tuple[str, ...]]
    # a declaration file (no header): the cdef, its version, its macros; the provenance of each function
    declarations: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, str] = field(default_factory=dict)

    @property
    def package(self) -> str:
        return f"dlbind_{self.name}"

    @property
    def generated_dir(self) -> str:
        return f"packages/{self.name}/src/{self.package}/_generated"


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise GeneratorError(f"{where} must be a list of strings")
    if len(set(value)) != len(value):
        raise GeneratorError(f"{where} lists a name twice")
    return tuple(value)


def load_backend_spec(path: Path) -> BackendSpec:
    """Read and check one ``spec/backends/<name>.toml``; GeneratorError names the file and what is wrong."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"invalid TOML: {exc}", file=str(path)) from None
    where = str(path)
    if "declarations" in data:
        return _load_declaration_file(path, data)
    unknown = set(data) - {*_KEYS, "enums"}
    if unknown:
        raise GeneratorError(f"unknown table(s) {sorted(unknown)}", file=where)
    for table, keys in _KEYS.items():
        extra = set(data.get(table, {})) - keys
        if extra:
            raise GeneratorError(f"[{table}] has unknown key(s) {sorted(extra)}", file=where)
    header, select = data.get("header", {}), data.get("select", {})
    for key in ("include", "roots", "version", "sha256"):
        if key not in header:
            raise GeneratorError(f"[header] needs {key!r}", file=where)
    version = header["version"]
    if set(version) != {"macro", "encoding"} or version["encoding"] not in _VERSION_DECODERS:
        raise GeneratorError(
            f"[header] version = {{ macro = ..., encoding = one of {sorted(_VERSION_DECODERS)} }}", file=where
        )
    macros = _strings(select.get("macros", []), f"{where}: [select] macros")
    if version["macro"] not in macros:
        macros = (*macros, version["macro"])
    return BackendSpec(
        name=path.stem,
        file=path,
        include=header["include"],
        roots=_strings(header["roots"], f"{where}: [header] roots"),
        expose=_strings(header.get("expose", []), f"{where}: [header] expose"),
        defines=tuple(sorted((str(k), str(v)) for k, v in header.get("defines", {}).items())),
        version_macro=version["macro"],
        version_encoding=version["encoding"],
        sha256=header["sha256"],
        library=dict(data.get("library", {})),
        functions=_strings(select.get("functions", []), f"{where}: [select] functions"),
        types=_strings(select.get("types", []), f"{where}: [select] types"),
        macros=macros,
        enum_members={k: _strings(v, f"{where}: [enums] {k}") for k, v in data.get("enums", {}).items()},
    )


def _load_declaration_file(path: Path, data: dict[str, Any]) -> BackendSpec:
    """A spec whose declarations are written out (no header can be had): ``[declarations]``, ``[provenance]``."""
    where = str(path)
    unknown = set(data) - {"declarations", "provenance", "library"}
    if unknown:
        tables = "[declarations], [provenance], [library]"
        raise GeneratorError(f"a declaration file has only {tables}: not {sorted(unknown)}", file=where)
    decl, provenance = data["declarations"], data.get("provenance", {})
    extra = set(decl) - _DECLARATION_KEYS
    if extra or not {"version", "cdef"} <= set(decl):
        raise GeneratorError(f"[declarations] needs version and cdef (and may have macros), not {sorted(extra)}",
                             file=where)  # fmt: skip
    extra = set(data.get("library", {})) - _KEYS["library"]
    if extra:
        raise GeneratorError(f"[library] has unknown key(s) {sorted(extra)}", file=where)
    macros = decl.get("macros", {})
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in macros.values()):
        raise GeneratorError("[declarations] macros are integers", file=where)
    if not provenance or not all(isinstance(v, str) and v for v in provenance.values()):
        raise GeneratorError("[provenance] names, per declared function, where it is documented", file=where)
    return BackendSpec(
        name=path.stem, file=path, include=f"spec/backends/{path.name}", roots=(), expose=(), defines=(),
        version_macro="", version_encoding="", sha256="", library=dict(data.get("library", {})),
        functions=(), types=(), macros=tuple(macros), enum_members={},
        declarations=dict(decl), provenance=dict(provenance),
    )  # fmt: skip


def load_backend_specs(folder: Path) -> list[BackendSpec]:
    return [load_backend_spec(p) for p in sorted(folder.glob("*.toml"))] if folder.is_dir() else []


# -- finding and preprocessing the header ------------------------------------------------------------


def _expand(root: str) -> str | None:
    """``${VAR}`` expanded from the environment; None when a variable is unset or empty."""
    missing = False

    def sub(m: re.Match[str]) -> str:
        nonlocal missing
        value = os.environ.get(m.group(1), "")
        missing = missing or not value
        return value

    out = _ENV.sub(sub, root)
    return None if missing else out


def find_header(spec: BackendSpec) -> Path | None:
    """The include root (a folder) that holds ``spec.include``; None when no root of the spec has it."""
    for root in spec.roots:
        expanded = _expand(root)
        if expanded and (Path(expanded) / spec.include).is_file():
            return Path(expanded)
    return None


def _decode_vulkan(v: int) -> str:
    return f"{(v >> 22) & 0x7F}.{(v >> 12) & 0x3FF}.{v & 0xFFF}"


def _decode_cuda(v: int) -> str:
    return f"{v // 1000}.{v % 1000 // 10}"


def _decode_hip(v: int) -> str:
    return f"{v // 10_000_000}.{v % 10_000_000 // 100_000}.{v % 100_000}"


_VERSION_DECODERS = {"vulkan": _decode_vulkan, "cuda": _decode_cuda, "hip": _decode_hip}
# "major.minor" -> the runtime's own integer (what its RuntimeGetVersion answers): [library] oldest
_VERSION_ENCODERS = {
    "cuda": lambda major, minor: 1000 * major + 10 * minor,
    "hip": lambda major, minor: 10_000_000 * major + 100_000 * minor,
}


def oldest_runtime(spec: BackendSpec) -> int | None:
    """``[library] oldest`` ("major.minor": the oldest runtime the binding serves) in the runtime's own encoding,
    or None where the spec names none; GeneratorError where it is malformed or the runtime has no such encoding."""
    oldest = spec.library.get("oldest")
    if oldest is None:
        return None
    encode = _VERSION_ENCODERS.get(spec.version_encoding)
    match = re.fullmatch(r"(\d+)\.(\d+)", oldest) if isinstance(oldest, str) else None
    if encode is None or match is None:
        raise GeneratorError(
            f'[library] oldest = "major.minor", for a runtime whose version is encoded as one of '
            f"{sorted(_VERSION_ENCODERS)} (this one: {spec.version_encoding or 'a declaration file'!r}), "
            f"not {oldest!r}",
            file=str(spec.file),
        )
    return int(encode(int(match[1]), int(match[2])))


def _preprocess(spec: BackendSpec, root: Path) -> tuple[str, str]:
    """(the header's declarations as preprocessed C, the probe lines of the selected macros)."""
    with tempfile.TemporaryDirectory(prefix=f"dlbind-{spec.name}-") as tmp:
        include_dir = Path(tmp) / "include"
        include_dir.mkdir()
        if spec.expose:
            for name in spec.expose:
                if (root / name).exists():
                    (include_dir / name).symlink_to(root / name)
        else:
            include_dir.rmdir()
            include_dir.symlink_to(root)
        probe = Path(tmp) / "probe.c"
        lines = [f"#include <{spec.include}>"] + [f'{_PROBE} "{m}" ({m})' for m in spec.macros]
        probe.write_text("\n".join(lines) + "\n", encoding="utf-8")
        defines = [f"-D{k}={v}" for k, v in spec.defines]
        cmd = [_cpp(), "-undef", "-nostdinc", "-std=c99", "-x", "c", "-I", str(STUB_DIR), "-I", str(include_dir)]
        proc = subprocess.run([*cmd, *defines, str(probe)], capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip())
        raise GeneratorError(f"the C preprocessor failed on <{spec.include}>: {first}", file=str(spec.file))
    decls: list[str] = []
    probes: list[str] = []
    for line in proc.stdout.split("\n"):
        (probes if line.startswith(_PROBE) else decls).append(line)
    return "\n".join(decls), "\n".join(probes)


# -- the selection -------------------------------------------------------------------------------------


@dataclass
class _Index:
    typedefs: dict[str, c_ast.Typedef] = field(default_factory=dict)
    structs: dict[str, c_ast.Struct | c_ast.Union] = field(default_factory=dict)  # complete bodies by tag
    enums: dict[str, c_ast.Enum] = field(default_factory=dict)  # by tag and by typedef name
    functions: dict[str, c_ast.Decl] = field(default_factory=dict)


def _index(ast: c_ast.FileAST) -> _Index:
    idx = _Index()

    def record_tagged(node: c_ast.Node) -> None:
        if isinstance(node, c_ast.Struct | c_ast.Union) and node.decls is not None and node.name:
            idx.structs[node.name] = node
        if isinstance(node, c_ast.Enum) and node.values is not None and node.name:
            idx.enums[node.name] = node

    for ext in ast.ext:
        if isinstance(ext, c_ast.Typedef):
            idx.typedefs[ext.name] = ext
            inner = ext.type.type if isinstance(ext.type, c_ast.TypeDecl) else None
            if inner is not None:
                record_tagged(inner)
                if isinstance(inner, c_ast.Enum) and inner.values is not None:
                    idx.enums[ext.name] = inner
        elif isinstance(ext, c_ast.Decl):
            if isinstance(ext.type, c_ast.FuncDecl):
                idx.functions[ext.name] = ext
            else:
                record_tagged(ext.type)
    return idx


class _Selector:
    """Closes the selection over its dependencies and renders the cdef."""

    def __init__(self, spec: BackendSpec, idx: _Index) -> None:
        self.spec, self.idx = spec, idx
        self.complete: set[str] = set()  # typedef names declared with their body
        self.opaque: set[str] = set()  # struct typedef names declared opaque (pointed to only)
        self.order: list[str] = []  # typedef names in dependency order (post-order of by-value uses)
        self.visiting: set[str] = set()

    # walking C types ---------------------------------------------------------------------------
    def _names(self, node: c_ast.Node, by_value: bool) -> Iterator[tuple[str, bool]]:
        """(typedef name, needed by value) for every type name a declarator uses."""
        if isinstance(node, c_ast.TypeDecl):
            inner = node.type
            if isinstance(inner, c_ast.IdentifierType):
                yield " ".join(inner.names), by_value
            elif isinstance(inner, c_ast.Struct | c_ast.Union | c_ast.Enum) and inner.name:
                yield f"{type(inner).__name__.lower()} {inner.name}", by_value
        elif isinstance(node, c_ast.PtrDecl):
            yield from self._names(node.type, False)
        elif isinstance(node, c_ast.ArrayDecl):
            yield from self._names(node.type, by_value)
        elif isinstance(node, c_ast.FuncDecl):
            yield from self._names(node.type, True)
            for param in node.args.params if node.args else ():
                if isinstance(param, c_ast.Decl | c_ast.Typename):
                    yield from self._names(param.type, True)

    def need(self, name: str, by_value: bool) -> None:
        if name in _BUILTIN or (name.startswith(("struct ", "union ", "enum ")) and not by_value):
            return
        if name.startswith(("struct ", "union ")):
            self._need_tagged(name)
            return
        if name.startswith("enum "):
            tag = name.split()[1]
            if tag not in self.idx.typedefs:  # an enum known by its tag only (CUDA's enum cudaMemoryType)
                if tag not in self.idx.enums:
                    raise GeneratorError(f"{name} has no body in <{self.spec.include}>", file=str(self.spec.file))
                if name not in self.complete:
                    self.complete.add(name)
                    self.order.append(name)
                return
            name = tag
        td = self.idx.typedefs.get(name)
        if td is None:
            raise GeneratorError(f"{name!r} is not declared by <{self.spec.include}>", file=str(self.spec.file))
        body = self._struct_body(td)
        if body is not None and not by_value:
            if name not in self.complete:
                self.opaque.add(name)
            return
        if name in self.complete or name in self.visiting:
            return
        self.visiting.add(name)
        self.opaque.discard(name)
        if body is not None:
            for decl in body.decls or ():
                for dep, dep_by_value in self._names(decl.type, True):
                    self.need(dep, dep_by_value)
        elif name not in self.idx.enums:
            for dep, dep_by_value in self._names(td.type, True):
                self.need(dep, dep_by_value)
        self.visiting.discard(name)
        self.complete.add(name)
        self.order.append(name)

    def _need_tagged(self, name: str) -> None:
        """A struct or union used by value through its tag, without a typedef (CUDA's struct cudaPointerAttributes)."""
        body = self.idx.structs.get(name.split()[1])
        if body is None:
            raise GeneratorError(f"{name} is used by value but has no body in <{self.spec.include}>",
                                 file=str(self.spec.file))  # fmt: skip
        if name in self.complete or name in self.visiting:
            return
        self.visiting.add(name)
        for decl in body.decls or ():
            for dep, dep_by_value in self._names(decl.type, True):
                self.need(dep, dep_by_value)
        self.visiting.discard(name)
        self.complete.add(name)
        self.order.append(name)

    def _struct_body(self, td: c_ast.Typedef) -> c_ast.Struct | c_ast.Union | None:
        inner = td.type.type if isinstance(td.type, c_ast.TypeDecl) else None
        if isinstance(inner, c_ast.Struct | c_ast.Union):
            return self.idx.structs.get(inner.name) if inner.name else inner
        return None

    def run(self) -> None:
        for name in self.spec.types:
            if name.startswith(("struct ", "union ")):  # a tag without a typedef
                self._need_tagged(name)
                continue
            if name not in self.idx.typedefs:
                raise GeneratorError(
                    f"[select] types: {name!r} is not declared by <{self.spec.include}>", file=str(self.spec.file)
                )
            self.need(name, True)
        for name in self.spec.functions:
            decl = self.idx.functions.get(name)
            if decl is None:
                raise GeneratorError(
                    f"[select] functions: {name!r} is not declared by <{self.spec.include}>", file=str(self.spec.file)
                )
            for dep, by_value in self._names(decl.type, True):
                self.need(dep, by_value)
        for name in self.spec.enum_members:
            if name not in self.idx.enums:
                raise GeneratorError(
                    f"[enums] {name!r} is not an enum of <{self.spec.include}>", file=str(self.spec.file)
                )
            if name not in self.complete and f"enum {name}" not in self.complete:
                raise GeneratorError(
                    f"[enums] {name!r} is not reached by the selection: select it or drop the entry",
                    file=str(self.spec.file),
                )

    # rendering ------------------------------------------------------------------------------------
    def _enum(self, name: str, *, tag_only: bool = False) -> tuple[str, int]:
        enum = self.idx.enums[name]
        keep = self.spec.enum_members.get(name)
        env: dict[str, int] = {}
        members: list[tuple[str, int]] = []
        last = -1
        for e in enum.values.enumerators:
            value = last + 1 if e.value is None else eval_node(e.value, env)
            env[e.name] = last = value
            if keep is None or e.name in keep or e.name.endswith("_MAX_ENUM"):
                members.append((e.name, value))
        if keep is not None:
            missing = sorted(set(keep) - set(env))
            if missing:
                raise GeneratorError(f"[enums] {name}: not members of the enum: {missing}", file=str(self.spec.file))
        body = "".join(f"    {m} = {v},\n" for m, v in members)
        if tag_only:
            return f"enum {name} {{\n{body}}};", len(members)
        return f"typedef enum {name} {{\n{body}}} {name};", len(members)

    def render(self) -> tuple[str, dict[str, int]]:
        gen = c_generator.CGenerator()
        counts = {"functions": len(self.spec.functions), "complete types": 0, "opaque types": len(self.opaque)}
        forward: list[str] = []
        scalars: list[str] = []
        enums: list[str] = []
        pointers: list[str] = []
        bodies: list[str] = []
        for name in sorted(self.opaque):
            forward.append(f"typedef struct {name} {name};")
        for name in self.order:
            kind, _, tag = name.partition(" ")
            if kind == "enum":
                enums.append(self._enum(tag, tag_only=True)[0])
                counts["complete types"] += 1
                continue
            if kind in ("struct", "union"):
                fields = "".join(f"    {gen.visit(d)};\n" for d in self.idx.structs[tag].decls or ())
                bodies.append(f"{name} {{\n{fields}}};")
                counts["complete types"] += 1
                continue
            td = self.idx.typedefs[name]
            body = self._struct_body(td)
            if body is not None:
                kind = "union" if isinstance(body, c_ast.Union) else "struct"
                forward.append(f"typedef {kind} {name} {name};")
                fields = "".join(f"    {gen.visit(d)};\n" for d in body.decls or ())
                bodies.append(f"{kind} {name} {{\n{fields}}};")
                counts["complete types"] += 1
            elif name in self.idx.enums:
                text, _ = self._enum(name)
                enums.append(text)
                counts["complete types"] += 1
            else:
                text = gen.visit(td) + ";"
                if _is_function_pointer(td.type):
                    pointers.append(text)
                elif _names_tagged_enum(td.type):  # after the enum it names (CUDA's cudaError_t)
                    enums.append(text)
                else:
                    scalars.append(text)
                counts["complete types"] += 1
        functions = []
        for name in self.spec.functions:
            decl = self.idx.functions[name]
            functions.append(gen.visit(_plain(decl)) + ";")
        sections = [
            ("declared types (opaque where only pointed to)", forward),
            ("scalar typedefs", scalars),
            ("enums", enums),
            ("function-pointer typedefs", pointers),
            ("structs", bodies),
            ("functions", functions),
        ]
        cdef = "\n\n".join(f"/* {title} */\n" + "\n".join(items) for title, items in sections if items)
        return cdef + "\n", counts


_BUILTIN = frozenset(
    {
        "void", "char", "signed char", "unsigned char", "short", "unsigned short", "int", "unsigned int",
        "unsigned", "long", "unsigned long", "long long", "unsigned long long", "float", "double",
        "int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t",
        "intptr_t", "uintptr_t", "size_t", "ptrdiff_t", "_Bool",
    }
)  # fmt: skip


def _is_function_pointer(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.PtrDecl) and isinstance(node.type, c_ast.FuncDecl)


def _names_tagged_enum(node: c_ast.Node) -> bool:
    return isinstance(node, c_ast.TypeDecl) and isinstance(node.type, c_ast.Enum) and node.type.values is None


def _plain(decl: c_ast.Decl) -> c_ast.Decl:
    """The prototype without storage classes or function specifiers (``extern``, ``inline``)."""
    return c_ast.Decl(decl.name, decl.quals, [], [], [], decl.type, None, None)


# -- macros ----------------------------------------------------------------------------------------------

_UNSIGNED_CASTS = {"uint8_t": 8, "uint16_t": 16, "uint32_t": 32, "uint64_t": 64, "size_t": 64, "unsigned": 32}


def _unsigned_width(node: c_ast.Node) -> int:
    """The widest unsigned type an expression computes in (0: signed): constants' suffixes and casts."""
    width = 0
    if isinstance(node, c_ast.Constant) and "unsigned" in node.type:
        width = 64 if "long" in node.type else 32
    if isinstance(node, c_ast.Cast):
        names = " ".join(getattr(node.to_type.type.type, "names", []))
        width = _UNSIGNED_CASTS.get(names, 64 if names.startswith("unsigned long") else 0)
    for _, child in node.children():
        width = max(width, _unsigned_width(child))
    return width


# The type names a macro's expansion may cast to (pycparser must know they are types).
_CAST_TYPES = "\n".join(
    f"typedef int {name};" for name in ("int8_t", "uint8_t", "int16_t", "uint16_t", "int32_t", "uint32_t",
                                        "int64_t", "uint64_t", "intptr_t", "uintptr_t", "size_t")
)  # fmt: skip


def evaluate_macros(probes: str, spec: BackendSpec, typedef_source: str) -> dict[str, int]:
    """Every selected macro's integer value, from the preprocessor's full expansion."""
    out: dict[str, int] = {}
    parser = c_parser.CParser()
    for line in probes.splitlines():
        m = re.match(rf'^{_PROBE} "(\w+)" (.*)$', line)
        if not m:
            continue
        name, text = m.groups()
        if text.strip() == f"({name})":  # not a macro: the preprocessor left the name as it was
            continue
        try:
            ast = parser.parse(f"{typedef_source}\nstatic const long long __dlbind_value = {text};")
            node = ast.ext[-1].init
            value = eval_node(node, {})
            width = _unsigned_width(node)
        except (NotConstant, c_parser.ParseError) as exc:
            raise GeneratorError(
                f"[select] macros: {name} is not an integer constant ({text}: {exc})", file=str(spec.file)
            ) from None
        out[name] = value % (1 << width) if width else value
    missing = [m for m in spec.macros if m not in out]
    if missing:
        raise GeneratorError(f"[select] macros: not defined by <{spec.include}>: {missing}", file=str(spec.file))
    return {name: out[name] for name in spec.macros}


# -- the whole stage ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Selection:
    spec: BackendSpec
    header_path: str  # as found, e.g. /usr/include/vulkan/vulkan_core.h
    header_version: str
    header_sha256: str
    cdef: str
    macros: dict[str, int]
    counts: dict[str, int]


class HeaderUnavailable(Exception):
    """The backend's header is not on this machine, or is not the pinned one: its output is not checked."""


def declared(spec: BackendSpec) -> Selection:
    """A declaration file's cdef, checked: C that pycparser reads, every function with its provenance."""
    cdef = spec.declarations["cdef"].strip() + "\n"
    try:
        ast = c_parser.CParser().parse(cdef, str(spec.file))
    except c_parser.ParseError as exc:
        raise GeneratorError(f"[declarations] cdef is not C pycparser reads: {exc}", file=str(spec.file)) from None
    functions = [n.name for n in ast.ext if isinstance(n, c_ast.Decl) and isinstance(n.type, c_ast.FuncDecl)]
    types = [n.name for n in ast.ext if isinstance(n, c_ast.Typedef)]
    missing = [f for f in functions if f not in spec.provenance]
    unknown = [f for f in spec.provenance if f not in functions]
    if missing or unknown:
        raise GeneratorError(
            f"[provenance] must name exactly the declared functions: missing {missing}, not declared {unknown}",
            file=str(spec.file),
        )
    sha = hashlib.sha256(cdef.encode()).hexdigest()
    counts = {"functions": len(functions), "types": len(types), "macros": len(spec.macros)}
    macros = {k: int(v) for k, v in spec.declarations.get("macros", {}).items()}
    return Selection(spec, spec.include, str(spec.declarations["version"]), sha, cdef, macros, counts)


def select(spec: BackendSpec) -> Selection:
    """Select ``spec``'s declarations from the header on this machine; HeaderUnavailable says why it cannot."""
    if spec.declarations:
        return declared(spec)
    root = find_header(spec)
    if root is None:
        roots = ", ".join(spec.roots)
        raise HeaderUnavailable(f"<{spec.include}> not found (searched {roots})")
    header = root / spec.include
    sha = hashlib.sha256(header.read_bytes()).hexdigest()
    if sha != spec.sha256:
        raise HeaderUnavailable(
            f"{header} has sha256 {sha}, {spec.file.name} pins {spec.sha256}: to move to this header, "
            "update the pin and review the regenerated output"
        )
    decls, probes = _preprocess(spec, root)
    try:
        ast = c_parser.CParser().parse(decls, str(header))
    except c_parser.ParseError as exc:
        raise GeneratorError(f"pycparser cannot read the preprocessed header: {exc}", file=str(header)) from None
    selector = _Selector(spec, _index(ast))
    selector.run()
    cdef, counts = selector.render()
    macros = evaluate_macros(probes, spec, _CAST_TYPES)
    counts["macros"] = len(macros)
    version = _VERSION_DECODERS[spec.version_encoding](macros[spec.version_macro])
    return Selection(spec, str(header), version, sha, cdef, macros, counts)

