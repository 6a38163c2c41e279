"""One validator for every description of memory (issue 38).

Whatever describes memory to dlbind — ``__array_interface__`` (a pointer, or a buffer, as ``data``),
``__cuda_array_interface__``, :func:`dlbind.from_pointer`, a buffer that is not C-contiguous — is checked
here before anything reads, copies or exports it; a consumed capsule's struct is checked here by the same rules
on import, before the Tensor is made (:func:`consumed`, :func:`check_managed`; ``dlbind_valid`` in the compiled
build), so ``asdlpack`` never exports what ``from_dlpack`` refuses:

- a dtype DLPack defines (:func:`check_dtype`) on a device it can name (:func:`check_device`);
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
import struct
from typing import Any

from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_VERSION
from dlbind._generated.tables import DTYPE_ACCEPTED_WIDTHS, KNOWN_DTYPE_CODES, LEGACY_READINGS
from dlbind.devices import HOST_ACCESSIBLE
from dlbind.dtypes import SUBBYTE_PADDED, DType

__all__ = [
    "MAX_NDIM",
    "ExtentError",
    "byte_size",
    "check_byte_strides",
    "check_description",
    "check_device",
    "check_dtype",
    "check_managed",
    "check_reach",
    "consumed",
    "contiguous_strides",
    "legacy_reading",
    "producer_refused",
    "type_name",
]

#: The name of the package this runtime is (``dlbind``, or a vendored copy's), for messages.
PACKAGE = __name__.rpartition(".")[0]

#: Dimensions a tensor may have: far above any library's limit (the import refuses more, in both builds).
MAX_NDIM = 64

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
MAX_ADDRESS = 2 ** (8 * struct.calcsize("P")) - 1  # the address space's last byte


def element_bytes(count: int, bits: int, padded: bool) -> int:
    """Bytes that ``count`` elements of ``bits`` bits each take: whole bytes each, or packed below a byte unless
    ``padded`` (one element per byte), as :meth:`dlbind.DType.nbytes` counts them."""
    if bits % 8 == 0 or padded:
        return count * ((bits + 7) // 8)
    return count // 8 * bits + (count % 8 * bits + 7) // 8


def byte_size(shape: tuple[int, ...], dtype: DType, *, padded: bool = False) -> int:
    """Bytes of a tensor of ``shape`` and ``dtype``; BufferError when a dimension, the element count or
    the byte size does not fit in int64 (DLPack's sizes; the compiled build checks the same in C)."""
    for d in shape:
        if d > INT64_MAX:
            raise BufferError(f"dimension {d} of shape {shape} does not fit in int64")
    size = 1
    for d in shape:
        size *= d
    if size > INT64_MAX:
        raise BufferError(f"shape {shape} has {size} elements: more than int64 can count")
    nbytes = element_bytes(size, dtype.bits * dtype.lanes, padded)
    if nbytes > INT64_MAX:
        raise BufferError(f"{size} elements of {dtype.name} do not fit in int64 bytes")
    return nbytes


class ExtentError(BufferError):
    """A tensor whose elements reach beyond int64 bytes, or beyond the address space (a producer's defect:
    CuPy before 14.3 carries negative strides as unsigned numbers). The importer names the producer."""


def reach_bytes(shape: tuple[int, ...], strides: tuple[int, ...], bits: int, padded: bool) -> tuple[int, int] | str:
    """The bytes a non-empty tensor's elements reach, relative to its first element: ``(low, high)``, ``low``
    the first byte (<= 0) and ``high`` one past the last; or why they cannot be counted (beyond int64). The
    same steps as the C fast path's."""
    low = high = 0  # elements below and above the first one
    for d, s in zip(shape, strides, strict=True):
        if d > 1:
            span = s * (d - 1)
            if span < 0:
                low += span
            else:
                high += span
    if low < -INT64_MAX or high + 1 > INT64_MAX:
        return "elements beyond int64 of them"
    low_b, high_b = -element_bytes(-low, bits, padded), element_bytes(high + 1, bits, padded)
    if not (low_b >= -INT64_MAX and high_b <= INT64_MAX):
        return "bytes beyond int64 of them"
    return low_b, high_b


def _reach(shape: tuple[int, ...], strides: tuple[int, ...], bits: int, padded: bool, start: int) -> None:
    """ExtentError unless the bytes a non-empty tensor's elements reach, from ``start`` (data + byte_offset),
    fit in int64 and in the address space; the same steps, and checks, as the C fast path's."""
    reach = reach_bytes(shape, strides, bits, padded)
    if isinstance(reach, str):
        why = reach
    elif start + reach[0] < 0 or start + reach[1] - 1 > MAX_ADDRESS:
        why = "past the ends of the address space"
    else:
        why = ""
    if why:
        raise ExtentError(
            f"the elements of shape {shape} with strides {strides} reach {why} (a producer's defect, e.g. "
            "negative strides carried as unsigned numbers): not imported"
        )


def check_reach(shape: tuple[int, ...], strides: tuple[int, ...], dtype: DType, padded: bool, start: int) -> None:
    """BufferError unless a consumed tensor's sizes fit in int64 (:func:`byte_size`), and
    :class:`ExtentError` unless the bytes its elements reach, from ``start`` (data + byte_offset), fit in
    int64 and in the address space (a non-empty tensor)."""
    byte_size(shape, dtype, padded=padded)
    if 0 not in shape:
        _reach(shape, strides, dtype.bits * dtype.lanes, padded, start)


def check_dtype(code: int, bits: int, lanes: int, what: str = "") -> None:
    """BufferError unless ``(code, bits, lanes)`` is a DLPack dtype: each field within its C type (``uint8``,
    ``uint8``, ``uint16``), a lane or more, and a width its code takes (spec/dtypes.toml; a code newer than this
    runtime's header is carried at any width). ``what``: the description, named first in the message."""
    prefix = f"{what}: " if what else ""
    if not (0 <= code <= 0xFF and 0 <= bits <= 0xFF and 0 <= lanes <= 0xFFFF):
        raise BufferError(
            f"{prefix}invalid dtype (code={code}, bits={bits}, lanes={lanes}): DLDataType holds a code and bits of "
            "0 to 255 and lanes of 0 to 65535"
        )
    if lanes < 1:
        raise BufferError(f"{prefix}invalid dtype: lanes={lanes} (a DLPack dtype has at least one lane)")
    widths = DTYPE_ACCEPTED_WIDTHS.get(code) if code in KNOWN_DTYPE_CODES else None
    if bits == 0 or (widths is not None and bits not in widths):
        raise BufferError(
            f"{prefix}invalid dtype: {DType(code, bits)} (code={code}, bits={bits}) is not defined by DLPack"
            + (f"; this code takes bits {', '.join(map(str, sorted(widths)))}" if widths else "")
        )


def check_device(device_type: int, device_id: int, what: str = "") -> None:
    """BufferError unless ``(device_type, device_id)`` is a DLPack device: both ``int32_t`` values >= 0 (a type
    newer than this runtime's header is carried; policy refuses it where needed)."""
    prefix = f"{what}: " if what else ""
    if not 0 <= device_type <= INT32_MAX:
        raise BufferError(f"{prefix}invalid device type {device_type}: DLPack device types are 0 to {INT32_MAX}")
    if not 0 <= device_id <= INT32_MAX:
        raise BufferError(f"{prefix}invalid device id {device_id}: device ids are 0 to {INT32_MAX}")


def check_byte_strides(what: str, byte_strides: tuple[int, ...]) -> None:
    """BufferError unless strides a description gives in bytes (an array interface's) fit in int64, as numpy and
    the buffer protocol hold them: on a dimension of extent 1 or 0 its element stride would pass, and every reader
    of bytes would then refuse it or wrap it."""
    for s in byte_strides:
        if not -INT64_MAX - 1 <= s <= INT64_MAX:
            raise BufferError(f"{what}: stride {s} of strides {byte_strides} does not fit in int64 bytes")


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
    device: tuple[int, int],
) -> None:
    """BufferError unless the memory ``what`` describes is consistent (the module's rules): ``data`` its pointer,
    ``shape``/``strides`` (elements) its layout, ``padded`` sub-byte elements one per byte, ``dtype`` and ``device``
    DLPack's; ``buffer``: ``(address, length)`` of the buffer that holds it, when one is given."""
    check_dtype(int(dtype.code), int(dtype.bits), int(dtype.lanes), what)
    check_device(int(device[0]), int(device[1]), what)
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
    if not 0 <= byte_offset <= INT64_MAX:  # DLPack's consumers read it as int64 (torch's storage offset)
        raise BufferError(
            f"{what}: byte_offset {byte_offset} " + ("is negative" if byte_offset < 0 else "does not fit in int64")
        )
    start = data + byte_offset
    if not 0 <= data <= MAX_ADDRESS:
        raise BufferError(f"{what}: data pointer {data:#x} is outside the address space")
    if start > MAX_ADDRESS:
        raise BufferError(f"{what}: byte_offset {byte_offset} takes the data pointer past the address space")
    _check_extent(what, data, start, shape, strides, dtype.bits * dtype.lanes, padded, buffer)


def _check_extent(
    what: str, data: int, start: int, shape: tuple[int, ...], strides: tuple[int, ...], bits: int, padded: bool,
    buffer: tuple[int, int] | None,
) -> None:  # fmt: skip
    """The bytes a description's elements reach from ``start`` (``data`` + its byte offset): inside the address
    space, and inside ``buffer`` where one holds them (:func:`check_description`)."""
    size = math.prod(shape)
    if not size:
        return  # no element is addressed: nothing to reach
    if not data:
        raise BufferError(f"{what}: a NULL data pointer with {size} elements")
    reach = reach_bytes(shape, strides, bits, padded)
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


def contiguous_strides(shape: tuple[int, ...], *, saturate: bool = False) -> tuple[int, ...]:
    """Row-major strides in elements (a zero dimension counts as one, so strides stay distinct).

    ``saturate``: strides past int64 become 0 (for a zero-size copy: no element is addressed).
    """
    strides: list[int] = []
    acc = 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= max(d, 1)
        if saturate and acc > INT64_MAX:
            acc = 0
    return tuple(reversed(strides))


def _fields(managed: Any, versioned: bool) -> tuple[Any, tuple[int, int] | None, int]:
    if versioned:
        major, minor = managed.version.major, managed.version.minor
        if major != DLPACK_VERSION[0]:
            raise BufferError(
                f"the producer made a DLPack {major}.{minor} tensor; {PACKAGE} understands major version "
                f"{DLPACK_VERSION[0]} only"
            )
        return managed.dl_tensor, (major, minor), int(managed.flags)
    return managed.dl_tensor, None, 0


def type_name(x: Any) -> str:
    """``module.Type`` of a producer for messages; dlbind's own types by their public names (the compiled
    build's exporter of buffers is a C type named ``dlbind.Exporter`` too, the Python class's name)."""
    kind = type(x)
    if kind.__module__ == PACKAGE or kind.__module__.startswith(PACKAGE + "."):
        public = "Tensor" if any(k.__name__ == "Tensor" for k in kind.__mro__) else "Exporter"
        return f"{PACKAGE}.{public}"
    return f"{kind.__module__}.{kind.__qualname__}"


def producer_refused(producer: Any, exc: ExtentError) -> BufferError:
    """The BufferError of a tensor that ``producer``'s ``__dlpack__`` gave with an extent beyond int64 or the
    address space (``exc``): the producer's defect, so the error names it."""
    err = BufferError(f"{type_name(producer)}.__dlpack__ gave a tensor dlbind refuses: {exc}")
    err.__cause__ = exc
    return err


def check_managed(
    managed: Any, versioned: bool, allow_vector: bool = False, producer: Any = None
) -> tuple[Any, tuple[int, ...], tuple[int, ...], tuple[int, int] | None, int]:
    """Validate a consumed struct; BufferError says what is wrong (naming ``producer``, the object whose
    ``__dlpack__`` gave it, where its extent is the fault: :func:`producer_refused`). Returns (DLTensor, shape,
    strides, version, flags): version and flags are a legacy struct's None and 0."""
    if isinstance(managed, int):
        managed = ffi.cast("DLManagedTensorVersioned *" if versioned else "DLManagedTensor *", managed)
    t, version, flags = _fields(managed, versioned)
    ndim = int(t.ndim)
    if not 0 <= ndim <= MAX_NDIM:
        raise BufferError(f"invalid ndim {ndim} in the DLPack tensor")
    code, bits, lanes = int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)
    check_dtype(code, bits, lanes)  # a code newer than this runtime's header is carried, named by its number
    device_type = int(t.device.device_type)
    if device_type > INT32_MAX:  # an int32 enum (cffi reads it unsigned): negative
        device_type -= 2**32
    check_device(device_type, int(t.device.device_id))
    if ndim and t.shape == ffi.NULL:
        raise BufferError(f"the DLPack tensor has ndim={ndim} but a NULL shape")
    shape = tuple(ffi.unpack(t.shape, ndim)) if ndim else ()
    if any(d < 0 for d in shape):
        raise BufferError(f"negative dimension in shape {shape}")
    # NULL strides: compact row-major (allowed before DLPack 1.2); past int64 (zero-size only): BufferError below
    strides = tuple(ffi.unpack(t.strides, ndim)) if ndim and t.strides != ffi.NULL else contiguous_strides(shape)
    padded = versioned and bool(int(managed.flags) & SUBBYTE_PADDED)
    if any(s > INT64_MAX for s in strides):
        raise BufferError(f"the row-major strides of shape {shape} do not fit in int64")
    size = math.prod(shape)
    data = int(ffi.cast("uintptr_t", t.data))
    if not data and size and device_type in HOST_ACCESSIBLE:
        raise BufferError(f"the DLPack tensor has {size} elements but a NULL data pointer")
    offset = int(t.byte_offset)
    if offset > INT64_MAX:  # DLPack's consumers read it as int64 (torch's storage offset)
        raise BufferError(f"byte_offset {offset} does not fit in int64")
    if data + offset > MAX_ADDRESS:
        raise BufferError(f"byte_offset {offset} overflows the data pointer")
    # beyond int64 (elements, bytes) or the address space: BufferError (ExtentError: the producer's defect)
    try:
        check_reach(shape, strides, DType(code, bits, lanes), padded, data + offset)
    except ExtentError as exc:
        if producer is None:
            raise
        raise producer_refused(producer, exc) from exc
    return t, shape, strides, version, flags


def legacy_reading(managed: Any) -> None:
    """A legacy struct's dtype that means one element per byte there (``(kDLUInt, 1, 1)``: MXNet's and
    old TVM's bool), rewritten to the dtype it is read as (spec/dtypes.toml ``[[legacy]]``). The
    consumer owns the struct from the moment it took the capsule; the C fast path does the same."""
    dtype = managed.dl_tensor.dtype
    if int(dtype.lanes) == 1:
        found = LEGACY_READINGS.get((int(dtype.code), int(dtype.bits)))
        if found is not None:
            dtype.code, dtype.bits = found


def consumed(owner: Any, versioned: bool, allow_vector: bool = False, producer: Any = None) -> Any:
    """The consumed struct ``owner`` owns (``dlbind.capsule.Owner``), read and checked by the rules of this module
    (:func:`check_managed`, naming ``producer``; a legacy struct's dtype read as :func:`legacy_reading` says):
    ``(DLTensor, shape, strides, version, flags)``. On invalid content ``owner`` releases the struct (its deleter
    runs, exactly once) and BufferError says what was wrong."""
    managed = owner.managed
    try:
        if not versioned:
            legacy_reading(managed)
        return check_managed(managed, versioned, allow_vector, producer)
    except BaseException:
        owner.release()
        raise
