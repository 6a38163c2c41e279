"""Tests of dlbind-rocm: on the recording HIP runtime (``recording_amdhip64.c``) everywhere, on an AMD GPU
where marked ``rocm_gpu`` (the setup: ``GpuTestSuite`` of tests/gpu_backends/gpu_recording.py).
"""

from __future__ import annotations

from pathlib import Path

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


pytest_configure, pytest_collection_modifyitems, recording_library, recording, rec = SUITE.conftest()
