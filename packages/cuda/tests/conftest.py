"""Tests of dlbind-cuda.

Most run everywhere, on a recording fake of the CUDA runtime (``recording_cudart.c``, built here with gcc
and loaded through ``DLBIND_CUDA_LIBRARY``): they check which runtime calls dlbind-cuda makes, in which
order, with which streams and devices. The tests marked ``cuda_gpu`` need a GPU and its driver; without
them they are skipped with the reason the real runtime gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dlbind_cuda
from cuda_recording import Recording
from gpu_recording import GpuTestSuite

SUITE = GpuTestSuite(
    backend="cuda",
    recording=Recording,
    source=Path(__file__).with_name("recording_cudart.c"),
    library="cudart",
    runtime_text="CUDA",
    marker_text="needs a CUDA GPU and its driver",
    defaults="runtime and driver 13.0",
    probe=dlbind_cuda.probe,
)


def pytest_configure(config: pytest.Config) -> None:
    SUITE.configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    SUITE.skip_without_gpu(items)


recording_library, recording, rec = SUITE.fixtures()
