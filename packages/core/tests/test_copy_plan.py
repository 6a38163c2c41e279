"""``dlbind._device_tensors.copy_plan``: the 2-D copies a GPU backend queues to compact a strided tensor.

The plan is pure arithmetic, so it is checked here without a GPU: an executor that does what
``MemcpyAsync``/``Memcpy2DAsync`` do (and checks what the runtime checks: pitches at least the width and at
most ``max_pitch``, every byte read inside the source's reach and written inside the destination) runs the
plan over random bytes, and the result must equal numpy's ``ascontiguousarray`` of the same strided view,
for hypothesis's layouts and a table of the named ones (transposed, reversed, broadcast, gapped, offset).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlbind._device_tensors import MAX_COPIES, Copy2D, copy_plan
from dlbind.export import byte_span


def execute(plan: list[Copy2D], source: np.ndarray, first: int, nbytes: int, max_pitch: int) -> np.ndarray:
    """Run ``plan`` as the runtime would: ``source`` holds every byte the elements reach, the first element
    at byte ``first``; returns the ``nbytes`` of the destination (zeros where nothing was written)."""
    out = np.zeros(nbytes, np.uint8)
    for c in plan:
        assert c.width > 0 and c.height > 0
        if c.height > 1:
            assert c.width <= c.spitch <= max_pitch and c.width <= c.dpitch <= max_pitch, c
        for r in range(c.height):
            d = c.dst + r * c.dpitch
            assert d >= 0 and d + c.width <= nbytes, c
            if c.within:
                s = c.src + r * c.spitch
                assert s >= 0 and s + c.width <= d, c  # from what earlier copies wrote, never overlapping
                out[d : d + c.width] = out[s : s + c.width]
            else:
                s = first + c.src + r * c.spitch
                assert s >= 0 and s + c.width <= source.size, c
                out[d : d + c.width] = source[s : s + c.width]
    return out


def check(shape: tuple[int, ...], strides: tuple[int, ...], item: int, *, max_pitch: int = (1 << 31) - 1,
          seed: int = 0) -> list[Copy2D]:  # fmt: skip
    """The plan of ``shape``/byte ``strides`` gives numpy's compact copy; returns the plan."""
    plan = copy_plan(shape, strides, item, max_pitch=max_pitch)
    if not math.prod(shape):
        assert plan == []
        return plan
    low, high = byte_span(shape, strides, item)
    source = np.random.default_rng(seed).integers(0, 256, high - low, dtype=np.uint8)
    view = np.ndarray(shape, f"V{item}", buffer=source, offset=-low, strides=strides)
    expected = np.ascontiguousarray(view).view(np.uint8).reshape(-1)
    assert np.array_equal(execute(plan, source, -low, expected.size, max_pitch), expected)
    return plan


@st.composite
def layouts(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """A shape, byte strides and item size: views numpy can make (slices with steps, flips, transposes,
    broadcasts) and arbitrary strides (zero, negative, overlapping, gapped)."""
    item = draw(st.sampled_from([1, 2, 4, 8, 16]))
    ndim = draw(st.integers(0, 5))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    if draw(st.booleans()):  # a numpy view of a compact array
        base_shape = tuple(d * draw(st.integers(1, 3)) for d in shape)
        strides = list(int(s) for s in np.empty(base_shape, f"V{item}").strides)
        strides = [s * (base // max(d, 1)) if d else s for s, d, base in zip(strides, shape, base_shape, strict=True)]
        strides = [s * draw(st.sampled_from([1, -1])) for s in strides]
        order = draw(st.permutations(range(ndim)))
        shape, strides = tuple(shape[i] for i in order), [strides[i] for i in order]
        strides = [0 if draw(st.integers(0, 5)) == 0 else s for s in strides]  # now and then a broadcast
        return shape, tuple(strides), item
    strides = tuple(draw(st.integers(-40, 40)) * draw(st.sampled_from([1, item])) for _ in shape)
    return shape, strides, item


@settings(max_examples=600, deadline=None)
@given(layouts(), st.sampled_from([(1 << 31) - 1, 64, 16]), st.integers(0, 2**32 - 1))
def test_any_layout_matches_numpy(layout: tuple[tuple[int, ...], tuple[int, ...], int], max_pitch: int,
                                  seed: int) -> None:  # fmt: skip
    shape, strides, item = layout
    check(shape, strides, item, max_pitch=max_pitch, seed=seed)


def f4(shape: tuple[int, ...], strides: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """float32 ``shape`` with element ``strides``, in bytes."""
    return shape, tuple(4 * s for s in strides), 4


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        (f4((3, 4), (4, 1)), [Copy2D(0, 0, 48, 1, 48, 48)]),  # row-major: one copy
        (f4((3, 4), (8, 1)), [Copy2D(0, 0, 16, 3, 32, 16)]),  # rows with gaps: one 2-D copy
        (f4((4, 3), (1, 4)), [Copy2D(16 * j, 4 * j, 4, 4, 4, 12) for j in range(3)]),  # transposed
        (f4((3, 4), (4, -1)), [Copy2D(-i * 4, i * 4, 4, 3, 16, 16) for i in range(4)]),  # columns reversed
        (f4((3, 4), (-4, 1)), [Copy2D(0, 0, 16, 1, 16, 16), Copy2D(-16, 16, 16, 1, 16, 16),
                               Copy2D(-32, 32, 16, 1, 16, 16)]),  # rows reversed: a copy per row
        (f4((5,), (0,)), [Copy2D(0, 0, 4, 1, 4, 4), Copy2D(0, 4, 4, 1, 20, 20, True),
                          Copy2D(0, 8, 8, 1, 20, 20, True), Copy2D(0, 16, 4, 1, 20, 20, True)]),  # doubling
        (f4((3, 4), (0, 1)), [Copy2D(0, 0, 16, 1, 16, 16), Copy2D(0, 16, 16, 1, 48, 48, True),
                              Copy2D(0, 32, 16, 1, 48, 48, True)]),  # a broadcast row
        (f4((1, 3, 1), (99, 1, -7)), [Copy2D(0, 0, 12, 1, 12, 12)]),  # dimensions of one move nothing
    ],
    ids=["row-major", "gapped-rows", "transposed", "reversed-columns", "reversed-rows", "broadcast-scalar",
         "broadcast-row", "unit-dims"],
)  # fmt: skip
def test_named_layouts(layout: tuple[tuple[int, ...], tuple[int, ...], int], expected: list[Copy2D]) -> None:
    shape, strides, item = layout
    assert check(shape, strides, item) == expected


def test_empty_tensors_need_no_copy() -> None:
    assert copy_plan((0, 5), (20, 4), 4) == []
    assert copy_plan((3, 0), (0, -4), 4) == []


def test_a_broadcast_takes_about_log2_copies() -> None:
    assert len(check((1000, 1000), (0, 0), 4)) == 1 + 20  # one element, then 2**20 > 10**6 doubled
    assert len(check((1000, 300), (0, 4), 4)) == 1 + 10  # one row, then doubled
    plan = check((300, 1000), (4000, 0), 4)  # a column repeated: 2-D copies over the rows
    assert len(plan) == 1 + 10 and all(c.height == 300 for c in plan)


def test_pitches_past_the_limit_are_looped() -> None:
    shape, strides = (4, 8), (1 << 32, 8)  # rows 4 GiB apart
    plan = copy_plan(shape, strides, 4)
    assert len(plan) == 4 and all(c.height == 8 and c.spitch == 8 for c in plan)
    plan = copy_plan((8, 2), (64, 4), 4, max_pitch=32)  # the only row dimension's stride is past the limit
    assert [(c.src, c.height) for c in plan] == [(64 * i, 1) for i in range(8)]


def test_too_many_copies_is_a_buffer_error_naming_the_layout() -> None:
    with pytest.raises(BufferError, match=r"shape \(300, 300\) with byte strides \(1200, -4\) \(4-byte items\) "
                       r"takes 300 copies, more than 100: its elements run backwards in memory"):  # fmt: skip
        copy_plan((300, 300), (1200, -4), 4, limit=100)  # a 2-D copy per column, over the rows
    with pytest.raises(BufferError, match=r"takes 90000 copies"):  # reversed both ways: one dimension, no pitch
        copy_plan((300, 300), (-1200, -4), 4, limit=100)
    with pytest.raises(BufferError, match=r"takes 400 copies, more than 10: its elements are scattered"):
        copy_plan((20, 20, 20), (4, 80, 1600), 4, limit=10)  # transposed in 3-D: 2-D copies over one dimension
    assert len(copy_plan((MAX_COPIES,), (-4,), 4)) == MAX_COPIES  # the limit itself is allowed
    with pytest.raises(BufferError, match=f"more than {MAX_COPIES}"):
        copy_plan((MAX_COPIES + 1,), (-4,), 4)
