"""Every copy dlbind makes (Tensor.copy, __dlpack__(copy=True), convert's bridges) is exact for any layout.

The compiled build copies in C (``_fastpath.copy_strided``), the pure build through numpy over the raw
memory, or run by run without numpy; each is checked against numpy's own copy of the same view.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import export

rng = np.random.default_rng(8)


def _views() -> dict[str, Any]:
    base3 = rng.integers(0, 2**31, size=(5, 7, 9)).astype(np.int64)
    big = rng.standard_normal((67, 45))
    return {
        "contiguous": base3,
        "reversed-1d": np.arange(1000.0)[::-1],
        "step-3": np.arange(1000, dtype=np.int16)[5::3],
        "transposed": big.T,
        "transposed-3d": base3.transpose(2, 0, 1),
        "negative-2d": big[::-1, ::-2],
        "offset-slice": base3[1:4, 2:, 3:7],
        "size-1-dims": base3[:, 3:4, :][:, :, ::2],
        "broadcast": np.broadcast_to(np.arange(6.0), (4, 6)),
        "0-d": np.array(7.5),
        "complex-strided": (np.arange(40) * (1 + 2j)).astype(np.complex128)[::-3],
        "uint8-transposed": rng.integers(0, 255, size=(33, 17), dtype=np.uint8).T,
        "bool-strided": (np.arange(50) % 3 == 0)[::2],
        "float32-4d": rng.standard_normal((3, 4, 5, 6)).astype(np.float32).transpose(3, 1, 0, 2)[::-1],
    }


VIEWS = _views()


@pytest.mark.parametrize("name", list(VIEWS))
def test_copy_matches_numpy(name: str) -> None:
    view = VIEWS[name]
    t = dlbind.from_dlpack(view) if view.flags.writeable else dlbind.from_dlpack(dlbind.asdlpack(view))
    c = t.copy()
    assert c.flags & dlbind.Flags.IS_COPIED
    out = np.asarray(c)
    assert out.flags.c_contiguous and out.shape == view.shape and out.dtype == view.dtype
    np.testing.assert_array_equal(out, view)
    assert out.ctypes.data != view.ctypes.data or view.size == 0


@pytest.mark.parametrize("name", list(VIEWS))
def test_dlpack_copy_true_and_convert_bridge(name: str) -> None:
    view = VIEWS[name]
    t = dlbind.from_dlpack(dlbind.asdlpack(view))
    np.testing.assert_array_equal(np.from_dlpack(dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), copy=True))), view)


@pytest.mark.parametrize("name", [n for n in VIEWS if VIEWS[n].ndim])
def test_python_fallback_matches(name: str) -> None:
    """The last resort (no compiled build, no numpy) is exact too, tried directly."""
    view = VIEWS[name]
    item = view.itemsize
    out = np.empty(view.shape, view.dtype)
    export._copy_strided_python(out.ctypes.data, view.ctypes.data, view.shape, view.strides, item)
    np.testing.assert_array_equal(out, view)


@pytest.mark.parametrize("name", [n for n in VIEWS if VIEWS[n].ndim])
def test_numpy_route_matches(name: str) -> None:
    view = VIEWS[name]
    out = np.empty(view.shape, view.dtype)
    export._copy_strided_numpy(out.ctypes.data, view.ctypes.data, view.shape, view.strides, view.itemsize)
    np.testing.assert_array_equal(out, view)


def test_every_axis_order_and_sign() -> None:
    base = rng.integers(0, 1000, size=(3, 4, 5)).astype(np.int32)
    for perm in itertools.permutations(range(3)):
        for signs in itertools.product((1, -1), repeat=3):
            view = base.transpose(perm)[tuple(slice(None, None, s) for s in signs)]
            np.testing.assert_array_equal(np.asarray(dlbind.from_dlpack(view).copy()), view)


def test_read_only_source_copies_to_writable_memory() -> None:
    ro = np.arange(12.0).reshape(3, 4).T
    ro.flags.writeable = False
    out = np.asarray(dlbind.from_dlpack(dlbind.asdlpack(ro)).copy())
    assert out.flags.writeable
    out[0, 0] = -1
    assert ro[0, 0] == 0


@pytest.mark.parametrize("dtype", ["int16", "float32", "float64", "int8", "complex128"])
@pytest.mark.parametrize("aligned", [True, False])
def test_reversed_copies_in_both_alignments(dtype: str, aligned: bool) -> None:
    """Reversed rows take a vectorised loop when their elements are aligned, the general one otherwise."""
    item = np.dtype(dtype).itemsize
    raw = np.arange(1 + 301 * item, dtype=np.uint8)
    a = np.frombuffer(raw.tobytes(), dtype=dtype, count=301, offset=0 if aligned else 1)
    assert a.flags.aligned == (aligned or item == 1)
    for view in (a[::-1], a[:300].reshape(20, 15)[::-1, ::-1], a[::-3]):
        c = dlbind.from_dlpack(view).copy()
        assert c.flags & dlbind.Flags.IS_COPIED
        np.testing.assert_array_equal(np.asarray(c), view)
