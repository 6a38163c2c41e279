"""Stage 1 through public routes only: ``pip download`` for wheels, the simple repository API for sdists.

The index tests serve a made-up project from a local index (a folder, PEP 503 HTML) and from a loopback
HTTP server (PEP 691 JSON), and read pip's configuration through the installed pip itself.
"""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import re
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dlbind_generator.errors import GeneratorError
from dlbind_generator.fetch import fetch_one, pip_indexes, wheel_download_args
from dlbind_generator.sources import HeaderSource, load_sources

HEADER = b"/* a made-up dlpack.h */\n#define DLPACK_MAJOR_VERSION 9\n"
ARCHIVE = "fake_pkg-1.0.tar.gz"


def _src(sha: str = hashlib.sha256(HEADER).hexdigest(), file: str = ARCHIVE) -> HeaderSource:
    return HeaderSource(
        version=(9, 9), sha256=sha, package="Fake.Pkg", package_version="1.0", file=file,
        path="fake_pkg-1.0/include/dlpack/dlpack.h",
    )  # fmt: skip


def _sdist() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        info = tarfile.TarInfo("fake_pkg-1.0/include/dlpack/dlpack.h")
        info.size = len(HEADER)
        tf.addfile(info, io.BytesIO(HEADER))
    return buf.getvalue()


@pytest.fixture
def only_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """pip configured with no file and no extra index: tests set PIP_INDEX_URL themselves."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.delenv("PIP_INDEX_URL", raising=False)
    monkeypatch.delenv("PIP_NO_INDEX", raising=False)


# -- wheels ----------------------------------------------------------------------------------------------


def test_wheel_tags_become_pip_download_options(tmp_path: Path) -> None:
    src = _src(file="apache_tvm_ffi-0.1.15.post2-cp311-cp311-manylinux_2_24_x86_64.manylinux_2_28_x86_64.whl")
    args = wheel_download_args(src, tmp_path)
    assert args[:3] == ["download", "--no-deps", "--only-binary=:all:"]
    assert args[args.index("--implementation") + 1] == "cp"
    assert args[args.index("--python-version") + 1] == "311"
    assert args[args.index("--abi") + 1] == "cp311"
    assert [args[i + 1] for i, a in enumerate(args) if a == "--platform"] == [
        "manylinux_2_24_x86_64",
        "manylinux_2_28_x86_64",
    ]
    assert args[-1] == "Fake.Pkg==1.0"


def test_pure_wheel_needs_no_platform(tmp_path: Path) -> None:
    args = wheel_download_args(_src(file="fake_pkg-1.0-py3-none-any.whl"), tmp_path)
    assert "--platform" not in args and "--abi" not in args


@pytest.mark.network
def test_listed_wheel_through_the_installed_pip(tmp_path: Path, root: Path) -> None:
    """The real route: the installed pip downloads the wheel listed for DLPack 1.3, the header matches."""
    src = load_sources(root / "spec" / "headers.toml").by_release((1, 3))
    assert src.file.endswith(".whl")
    messages: list[str] = []
    got = fetch_one(src, tmp_path, messages.append)
    assert hashlib.sha256(got.read_bytes()).hexdigest() == src.sha256
    assert not any("pip chose" in m for m in messages), messages  # the wheel's tags selected that very file


def test_not_a_wheel_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match="is not a wheel file name"):
        wheel_download_args(_src(file="fake_pkg-1.0.whl"), tmp_path)


# -- which indexes: read from the installed pip --------------------------------------------------------


def test_index_url_from_the_environment_comes_first(only_index: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "file:///first/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///second/simple file:///third/simple")
    assert pip_indexes() == ["file:///first/simple", "file:///second/simple", "file:///third/simple"]


def test_default_index_is_what_pip_states(only_index: None) -> None:
    # Nothing configured: the default is read from `pip download --help` of the installed pip.
    indexes = pip_indexes()
    assert len(indexes) == 1
    assert indexes[0].startswith("https://") and indexes[0].rstrip("/").endswith("/simple")


def test_no_index_is_refused(only_index: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(GeneratorError, match="no-index"):
        pip_indexes()


# -- sdists: PEP 503 HTML from a local index ----------------------------------------------------------------


def _html_index(root: Path, digest: str) -> str:
    (root / "files").mkdir(parents=True)
    (root / "files" / ARCHIVE).write_bytes(_sdist())
    page = root / "simple" / "fake-pkg"
    page.mkdir(parents=True)
    (page / "index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../files/{ARCHIVE}#sha256={digest}">{ARCHIVE}</a></body></html>'
    )
    return (root / "simple").as_uri()


def test_sdist_from_a_pep503_index(tmp_path: Path, only_index: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", _html_index(tmp_path / "index", hashlib.sha256(_sdist()).hexdigest()))
    messages: list[str] = []
    got = fetch_one(_src(), tmp_path / "cache", messages.append)
    assert got == tmp_path / "cache" / "dlpack-9.9.h"
    assert got.read_bytes() == HEADER
    assert any("downloaded" in m for m in messages)


def test_archive_not_matching_the_index_digest(
    tmp_path: Path, only_index: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", _html_index(tmp_path / "index", "0" * 64))
    with pytest.raises(GeneratorError, match="does not match the index's sha256 0000"):
        fetch_one(_src(), tmp_path / "cache", lambda _: None)
    assert not (tmp_path / "cache" / "dlpack-9.9.h").exists()


def test_archive_not_listed(tmp_path: Path, only_index: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", _html_index(tmp_path / "index", ""))
    with pytest.raises(
        GeneratorError, match=re.escape("no package index pip is configured with lists fake_pkg-2.0.tar.gz")
    ):
        fetch_one(_src(file="fake_pkg-2.0.tar.gz"), tmp_path / "cache", lambda _: None)


def test_wrong_header_digest(tmp_path: Path, only_index: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", _html_index(tmp_path / "index", ""))
    with pytest.raises(GeneratorError, match=f"expected {'1' * 64}, got {hashlib.sha256(HEADER).hexdigest()}"):
        fetch_one(_src(sha="1" * 64), tmp_path / "cache", lambda _: None)


# -- sdists: PEP 691 JSON from a loopback server ----------------------------------------------------------------


@pytest.fixture
def json_index() -> Iterator[str]:
    archive = _sdist()
    page = json.dumps(
        {
            "meta": {"api-version": "1.1"},
            "name": "fake-pkg",
            "files": [
                {"filename": "fake_pkg-0.9.tar.gz", "url": "/files/fake_pkg-0.9.tar.gz", "hashes": {}},
                {
                    "filename": ARCHIVE,
                    "url": f"/files/{ARCHIVE}",
                    "hashes": {"sha256": hashlib.sha256(archive).hexdigest()},
                },
            ],
        }
    ).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/simple/fake-pkg/" and "json" in self.headers.get("Accept", ""):
                body, kind = page, "application/vnd.pypi.simple.v1+json"
            elif self.path == f"/files/{ARCHIVE}":
                body, kind = archive, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()


def test_sdist_from_a_pep691_index(
    tmp_path: Path, only_index: None, monkeypatch: pytest.MonkeyPatch, json_index: str
) -> None:
    # A first index without the project is skipped; the extra index has it.
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "empty").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", json_index)
    got = fetch_one(_src(), tmp_path / "cache", lambda _: None)
    assert got.read_bytes() == HEADER
