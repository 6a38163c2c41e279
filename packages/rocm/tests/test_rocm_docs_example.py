"""The example of docs/rocm.md runs as written: on the recording runtime everywhere, on an AMD GPU where there is
one."""

from __future__ import annotations

import numpy as np
import pytest

from dlbind import DeviceType
from docs_examples import run_example
from rocm_recording import Recording


def check(ns: dict[str, object]) -> None:
    t, p, back = ns["t"], ns["p"], ns["back"]
    assert t.device == (DeviceType.kDLROCM, 0)  # type: ignore[attr-defined]
    assert p.device == (DeviceType.kDLROCMHost, 0) and p.shape == (256,)  # type: ignore[attr-defined]
    assert isinstance(back, np.ndarray) and np.array_equal(back, np.arange(6.0))


def test_on_the_recording_runtime(rec: Recording) -> None:
    check(run_example("rocm.md", "rocm"))
    calls = rec.calls()
    for call in ("hipMalloc(", "hipHostMalloc(", "hipPointerGetAttributes("):
        assert any(c.startswith(call) for c in calls), (call, calls)


@pytest.mark.rocm_gpu
def test_on_a_gpu() -> None:
    check(run_example("rocm.md", "rocm"))
