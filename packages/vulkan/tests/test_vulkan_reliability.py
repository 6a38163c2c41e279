"""Threads, many allocations and interpreter exit with live kDLVulkan tensors (the core's reliability
checks, on lavapipe)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import dlbind
import dlbind_vulkan

pytestmark = pytest.mark.vulkan


def test_threads_upload_and_download_concurrently() -> None:
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(25):
                a = rng.standard_normal((int(rng.integers(1, 64)), 3))
                t = dlbind_vulkan.asarray(a)
                assert np.array_equal(np.from_dlpack(dlbind.from_dlpack(t), device="cpu", copy=True), a)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_exit_with_live_tensors_and_capsules_is_clean() -> None:
    code = (
        "import numpy as np, dlbind, dlbind_vulkan\n"
        "keep = [dlbind_vulkan.asarray(np.arange(100.0)) for _ in range(10)]\n"
        "caps = [t.__dlpack__(max_version=(1, 3)) for t in keep]  # never consumed\n"
        "alias = dlbind.from_dlpack(keep[0])\n"
        "print('done')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=dict(os.environ))
    assert proc.returncode == 0 and proc.stdout == "done\n", proc.stderr
    assert proc.stderr == ""
