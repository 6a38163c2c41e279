"""The GPU suite (issue 21): torch, CuPy, JAX, numba-cuda and dlbind-cuda exchanging CUDA memory through dlbind.

Every test here carries the ``gpu`` marker. Without a CUDA GPU they are skipped at collection, naming the
reason the CUDA runtime gives (``no CUDA GPU: ...``); on a GPU, each library that is missing or has no CUDA
support here skips its own cases, naming it (``gpulibs.library``). Nothing fakes a GPU: the call sequences
are tested on the recording runtime in ``packages/cuda/tests``.

JAX takes 75 % of the GPU's memory at its first use unless told otherwise, which would starve torch and
CuPy in the same process: the allocator is set to grow on demand before anything can import jax.
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import gpulibs

MARKER = "gpu"
# Warnings raised inside the array libraries themselves (deprecations of their own internals, numba's
# occupancy hints) are theirs, not dlbind's: the repository's filterwarnings=error stays for everything else.
THIRD_PARTY = "ignore:::(torch|cupy|cupyx|cupy_backends|jax|jaxlib|numba|numba_cuda|cuda|ml_dtypes)"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: needs a CUDA GPU and its driver (tests/gpu; skipped naming what is missing)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mine = [item for item in items if MARKER in item.keywords]
    if not mine:
        return
    reason = gpulibs.no_gpu_reason()
    for item in mine:
        item.add_marker(pytest.mark.filterwarnings(THIRD_PARTY))
        if reason is not None:
            item.add_marker(pytest.mark.skip(reason=f"no CUDA GPU: {reason}"))
