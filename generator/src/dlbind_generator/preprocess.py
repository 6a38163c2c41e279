"""Stage 2: run the C preprocessor (C mode, never ``__cplusplus``) and collect the header's macros.

``cpp -undef -nostdinc -dD`` keeps line markers (so parse errors and doc comments map to the
original file and line) and prints every ``#define`` where it takes effect. Defines that come from
the header itself are collected and evaluated as integer constant expressions; the others (the
generator's own stub ``stdint.h``/``stddef.h``, built-ins) are dropped.
"""

from __future__ import annotations

import codecs
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


#: Byte order marks of the encodings a header saved by an editor may have instead of UTF-8 (UTF-32 first:
#: its little-endian mark begins with UTF-16's).
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


def check_header_file(header: Path) -> None:
    """A header is a readable file of UTF-8 text (every dlpack.h is ASCII): else a :class:`GeneratorError` that
    says what it is instead (a folder, a UTF-16 file: where the first byte that is not UTF-8 is)."""
    if header.is_dir():
        raise GeneratorError("is a directory, not a header file", file=str(header))
    if not header.exists():
        raise GeneratorError("no such file", file=str(header))
    if not header.is_file():
        raise GeneratorError("not a regular file", file=str(header))
    try:
        data = header.read_bytes()
    except OSError as exc:
        raise GeneratorError(f"cannot read: {exc.strerror}", file=str(header)) from None
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bom = next((name for mark, name in _BOMS if data.startswith(mark)), None)
        what = f"{bom}, by its byte order mark" if bom else f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise GeneratorError(
            f"not UTF-8 text ({what}): a dlpack.h is UTF-8 (ASCII in every release); save it as UTF-8",
            file=str(header),
            line=data.count(b"\n", 0, exc.start) + 1,
        ) from None


def preprocess(header: Path) -> Preprocessed:
    check_header_file(header)
    cmd = [_cpp(), "-undef", "-nostdinc", "-dD", "-std=c99", "-x", "c", "-I", str(STUB_DIR), str(header)]
    proc = subprocess.run(cmd, capture_output=True, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace")
        first = next((ln for ln in stderr.splitlines() if "error" in ln), stderr.strip())
        raise GeneratorError(f"the C preprocessor failed: {first}")
    try:
        stdout = proc.stdout.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as text mode reads it
    except UnicodeDecodeError as exc:  # the header is UTF-8: a file it includes is not
        raise GeneratorError(
            f"the preprocessed header is not UTF-8 text (byte 0x{proc.stdout[exc.start]:02x}): a file it includes "
            "is in another encoding; save it as UTF-8",
            file=str(header),
        ) from None
    own = str(header)
    current, line = "", 0
    out: list[str] = []
    macros: dict[str, RawMacro] = {}
    for raw in stdout.split("\n"):
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
