"""Stage 2: run the C preprocessor (C mode, never ``__cplusplus``) and collect the header's macros.

``cpp -undef -nostdinc -dD`` keeps line markers (so parse errors and doc comments map to the
original file and line) and prints every ``#define`` where it takes effect. Defines that come from
the header itself are collected and evaluated as integer constant expressions; the others (the
generator's own stub ``stdint.h``/``stddef.h``, built-ins) are dropped.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import GeneratorError

STUB_DIR = Path(__file__).parent / "stubs"
_LINEMARKER = re.compile(r'^# (\d+) "(.*)"')
_DEFINE = re.compile(r"^#define ([A-Za-z_]\w*)(\(.*?\))?(?:\s+(.*))?$")


@dataclass(frozen=True)
class RawMacro:
    name: str
    text: str  # the replacement list as written ("030", "(1UL << 2UL)")
    line: int


@dataclass(frozen=True)
class Preprocessed:
    text: str  # C source with line markers, ready for pycparser
    macros: tuple[RawMacro, ...]  # object-like macros defined by the header itself, in order


def _cpp() -> str:
    exe = shutil.which("cpp")
    if exe is None:
        raise GeneratorError("a C preprocessor is needed: install gcc (Debian: apt-get install cpp)")
    return exe


def preprocess(header: Path) -> Preprocessed:
    if not header.is_file():
        raise GeneratorError("no such file", file=str(header))
    cmd = [_cpp(), "-undef", "-nostdinc", "-dD", "-std=c99", "-x", "c", "-I", str(STUB_DIR), str(header)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr.strip())
        raise GeneratorError(f"the C preprocessor failed: {first}")
    own = str(header)
    current, line = "", 0
    out: list[str] = []
    macros: dict[str, RawMacro] = {}
    for raw in proc.stdout.split("\n"):
        m = _LINEMARKER.match(raw)
        if m:
            line, current = int(m.group(1)), m.group(2)
            out.append(raw)
            continue
        if raw.startswith("#define ") or raw.startswith("#undef "):
            if current == own:
                d = _DEFINE.match(raw)
                if raw.startswith("#undef "):
                    macros.pop(raw.split()[1], None)
                elif d and d.group(2) is None:  # object-like macros only
                    macros[d.group(1)] = RawMacro(d.group(1), (d.group(3) or "").strip(), line)
            out.append("")
        else:
            out.append(raw)
        line += 1
    return Preprocessed("\n".join(out), tuple(macros.values()))
