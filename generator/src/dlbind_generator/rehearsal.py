"""Headers for rehearsing the header bump with upstream's real additions (never committed, never released).

DLPack's main branch moved past v1.3 without a release: it added the device types ``kDLTPU = 19``,
``kDLTPUHost = 20``, ``kDLAscend = 21`` and the dtype code ``kDLBcomplex = 18U`` (a complex of two
bfloat16), keeping ``DLPACK_MAJOR_VERSION``/``DLPACK_MINOR_VERSION`` at 1 and 3 (reference notes §1.1:
dmlc/dlpack#189). :func:`derive` adds exactly these values to a released header, as upstream did:

- ``drift``: the version macros unchanged — what upstream main is; the bump records it as a
  post-release (``1.3.post1``);
- ``minor``: ``DLPACK_MINOR_VERSION`` raised by one — what a release of them would be (``1.4``).

The values are upstream's; the doc comments in the derived text are this rehearsal's own (they say so).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import GeneratorError
from .model import HeaderModel

#: Upstream's additions after v1.3, per enum: (member, value).
UPSTREAM_ADDITIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "DLDeviceType": (("kDLTPU", 19), ("kDLTPUHost", 20), ("kDLAscend", 21)),
    "DLDataTypeCode": (("kDLBcomplex", 18),),
}
_DOCS = {
    "kDLTPU": "Google TPU device memory",
    "kDLTPUHost": "Google TPU host (pinned) memory",
    "kDLAscend": "Huawei Ascend NPU device memory",
    "kDLBcomplex": "A complex number of two bfloat16 (real, imaginary): bits = 32",
}
KINDS = ("drift", "minor")


@dataclass(frozen=True)
class RehearsalHeader:
    """The derived header's text, its version macros and the names it adds, with their values."""

    text: str
    kind: str  # "drift" (version macros kept) or "minor" (minor version + 1)
    version: tuple[int, int]
    devices: tuple[tuple[str, int], ...]
    dtypes: tuple[tuple[str, int], ...]


def _once(pattern: str, text: str, what: str) -> re.Match[str]:
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if len(found) != 1:
        raise GeneratorError(f"cannot derive the rehearsal header: {what} found {len(found)} times, expected once")
    return found[0]


def _add_members(text: str, last: str, new: tuple[tuple[str, int], ...]) -> str:
    """Insert ``new`` after the enum member ``last`` (keeping C's commas right), each with a doc comment."""
    pattern = rf"^(?P<indent>[ \t]*){re.escape(last)}[ \t]*=[ \t]*(?P<value>[^,\n}}]*?)[ \t]*(?P<comma>,?)[ \t]*"
    m = _once(pattern + r"(//.*|/\*.*\*/)?$", text, last)
    suffix = "U" if m.group("value").endswith("U") else ""
    indent = m.group("indent") or "  "
    lines = [
        f"{indent}/*! \\brief {_DOCS[name]} (added upstream after v1.3; comment of the bump rehearsal) */\n"
        f"{indent}{name} = {value}{suffix},"
        for name, value in new
    ]
    head = text[: m.start("comma")] + ","
    return head + text[m.end("comma") : m.end()] + "\n" + "\n".join(lines) + text[m.end() :]


def derive(text: str, model: HeaderModel, kind: str = "drift") -> RehearsalHeader:
    """``model``'s header (source ``text``, a released header) plus upstream's additions after v1.3.

    ``kind`` "drift" keeps the version macros; "minor" raises DLPACK_MINOR_VERSION by one. A header that
    declares any of the additions already, or gives one of their values to another member, is an error.
    """
    if kind not in KINDS:
        raise GeneratorError(f"rehearsal kind {kind!r}: expected one of {', '.join(KINDS)}")
    if model.post:
        raise GeneratorError("derive the rehearsal header from a released header, not a post-release")
    for enum, new in UPSTREAM_ADDITIONS.items():
        members = dict(model.enum(enum).members)
        values = {v: m for m, v in members.items()}
        for name, value in new:
            if name in members or value in values:
                have = name if name in members else values[value]
                raise GeneratorError(
                    f"cannot derive the rehearsal header: DLPack {model.version[0]}.{model.version[1]} declares "
                    f"{enum}.{have} = {members.get(have, value)} already (upstream's additions are in this release)"
                )
    major, minor = model.version
    version = model.version
    if kind == "minor":
        version = (major, minor + 1)
        m = _once(r"^(#define\s+DLPACK_MINOR_VERSION\s+)(\d+)", text, "#define DLPACK_MINOR_VERSION")
        text = text[: m.start(2)] + str(minor + 1) + text[m.end(2) :]
    for enum, new in UPSTREAM_ADDITIONS.items():
        last, _ = model.enum(enum).members[-1]
        text = _add_members(text, last, new)
    return RehearsalHeader(
        text, kind, version, UPSTREAM_ADDITIONS["DLDeviceType"], UPSTREAM_ADDITIONS["DLDataTypeCode"]
    )
