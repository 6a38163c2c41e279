"""On a real Metal device (macOS): dlbind-metal's own buffers, torch's MPS tensors, MLX arrays.

Elsewhere every test here is skipped with the probe's reason ("wrong platform: macOS only ...").
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbind
import dlbind_metal
from dlbind._generated.enums import DeviceType, Flags

METAL = DeviceType.kDLMetal
pytestmark = pytest.mark.metal_gpu


@pytest.mark.parametrize("storage", ["shared", "private"])
def test_round_trip(storage: str) -> None:
    a = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    t = dlbind_metal.asarray(a, storage=storage)
    assert t.device == (METAL, 0) and t.byte_offset == 0
    assert dlbind.from_dlpack(t).data_ptr == t.data_ptr
    back = dlbind.from_dlpack(t, device="cpu", copy=True)
    assert back.flags & Flags.IS_COPIED
    assert (np.from_dlpack(back) == a).all()
    assert dlbind_metal.device_of(t.data_ptr) == (METAL, 0)


def test_bytes_no_word_holds_whole() -> None:
    # macOS blits whole 4-byte words: a private buffer of 7 bytes, and a view of bytes 1..4 of it
    t = dlbind_metal.asarray(np.arange(7, dtype=np.uint8), storage="private")
    assert (np.from_dlpack(t, device="cpu", copy=True) == np.arange(7)).all()
    view = dlbind.from_pointer(t.data_ptr, (3,), "uint8", byte_offset=1, device=(METAL, 0), owner=t)
    assert (np.from_dlpack(dlbind.from_dlpack(view), device="cpu", copy=True) == [1, 2, 3]).all()


def test_an_offset_view() -> None:
    t = dlbind_metal.asarray(np.arange(10, dtype=np.float32))
    view = dlbind.from_dlpack(dlbind.from_pointer(t.data_ptr, (3,), "float32", byte_offset=12,
                                                  device=(METAL, 0), owner=t))  # fmt: skip
    assert (np.from_dlpack(view, device="cpu", copy=True) == [3, 4, 5]).all()


def test_torch_mps() -> None:
    torch = pytest.importorskip("torch")
    if not torch.backends.mps.is_available():
        pytest.skip("torch has no MPS device here")
    x = torch.arange(12, dtype=torch.float32, device="mps").reshape(3, 4)
    torch.mps.synchronize()
    t = dlbind.from_dlpack(x)
    assert t.device == (METAL, 0) and t.shape == (3, 4)
    assert (np.from_dlpack(t, device="cpu", copy=True) == x.cpu().numpy()).all()
    part = x[1:]  # an offset view: torch says where it starts in byte_offset (or in the pointer, see docs)
    assert (np.from_dlpack(dlbind.from_dlpack(part), device="cpu", copy=True) == part.cpu().numpy()).all()


def test_mlx() -> None:
    mx = pytest.importorskip("mlx.core")
    x = mx.arange(12, dtype=mx.float32).reshape(3, 4)
    mx.eval(x)
    t = dlbind.from_dlpack(x)
    if t.device[0] != METAL:
        pytest.skip(f"this MLX exports {t.device} (its arrays are in unified memory)")
    assert (np.from_dlpack(t, device="cpu", copy=True) == np.array(x)).all()
