"""Stage 1: download each header's registry archive, extract ``dlpack.h``, verify its sha256, cache it.

Only public interfaces of pip and of package indexes are used, so whatever index pip is configured with
(``pip config``, ``PIP_INDEX_URL``, extra indexes) is used and no registry host is written here:

- a wheel (``file`` ends in ``.whl``) comes from ``python -m pip download --no-deps --only-binary=:all:``
  with the wheel's own tags as ``--platform``/``--python-version``/``--implementation``/``--abi``;
- an sdist cannot go that way (``pip download`` builds its metadata, which old cupy sdists cannot do), so
  it is looked up on the indexes pip names (``python -m pip config list``, else the default that
  ``pip download --help`` states) through the simple repository API (PEP 691 JSON, PEP 503 HTML) and
  downloaded with ``urllib``; the index's sha256 of the archive is checked when it gives one;
- a header listed by ``url`` (a post-release taken from an upstream commit) is downloaded as it is.

The header's sha256 is the fact that matters: the archive is only a carrier. This is a maintainer step:
it runs only on ``generate``/``fetch``, never at import.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import ssl
import subprocess
import sys
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from .errors import GeneratorError
from .sources import HeaderSource, Release, Sources, format_version

Progress = Callable[[str], None]


def cache_path(cache_dir: Path, release: Release) -> Path:
    return cache_dir / f"dlpack-{format_version(release)}.h"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verify(src: HeaderSource, data: bytes, origin: str) -> None:
    actual = sha256(data)
    if actual != src.sha256:
        raise GeneratorError(f"sha256 mismatch for {src.label} from {origin}: expected {src.sha256}, got {actual}")


def _pip(*args: str) -> subprocess.CompletedProcess[str]:
    """Run this interpreter's pip (a public command line) and return what it printed."""
    return subprocess.run(
        [sys.executable, "-m", "pip", *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1"},
    )


def _pip_failed(what: str, proc: subprocess.CompletedProcess[str]) -> GeneratorError:
    tail = "\n  ".join((proc.stdout + proc.stderr).strip().splitlines()[-12:])
    return GeneratorError(f"{what}: pip exited with {proc.returncode}:\n  {tail}")


# -- wheels: pip download ----------------------------------------------------------------------------


def wheel_download_args(src: HeaderSource, dest: Path) -> list[str]:
    """The ``pip download`` arguments that select ``src.file`` (a wheel) by its own compatibility tags."""
    parts = src.file.removesuffix(".whl").split("-")
    if not src.file.endswith(".whl") or len(parts) not in (5, 6):
        raise GeneratorError(f"{src.label}: {src.file!r} is not a wheel file name (name-version-py-abi-platform.whl)")
    py_tag, abi, platforms = parts[-3], parts[-2], parts[-1]
    args = ["download", "--no-deps", "--only-binary=:all:", "--quiet", "--dest", str(dest)]
    if not (abi == "none" and platforms == "any"):
        first = py_tag.split(".")[0]
        m = re.fullmatch(r"([a-z]+)(\d+)", first)
        if not m:
            raise GeneratorError(f"{src.label}: cannot read the Python tag {py_tag!r} of {src.file}")
        args += ["--implementation", m.group(1), "--python-version", m.group(2), "--abi", abi]
        for platform in platforms.split("."):
            args += ["--platform", platform]
    return [*args, f"{src.package}=={src.package_version}"]


def _download_wheel(src: HeaderSource, progress: Progress) -> bytes:
    with tempfile.TemporaryDirectory(prefix="dlbind-fetch-") as tmp:
        progress(f"  pip download {src.package}=={src.package_version} ({src.file}) ...")
        proc = _pip(*wheel_download_args(src, Path(tmp)))
        if proc.returncode != 0:
            raise _pip_failed(f"{src.label}: downloading {src.file}", proc)
        wheels = sorted(Path(tmp).glob("*.whl"))
        if len(wheels) != 1:
            raise GeneratorError(f"{src.label}: pip download left {[w.name for w in wheels]}, expected one wheel")
        if wheels[0].name != src.file:  # the same release and tags: the header's sha256 still decides
            progress(f"  pip chose {wheels[0].name} (listed: {src.file})")
        data = wheels[0].read_bytes()
    progress(f"  downloaded {len(data) / 1e6:.1f} MB")
    return data


# -- sdists: the simple repository API of the indexes pip is configured with ---------------------------------


def pip_config() -> dict[str, str]:
    """pip's effective settings as ``python -m pip config list`` prints them (``global.index-url``, ...)."""
    proc = _pip("config", "list")
    if proc.returncode != 0:
        raise _pip_failed("reading pip's configuration", proc)
    config: dict[str, str] = {}
    for line in proc.stdout.splitlines():
        m = re.fullmatch(r"([^=\s]+)='(.*)'", line.strip())
        if m:
            config[m.group(1)] = m.group(2)
    return config


def _setting(config: dict[str, str], name: str) -> str:
    """A setting as ``pip download`` sees it: the environment first, then its own section, then global."""
    return next((config[k] for k in (f":env:.{name}", f"download.{name}", f"global.{name}") if k in config), "")


def pip_indexes(config: dict[str, str] | None = None) -> list[str]:
    """The index URLs pip would use, in order: ``index-url`` (or pip's stated default), then extra ones."""
    config = pip_config() if config is None else config
    if _setting(config, "no-index").lower() in ("1", "true", "yes", "on"):
        raise GeneratorError("pip is configured with no-index: no package index to fetch headers from")
    index = _setting(config, "index-url").split()
    if not index:
        help_text = " ".join(_pip("download", "--help").stdout.split())
        m = re.search(r"--index-url <url> Base URL of the Python Package Index \(default (\S+?)\)", help_text)
        if not m:
            raise GeneratorError(
                "cannot tell which package index pip uses: no index-url is configured and `pip download --help` "
                "no longer states its default; set PIP_INDEX_URL"
            )
        index = [m.group(1)]
    return [*index[:1], *_setting(config, "extra-index-url").split()]


def _ssl_context(config: dict[str, str]) -> ssl.SSLContext:
    """TLS as pip is configured: its ``cert`` bundle when one is set, else the system's."""
    return ssl.create_default_context(cafile=_setting(config, "cert") or None)


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Anchors(HTMLParser):
    """The ``<a href>`` links of a PEP 503 page: (file name, URL)."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href, self._text = dict(attrs).get("href"), []

    def handle_data(self, data: str) -> None:
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag == "a" and self._href is not None:
            self.links.append(("".join(self._text).strip(), self._href))
            self._href = None


def _open(url: str, context: ssl.SSLContext, *, accept: str = "*/*") -> tuple[bytes, str]:
    """GET ``url`` (http, https or file; a file index may be a folder holding ``index.html``)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))
        path = path / "index.html" if path.is_dir() else path
        return path.read_bytes(), "text/html"
    request = urllib.request.Request(url, headers={"Accept": accept, "User-Agent": "dlbind-generator"})
    with urllib.request.urlopen(request, timeout=120, context=context) as resp:
        return resp.read(), resp.headers.get("Content-Type", "")


def find_in_index(index: str, package: str, filename: str, context: ssl.SSLContext) -> tuple[str, str] | None:
    """``(url, sha256 or "")`` of ``filename`` on ``index``'s page for ``package``; None when not listed."""
    page = f"{index.rstrip('/')}/{_normalize(package)}/"
    try:
        body, content_type = _open(page, context, accept="application/vnd.pypi.simple.v1+json, text/html;q=0.1")
    except (OSError, urllib.error.URLError):
        return None  # no such project on this index (404), or the index is not reachable
    if "json" in content_type:
        for entry in json.loads(body)["files"]:
            if entry["filename"] == filename:
                return urllib.parse.urljoin(page, entry["url"]), entry.get("hashes", {}).get("sha256", "")
        return None
    anchors = _Anchors()
    anchors.feed(body.decode("utf-8", "replace"))
    for text, href in anchors.links:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        if text == filename or url.rsplit("/", 1)[-1] == filename:
            return url, fragment.removeprefix("sha256=") if fragment.startswith("sha256=") else ""
    return None


def _download_from_index(src: HeaderSource, progress: Progress) -> bytes:
    config = pip_config()
    context = _ssl_context(config)
    indexes = pip_indexes(config)
    for index in indexes:
        found = find_in_index(index, src.package, src.file, context)
        if found is None:
            continue
        url, digest = found
        progress(f"  downloading {src.file} ...")
        data, _ = _open(url, context)
        if digest and sha256(data) != digest.lower():
            raise GeneratorError(f"{src.label}: {src.file} does not match the index's sha256 {digest}")
        progress(f"  downloaded {len(data) / 1e6:.1f} MB")
        return data
    raise GeneratorError(
        f"{src.label}: no package index pip is configured with lists {src.file} ({', '.join(indexes)})"
    )


def _download_archive(src: HeaderSource, progress: Progress) -> bytes:
    """The bytes of ``src.file``: wheels through ``pip download``, sdists through the simple repository API."""
    if src.file.endswith(".whl"):
        return _download_wheel(src, progress)
    return _download_from_index(src, progress)


def download_url(url: str, progress: Progress) -> bytes:
    """The bytes at ``url`` (a header listed by URL: e.g. the raw ``dlpack.h`` of an upstream commit)."""
    progress(f"  downloading {url} ...")
    try:
        data, _ = _open(url, ssl.create_default_context())
    except (OSError, urllib.error.URLError) as exc:
        raise GeneratorError(f"cannot download {url}: {exc}") from None
    return data


def _extract(src: HeaderSource, archive: bytes) -> bytes:
    try:
        if src.file.endswith(".whl") or src.file.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(archive)) as zf:
                return zf.read(src.path)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:*") as tf:
            member = tf.extractfile(src.path)
            if member is None:
                raise KeyError(src.path)
            return member.read()
    except KeyError:
        raise GeneratorError(f"{src.label}: {src.path!r} is not in {src.file}") from None
    except (zipfile.BadZipFile, tarfile.TarError) as exc:
        raise GeneratorError(f"{src.label}: {src.file} is not a readable archive ({exc})") from None


def _cached(src: HeaderSource, dest: Path, *, offline: bool) -> bool:
    """Whether ``dest`` holds ``src``'s header; offline, a missing or different one is an error (online, the
    header is fetched again and replaces it)."""
    if dest.exists() and not dest.is_file():
        raise GeneratorError(f"{src.label}: the cached header {dest} is not a file: remove it and fetch again")
    if not dest.exists():
        if offline:
            raise GeneratorError(
                f"{src.label}: not cached in {dest.parent} and offline mode is on; fetch it first "
                "(`python -m dlbind_generator fetch`, or `nox -s headers`), or run without --offline"
            )
        return False
    try:
        actual = sha256(dest.read_bytes())
    except OSError as exc:
        raise GeneratorError(f"{src.label}: cannot read the cached header {dest}: {exc.strerror}") from None
    if actual != src.sha256 and offline:
        raise GeneratorError(
            f"sha256 mismatch for {src.label} from {dest}: expected {src.sha256}, got {actual}; fetch it again "
            "without --offline (`python -m dlbind_generator fetch`), which replaces the cached file"
        )
    return actual == src.sha256


def fetch_one(src: HeaderSource, cache_dir: Path, progress: Progress, *, offline: bool = False) -> Path:
    """Return the cached, verified header for ``src``, downloading it if needed."""
    if src.local:  # a header made on this machine is read where it is, never cached
        local = Path(src.local)
        if not local.is_file():
            raise GeneratorError(f"{src.label}: no such file")
        _verify(src, local.read_bytes(), src.local)
        return local
    dest = cache_path(cache_dir, src.release)
    if _cached(src, dest, offline=offline):
        return dest
    progress(f"fetching {src.label}")
    if src.url:
        data = download_url(src.url, progress)
        _verify(src, data, src.url)
    else:
        data = _extract(src, _download_archive(src, progress))
        _verify(src, data, src.file)
    progress(f"  sha256 ok ({src.sha256[:12]}...)")
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(dest)
    except OSError as exc:
        raise GeneratorError(f"{src.label}: cannot cache the header as {dest}: {exc}") from None
    return dest


def fetch_all(
    sources: Sources, cache_dir: Path, progress: Progress | None = None, *, offline: bool = False
) -> dict[Release, Path]:
    """Every listed header, verified, by release (``(1, 3)``; ``(1, 3, 1)`` for 1.3.post1)."""
    progress = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return {src.release: fetch_one(src, cache_dir, progress, offline=offline) for src in sources.headers}
