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


VALIDATION_LAYER = "VkLayer_khronos_validation.json"
LAYER_DIRS = ("/usr/share/vulkan", "/etc/vulkan", "/usr/local/share/vulkan")  # each with an explicit_layer.d


@pytest.mark.skipif(
    not any(os.path.exists(os.path.join(d, "explicit_layer.d", VALIDATION_LAYER)) for d in LAYER_DIRS),
    reason="needs the Vulkan validation layers (apt-get install vulkan-validationlayers)",
)
def test_threads_on_own_tensors_and_wraps_of_them_take_turns_on_the_queue() -> None:
    # a wrap of a buffer of dlbind's own VkDevice copies on dlbind's own queue, under the same lock: the
    # validation layer's thread checks see no two threads in vkQueueSubmit at once
    code = (
        "import threading, numpy as np, dlbind, dlbind_vulkan as dv\n"
        "a, b = dv.asarray(np.arange(1 << 14, dtype=np.float32)), dv.asarray(np.arange(1 << 14, dtype=np.float32))\n"
        "i = dv.buffer_info(b)\n"
        "view = dv.wrap(i.buffer, (1 << 13,), 'float32', device=i.device, physical_device=i.physical_device,\n"
        "               queue_family_index=i.queue_family_index, size=i.size, owner=b)\n"
        "def loop(t):\n"
        "    for _ in range(100):\n"
        "        dlbind.from_dlpack(t, device='cpu', copy=True)\n"
        "ts = [threading.Thread(target=loop, args=(x,)) for x in (a, view, a, view)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print('done')\n"
    )
    env = {**os.environ, "VK_INSTANCE_LAYERS": "VK_LAYER_KHRONOS_validation"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "done\n", proc.stdout[:2000]  # the layer's reports come on stdout


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
