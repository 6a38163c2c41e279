"""The example of docs/metal.md runs as written: on the fake of the Objective-C runtime and Metal everywhere, on
a Metal device where there is one."""

from __future__ import annotations

import numpy as np
import pytest

from dlbind import DeviceType
from docs_examples import run_example
from metal_fake import Fake


def check(ns: dict[str, object]) -> None:
    t, p, back = ns["t"], ns["p"], ns["back"]
    assert t.device == (DeviceType.kDLMetal, 0)  # type: ignore[attr-defined]
    assert p.device == (DeviceType.kDLMetal, 0) and p.shape == (1024,)  # type: ignore[attr-defined]
    expected = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    assert isinstance(back, np.ndarray) and np.array_equal(back, expected)


def test_on_the_fake(fake: Fake) -> None:
    check(run_example("metal.md", "metal"))
    calls = fake.calls()
    # 12 float32 in shared storage (options 0); 1024 float16 in private storage (MTLStorageModePrivate << 4)
    for message in ("newBufferWithBytes:length:48 options:0 ", "newBufferWithLength:2048 options:32 "):
        assert any(c.startswith(message) for c in calls), (message, calls)


@pytest.mark.metal_gpu
def test_on_a_metal_device() -> None:
    check(run_example("metal.md", "metal"))
