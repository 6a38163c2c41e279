"""``python -m dlbind check --device cuda`` on torch and CuPy, whose DLPack on CUDA is known good where asserted.

The checker is a tool for a library's maintainer: on a GPU it must run each library's checks on its own CUDA
arrays, in its own process, and report torch's and CuPy's correct behaviour as passing (values, layouts made
on the device, stream ordering with a busy producer stream, the consumer passing its stream), crashes as
CRASH without ending the run.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import gpulibs
import pytest

pytestmark = pytest.mark.gpu

# what torch and CuPy both do right on CUDA; torch also orders a busy stream and passes its stream (its own
# test_dlpack.py asserts both)
KNOWN_GOOD = [
    "producer:protocol", "producer:device", "producer:values", "producer:transposed", "producer:offset_view",
    "producer:zero_d", "producer:dtype_float32", "consumer:zero_d", "consumer:dtype_float32",
]  # fmt: skip
TORCH_GOOD = ["producer:stream_values", "producer:stream_ordered", "consumer:stream_passed", "consumer:byte_offset"]


def test_check_device_cuda_on_torch_and_cupy(tmp_path: Path) -> None:
    if os.environ.get("DLBIND_PURE") == "1":
        pytest.skip("the checker's logic is the same in both builds: it runs once, on the compiled build")
    libs = [name for name in ("torch", "cupy") if gpulibs._load(name)[1] is None and gpulibs._load(name)[0]]
    if not libs:
        pytest.skip("neither torch nor CuPy can use the GPU here")
    gpulibs.library("dlbind_cuda")
    out = tmp_path / "matrix.json"
    code = (
        "import sys, runpy; sys.argv = ['dlbind', 'check', '--device', 'cuda', '--libs', "
        f"{','.join(libs)!r}, '--json', {str(out)!r}, '--details']; runpy.run_module('dlbind', run_name='__main__')"
    )
    proc = gpulibs.run_child(code, timeout=140)
    assert proc.returncode == 0, gpulibs.describe_exit(proc)
    data = json.loads(out.read_text())
    assert data["device"] == "cuda"
    sys.stdout.write(proc.stdout[-4000:])  # the matrix, in the log
    for lib in libs:
        results = data["results"][lib]
        good = KNOWN_GOOD + (TORCH_GOOD if lib == "torch" else [])
        wrong = {k: results.get(k) for k in good if results.get(k, {}).get("status") != "pass"}
        assert not wrong, f"{lib}: {wrong}"
    for src in libs:
        for dst in libs:
            assert data["pairs"][src][dst]["status"] == "pass", (src, dst, data["pairs"][src][dst])
