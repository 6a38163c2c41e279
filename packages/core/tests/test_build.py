"""The core's build hook (setup.py): without a working C compiler, or with DLBIND_NO_COMPILE=1, it
builds the pure core and says so in one line; it never writes (or reuses) a ``build/`` folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[1]

pytest.importorskip("setuptools", minversion="77", reason="setup.py needs setuptools>=77 (pyproject's build-system)")
pytest.importorskip("cffi", reason="setup.py needs cffi")


def _copy_core(tmp_path: Path) -> Path:
    core = tmp_path / "core"
    shutil.copytree(
        CORE,
        core,
        ignore=shutil.ignore_patterns("tests", "build", "*.so", "__pycache__", "*.egg-info"),
    )
    return core


def _build(core: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "setup.py", "build_ext", "--inplace"],
        cwd=core,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("env", "line"),
    [
        ({"CC": "/bin/false"}, "dlbind: no working C compiler (/bin/false failed on a test file: exit status 1); "),
        ({"DLBIND_NO_COMPILE": "1"}, "dlbind: DLBIND_NO_COMPILE is set; "),
    ],
)
def test_pure_build_without_a_compiler(tmp_path: Path, env: dict[str, str], line: str) -> None:
    if env.get("CC") and not Path(env["CC"]).exists():
        pytest.skip(f"{env['CC']} does not exist here")
    core = _copy_core(tmp_path)
    proc = _build(core, **env)
    assert proc.returncode == 0, proc.stderr
    said = [text for text in proc.stderr.splitlines() if text.startswith("dlbind:")]
    assert said == [line + "installing the pure build"]
    assert not list((core / "src/dlbind").glob("*.so")), "an extension was built"
    assert not (core / "build").exists()


def test_compiled_build_uses_a_fresh_folder(tmp_path: Path) -> None:
    core = _copy_core(tmp_path)
    stale = core / "build"
    stale.mkdir()
    (stale / "marker").write_text("a stale build folder")
    proc = _build(core, DLBIND_NO_COMPILE="0")
    assert proc.returncode == 0, proc.stderr
    assert not [text for text in proc.stderr.splitlines() if text.startswith("dlbind:")]
    built = {p.name.split(".")[0] for p in (core / "src/dlbind").glob("*.so")}
    assert built == {"_api", "_fastpath"}
    assert sorted(p.name for p in stale.iterdir()) == ["marker"], "the build went into build/"
