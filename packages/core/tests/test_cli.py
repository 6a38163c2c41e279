"""python -m dlbind info: the tables a user sees."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import dlbind

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
    assert out.startswith(f"dlbind {dlbind.__version__}: generated from dlpack.h {_canonical()}, ")
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


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["explain", "numpy", "numpy", "--shape", "2x3"], "argument --shape: '2x3' is not a comma-separated list"),
        (["explain", "numpy", "numpy", "--shape=-1,2"], "argument --shape: '-1,2': a size cannot be negative"),
        (["explain", "numpy", "numpy", "--shape", "99999,99999"], "more than explain makes"),
        (
            ["explain", "numpy", "numpy", "--dtype", "float33"],
            "argument --dtype: unknown DLPack dtype name 'float33' (did you mean 'float32'?)",
        ),
        (["explain", "numpy", "no-such-library"], "argument target: unknown array library 'no-such-library'"),
        (["explain", "no-such-library", "numpy"], "argument source: unknown array library 'no-such-library'"),
        (["check", "--libs", "numpy,no-such-library"], "argument --libs: unknown array library 'no-such-library'"),
        (["explain", "numpy", "numpy", "--stream", "x"], "argument --stream: invalid int value: 'x'"),
    ],
    ids=["shape-2x3", "shape-negative", "shape-huge", "dtype", "target", "source", "libs", "stream"],
)
def test_a_bad_argument_is_a_one_line_usage_error(args: list[str], said: str) -> None:
    """argparse checks every argument as it parses (its ``type=``): exit status 2, one line on stderr naming the
    argument and what is wrong, never a traceback."""
    proc = subprocess.run([sys.executable, "-m", "dlbind", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and said in lines[0] and lines[0].endswith("--help)"), proc.stderr


def test_explain_takes_the_ml_dtypes_names() -> None:
    pytest.importorskip("ml_dtypes")
    out = _run("explain", "numpy", "numpy", "--dtype", "bfloat16", "--shape", "4")
    assert out.startswith("dlbind.convert(numpy.ndarray bfloat16 (4,), to='numpy')"), out


def test_check_libs_are_read_by_name_or_module() -> None:
    """``check --libs`` takes a system's module as convert's ``to=`` does (``cuda.core``, ``mlx.core``), read
    without importing it."""
    from dlbind.__main__ import _libraries

    assert _libraries("numpy,mlx.core,cuda.core") == ["numpy", "mlx", "cuda_core"]


def _explain_fails(*args: str, code: str = "") -> str:
    """stderr of ``python -m dlbind explain ARGS`` (``code`` run first in the same interpreter), which must fail with
    exit status 2 and one line, no traceback."""
    run = f"{code}\nimport sys\nfrom dlbind.__main__ import main\nsys.exit(main({['explain', *args]!r}))"
    proc = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "", (proc.returncode, proc.stdout, proc.stderr)
    assert len(proc.stderr.splitlines()) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr.strip()


def test_explain_of_a_source_that_is_not_installed_says_so() -> None:
    """The source library is named as the array that cannot be made (not as a conversion target)."""
    import importlib.util

    from dlbind._generated.adapters import ADAPTERS

    missing = [a.name for a in ADAPTERS.values() if importlib.util.find_spec(a.import_name.split(".")[0]) is None]
    if not missing:
        pytest.skip("every library of spec/adapters.toml is installed")
    said = _explain_fails(missing[0], "numpy")
    assert said == f"cannot make a {missing[0]} array: {missing[0]} is not installed"


def test_explain_without_numpy_says_it_needs_numpy() -> None:
    """Not blamed on --dtype, which was not given."""
    block = (
        "import sys\nclass _NoNumpy:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'numpy': raise ImportError(name)\nsys.meta_path.insert(0, _NoNumpy())"
    )
    said = _explain_fails("numpy", "numpy", code=block)
    assert said == "cannot explain: explain makes its array with numpy, which is not installed"
