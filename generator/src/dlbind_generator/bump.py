"""The header bump: record a new ``dlpack.h`` in ``spec/headers.toml`` and regenerate everything.

``SOURCE`` is either a path to a ``dlpack.h`` (a rehearsal: recorded with the ``local`` key, its
absolute path and sha256; never commit such an entry) or ``PACKAGE==VERSION:PATH/IN/ARCHIVE`` (a
registry archive, the form to commit: fetched through :mod:`dlbind_generator.fetch` like every
other header). The DLPack version comes from the header's own version macros.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import GeneratorError
from .fetch import Progress, _download_archive, _extract, _pip, _pip_failed, cache_path, sha256
from .parse import parse_header
from .sources import HeaderSource, format_version, load_sources

_ARCHIVE_RE = re.compile(r"^(?P<package>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^:\s]+):(?P<path>\S+)$")


@dataclass(frozen=True)
class Recorded:
    """What :func:`record` did: the entry, whether it was new, and the canonical before and after."""

    source: HeaderSource
    added: bool
    canonical_before: tuple[int, int]
    canonical_after: tuple[int, int]


def _sdist_folder(package: str, version: str, path: str) -> str | None:
    """``cupy-8.6.0`` when ``path`` starts with the release's sdist folder (``NAME-VERSION/``), else None."""
    folder = path.split("/", 1)[0]
    name, _, tail = folder.rpartition("-")
    if (
        "/" in path
        and tail == version
        and re.sub(r"[-_.]+", "-", name).lower() == re.sub(r"[-_.]+", "-", package).lower()
    ):
        return folder
    return None


def _machine_wheel(package: str, version: str, progress: Progress) -> tuple[str, bytes]:
    """The wheel of ``package==version`` that ``pip download`` picks for this machine: (file name, bytes)."""
    with tempfile.TemporaryDirectory(prefix="dlbind-bump-") as tmp:
        progress(f"  pip download {package}=={version} (the wheel for this machine) ...")
        spec = f"{package}=={version}"
        proc = _pip("download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest", tmp, spec)
        if proc.returncode != 0:
            raise _pip_failed(
                f"bump source {spec}: no wheel for this machine (for an sdist give NAME-VERSION/...)", proc
            )
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise GeneratorError(
                f"bump source {spec}: pip download left {[w.name for w in wheels]}, expected one wheel"
            )
        return wheels[0].name, wheels[0].read_bytes()


def header_from_archive(spec: str, progress: Progress) -> tuple[HeaderSource, bytes]:
    """``PACKAGE==VERSION:PATH`` -> the registry entry (version not yet read: (0, 0)) and the header bytes.

    The archive comes through :mod:`dlbind_generator.fetch`'s routes: the sdist from the index when
    ``PATH`` starts with its folder, else the wheel ``pip download`` picks for this machine.
    """
    m = _ARCHIVE_RE.match(spec)
    if not m:
        raise GeneratorError(f"bump source {spec!r}: expected a path to dlpack.h or PACKAGE==VERSION:PATH/IN/ARCHIVE")
    package, version, path = m.group("package", "version", "path")
    src = HeaderSource(version=(0, 0), sha256="0" * 64, package=package, package_version=version, path=path)
    folder = _sdist_folder(package, version, path)
    if folder is None:
        name, archive = _machine_wheel(package, version, progress)
        src = replace(src, file=name)
    else:
        errors = []
        for suffix in (".tar.gz", ".zip"):
            try:
                src = replace(src, file=folder + suffix)
                archive = _download_archive(src, progress)
                break
            except GeneratorError as exc:
                errors.append(str(exc))
        else:
            raise GeneratorError(f"bump source {spec!r}: no sdist {folder}.tar.gz or .zip ({errors[-1]})")
    try:
        data = _extract(src, archive)
    except GeneratorError:
        raise GeneratorError(f"bump source {spec!r}: {path!r} is not in {src.file}") from None
    return replace(src, sha256=sha256(data)), data


def resolve_source(arg: str, progress: Progress) -> tuple[HeaderSource, bytes]:
    """The ``[[header]]`` entry for SOURCE, with its version read from the header's macros, and the header."""
    local = Path(arg)
    if local.is_file():
        local = local.resolve()
        data = local.read_bytes()
        model = parse_header(local)
        return HeaderSource(version=model.version, sha256=sha256(data), local=str(local)), data
    if "==" not in arg:
        raise GeneratorError(f"bump source {arg!r}: no such file (and not of the form PACKAGE==VERSION:PATH)")
    src, data = header_from_archive(arg, progress)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dlpack.h"
        path.write_bytes(data)
        model = parse_header(path)
    return replace(src, version=model.version), data


def cache(src: HeaderSource, data: bytes, cache_dir: Path) -> None:
    """Leave a registry header where ``generate`` finds it (verified by its sha256) without downloading it again."""
    if src.local:
        return
    dest = cache_path(cache_dir, src.version)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def entry_text(src: HeaderSource) -> str:
    """The ``[[header]]`` table for ``src`` in the layout of spec/headers.toml."""
    keys = ["version"]
    keys += ["local"] if src.local else ["package", "package_version", "file", "path"]
    values = {
        "version": format_version(src.version),
        "local": src.local,
        "package": src.package,
        "package_version": src.package_version,
        "file": src.file,
        "path": src.path,
    }
    lines = ["[[header]]", *(f"{k} = {_toml_str(values[k])}" for k in keys), f"sha256 = {_toml_str(src.sha256)}"]
    return "\n".join(lines) + "\n"


_CANONICAL_RE = re.compile(r'^canonical\s*=\s*"[^"]*"[ \t]*$', re.MULTILINE)


def record(headers_toml: Path, src: HeaderSource) -> tuple[str, Recorded]:
    """The new text of headers.toml with ``src`` appended (comments and layout kept), and what changed.

    A version listed already with another sha256 is refused, naming both digests; listed with the
    same sha256 it is left as it is.
    """
    text = headers_toml.read_text(encoding="utf-8")
    sources = load_sources(headers_toml)
    v = format_version(src.version)
    listed = next((h for h in sources.headers if h.version == src.version), None)
    if listed is not None and listed.sha256 != src.sha256:
        raise GeneratorError(
            f"DLPack {v} is listed already with sha256 {listed.sha256} ({listed.label}); "
            f"the new header has sha256 {src.sha256} ({src.label}). A changed header needs a new version; "
            "remove the old entry by hand only if it was a rehearsal",
            file=str(headers_toml),
        )
    newest = max([h.version for h in sources.headers] + [src.version])
    canonical = src.version if src.version == newest and src.version > sources.canonical else sources.canonical
    if listed is None:
        text = text.rstrip("\n") + "\n\n" + entry_text(src)
    if canonical != sources.canonical:
        if not _CANONICAL_RE.search(text):
            raise GeneratorError('no `canonical = "M.m"` line to update', file=str(headers_toml))
        text = _CANONICAL_RE.sub(f'canonical = "{format_version(canonical)}"', text, count=1)
    return text, Recorded(src, listed is None, sources.canonical, canonical)


def report_summary(report: str) -> str:
    """The ``## Summary`` section of generator/REPORT.md (without its heading)."""
    m = re.search(r"^## Summary\n(.*?)(?=^## |\Z)", report, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else report.strip()
