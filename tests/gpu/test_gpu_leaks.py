"""10^5 exchanges of CUDA memory leave GPU memory and reference counts where they were.

Each path runs 1,000 times to warm up, then ``DLBIND_GPU_EXCHANGES`` times (default 100,000); before and after,
with the garbage collected and the device synchronised: the producer's ``sys.getrefcount`` (every capsule,
Tensor and bridge let go), torch's ``memory_allocated`` and CuPy's pool's ``used_bytes`` (exact: the
exchanges allocate nothing that outlives them), and the driver's free memory (within 64 MiB). The paths
that copy on the device run 1,000 times.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Any

import gpulibs
import numpy as np
import pytest

import dlbind

pytestmark = pytest.mark.gpu

EXCHANGES = int(os.environ.get("DLBIND_GPU_EXCHANGES", "100000"))
COPIES = 1000
SLACK = 64 << 20


def _state(x: Any) -> dict[str, int]:
    gc.collect()
    out = {"refcount": sys.getrefcount(x)}
    torch_mod, why = gpulibs._load("torch")
    if why is None:
        torch_mod.cuda.synchronize()
        out["torch memory_allocated"] = int(torch_mod.cuda.memory_allocated())
        out["driver free"] = int(torch_mod.cuda.mem_get_info()[0])
    cupy_mod, why = gpulibs._load("cupy")
    if why is None:
        cupy_mod.cuda.Device().synchronize()
        out["cupy pool used_bytes"] = int(cupy_mod.get_default_memory_pool().used_bytes())
    return out


def _paths() -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any], int]]:
    """name -> (make the producer, one exchange of it, how many times)."""
    return {
        "dlbind.from_dlpack(torch)": (lambda: _torch(), dlbind.from_dlpack, EXCHANGES),
        "dlbind.from_dlpack(torch, stream=-1)": (
            lambda: _torch(),
            lambda x: dlbind.from_dlpack(x, stream=-1),
            EXCHANGES,
        ),
        "dlbind.convert(torch, 'cupy')": (lambda: _torch(), lambda x: dlbind.convert(x, to="cupy"), EXCHANGES),
        "dlbind.convert(cupy, 'torch')": (lambda: _cupy(), lambda x: dlbind.convert(x, to="torch"), EXCHANGES),
        "dlbind.from_dlpack(dlbind_cuda) -> torch.from_dlpack": (
            lambda: _dlbind_cuda(),
            lambda x: gpulibs.library("torch").from_dlpack(dlbind.from_dlpack(x)),
            EXCHANGES,
        ),
        "dlbind.convert(jax, 'torch') (a device copy)": (
            lambda: _jax(),
            lambda x: dlbind.convert(x, to="torch"),
            COPIES,
        ),
        "dlbind.from_dlpack(torch, copy=True) (a device copy)": (
            lambda: _torch(),
            lambda x: dlbind.from_dlpack(x, copy=True),
            COPIES,
        ),
        "dlbind.from_dlpack(torch, device='cpu', copy=True)": (
            lambda: _torch(),
            lambda x: dlbind.from_dlpack(x, device="cpu", copy=True),
            COPIES,
        ),
    }


def _torch() -> Any:
    torch = gpulibs.library("torch")
    return torch.arange(1024, dtype=torch.float32, device="cuda")


def _cupy() -> Any:
    return gpulibs.library("cupy").arange(1024, dtype="float32")


def _jax() -> Any:
    return gpulibs.make("jax", np.arange(1024, dtype=np.float32))


def _dlbind_cuda() -> Any:
    return gpulibs.library("dlbind_cuda").asarray(np.arange(1024, dtype=np.float32))


PATHS = list(_paths())


@pytest.mark.parametrize("path", PATHS)
def test_exchanges_keep_memory_and_refcounts_flat(path: str) -> None:
    needs = {"torch": ("torch",), "cupy": ("cupy",), "jax": ("jax",), "dlbind_cuda": ("dlbind_cuda",)}
    for word, libs in needs.items():
        if word in path:
            for lib in libs:
                gpulibs.library(lib)
    make, exchange, count = _paths()[path]
    x = make()
    for _ in range(1000):
        exchange(x)
    before = _state(x)
    for _ in range(count):
        exchange(x)
    after = _state(x)
    for key in before:
        if key == "driver free":
            assert after[key] >= before[key] - SLACK, f"{path}: {key} fell by {before[key] - after[key]} bytes"
        else:
            assert after[key] == before[key], f"{path}: {key} {before[key]} -> {after[key]} after {count} exchanges"
