"""Stage 5: the Jinja environment and the view of the models each template reads.

Logic lives here (filters, view building); templates only lay text out. Python output goes through
``ruff format`` (pinned in the generator's requirements) so templates need not care about layout.
"""

from __future__ import annotations

import importlib.resources
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2

from .cdecl import c_declarations, struct_declaration
from .errors import GeneratorError
from .merge import MergedModel
from .model import HeaderModel
from .sources import Release, format_version, post_of


def _template_dir() -> Path:
    """The Jinja templates: package data of ``dlbind_generator.templates`` (``generator/templates`` in the checkout)."""
    found = importlib.resources.files("dlbind_generator.templates")
    if not isinstance(found, Path):  # e.g. a zipped install: Jinja's FileSystemLoader needs a folder
        raise GeneratorError(f"the generator's templates are not a folder on disk ({found!r}): install it unzipped")
    return found


TEMPLATES = _template_dir()
FLAG_PREFIX = "DLPACK_FLAG_BITMASK_"


def py_enum_name(c_name: str) -> str:
    """``DLDeviceType`` -> ``DeviceType``: the C prefix is dropped, the rest kept."""
    return c_name[2:] if c_name.startswith("DL") and c_name[2:3].isupper() else c_name


def one_line(text: str) -> str:
    return " ".join(text.split())


def c_string(text: str) -> str:
    """A C string literal (ASCII, escaped)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    if not escaped.isascii() or any(ord(ch) < 32 for ch in escaped):
        raise GeneratorError(f"a C table string must be printable ASCII: {text!r}")
    return f'"{escaped}"'


def py_release(release: Release) -> str:
    """A release as Python source: ``(1, 3)``; a post-release ``(1, PostMinor(3, 1))`` (spec_tables.py)."""
    if post_of(release):
        return f"({release[0]}, PostMinor({release[1]}, {post_of(release)}))"
    return f"({release[0]}, {release[1]})"


def environment(templates: Path = TEMPLATES) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["version"] = format_version
    env.filters["pyrelease"] = py_release
    env.filters["one_line"] = one_line
    env.filters["pyrepr"] = repr
    env.filters["cstr"] = c_string
    return env


@dataclass(frozen=True)
class Member:
    name: str
    value: int
    since: str
    doc: str


@dataclass(frozen=True)
class Alias:
    name: str
    target: str
    value: int
    until: str


@dataclass(frozen=True)
class EnumView:
    c_name: str
    py_name: str
    base: str
    doc: str
    members: tuple[Member, ...]
    aliases: tuple[Alias, ...]


def versioned_capsules(model: HeaderModel) -> bool:
    """Whether the header declares ``DLManagedTensorVersioned`` (DLPack 1.0+: versioned capsules)."""
    return any(s.name == "DLManagedTensorVersioned" or s.tag == "DLManagedTensorVersioned" for s in model.structs)


#: The structs the C fast path's code names that a header without versioned capsules lacks (DLPack 0.x).
C_PRIVATE_STRUCTS = ("DLPackVersion", "DLManagedTensorVersioned")


def c_private_versioned(model: HeaderModel, canonical: HeaderModel) -> str:
    """C declarations for the fast path of a header without versioned capsules (DLPack 0.x), else "".

    The fast path's C code is written against DLPack 1.x: it names ``DLManagedTensorVersioned``,
    ``DLPackVersion`` and ``DLPACK_MAJOR_VERSION``/``DLPACK_MINOR_VERSION``. For a 0.x header they are
    declared here, C-private: the structs as the canonical header lays them out, the version macros as
    this header's version. They are not in the cffi cdef, and no struct of these types is ever exchanged
    (``DLBIND_VERSIONED_CAPSULES`` 0 keeps every versioned path of the fast path shut).
    """
    if versioned_capsules(model):
        return ""
    out = [f"#define DLPACK_MAJOR_VERSION {model.version[0]}\n#define DLPACK_MINOR_VERSION {model.version[1]}\n"]
    for name in C_PRIVATE_STRUCTS:
        s = canonical.struct(name)
        out.append(struct_declaration(s))
        if not s.typedef:  # DLPack 1.0 declares struct DLManagedTensorVersioned by tag only
            out.append(f"typedef struct {s.name} {s.name};\n")
    return "\n".join(out)


def enum_views(model: HeaderModel, merged: MergedModel) -> list[EnumView]:
    docs = dict(model.docs)
    views = []
    for e in model.enums:
        members = tuple(
            Member(m, v, format_version(merged.get(f"{e.name}.{m}").since), one_line(docs.get(f"{e.name}.{m}", "")))
            for m, v in e.members
        )
        current = {m for m, _ in e.members}
        aliases: list[Alias] = []
        for m, v in e.members:
            for old, when in merged.get(f"{e.name}.{m}").renamed_from:
                if old not in current and old not in {a.name for a in aliases}:
                    aliases.append(Alias(old, m, v, format_version(when)))
        views.append(EnumView(e.name, py_enum_name(e.name), "IntEnum", docs.get(e.name, ""), members, tuple(aliases)))
    flags = [(n[len(FLAG_PREFIX) :], v, n) for n, v in model.macros if n.startswith(FLAG_PREFIX)]
    if not flags and not versioned_capsules(model):
        # DLPack 0.x: no flags field. An empty Flags keeps the runtime's Flags(0) (legacy capsules' flags).
        views.append(
            EnumView("DLPACK_FLAG_BITMASK_*", "Flags", "IntFlag",
                     f"No flags: DLPack {format_version(model.version)} has no DLManagedTensorVersioned.flags.", (), ())
        )  # fmt: skip
    if flags:
        views.append(
            EnumView(
                "DLPACK_FLAG_BITMASK_*",
                "Flags",
                "IntFlag",
                "Bits of DLManagedTensorVersioned.flags.",
                tuple(
                    Member(n, v, format_version(merged.get(c).since), one_line(docs.get(f"#{c}", "")))
                    for n, v, c in flags
                ),
                (),
            )
        )
    return views


def context(model: HeaderModel, merged: MergedModel, sources_label: dict[str, str]) -> dict[str, Any]:
    cdef = c_declarations(model)
    names = sorted(merged.names, key=lambda n: n.qualname)
    return {
        "model": model,
        "merged": merged,
        # the release: DLPACK_VERSION is version[:2] (the macros); "version" filter: "1.3" or "1.3.post1"
        "version": model.release,
        "enums": enum_views(model, merged),
        # DLPACK_VERSION (0.x headers' macro, 80 or the octal 040) is the (major, minor) tuple in Python
        "constants": [(n, v) for n, v in model.macros if n != "DLPACK_VERSION"],
        "versioned_capsules": versioned_capsules(model),
        # the C-private declarations of a 0.x header (vendor_render: c_private_versioned with the canonical)
        "c_private": "",
        "structs": model.structs,
        "cdef": cdef,
        "since": [(n.qualname, n.since) for n in names],
        "removed": [(n.qualname, n.removed) for n in names if n.removed is not None],
        "renamed": [(n.qualname, n.renamed_from) for n in names if n.renamed_from],
        "kinds": [(n.qualname, n.kind) for n in names],
        "sources": sources_label,
    }


def ruff_format(text: str, filename: str) -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        raise GeneratorError("ruff is needed to format generated Python: pip install -e generator")
    proc = subprocess.run(
        [ruff, "format", "--isolated", "--line-length", "110", "--stdin-filename", filename, "-"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise GeneratorError(f"ruff could not format the rendered {filename} (a template bug): {proc.stderr.strip()}")
    return proc.stdout
