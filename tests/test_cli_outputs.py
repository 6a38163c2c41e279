"""``python -m dlbind``'s arguments that name files or sizes are checked as argparse parses them: a file that cannot
be written is refused before ``check`` runs the whole suite, an empty size of ``explain --shape`` is no size left
out. Each is a one-line usage error, exit status 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest


def _dlbind(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dlbind", *args], capture_output=True, text=True, timeout=120)


def _usage_error(proc: subprocess.CompletedProcess[str], said: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].endswith("--help)"), proc.stderr


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_an_output_in_a_missing_folder_is_refused_before_the_run(tmp_path: Path, option: str) -> None:
    out = tmp_path / "no-such-folder" / "matrix.out"
    proc = _dlbind("check", "--libs", "numpy", option, str(out))
    _usage_error(proc, f"argument {option}: '{out}': no such folder '{out.parent}'")
    assert "DLPack conformance" not in proc.stdout  # the suite never ran


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_folder_as_the_output_is_refused_before_the_run(tmp_path: Path, option: str) -> None:
    _usage_error(_dlbind("check", "--libs", "numpy", option, str(tmp_path)), f"'{tmp_path}' is a folder, not a file")


@pytest.mark.parametrize("shape", ["2,,3", "2,", ",3"])
def test_an_empty_size_is_refused(shape: str) -> None:
    _usage_error(_dlbind("explain", "numpy", "numpy", "--shape", shape), f"argument --shape: '{shape}': an empty size")


def test_an_empty_shape_is_still_a_0d_array() -> None:
    pytest.importorskip("numpy")
    proc = _dlbind("explain", "numpy", "numpy", "--shape", "")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("dlbind.convert(numpy.ndarray float32 (), to='numpy')"), proc.stdout
