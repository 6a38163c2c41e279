"""Loading is lazy, and the real runtime's answer here is a one-line reason: checked in fresh interpreters.

``/proc/self/maps`` lists the shared libraries a process has mapped: ``libamdhip64`` must appear only once
something asked for ROCm.
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
    environ = {k: v for k, v in os.environ.items() if k != "DLBIND_ROCM_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env},
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_import_loads_no_vendor_library() -> None:
    out = run(
        f"import dlbind, dlbind_rocm, dlbind_rocm._backend; a = 'libamdhip64' in {MAPS}; "
        f"s = dlbind.backends()['rocm']; print(a, 'libamdhip64' in {MAPS} or not s.runtime_version)"
    )
    assert out == "False True"


def test_the_real_runtime_says_why_in_one_line() -> None:
    code = (
        "import json, dlbind, dlbind_rocm, numpy as np\n"
        "s = dlbind.backends()['rocm']\n"
        "try:\n    dlbind_rocm.asarray(np.ones(2)); err = ''\nexcept BufferError as e:\n    err = str(e)\n"
        "print(json.dumps([s.available, s.reason, s.runtime_version, s.device_count, str(s), err]))"
    )
    available, reason, version, count, line, err = json.loads(run(code))
    if available:
        pytest.skip("this machine has an AMD GPU (the GPU tests cover it)")
    if reason.startswith("runtime library not found"):
        pytest.skip(f"no HIP runtime on this machine (Debian: apt-get install libamdhip64-5): {reason}")
    # here: Debian's libamdhip64.so.5 loads, and finds no AMD GPU (no /dev/kfd)
    assert "\n" not in reason, reason
    assert reason == "no device: the HIP runtime finds no AMD GPU (hipGetDeviceCount: hipErrorNoDevice)", reason
    assert version.startswith("HIP runtime ") and "libamdhip64.so" in version and count == 0
    assert line.startswith("rocm: unavailable: no device: ") and line.endswith(f"[runtime {version}]")
    assert err == f"dlbind-rocm is unavailable: {reason}"


def test_a_missing_runtime_is_a_reason_not_an_error() -> None:
    code = (
        "import json, dlbind, dlbind_rocm, numpy as np\n"
        "s = dlbind.backends()['rocm']\n"
        "try:\n    dlbind_rocm.empty((2,))\nexcept BufferError as e:\n    err = str(e)\n"
        "print(json.dumps([s.available, s.reason, err, dlbind.from_dlpack(np.ones(2)).shape]))"
    )
    available, reason, err, shape = json.loads(run(code, DLBIND_ROCM_LIBRARY="/nonexistent/libamdhip64.so.6"))
    assert not available
    assert reason.startswith("runtime library not found: DLBIND_ROCM_LIBRARY=/nonexistent/libamdhip64.so.6")
    assert err.startswith("dlbind-rocm is unavailable: runtime library not found")
    assert shape == [2]  # the core works on


def test_a_library_that_is_not_the_runtime() -> None:
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    out = run("import dlbind; print(dlbind.backends()['rocm'].reason)", DLBIND_ROCM_LIBRARY=libm)
    assert out.startswith(f"runtime error: {libm} is not a HIP runtime")
