"""A made-up next ``dlpack.h`` for rehearsing the header bump (never committed, never released).

From the canonical header N (whatever ``spec/headers.toml`` names) it derives N+1 (minor + 1) with
what a real release tends to add: three device types after the last one, a dtype code after the
last one, a flag bit after the last one and a struct. The new names are returned with their values
so that a rehearsal can look for them in every generated target and at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import GeneratorError
from .model import HeaderModel

FLAG_PREFIX = "DLPACK_FLAG_BITMASK_"


def _names(version: tuple[int, int]) -> tuple[tuple[str, ...], str, str, str]:
    """The made-up names, distinct per version, so a rehearsal can be derived from a rehearsal."""
    tag = f"{version[0]}_{version[1]}"
    devices = tuple(f"kDLBump{tag}Dev{c}" for c in "ABC")
    return devices, f"kDLBump{tag}Type", f"DLPACK_FLAG_BITMASK_IS_BUMPED_{tag}", f"DLBump{tag}Info"


@dataclass(frozen=True)
class NextHeader:
    """The derived header's text and the names it adds, with their values."""

    text: str
    version: tuple[int, int]
    devices: tuple[tuple[str, int], ...]
    dtype: tuple[str, int]
    flag: tuple[str, int]
    struct: str


def _once(pattern: str, text: str, what: str) -> re.Match[str]:
    found = list(re.finditer(pattern, text, re.MULTILINE))
    if len(found) != 1:
        raise GeneratorError(f"cannot derive the next header: {what} found {len(found)} times, expected once")
    return found[0]


def _add_members(text: str, last: str, new: list[tuple[str, int]], what: str) -> str:
    """Insert ``new`` after the enum member ``last`` (keeping C's commas right), each with a doc comment."""
    pattern = rf"^(?P<indent>[ \t]*){re.escape(last)}[ \t]*=[ \t]*(?P<value>[^,\n}}]*?)[ \t]*(?P<comma>,?)[ \t]*"
    m = _once(pattern + r"(//.*|/\*.*\*/)?$", text, last)
    suffix = "U" if m.group("value").endswith("U") else ""
    indent = m.group("indent") or "  "
    lines = [
        f"{indent}/*! \\brief A {what} made up to rehearse the header bump. */\n{indent}{name} = {value}{suffix},"
        for name, value in new
    ]
    head = text[: m.start("comma")] + ","
    return head + text[m.end("comma") : m.end()] + "\n" + "\n".join(lines) + text[m.end() :]


def derive_next(text: str, model: HeaderModel) -> NextHeader:
    """The header after ``model`` (whose source text is ``text``): version minor + 1 and new names."""
    major, minor = model.version
    version = (major, minor + 1)
    device_names, dtype_name, flag_name, struct_name = _names(version)
    m = _once(r"^(#define\s+DLPACK_MINOR_VERSION\s+)(\d+)", text, "#define DLPACK_MINOR_VERSION")
    text = text[: m.start(2)] + str(minor + 1) + text[m.end(2) :]

    dev_last, _ = model.enum("DLDeviceType").members[-1]
    top = max(v for _, v in model.enum("DLDeviceType").members)
    devices = tuple((name, top + 1 + i) for i, name in enumerate(device_names))
    text = _add_members(text, dev_last, list(devices), "device type")

    code_last, _ = model.enum("DLDataTypeCode").members[-1]
    dtype = (dtype_name, max(v for _, v in model.enum("DLDataTypeCode").members) + 1)
    text = _add_members(text, code_last, [dtype], "dtype code")

    flags = [(n, v) for n, v in model.macros if n.startswith(FLAG_PREFIX)]
    if not flags:
        raise GeneratorError("cannot derive the next header: the canonical header has no DLPACK_FLAG_BITMASK_ macro")
    flag_last, flag_value = max(flags, key=lambda nv: nv[1])
    bit = flag_value.bit_length()
    m = _once(rf"^#define\s+{re.escape(flag_last)}\b.*$", text, f"#define {flag_last}")
    text = (
        text[: m.end()]
        + f"\n\n/*! \\brief A flag bit made up to rehearse the header bump. */\n#define {flag_name} (1UL << {bit}UL)"
        + text[m.end() :]
    )

    m = _once(r"^\}\s*DLTensor\s*;[ \t]*$", text, "} DLTensor;")
    struct = (
        f"\n\n/*! \\brief A struct made up to rehearse the header bump. */\n"
        f"typedef struct {{\n  DLDevice device;\n  uint64_t cookie;\n  DLDataType dtype;\n}} {struct_name};"
    )
    text = text[: m.end()] + struct + text[m.end() :]
    return NextHeader(text, version, devices, dtype, (flag_name, 1 << bit), struct_name)
