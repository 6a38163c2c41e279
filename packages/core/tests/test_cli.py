"""python -m dlbind info: the tables a user sees."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def _canonical() -> str:
    """The canonical DLPack version as spec/headers.toml writes it: a post-release (``1.3.post1``, a header that
    changed after 1.3 without a new version) is said as such (``DLPACK_VERSION`` keeps its release's)."""
    headers = Path(__file__).resolve().parents[3] / "spec/headers.toml"
    return str(tomllib.loads(headers.read_text(encoding="utf-8"))["canonical"])


def _run(*args: str) -> str:
    return subprocess.run([sys.executable, "-m", "dlbind", *args], capture_output=True, text=True, check=True).stdout


def test_info_text() -> None:
    out = _run("info")
    assert out.startswith(f"dlbind 0.1.0: generated from dlpack.h {_canonical()}, ")
    lines = out.splitlines()
    cuda = next(ln for ln in lines if ln.split()[:1] == ["kDLCUDA"])
    assert cuda.split()[1:3] == ["2", "0.5"] and "kDLGPU (until 0.5)" in cuda
    fp4 = next(ln for ln in lines if ln.split()[:1] == ["kDLFloat4_e2m1fn"])
    assert fp4.split()[1:3] == ["17", "1.1"]


def test_info_json() -> None:
    data = json.loads(_run("info", "--json"))
    assert data["dlpack"] == _canonical()
    devices = data["tables"]["device types (DLDeviceType)"]
    assert {"name": "kDLTrn", "value": 18, "since": "1.2", "earlier names": ""} in devices
    assert data["build"] in ("compiled", "pure")


def test_a_closed_pipe_ends_quietly() -> None:
    """``python -m dlbind info --json | head -c 0``: no BrokenPipeError traceback, SIGPIPE's exit status.

    The reader is gone before dlbind writes (its end of the pipe closed before the process starts), so the
    write fails every time, whatever the machine's load; a reader that closed after part of the output could
    miss it when the whole output fits in the pipe's buffer."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "dlbind", "info", "--json"], stdout=write_end, stderr=subprocess.PIPE, timeout=60
        )
    finally:
        os.close(write_end)
    err = proc.stderr.decode()
    assert proc.returncode == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err, err


def test_version() -> None:
    import dlbind

    out = _run("--version").strip()
    assert out == f"dlbind {dlbind.__version__} (DLPack {_canonical()}, {dlbind.ffi_build()} build)"
