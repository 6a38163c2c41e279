"""Reads ``spec/headers.toml``: which registry archive (or file, or URL) carries which DLPack header.

Headers are keyed by *release*: ``(major, minor)`` for a header whose version macros name a DLPack
release, or ``(major, minor, post)`` for a **post-release** — a header that changed after release
``major.minor`` without a new version (upstream's main branch adds enum values and keeps the version
macros), recorded as ``M.m.postN``. Plain tuple order puts ``1.3 < 1.3.post1 < 1.3.post2 < 1.4``.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass
from pathlib import Path

import tomllib

from .errors import GeneratorError

#: A release key: (major, minor) or (major, minor, post).
Release = tuple[int, ...]

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)$")
_RELEASE_RE = re.compile(r"^(\d+)\.(\d+)(?:\.post([1-9]\d*))?$")


def parse_version(text: str, *, where: str = "version") -> tuple[int, int]:
    """``"1.3"`` -> ``(1, 3)``; anything else is a :class:`GeneratorError`."""
    m = _VERSION_RE.match(text)
    if not m:
        raise GeneratorError(f"{where}: expected MAJOR.MINOR, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def parse_release(text: str, *, where: str = "version") -> Release:
    """``"1.3"`` -> ``(1, 3)``, ``"1.3.post1"`` -> ``(1, 3, 1)``; anything else is a :class:`GeneratorError`."""
    m = _RELEASE_RE.match(text)
    if not m:
        raise GeneratorError(f"{where}: expected MAJOR.MINOR or MAJOR.MINOR.postN, got {text!r}")
    major, minor, post = m.groups()
    return (int(major), int(minor)) if post is None else (int(major), int(minor), int(post))


def format_version(version: Release) -> str:
    """``(1, 3)`` -> ``"1.3"``, ``(1, 3, 1)`` -> ``"1.3.post1"``."""
    text = f"{version[0]}.{version[1]}"
    return f"{text}.post{version[2]}" if len(version) > 2 and version[2] else text


def base_of(release: Release) -> tuple[int, int]:
    """The DLPack release a release key belongs to: ``(1, 3, 1)`` -> ``(1, 3)``."""
    return release[0], release[1]


def post_of(release: Release) -> int:
    """The post number of a release key: 0 for a release, N for ``M.m.postN``."""
    return release[2] if len(release) > 2 else 0


@dataclass(frozen=True)
class HeaderSource:
    """One ``[[header]]`` entry: where ``dlpack.h`` comes from and its sha256.

    ``version`` is what the header's version macros say; ``post`` > 0 marks a post-release (the
    header changed after that release without a new version) recorded on ``date``. The header comes
    from a registry archive (``package``, ``package_version``, ``file``, ``path``), a ``url`` (e.g.
    the raw file of an upstream commit), or ``local``: a file on this machine (rehearsals only).
    """

    version: tuple[int, int]
    sha256: str
    package: str = ""
    package_version: str = ""
    file: str = ""
    path: str = ""
    local: str = ""
    url: str = ""
    post: int = 0
    date: str = ""  # ISO date a post-release was recorded

    @property
    def release(self) -> Release:
        return (*self.version, self.post) if self.post else self.version

    @property
    def origin(self) -> str:
        """Where the header comes from, in a few words (the report's "source" column)."""
        if self.local:
            return "local file"
        if self.url:
            return f"URL {self.url}"
        return f"{self.package} {self.package_version}"

    @property
    def label(self) -> str:
        v = format_version(self.release)
        if self.local:
            return f"dlpack {v} (local file {self.local})"
        if self.url:
            return f"dlpack {v} ({self.url})"
        return f"dlpack {v} ({self.package} {self.package_version}: {self.path})"


@dataclass(frozen=True)
class Sources:
    canonical: Release
    headers: tuple[HeaderSource, ...]

    def by_release(self, release: Release) -> HeaderSource:
        for h in self.headers:
            if h.release == tuple(release):
                return h
        raise GeneratorError(f"no header for DLPack {format_version(release)} in headers.toml")

    @property
    def releases(self) -> list[Release]:
        return [h.release for h in self.headers]


_REQUIRED = ("version", "sha256")
_REGISTRY = ("package", "package_version", "file", "path")
_OTHER = ("local", "url", "date")
_TOP = ("canonical", "header")


def _date(value: object, where: str) -> str:
    if isinstance(value, datetime.datetime):
        value = value.date()
    if isinstance(value, datetime.date):
        return value.isoformat()
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return datetime.date.fromisoformat(value).isoformat()
    except ValueError:
        raise GeneratorError(f"{where}: date must be a date (YYYY-MM-DD), not {value!r}") from None


def _string(raw: dict[str, object], key: str, where: str) -> str:
    """``raw[key]`` (``""`` where it is absent), which must be a string: ``version = 1.10`` (a float) is an error,
    never release 1.1."""
    value = raw.get(key, "")
    if not isinstance(value, str):
        raise GeneratorError(f"{where}: {key} must be a string (in quotes), not {value!r}")
    return value


def _entry(raw: object, where: str) -> HeaderSource:
    """One ``[[header]]`` entry, every key known and of its type."""
    if not isinstance(raw, dict):
        raise GeneratorError(f"{where}: expected a table, not {raw!r}")
    missing = [k for k in _REQUIRED if k not in raw]
    kinds = [f"`{k}`" for k in ("local", "url") if raw.get(k)]
    kinds += ["a registry archive"] if any(k in raw for k in _REGISTRY) else []
    if len(kinds) > 1:
        raise GeneratorError(f"{where}: one source per header: a registry archive, `url` or `local`, "
                             f"not {' and '.join(kinds)}")  # fmt: skip
    if not raw.get("local") and not raw.get("url"):
        missing += [k for k in _REGISTRY if k not in raw]
    if missing:
        raise GeneratorError(f"{where}: missing {', '.join(missing)}")
    unknown = set(raw) - set(_REQUIRED) - set(_REGISTRY) - set(_OTHER)
    if unknown:
        raise GeneratorError(f"{where}: unknown keys {', '.join(sorted(unknown))}")
    text = {k: _string(raw, k, where) for k in (*_REQUIRED, *_REGISTRY, "local", "url")}
    sha = text["sha256"].lower()
    if not re.fullmatch(r"[0-9a-f]{64}", sha):
        raise GeneratorError(f"{where}: sha256 must be 64 hex digits")
    url = text["url"]
    if url and not re.match(r"^(https?|file)://", url):
        raise GeneratorError(f"{where}: url must be an http(s):// or file:// URL, not {url!r}")
    release = parse_release(text["version"], where=where)
    post = post_of(release)
    if post and "date" not in raw:
        raise GeneratorError(f"{where}: a post-release ({format_version(release)}) needs the date it was recorded")
    return HeaderSource(
        version=base_of(release),
        sha256=sha,
        **{k: text[k] for k in (*_REGISTRY, "local")},
        url=url,
        post=post,
        date=_date(raw["date"], where) if "date" in raw else "",
    )


def _read(path: Path) -> tuple[object, list[object]]:
    """``path``'s ``canonical`` and its ``[[header]]`` entries, its only top-level keys (a typo drops no entry)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    unknown = sorted(set(data) - set(_TOP))
    if unknown:
        raise GeneratorError(
            f"unknown key(s) {', '.join(unknown)}; known: `canonical` and the [[header]] entries", file=str(path)
        )
    raws = data.get("header", [])
    if not isinstance(raws, list):
        raise GeneratorError("`header` must be an array of tables ([[header]] entries)", file=str(path))
    return data.get("canonical", ""), raws


def load_sources(path: Path) -> Sources:
    canonical, raws = _read(path)
    entries = [_entry(raw, f"{path.name} [[header]] #{i + 1}") for i, raw in enumerate(raws)]
    if not entries:
        raise GeneratorError("no [[header]] entries", file=str(path))
    releases = [e.release for e in entries]
    if len(set(releases)) != len(releases):
        raise GeneratorError("a DLPack version is listed twice", file=str(path))
    for e in entries:
        if e.post and e.version not in releases:
            raise GeneratorError(
                f"{format_version(e.release)} is a post-release of {format_version(e.version)}, which has no "
                "[[header]] entry (the released header stays listed)",
                file=str(path),
            )
    if not isinstance(canonical, str):
        raise GeneratorError(f"canonical must be a string (in quotes), not {canonical!r}", file=str(path))
    release = parse_release(canonical, where=f"{path.name} canonical")
    if release not in releases:
        raise GeneratorError(f"canonical {format_version(release)} has no [[header]] entry", file=str(path))
    return Sources(canonical=release, headers=tuple(sorted(entries, key=lambda e: e.release)))
