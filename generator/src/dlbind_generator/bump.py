"""The header bump: record a new ``dlpack.h`` in ``spec/headers.toml`` and regenerate everything.

``SOURCE`` is a path to a ``dlpack.h`` (a rehearsal: recorded with the ``local`` key, its absolute
path and sha256; never commit such an entry), a URL of one (``url``: e.g. the raw file of an upstream
commit, ``https://raw.githubusercontent.com/dmlc/dlpack/<commit>/include/dlpack/dlpack.h``) or
``PACKAGE==VERSION:PATH/IN/ARCHIVE`` (a registry archive, the form to commit for a release: fetched
through :mod:`dlbind_generator.fetch` like every other header). The DLPack version comes from the
header's own version macros.

A header whose macros name a listed version but whose bytes differ (upstream's main branch added enum
values and kept the version) is recorded as a **post-release** of that version, ``M.m.postN`` (N one
more than the last post-release of M.m), with the date; the released header stays listed.
:func:`set_canonical` is the way back: it makes a listed release (or post-release) canonical again and
removes the post-releases and rehearsals after it.
"""

from __future__ import annotations

import datetime
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import tomllib

from .errors import GeneratorError
from .fetch import Progress, _download_archive, _extract, _pip, _pip_failed, cache_path, download_url, sha256
from .model import HeaderModel
from .parse import parse_header
from .sources import HeaderSource, Release, format_version, load_sources, parse_release

_ARCHIVE_RE = re.compile(r"^(?P<package>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^:\s]+):(?P<path>\S+)$")


@dataclass(frozen=True)
class Recorded:
    """What :func:`record` did: the entry, whether it was new, the canonical before and after, and for a
    post-release the entry of the release it follows."""

    source: HeaderSource
    added: bool
    canonical_before: Release
    canonical_after: Release
    released: HeaderSource | None = None


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


_URL_RE = re.compile(r"^(https?|file)://")


def model_of(data: bytes) -> HeaderModel:
    """The model of a header given as bytes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dlpack.h"
        path.write_bytes(data)
        return parse_header(path)


def _version_of(data: bytes) -> tuple[int, int]:
    return model_of(data).version


def resolve_source(arg: str, progress: Progress) -> tuple[HeaderSource, bytes]:
    """The ``[[header]]`` entry for SOURCE, with its version read from the header's macros, and the header."""
    if _URL_RE.match(arg):
        data = download_url(arg, progress)
        return HeaderSource(version=_version_of(data), sha256=sha256(data), url=arg), data
    local = Path(arg)
    if local.is_dir():
        raise GeneratorError(f"bump source {arg!r}: is a directory, not a header file")
    if local.is_file():
        local = local.resolve()
        data = local.read_bytes()
        model = parse_header(local)
        return HeaderSource(version=model.version, sha256=sha256(data), local=str(local)), data
    if "==" not in arg:
        raise GeneratorError(
            f"bump source {arg!r}: no such file (and not a URL, nor of the form PACKAGE==VERSION:PATH)"
        )
    src, data = header_from_archive(arg, progress)
    return replace(src, version=_version_of(data)), data


def cache(src: HeaderSource, data: bytes, cache_dir: Path) -> None:
    """Leave a registry header where ``generate`` finds it (verified by its sha256) without downloading it again."""
    if src.local:
        return
    dest = cache_path(cache_dir, src.release)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(data)


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def entry_text(src: HeaderSource) -> str:
    """The ``[[header]]`` table for ``src`` in the layout of spec/headers.toml."""
    keys = ["version"]
    if src.local:
        keys.append("local")
    elif src.url:
        keys.append("url")
    else:
        keys += ["package", "package_version", "file", "path"]
    values = {
        "version": format_version(src.release),
        "local": src.local,
        "url": src.url,
        "package": src.package,
        "package_version": src.package_version,
        "file": src.file,
        "path": src.path,
    }
    lines = ["[[header]]", *(f"{k} = {_toml_str(values[k])}" for k in keys), f"sha256 = {_toml_str(src.sha256)}"]
    if src.post:
        lines.append(f"date = {src.date}")  # a TOML date
    return "\n".join(lines) + "\n"


_CANONICAL_RE = re.compile(r'^canonical\s*=\s*"[^"]*"[ \t]*$', re.MULTILINE)


def _set_canonical_line(text: str, canonical: Release, headers_toml: Path) -> str:
    if not _CANONICAL_RE.search(text):
        raise GeneratorError('no `canonical = "M.m"` line to update', file=str(headers_toml))
    return _CANONICAL_RE.sub(f'canonical = "{format_version(canonical)}"', text, count=1)


def _post_number(src: HeaderSource, same: list[HeaderSource], ledger: dict[str, str], abi_hash: str) -> int:
    """N of the post-release ``src`` becomes: the N of a post-release of its version that the ledger
    records with the same ABI model (the same header bumped again after `canonical` went back), else one
    more than every N listed or ever recorded in the ledger (an N is never given to another ABI model)."""
    v = format_version(src.version)
    recorded = {int(k.rsplit(".post", 1)[1]): h for k, h in ledger.items() if k.startswith(f"{v}.post")}
    again = [n for n, h in sorted(recorded.items()) if h == abi_hash and n not in {x.post for x in same}]
    if again:
        return again[0]
    return max([h.post for h in same] + list(recorded)) + 1


def record(
    headers_toml: Path,
    src: HeaderSource,
    today: datetime.date | None = None,
    *,
    ledger: dict[str, str] | None = None,
    abi_hash: str = "",
) -> tuple[str, Recorded]:
    """The new text of headers.toml with ``src`` appended (comments and layout kept), and what changed.

    A header listed already (the same sha256 for its version, a post-release included) is left as it
    is. A header whose version is listed with other bytes becomes a post-release of that version,
    dated ``today`` (its number: :func:`_post_number`, from ``ledger``, the ABI ledger's release ->
    digest lines, and the header's ``abi_hash``). The new entry is made canonical when it is the newest
    listed.
    """
    text = headers_toml.read_text(encoding="utf-8")
    sources = load_sources(headers_toml)
    same = [h for h in sources.headers if h.version == src.version]
    listed = next((h for h in same if h.sha256 == src.sha256), None)
    released = next((h for h in same if not h.post), None)
    if listed is not None:
        src = replace(src, post=listed.post, date=listed.date)
    elif same:  # the version's header is listed with other bytes: a post-release of it
        date = (today or datetime.date.today()).isoformat()
        src = replace(src, post=_post_number(src, same, ledger or {}, abi_hash), date=date)
    newest = max([*sources.releases, src.release])
    canonical = src.release if src.release == newest and src.release > sources.canonical else sources.canonical
    if listed is None:
        text = text.rstrip("\n") + "\n\n" + entry_text(src)
    if canonical != sources.canonical:
        text = _set_canonical_line(text, canonical, headers_toml)
    return text, Recorded(src, listed is None, sources.canonical, canonical, released if src.post else None)


def _without(text: str, releases: set[str]) -> str:
    """headers.toml's text without the ``[[header]]`` tables of ``releases`` (the rest as it is)."""
    parts = re.split(r"(?m)^(?=\[\[header\]\][ \t]*$)", text)
    kept = [parts[0]]
    for part in parts[1:]:
        if str(tomllib.loads(part)["header"][0]["version"]) not in releases:
            kept.append(part)
    return "".join(kept).rstrip("\n") + "\n"


def set_canonical(headers_toml: Path, arg: str) -> tuple[str, Release, list[HeaderSource]]:
    """The way back: headers.toml's new text with the listed release ``arg`` canonical (a release, ``1.3``, or a
    post-release, ``1.3.post1``: whatever was canonical before a bump), and every entry after it removed —
    the post-releases of its version and rehearsals (``local =`` entries) of newer ones; they are what a bump
    made canonical (bump the header again to return). Returns (text, the old canonical, the removed entries).
    A newer release from a registry or URL listed after ``arg`` is refused: the canonical header is the newest
    release, and removing a real release is a hand edit."""
    sources = load_sources(headers_toml)
    target = parse_release(arg, where="canonical")
    src = sources.by_release(target)
    newer = [h for h in sources.headers if h.release > target]
    releases = [h for h in newer if h.version != src.version and not h.local]
    if releases:
        raise GeneratorError(
            f"DLPack {', '.join(format_version(h.release) for h in releases)} is listed after {arg}: the canonical "
            "header is the newest listed release; remove newer releases from spec/headers.toml by hand",
            file=str(headers_toml),
        )
    text = _without(headers_toml.read_text(encoding="utf-8"), {format_version(h.release) for h in newer})
    return _set_canonical_line(text, target, headers_toml), sources.canonical, newer


def report_summary(report: str) -> str:
    """The ``## Summary`` section of generator/REPORT.md (without its heading)."""
    m = re.search(r"^## Summary\n(.*?)(?=^## |\Z)", report, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else report.strip()
