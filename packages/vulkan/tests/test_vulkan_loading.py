"""Loading is lazy and failures are reported, not raised: checked in fresh interpreters.

``/proc/self/maps`` lists the shared libraries a process has mapped: the Vulkan loader must appear only
once something asked for Vulkan.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

MAPS = "open('/proc/self/maps').read()"


def run(code: str, **env: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env}, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")


def test_import_loads_no_vendor_library() -> None:
    out = run(
        f"import dlbind, dlbind_vulkan, dlbind_vulkan._backend; a = 'libvulkan' in {MAPS}; "
        f"dlbind.backends(); print(a, 'libvulkan' in {MAPS})"
    )
    assert out == "False True"


def test_a_missing_loader_is_a_reason_not_an_error() -> None:
    code = (
        "import json, dlbind, dlbind_vulkan, numpy as np\n"
        "s = dlbind.backends()['vulkan']\n"
        "try:\n    dlbind_vulkan.asarray(np.ones(2))\nexcept BufferError as e:\n    err = str(e)\n"
        "print(json.dumps([s.available, s.reason, str(s), err, dlbind.from_dlpack(np.ones(2)).shape]))"
    )
    available, reason, line, err, shape = json.loads(run(code, DLBIND_VULKAN_LIBRARY="/nonexistent/libvulkan.so.1"))
    assert not available
    assert reason.startswith("runtime library not found: DLBIND_VULKAN_LIBRARY=/nonexistent/libvulkan.so.1")
    assert "\n" not in reason and line.startswith("vulkan: unavailable: runtime library not found")
    assert err.startswith("dlbind-vulkan is unavailable: runtime library not found")
    assert shape == [2]  # the core works on


@pytest.mark.vulkan
def test_no_driver_is_reported() -> None:
    # The loader reads its drivers from VK_ICD_FILENAMES (and VK_DRIVER_FILES) when set: none here.
    code = "import dlbind; s = dlbind.backends()['vulkan']; print(s.available, s.device_count, s.reason)"
    out = run(code, VK_ICD_FILENAMES="/nonexistent.json", VK_DRIVER_FILES="/nonexistent.json")
    assert out.startswith("False 0 no driver: the Vulkan loader found no driver (VK_ERROR_INCOMPATIBLE_DRIVER)")


@pytest.mark.vulkan
def test_host_copy_routes_through_the_entry_point() -> None:
    # A fresh process where only the core was imported by the consumer: the kDLVulkan capsule's host copy
    # finds dlbind-vulkan through the dlbind.backends entry point.
    code = (
        "import numpy as np, dlbind\n"
        "from dlbind_vulkan import asarray\n"
        "t = asarray(np.arange(4.0))\n"
        "print(dlbind.from_dlpack(t, device='cpu').shape, np.from_dlpack(t, device='cpu', copy=True).sum())"
    )
    assert run(code) == "(4,) 6.0"


@pytest.mark.vulkan
def test_cli_says_vulkan_is_available() -> None:
    out = run("import dlbind.__main__ as m; m.main(['backends'])")
    (line,) = [ln for ln in out.splitlines() if ln.startswith("vulkan: ")]  # other backends may be installed
    version = importlib.metadata.version("dlbind-vulkan")  # the core's (docs/releasing.md)
    assert line.startswith("vulkan: available (Vulkan loader 1.") and line.endswith(f"[dlbind-vulkan {version}]")
