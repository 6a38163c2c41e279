"""One validator for every description of memory (issue 38).

Whatever describes memory to dlbind — ``__array_interface__`` (a pointer, or a buffer, as ``data``),
``__cuda_array_interface__``, :func:`dlbind.from_pointer`, a buffer that is not C-contiguous — is checked
here before anything reads, copies or exports it; a consumed capsule is checked by the same rules on import
(:func:`dlbind.tensor.check_managed`, and ``dlbind_valid`` in the compiled build), so ``asdlpack`` never
exports what ``from_dlpack`` refuses:

- at most :data:`MAX_NDIM` dimensions, each >= 0, with as many strides as dimensions;
- the element count, the byte size and every stride within int64;
- a data pointer in the address space, and not NULL where there are elements;
- the bytes the elements reach, from ``data + byte_offset``, within int64 and inside the address space
  (no wrap at either end);
- where a buffer is given as the data (``buffer=``): every element inside it.

A raw pointer (a tuple's ``data``, ``from_pointer``, ``__cuda_array_interface__``) that passes is trusted:
dlbind cannot know what lies at an address, only that the description is consistent (docs/reliability.md).
Every refusal is a ``BufferError`` naming the description and what is wrong with it.
"""

from __future__ import annotations

import math

from dlbind.dtypes import INT64_MAX, MAX_ADDRESS, DType, byte_size, reach_bytes

__all__ = ["MAX_NDIM", "check_description"]

#: Dimensions a tensor may have: far above any library's limit (the import refuses more, in both builds).
MAX_NDIM = 64


def check_description(
    what: str,
    data: int,
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    dtype: DType,
    byte_offset: int = 0,
    *,
    padded: bool = False,
    buffer: tuple[int, int] | None = None,
) -> None:
    """BufferError unless the memory ``what`` describes is consistent (the module's rules): ``data`` its
    pointer, ``shape``/``strides`` (elements) its layout, ``padded`` sub-byte elements one per byte;
    ``buffer``: ``(address, length)`` of the buffer that holds it, when one is given."""
    ndim = len(shape)
    if ndim > MAX_NDIM:
        raise BufferError(f"{what}: {ndim} dimensions (at most {MAX_NDIM})")
    for d in shape:
        if d < 0:
            raise BufferError(f"{what}: negative dimension in shape {shape}")
    if len(strides) != ndim:
        raise BufferError(f"{what}: {len(strides)} strides {strides} for the {ndim} dimensions of shape {shape}")
    try:
        byte_size(shape, dtype, padded=padded)
    except BufferError as exc:
        raise BufferError(f"{what}: {exc}") from None
    for s in strides:
        if not -INT64_MAX - 1 <= s <= INT64_MAX:
            raise BufferError(f"{what}: stride {s} of strides {strides} does not fit in int64")
    if byte_offset < 0:
        raise BufferError(f"{what}: byte_offset {byte_offset} is negative")
    start = data + byte_offset
    if not 0 <= data <= MAX_ADDRESS:
        raise BufferError(f"{what}: data pointer {data:#x} is outside the address space")
    if start > MAX_ADDRESS:
        raise BufferError(f"{what}: byte_offset {byte_offset} takes the data pointer past the address space")
    size = math.prod(shape)
    if not size:
        return  # no element is addressed: nothing to reach
    if not data:
        raise BufferError(f"{what}: a NULL data pointer with {size} elements")
    reach = reach_bytes(shape, strides, dtype.bits * dtype.lanes, padded)
    if isinstance(reach, str):
        raise BufferError(f"{what}: the elements of shape {shape} with strides {strides} reach {reach}")
    low, high = reach
    if start + low < 0 or start + high - 1 > MAX_ADDRESS:
        raise BufferError(
            f"{what}: the elements of shape {shape} with strides {strides} from {start:#x} reach past the ends of "
            "the address space"
        )
    if buffer is not None:
        base, length = buffer
        first, end = start + low - base, start + high - base
        if first < 0 or end > length:
            raise BufferError(
                f"{what}: the elements of shape {shape} with strides {strides} reach bytes {first} to {end} of a "
                f"{length}-byte buffer"
            )
