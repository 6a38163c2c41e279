"""Tests of dlbind-rocm.

Most run everywhere, on a recording fake of the HIP runtime (``recording_amdhip64.c``, built here with gcc
and loaded through ``DLBIND_ROCM_LIBRARY``): they check which runtime calls dlbind-rocm makes, in which
order, with which streams and devices. The tests marked ``rocm_gpu`` need a GPU and its driver; without
them they are skipped with the reason the real runtime gives.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import dlbind_rocm
from gpu_recording import GpuTestSuite
from rocm_recording import Recording

SUITE = GpuTestSuite(
    backend="rocm",
    recording=Recording,
    source=Path(__file__).with_name("recording_amdhip64.c"),
    library="amdhip64",
    runtime_text="HIP",
    marker_text="needs an AMD GPU and ROCm",
    defaults="runtime and driver HIP 5.2",
    probe=dlbind_rocm.probe,
)


def pytest_configure(config: pytest.Config) -> None:
    SUITE.configure(config)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    SUITE.skip_without_gpu(items)


recording_library, recording, rec = SUITE.fixtures()
