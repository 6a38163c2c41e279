"""Stage 1: download each header's registry archive, extract ``dlpack.h``, verify its sha256, cache it.

Registry access goes through pip's own package finder and HTTP session, so whatever index pip is
configured with (``pip config``, ``PIP_INDEX_URL``, find-links) is used and no registry host is
written here. This is a maintainer step: it runs only on ``generate``/``fetch``, never at import.
"""

from __future__ import annotations

import hashlib
import io
import sys
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import GeneratorError
from .sources import HeaderSource, Sources, format_version

Progress = Callable[[str], None]


def cache_path(cache_dir: Path, version: tuple[int, int]) -> Path:
    return cache_dir / f"dlpack-{format_version(version)}.h"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _verify(src: HeaderSource, data: bytes, origin: str) -> None:
    actual = sha256(data)
    if actual != src.sha256:
        raise GeneratorError(f"sha256 mismatch for {src.label} from {origin}: expected {src.sha256}, got {actual}")


def _download_archive(src: HeaderSource, progress: Progress) -> bytes:
    """Find ``src.file`` among the registry's files for the pinned release and download it."""
    try:
        from pip._internal.commands import create_command
    except ImportError as exc:  # pragma: no cover - pip is always there in a venv
        raise GeneratorError(f"fetching needs pip in this environment ({exc})") from None

    import logging

    logging.getLogger("pip._internal").setLevel(logging.ERROR)
    cmd: Any = create_command("download")  # pip's RequirementCommand: its finder and session
    options, _ = cmd.parse_args(["--no-deps", "--quiet", src.package])
    with cmd.main_context():
        session = cmd.get_default_session(options)
        finder = cmd._build_package_finder(options=options, session=session)
        candidates = finder.find_all_candidates(src.package)
        links = [c.link for c in candidates if c.link.filename == src.file]
        if not links:
            found = sorted({c.link.filename for c in candidates if str(c.version) == src.package_version})
            raise GeneratorError(
                f"{src.label}: the registry has no file {src.file!r}"
                + (f" (files of {src.package_version}: {', '.join(found)})" if found else "")
            )
        url = links[0].url
        progress(f"  downloading {src.file} ...")
        resp = session.get(url, stream=True)
        resp.raise_for_status()
        buf = io.BytesIO()
        total = int(resp.headers.get("content-length") or 0)
        for chunk in resp.iter_content(chunk_size=1 << 16):
            buf.write(chunk)
        size = buf.tell()
        if total and size != total:
            raise GeneratorError(f"{src.label}: download truncated ({size} of {total} bytes)")
        progress(f"  downloaded {size / 1e6:.1f} MB")
        return buf.getvalue()


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


def fetch_one(src: HeaderSource, cache_dir: Path, progress: Progress, *, offline: bool = False) -> Path:
    """Return the cached, verified header for ``src``, downloading it if needed."""
    if src.local:  # a header made on this machine is read where it is, never cached
        local = Path(src.local)
        if not local.is_file():
            raise GeneratorError(f"{src.label}: no such file")
        _verify(src, local.read_bytes(), src.local)
        return local
    dest = cache_path(cache_dir, src.version)
    if dest.exists() and sha256(dest.read_bytes()) == src.sha256:
        return dest
    if offline:
        raise GeneratorError(f"{src.label}: not cached in {cache_dir} and offline mode is on")
    progress(f"fetching {src.label}")
    data = _extract(src, _download_archive(src, progress))
    _verify(src, data, src.file)
    progress(f"  sha256 ok ({src.sha256[:12]}...)")
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(dest)
    return dest


def fetch_all(
    sources: Sources, cache_dir: Path, progress: Progress | None = None, *, offline: bool = False
) -> dict[tuple[int, int], Path]:
    progress = progress or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return {src.version: fetch_one(src, cache_dir, progress, offline=offline) for src in sources.headers}
