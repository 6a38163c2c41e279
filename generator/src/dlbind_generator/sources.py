"""Reads ``spec/headers.toml``: which registry archive carries which DLPack header."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import tomllib

from .errors import GeneratorError

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")


def parse_version(text: str, *, where: str = "version") -> tuple[int, int]:
    """``"1.3"`` -> ``(1, 3)``; anything else is a :class:`GeneratorError`."""
    m = _VERSION_RE.match(text)
    if not m:
        raise GeneratorError(f"{where}: expected MAJOR.MINOR, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def format_version(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class HeaderSource:
    """One ``[[header]]`` entry: a registry archive and the path of ``dlpack.h`` inside it.

    ``local`` (a file path) replaces the registry fields for headers made on this machine, as the
    header-bump rehearsal does.
    """

    version: tuple[int, int]
    sha256: str
    package: str = ""
    package_version: str = ""
    file: str = ""
    path: str = ""
    local: str = ""

    @property
    def label(self) -> str:
        if self.local:
            return f"dlpack {format_version(self.version)} (local file {self.local})"
        return f"dlpack {format_version(self.version)} ({self.package} {self.package_version}: {self.path})"


@dataclass(frozen=True)
class Sources:
    canonical: tuple[int, int]
    headers: tuple[HeaderSource, ...]

    def by_version(self, version: tuple[int, int]) -> HeaderSource:
        for h in self.headers:
            if h.version == version:
                return h
        raise GeneratorError(f"no header for DLPack {format_version(version)} in headers.toml")


_REQUIRED = ("version", "sha256")
_REGISTRY = ("package", "package_version", "file", "path")


def load_sources(path: Path) -> Sources:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    entries = []
    for i, raw in enumerate(data.get("header", [])):
        where = f"{path.name} [[header]] #{i + 1}"
        missing = [k for k in _REQUIRED if k not in raw]
        if not raw.get("local"):
            missing += [k for k in _REGISTRY if k not in raw]
        if missing:
            raise GeneratorError(f"{where}: missing {', '.join(missing)}")
        unknown = set(raw) - set(_REQUIRED) - set(_REGISTRY) - {"local"}
        if unknown:
            raise GeneratorError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
        sha = str(raw["sha256"]).lower()
        if not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise GeneratorError(f"{where}: sha256 must be 64 hex digits")
        entries.append(
            HeaderSource(
                version=parse_version(str(raw["version"]), where=where),
                sha256=sha,
                **{k: str(raw.get(k, "")) for k in (*_REGISTRY, "local")},
            )
        )
    if not entries:
        raise GeneratorError("no [[header]] entries", file=str(path))
    versions = [e.version for e in entries]
    if len(set(versions)) != len(versions):
        raise GeneratorError("a DLPack version is listed twice", file=str(path))
    canonical = parse_version(str(data.get("canonical", "")), where=f"{path.name} canonical")
    if canonical not in versions:
        raise GeneratorError(f"canonical {format_version(canonical)} has no [[header]] entry", file=str(path))
    return Sources(canonical=canonical, headers=tuple(sorted(entries, key=lambda e: e.version)))
