"""tests/conftest.py: a run ends with its skips counted by the kind of their reason, the unknown ones listed."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

SKIPPING = """
import pytest

REASONS = [
    "no CUDA GPU: no NVIDIA driver: libcuda.so.1 does not load",
    "no CUDA GPU: no NVIDIA driver: libcuda.so.1 does not load",
    "could not import 'paddle': No module named 'paddle'",
    "mindspore is not installed",
    "the pure build's buffer protocol needs Python 3.12 (PEP 688)",
    "the compiled build exchanges buffers in C",
    "builds two libraries and a fresh venv (minutes): run by `nox -s vendor`",
    "torch has no uint16",
    "the moon is in the wrong phase",
]


@pytest.mark.parametrize("reason", REASONS)
def test_skips(reason):
    pytest.skip(reason)


def test_passes():
    pass
"""


def test_a_run_ends_with_its_skips_by_kind(tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_skipping.py").write_text(textwrap.dedent(SKIPPING))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # not the repository's configuration
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-ra", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if "9 skipped, by the kind of their reason" in line)
    # after pytest's own list of every skip (-ra), before the line of counts
    assert any(line.startswith("SKIPPED") for line in lines[:start])
    summary = [line.strip() for line in lines[start + 1 : -1]]
    assert summary == [
        "2  no GPU or device here (or the GPU run's)",
        "1  Python version",
        "2  library not in this session",
        "1  the other build runs it",
        "1  another nox session runs it",
        "1  does not apply to that library",
        "1  other: read each reason",
        "1  the moon is in the wrong phase",
    ], "\n".join(lines[start:])
    assert lines[-1].startswith("1 passed, 9 skipped")


def test_a_run_without_skips_says_nothing_of_them(tmp_path: Path) -> None:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_plain.py").write_text("def test_passes():\n    pass\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path)],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and "by the kind of their reason" not in proc.stdout, proc.stdout
