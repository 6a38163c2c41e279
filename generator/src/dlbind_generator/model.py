"""Stage 4: the model of one header — frozen, ordered, JSON-dumpable facts.

JSON shape (the CLI contract of ``parse``; extra keys may be added, none removed):

``version`` [major, minor]; ``enums`` {Enum: {Member: int}} (members in declaration order);
``structs`` {Struct: [{name, type, offset, size}]}; ``macros`` {NAME: int} (integer macros);
``typedefs`` {name: "C type text"} (aliases and function pointers); plus ``struct_info``
{Struct: {tag, typedef, size, align}}, ``enum_info`` {Enum: {tag, typedef}}, ``functions``,
``declarations`` [[kind, name]] in header order, ``abi`` and ``docs`` {qualified name: text}.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Field:
    name: str
    type: str
    offset: int
    size: int


@dataclass(frozen=True)
class Struct:
    name: str
    tag: str | None
    typedef: bool
    fields: tuple[Field, ...]
    size: int
    align: int


@dataclass(frozen=True)
class Enum:
    name: str
    tag: str | None
    typedef: bool
    members: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class HeaderModel:
    version: tuple[int, int]
    sha256: str
    enums: tuple[Enum, ...]
    structs: tuple[Struct, ...]
    macros: tuple[tuple[str, int], ...]
    typedefs: tuple[tuple[str, str], ...]
    functions: tuple[tuple[str, str], ...]
    declarations: tuple[tuple[str, str], ...]  # (kind, name) in header order
    docs: tuple[tuple[str, str], ...]
    abi: str

    def enum(self, name: str) -> Enum:
        return next(e for e in self.enums if e.name == name)

    def struct(self, name: str) -> Struct:
        return next(s for s in self.structs if s.name == name)

    @property
    def macro_values(self) -> dict[str, int]:
        return dict(self.macros)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": list(self.version),
            "header_sha256": self.sha256,
            "abi": self.abi,
            "enums": {e.name: dict(e.members) for e in sorted(self.enums, key=lambda e: e.name)},
            "enum_info": {
                e.name: {"tag": e.tag, "typedef": e.typedef} for e in sorted(self.enums, key=lambda e: e.name)
            },
            "structs": {
                s.name: [{"name": f.name, "type": f.type, "offset": f.offset, "size": f.size} for f in s.fields]
                for s in sorted(self.structs, key=lambda s: s.name)
            },
            "struct_info": {
                s.name: {"tag": s.tag, "typedef": s.typedef, "size": s.size, "align": s.align}
                for s in sorted(self.structs, key=lambda s: s.name)
            },
            "macros": dict(sorted(self.macros)),
            "typedefs": dict(sorted(self.typedefs)),
            "functions": dict(sorted(self.functions)),
            "declarations": [list(d) for d in self.declarations],
            "docs": dict(sorted(self.docs)),
        }

    def abi_hash(self) -> str:
        """sha256 of everything but docs and the header digest: what the ledger pins per version."""
        data = self.to_json()
        del data["docs"], data["header_sha256"]
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
