"""Tests of dlbind-cuda: on the recording CUDA runtime (``recording_cudart.c``) everywhere, on a GPU where
marked ``cuda_gpu`` (the setup: ``GpuTestSuite`` of tests/gpu_backends/gpu_recording.py).
"""

from __future__ import annotations

from pathlib import Path

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


pytest_configure, pytest_collection_modifyitems, recording_library, recording, rec = SUITE.conftest()
