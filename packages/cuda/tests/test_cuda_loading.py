"""Loading is lazy, and the real runtime's answer here is a one-line reason: checked in fresh interpreters.

``/proc/self/maps`` lists the shared libraries a process has mapped: ``libcudart`` must appear only once
something asked for CUDA. The tests but the real runtime's are :class:`gpu_recording.LoadingTests`.
"""

from __future__ import annotations

import sys

import pytest

from gpu_recording import LoadingTests

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/maps (Linux)")


class TestCudaLoading(LoadingTests):
    backend = "cuda"
    vendor_library = "libcudart"
    runtime_text = "CUDA"
    missing = "/nonexistent/libcudart.so.13"

    def test_the_real_runtime_says_why_in_one_line(self) -> None:
        available, reason, version, count, line, err = self.real_runtime()
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
