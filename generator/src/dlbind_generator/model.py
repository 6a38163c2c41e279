"""Stage 4: the model of one header — frozen, ordered, JSON-dumpable facts.

JSON shape (the CLI contract of ``parse``; extra keys may be added, none removed):

``version`` [major, minor]; ``enums`` {Enum: {Member: int}} (members in declaration order);
``structs`` {Struct: [{name, type, offset, size}]}; ``macros`` {NAME: int} (integer macros);
``typedefs`` {name: "C type text"} (aliases and function pointers); plus ``struct_info``
{Struct: {tag, typedef, size, align}}, ``enum_info`` {Enum: {tag, typedef}}, ``functions``,
``declarations`` [[kind, name]] in header order, ``abi`` and ``docs`` {qualified name: text}; and
``release`` ("1.3.post1") only for a post-release (a header that changed after its release without a
new version: ``version`` is still what its macros say).
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
    post: int = 0  # N of a post-release M.m.postN (set from spec/headers.toml; the header cannot say it)

    @property
    def release(self) -> tuple[int, ...]:
        """The release key: ``version``, or ``(major, minor, post)`` for a post-release."""
        return (*self.version, self.post) if self.post else self.version

    def enum(self, name: str) -> Enum:
        return next(e for e in self.enums if e.name == name)

    def struct(self, name: str) -> Struct:
        return next(s for s in self.structs if s.name == name)

    @property
    def macro_values(self) -> dict[str, int]:
        return dict(self.macros)

    def to_json(self) -> dict[str, Any]:
        release = {"release": f"{self.version[0]}.{self.version[1]}.post{self.post}"} if self.post else {}
        return {
            "version": list(self.version),
            **release,
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
        data.pop("release", None)
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()

    def layout_hash(self) -> str:
        """sha256 of the layout alone: structs (fields, types, sizes, offsets), typedefs and function types.

        Enum values and macros are left out: a header that only adds enum values (upstream's post-1.3
        device types and dtype code) has the same layout hash as the release it follows.
        """
        data = self.to_json()
        layout = {k: data[k] for k in ("structs", "struct_info", "typedefs", "functions")}
        return hashlib.sha256(json.dumps(layout, sort_keys=True).encode()).hexdigest()


def dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"
