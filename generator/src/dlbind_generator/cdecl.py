"""C declaration text from the model: what cffi's ``cdef`` and the compiled module's source read."""

from __future__ import annotations

import re

from .model import HeaderModel, Struct

_ABSTRACT_PTR = re.compile(r"\((\*+)\)")


def declare(type_text: str, name: str) -> str:
    """Put ``name`` into an abstract type: ``int (*)(int)`` + f -> ``int (*f)(int)``."""
    m = _ABSTRACT_PTR.search(type_text)
    if m:
        return f"{type_text[: m.end() - 1]}{name}{type_text[m.end() - 1 :]}"
    if "[" in type_text:
        i = type_text.index("[")
        return f"{type_text[:i].rstrip()} {name}{type_text[i:]}"
    return f"{type_text}{name}" if type_text.endswith("*") else f"{type_text} {name}"


def struct_declaration(s: Struct) -> str:
    """One struct as C, as the header declares it (with its typedef, if any)."""
    body = "".join(f"  {declare(f.type, f.name)};\n" for f in s.fields)
    if s.typedef:
        tag = f" {s.tag}" if s.tag else ""
        return f"typedef struct{tag} {{\n{body}}} {s.name};\n"
    return f"struct {s.name} {{\n{body}}};\n"


def c_declarations(model: HeaderModel) -> str:
    """The header's integer macros, then every type it declares in header order, as plain C (no comments)."""
    enums = {e.name: e for e in model.enums}
    structs = {s.name: s for s in model.structs}
    typedefs = dict(model.typedefs)
    out: list[str] = ["".join(f"#define {name} {value}\n" for name, value in model.macros)] if model.macros else []
    for kind, name in model.declarations:
        if kind == "struct":
            out.append(struct_declaration(structs[name]))
        elif kind == "enum":
            e = enums[name]
            body = "".join(f"  {member} = {value},\n" for member, value in e.members)
            if e.typedef:
                tag = f" {e.tag}" if e.tag else ""
                out.append(f"typedef enum{tag} {{\n{body}}} {e.name};\n")
            else:
                out.append(f"enum {e.name} {{\n{body}}};\n")
        elif kind == "typedef":
            out.append(f"typedef {declare(typedefs[name], name)};\n")
        # function prototypes are not declared: DLPack ships no library to bind them to
    return "\n".join(out)
