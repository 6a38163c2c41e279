"""stubtest (what ``nox -s typecheck`` runs): dlbind's stubs (its typed .py files, ``_fastpath.pyi``, the generated
``_abi.pyi``) agree with the runtime of the build loaded (the suite runs once per build), and a mismatch planted in a
copy of them fails it: in the C core (whose methods stubtest reads through their text signatures), in the Python
code, and in the ``__all__`` the package declares for type checkers (held to the one it publishes at run time)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dlbind

pytest.importorskip("mypy.stubtest", reason="mypy is in the test dependency group")

ROOT = Path(__file__).resolve().parents[3]
ALLOWLIST = ROOT / "packages/core/stubtest-allowlist.txt"


@pytest.fixture(scope="module", autouse=True)
def _compiled_extension_installed() -> None:
    if importlib.util.find_spec("dlbind._fastpath") is None:  # a core installed without a compiler: pure only
        pytest.skip("dlbind._fastpath is not installed: its stub (_fastpath.pyi) has no module to be held to")
    if not ALLOWLIST.is_file():
        pytest.skip("the repository's stubtest allowlist is not here")


def _stubtest(cwd: Path, stubs: Path | None = None) -> tuple[int, str]:
    """stubtest's status and report for the installed dlbind as ``nox -s typecheck`` runs it (noxfile.py's
    STUBTEST), its stubs read from ``stubs`` (a copy of the package's folder, which MYPYPATH puts before the installed
    one) when given."""
    env = {**os.environ, "MYPY_CACHE_DIR": str(cwd / ".mypy_cache")}
    if stubs is not None:
        env["MYPYPATH"] = str(stubs)
    args = ["--allowlist", str(ALLOWLIST)]
    proc = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "dlbind", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    return proc.returncode, proc.stdout + proc.stderr


def test_the_stubs_agree_with_the_runtime(tmp_path: Path) -> None:
    status, out = _stubtest(tmp_path)
    assert status == 0, out


def _planted(tmp_path: Path, rel: str, old: str, new: str) -> None:
    path = tmp_path / "stubs" / "dlbind" / rel
    text = path.read_text(encoding="utf-8")
    assert old in text, (rel, old)
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def test_a_planted_mismatch_fails(tmp_path: Path) -> None:
    installed = Path(dlbind.__file__).parent
    shutil.copytree(installed, tmp_path / "stubs" / "dlbind", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    # the C core's __dlpack__: its runtime signature is its text signature (tensor.c, fastpath.h)
    _planted(tmp_path, "_fastpath.pyi", "        stream: int | None = None,\n", "        streams: int | None = None,\n")
    # a Python method
    old = "        copy: bool | None = None,\n    ) -> CapsuleType:"
    _planted(tmp_path, "described.py", old, old.replace("= None", "= False"))
    # the __all__ type checkers read, held to what the package publishes once loaded
    _planted(tmp_path, "__init__.py", '"ffi_build", ', "")
    status, out = _stubtest(tmp_path, tmp_path / "stubs")
    assert status == 1, out
    assert 'dlbind._fastpath.TensorCore.__dlpack__ is inconsistent, runtime does not have parameter "streams"' in out
    differs = 'parameter "copy" has a default value of None, which is different from stub parameter default False'
    assert f"dlbind.described.Exporter.__dlpack__ is inconsistent, runtime {differs}" in out
    assert "dlbind.__all__ names exported from the stub do not correspond" in out
    assert "Names exported at runtime but not in the stub: ['ffi_build']" in out
