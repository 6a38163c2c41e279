"""Loading is lazy, and the real runtime's answer here is a one-line reason: checked in fresh interpreters.

``/proc/self/maps`` lists the shared libraries a process has mapped: ``libamdhip64`` must appear only once
something asked for ROCm. The tests but the real runtime's are :class:`gpu_recording.LoadingTests`.
"""

from __future__ import annotations

import sys

import pytest

from gpu_recording import LoadingTests

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")


class TestRocmLoading(LoadingTests):
    backend = "rocm"
    vendor_library = "libamdhip64"
    runtime_text = "HIP"
    missing = "/nonexistent/libamdhip64.so.6"

    def test_the_real_runtime_says_why_in_one_line(self) -> None:
        available, reason, version, count, line, err = self.real_runtime()
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
