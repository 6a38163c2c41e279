"""The example of docs/cuda.md runs as written: on the recording runtime everywhere, on a GPU where there is one."""

from __future__ import annotations

import numpy as np
import pytest

from cuda_recording import Recording
from dlbind import DeviceType, Flags
from docs_examples import run_example


def check(ns: dict[str, object]) -> None:
    t, p, m, back = ns["t"], ns["p"], ns["m"], ns["back"]
    assert t.device == (DeviceType.kDLCUDA, 0)  # type: ignore[attr-defined]
    assert p.device == (DeviceType.kDLCUDAHost, 0) and p.shape == (1024,)  # type: ignore[attr-defined]
    assert m.device == (DeviceType.kDLCUDAManaged, 0) and m.shape == (8, 8)  # type: ignore[attr-defined]
    assert isinstance(back, np.ndarray) and np.array_equal(back, np.arange(12.0).reshape(3, 4))


def test_on_the_recording_runtime(rec: Recording) -> None:
    ns = run_example("cuda.md", "cuda")
    check(ns)
    calls = rec.calls()
    for call in ("cudaMalloc(", "cudaMallocHost(", "cudaMallocManaged(", "cudaPointerGetAttributes("):
        assert any(c.startswith(call) for c in calls), (call, calls)
    assert ns["m"].flags == Flags(0)  # type: ignore[attr-defined]


@pytest.mark.cuda_gpu
def test_on_a_gpu() -> None:
    check(run_example("cuda.md", "cuda"))
