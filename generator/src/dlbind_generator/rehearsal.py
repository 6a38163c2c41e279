"""Headers for rehearsing the header bump, derived from whatever header is canonical (never committed).

A rehearsal adds to the canonical header (a release or a post-release alike) names that it does not
declare yet, at values no member holds, in one of two kinds:

- ``drift``: the version macros unchanged — what upstream's main branch is between releases; the bump
  records it as the next post-release (``1.3.post1``, then ``1.3.post2``, ...);
- ``minor``: ``DLPACK_MINOR_VERSION`` raised by one — what the next release would be (``1.4``).

Which names: first **upstream's additions** that the header lacks. DLPack's main branch moved past v1.3
without a release: it added the device types ``kDLTPU = 19``, ``kDLTPUHost = 20``, ``kDLAscend = 21``
and the dtype code ``kDLBcomplex = 18U`` (a complex of two bfloat16), keeping the version macros at 1.3
(reference notes §1.1: dmlc/dlpack#189); their policy rows wait in spec/devices.toml and spec/dtypes.toml.
Then, where none of those is missing (the canonical header has them all) and always for ``minor`` (a
release brings something of its own), **names of the rehearsal's own**: one device type and one dtype
code at the next free values, named after their value (``kDLRehearsalDevice22``, ``kDLRehearsalType19``)
so that a rehearsal of a rehearsed tree adds new names again. Their policy is not in the tables: the
rows :func:`policy_rows` gives are written into spec/devices.toml and spec/dtypes.toml before the bump,
as the generator manual says a maintainer does for a new name (``rehearsal-header --policy``).

Upstream's values are upstream's; the doc comments in the derived text are this rehearsal's own (they
say so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import GeneratorError
from .model import HeaderModel
from .policy import _VALUE_LIMIT, DEVICE_ENUM, DTYPE_ENUM

#: Upstream's additions after v1.3, per enum: (member, value).
UPSTREAM_ADDITIONS: dict[str, tuple[tuple[str, int], ...]] = {
    DEVICE_ENUM: (("kDLTPU", 19), ("kDLTPUHost", 20), ("kDLAscend", 21)),
    DTYPE_ENUM: (("kDLBcomplex", 18),),
}
_DOCS = {
    "kDLTPU": "Google TPU device memory",
    "kDLTPUHost": "Google TPU host (pinned) memory",
    "kDLAscend": "Huawei Ascend NPU device memory",
    "kDLBcomplex": "A complex number of two bfloat16 (real, imaginary): bits = 32",
}
#: The names of the rehearsal's own, per enum: a pattern of the value.
OWN_NAMES = {DEVICE_ENUM: "kDLRehearsalDevice{value}", DTYPE_ENUM: "kDLRehearsalType{value}"}
OWN_BITS = 16  # the one width a dtype code of the rehearsal's own has a name for
KINDS = ("drift", "minor")


@dataclass(frozen=True)
class RehearsalHeader:
    """The derived header's text, its version macros, the release it derives from and the names it adds."""

    text: str
    kind: str  # "drift" (version macros kept) or "minor" (minor version + 1)
    version: tuple[int, int]
    base: tuple[int, ...]  # the release key of the header it was derived from (canonical at the time)
    devices: tuple[tuple[str, int], ...]  # DLDeviceType members added, (name, value), in value order
    dtypes: tuple[tuple[str, int], ...]  # DLDataTypeCode members added
    own: tuple[str, ...] = ()  # the added members that are the rehearsal's own (policy rows needed)

    @property
    def added(self) -> dict[str, tuple[tuple[str, int], ...]]:
        """The added members per enum."""
        return {DEVICE_ENUM: self.devices, DTYPE_ENUM: self.dtypes}

    @property
    def qualnames(self) -> tuple[str, ...]:
        """``DLDeviceType.kDLTPU``, ... for every added member."""
        return tuple(f"{enum}.{name}" for enum, new in self.added.items() for name, _ in new)

    @property
    def upstream(self) -> bool:
        """Whether upstream's additions are what this header adds (no name of the rehearsal's own)."""
        return not self.own


def _once(pattern: str, text: str, what: str) -> re.Match[str]:
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if len(found) != 1:
        raise GeneratorError(f"cannot derive the rehearsal header: {what} found {len(found)} times, expected once")
    return found[0]


def _doc(name: str) -> str:
    if name in _DOCS:
        return f"{_DOCS[name]} (added upstream after v1.3; comment of the bump rehearsal)"
    return "A name of the bump rehearsal's own (never in a real dlpack.h)"


def _add_members(text: str, last: str, new: tuple[tuple[str, int], ...]) -> str:
    """Insert ``new`` after the enum member ``last`` (keeping C's commas right), each with a doc comment."""
    pattern = rf"^(?P<indent>[ \t]*){re.escape(last)}[ \t]*=[ \t]*(?P<value>[^,\n}}]*?)[ \t]*(?P<comma>,?)[ \t]*"
    m = _once(pattern + r"(//.*|/\*.*\*/)?$", text, last)
    suffix = "U" if m.group("value").endswith("U") else ""
    indent = m.group("indent") or "  "
    lines = [f"{indent}/*! \\brief {_doc(name)} */\n{indent}{name} = {value}{suffix}," for name, value in new]
    head = text[: m.start("comma")] + ","
    return head + text[m.end("comma") : m.end()] + "\n" + "\n".join(lines) + text[m.end() :]


def _additions(model: HeaderModel, kind: str) -> tuple[dict[str, tuple[tuple[str, int], ...]], tuple[str, ...]]:
    """What a rehearsal of ``kind`` adds to ``model``'s header, per enum, and which of it is its own."""
    added: dict[str, tuple[tuple[str, int], ...]] = {}
    for enum, new in UPSTREAM_ADDITIONS.items():
        members = dict(model.enum(enum).members)
        values = {v: m for m, v in members.items()}
        missing = []
        for name, value in new:
            if name in members:
                if members[name] != value:
                    raise GeneratorError(
                        f"cannot derive the rehearsal header: DLPack {model.version[0]}.{model.version[1]} declares "
                        f"{enum}.{name} = {members[name]}, upstream's value is {value}"
                    )
                continue
            if value in values:
                raise GeneratorError(
                    f"cannot derive the rehearsal header: DLPack {model.version[0]}.{model.version[1]} gives "
                    f"{enum}.{values[value]} the value {value} that upstream gave {name}"
                )
            missing.append((name, value))
        added[enum] = tuple(missing)
    own: list[str] = []
    if kind == "minor" or not any(added.values()):
        for enum, pattern in OWN_NAMES.items():
            taken = {v for _, v in model.enum(enum).members} | {v for _, v in added[enum]}
            value = max(taken) + 1
            if value > _VALUE_LIMIT[enum]:
                raise GeneratorError(f"cannot derive the rehearsal header: {enum} has no free value after {value - 1}")
            name = pattern.format(value=value)
            added[enum] = (*added[enum], (name, value))
            own.append(f"{enum}.{name}")
    return added, tuple(own)


def derive(text: str, model: HeaderModel, kind: str = "drift") -> RehearsalHeader:
    """``model``'s header (source ``text``: the canonical header, a release or a post-release) plus the names
    a rehearsal of ``kind`` adds (see the module's doc).

    ``kind`` "drift" keeps the version macros; "minor" raises DLPACK_MINOR_VERSION by one. A header that
    declares one of upstream's names with another value, or gives one of their values to another member,
    is an error (it is not the header upstream's additions apply to).
    """
    if kind not in KINDS:
        raise GeneratorError(f"rehearsal kind {kind!r}: expected one of {', '.join(KINDS)}")
    added, own = _additions(model, kind)
    major, minor = model.version
    version = model.version
    if kind == "minor":
        version = (major, minor + 1)
        m = _once(r"^(#define\s+DLPACK_MINOR_VERSION\s+)(\d+)", text, "#define DLPACK_MINOR_VERSION")
        text = text[: m.start(2)] + str(minor + 1) + text[m.end(2) :]
    for enum, new in added.items():
        if new:
            last, _ = model.enum(enum).members[-1]
            text = _add_members(text, last, new)
    return RehearsalHeader(text, kind, version, model.release, added[DEVICE_ENUM], added[DTYPE_ENUM], own)


def policy_rows(made: RehearsalHeader) -> dict[str, str]:
    """The policy entries for the rehearsal's own names, as TOML text per table (``devices``, ``dtypes``):
    what a maintainer writes before bumping a header with a new name (each with its ``value``, so the entry
    waits for the header until the bump). Upstream's names have theirs in the tables already."""
    rows = {"devices": "", "dtypes": ""}
    for enum, new in made.added.items():
        for name, value in new:
            if f"{enum}.{name}" not in made.own:
                continue
            if enum == DEVICE_ENUM:
                rows["devices"] += (
                    f"\n# A device type of the bump rehearsal's own (rehearsal-header --policy; never commit it)\n"
                    f'[devices.{name}]\nvalue = {value}\nname = "rehearsal{value}"\nhost = false\nstream = "none"\n'
                )
            else:
                rows["dtypes"] += (
                    f"\n# A dtype code of the bump rehearsal's own (rehearsal-header --policy; never commit it)\n"
                    f'[codes.{name}]\nvalue = {value}\nname = "rehearsal{value}_{{bits}}"\nbits = [{OWN_BITS}]\n'
                )
    return rows
