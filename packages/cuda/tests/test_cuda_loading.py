"""Loading is lazy, and the real runtime's answer here is a one-line reason: checked in fresh interpreters.

``/proc/self/maps`` lists the shared libraries a process has mapped: ``libcudart`` must appear only once
something asked for CUDA.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

MAPS = "open('/proc/self/maps').read()"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")


def run(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "DLBIND_CUDA_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env},
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_loads_no_vendor_library() -> None:
    out = run(
        f"import dlbind, dlbind_cuda, dlbind_cuda._backend; a = 'libcudart' in {MAPS}; "
        f"s = dlbind.backends()['cuda']; print(a, 'libcudart' in {MAPS} or not s.runtime_version)"
    )
    assert out == "False True"


def test_the_real_runtime_says_why_in_one_line() -> None:
    code = (
        "import json, dlbind, dlbind_cuda, numpy as np\n"
        "s = dlbind.backends()['cuda']\n"
        "try:\n    dlbind_cuda.asarray(np.ones(2)); err = ''\nexcept BufferError as e:\n    err = str(e)\n"
        "print(json.dumps([s.available, s.reason, s.runtime_version, s.device_count, str(s), err]))"
    )
    available, reason, version, count, line, err = json.loads(run(code))
    if available:
        pytest.skip("this machine has a CUDA GPU and driver (the GPU tests cover it)")
    if reason.startswith("runtime library not found"):
        pytest.skip(f"no CUDA runtime on this machine: {reason}")
    # here: libcudart.so.13 loads, and no NVIDIA driver is installed
    assert "\n" not in reason and reason.startswith("no driver: cudaGetDeviceCount: "), reason
    assert "(cudaErrorInsufficientDriver)" in reason and f"CUDA runtime {version.split()[2]}" in reason
    assert version.startswith("CUDA runtime 1") and "libcudart.so" in version and count == 0
    assert line.startswith("cuda: unavailable: no driver: ") and line.endswith(f"[runtime {version}]")
    assert err == f"dlbind-cuda is unavailable: {reason}"


def test_a_missing_runtime_is_a_reason_not_an_error() -> None:
    code = (
        "import json, dlbind, dlbind_cuda, numpy as np\n"
        "s = dlbind.backends()['cuda']\n"
        "try:\n    dlbind_cuda.empty((2,))\nexcept BufferError as e:\n    err = str(e)\n"
        "print(json.dumps([s.available, s.reason, err, dlbind.from_dlpack(np.ones(2)).shape]))"
    )
    available, reason, err, shape = json.loads(run(code, DLBIND_CUDA_LIBRARY="/nonexistent/libcudart.so.13"))
    assert not available
    assert reason.startswith("runtime library not found: DLBIND_CUDA_LIBRARY=/nonexistent/libcudart.so.13")
    assert err.startswith("dlbind-cuda is unavailable: runtime library not found")
    assert shape == [2]  # the core works on


def test_a_library_that_is_not_the_runtime() -> None:
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    out = run("import dlbind; print(dlbind.backends()['cuda'].reason)", DLBIND_CUDA_LIBRARY=libm)
    assert out.startswith(f"runtime error: {libm} is not a CUDA runtime")
