"""DLPack data types: ``(code, bits, lanes)`` with names, numpy and buffer-format conversions.

Names and buffer formats are the generated tables (``spec/dtypes.toml`` joined with the header's
``DLDataTypeCode``), not branches.
numpy and ml_dtypes are imported only when a conversion asks for them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, NamedTuple

from dlbind._generated.enums import DataTypeCode, Flags
from dlbind._generated.tables import (
    DTYPE_ACCEPTED_WIDTHS,
    DTYPE_BY_NAME,
    DTYPE_CODE_PATTERNS,
    DTYPE_CODE_WIDTHS,
    DTYPE_FORMATS,
    DTYPE_NAMES,
    FORMAT_DTYPES,
    KNOWN_DTYPE_CODES,
    LEGACY_READINGS,
)
from dlbind._names import suggestion

_KNOWN_CODES = KNOWN_DTYPE_CODES

__all__ = [
    "SUBBYTE_PADDED",
    "DType",
    "from_format",
    "from_numpy",
    "lookup",
]

_C = DataTypeCode
#: The flag bit that says sub-byte elements are padded to a byte each (DLPack 1.2); 0 when the header
#: the runtime is generated from predates it (a vendored copy's): sub-byte data is then packed.
SUBBYTE_PADDED: int = int(getattr(Flags, "IS_SUBBYTE_TYPE_PADDED", 0))
_PACKAGE = __name__.rpartition(".")[0]  # dlbind, or a vendored copy's package
_NATIVE = "<" if sys.byteorder == "little" else ">"
# numpy's dtype.kind -> DLPack code for the builtin kinds
# (the kinds whose code the header has: DLPack 0.4 has no kDLBool, 0.8 added it)
_NUMPY_KINDS: dict[str, int] = {
    kind: getattr(_C, member)
    for kind, member in (("b", "kDLBool"), ("i", "kDLInt"), ("u", "kDLUInt"), ("f", "kDLFloat"), ("c", "kDLComplex"))
    if hasattr(_C, member)
}
_KIND_OF_CODE = {code: kind for kind, code in _NUMPY_KINDS.items()}  # the array interface's typestr kind too


class DType(NamedTuple):
    """A DLPack ``DLDataType``: type code, bits per lane, lanes (a named tuple: ``code, bits, lanes = dt``)."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def name(self) -> str:
        base = _name(self.code, self.bits)
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    @property
    def is_subbyte(self) -> bool:
        return self.bits < 8

    @property
    def itemsize(self) -> int:
        """Bytes per element when each element fills whole bytes (packed sub-byte types: 1)."""
        return max(1, (self.bits * self.lanes + 7) // 8)

    def legacy_refusal(self, *, padded: bool) -> str | None:
        """Why data of this dtype, stored packed or one element per byte (``padded``), cannot go in a
        legacy ``"dltensor"`` capsule (no flags; spec/dtypes.toml ``[[legacy]]``), or None."""
        if self.bits * self.lanes % 8 == 0:
            return None
        reads_as = LEGACY_READINGS.get((self.code, self.bits)) if self.lanes == 1 else None
        if reads_as is not None and not padded:
            return (
                f"packed {self.name} data cannot be exported in a legacy 'dltensor' capsule: there this dtype "
                f"means one element per byte ({_name(*reads_as)}); "
                "the consumer must ask for max_version=(1, 2) or newer"
            )
        if reads_as is None and padded:
            return (
                f"{self.name} data stored one element per byte cannot be exported in a legacy 'dltensor' capsule "
                "(it has no IS_SUBBYTE_TYPE_PADDED flag); the consumer must ask for max_version=(1, 2) or newer"
            )
        return None

    def __dlpack_data_type__(self) -> tuple[int, int, int]:
        """``(code, bits, lanes)``: the DLPack data type protocol (dmlc/dlpack#172), which tvm-ffi and Paddle read
        from any dtype object."""
        return int(self.code), self.bits, self.lanes

    def nbytes(self, count: int, *, padded: bool = False) -> int:
        """Bytes that ``count`` elements take: sub-byte types are packed unless ``padded``."""
        if self.bits * self.lanes % 8 == 0 or padded:
            return count * self.itemsize
        return (count * self.bits * self.lanes + 7) // 8

    @property
    def format(self) -> str:
        """The buffer-protocol format string; ValueError for types the buffer protocol cannot express."""
        fmt = DTYPE_FORMATS.get((self.code, self.bits))
        if fmt is None or self.lanes != 1:
            raise ValueError(f"{self.name} has no buffer-protocol format")
        return fmt

    @property
    def typestr(self) -> str:
        """The array interface's typestr (v3: byte order, kind, size in bytes: ``"<f4"``, ``"|b1"``); ValueError
        for types it cannot express (those without a buffer-protocol :attr:`format`)."""
        self.format  # noqa: B018 (its ValueError: no format, no typestr)
        size = self.bits // 8
        return f"{'|' if size == 1 else _NATIVE}{_KIND_OF_CODE[self.code]}{size}"

    def to_numpy(self) -> Any:
        """The numpy dtype (``ml_dtypes`` supplies bfloat16 and the fp8/fp6/fp4 types)."""
        import numpy as np

        if self.lanes != 1:  # a vector type: each element is a sub-array of `lanes` scalars
            return np.dtype((DType(self.code, self.bits).to_numpy(), (self.lanes,)))
        fmt = DTYPE_FORMATS.get((self.code, self.bits))
        if fmt is not None:
            return np.dtype({"Zf": "complex64", "Zd": "complex128"}.get(fmt, fmt))
        name = DTYPE_NAMES.get((self.code, self.bits))
        if name is not None:
            try:
                import ml_dtypes
            except ImportError:
                raise ValueError(f"{self.name} needs ml_dtypes: pip install ml_dtypes") from None
            if hasattr(ml_dtypes, name):
                return np.dtype(getattr(ml_dtypes, name))
        if self.code not in _KNOWN_CODES:  # a code newer than this runtime's header, carried by number
            raise BufferError(
                f"numpy has no dtype for {self.name}: this {_PACKAGE}'s DLPack header does not name code {self.code} "
                "(a header bump would name it)"
            )
        raise ValueError(f"numpy has no dtype for {self.name}")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"{_PACKAGE}.DType({self.name})"


#: The dtypes whose bool encodings the consumer and the planner translate between (adapters.toml
#: ``export.bool``/``import.bool``): DLPack's bool, a uint8 labelled bool, a legacy 1-bit uint.
#: (code -1, which no tensor has, when the header has no kDLBool: before DLPack 0.8)
BOOL = DType(getattr(_C, "kDLBool", -1), 8)
UINT8 = DType(_C.kDLUInt, 8)
UINT1 = DType(_C.kDLUInt, 1)


def _name(code: int, bits: int) -> str:
    name = DTYPE_NAMES.get((code, bits))
    if name is not None:
        return name
    pattern = DTYPE_CODE_PATTERNS.get(code)
    if pattern is not None and DTYPE_CODE_WIDTHS[code] is None:  # every width has a name
        return pattern.replace("{bits}", str(bits))
    try:
        code_name = DataTypeCode(code).name
    except ValueError:  # a code newer than this runtime's header: carried, named by its number
        code_name = f"code {code}"
    return f"{code_name}:{bits}"


def lookup(name: str) -> DType:
    """``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"`` -> DType."""
    key = DTYPE_BY_NAME.get(name)
    if key is not None:
        return DType(*key)
    for code, pattern in DTYPE_CODE_PATTERNS.items():  # codes whose every width has a name
        prefix, _, suffix = pattern.partition("{bits}")
        if DTYPE_CODE_WIDTHS[code] is None and name.startswith(prefix) and name.endswith(suffix):
            width = name[len(prefix) : len(name) - len(suffix)]
            if width.isdigit() and int(width) > 0:
                return DType(code, int(width))
    said = suggestion(name, DTYPE_BY_NAME)
    raise ValueError(f"unknown DLPack dtype name {name!r}{said}; known: {', '.join(sorted(DTYPE_BY_NAME))}")


def named_in(dtype: DType, patterns: Iterable[str]) -> bool:
    """Whether ``dtype``'s name matches one of ``patterns`` (fnmatch, as spec/adapters.toml writes the dtypes a
    system lacks: ``"float8_*"``); a width without a name is spelled by its code's name pattern for this
    (``complex32``, torch's chalf, which ``"complex*"`` matches)."""
    from fnmatch import fnmatchcase  # here: `re` is not imported when the runtime loads

    name, pattern = dtype.name, DTYPE_CODE_PATTERNS.get(dtype.code)
    lanes = "" if dtype.lanes == 1 else f"x{dtype.lanes}"  # as the name says them
    spelled = pattern.replace("{bits}", str(dtype.bits)) + lanes if pattern is not None else name
    return any(fnmatchcase(name, p) or fnmatchcase(spelled, p) for p in patterns)


class DTypeSet(dict[tuple[int, int, int], bool]):
    """The dtypes whose names match fnmatch patterns (:func:`named_in`), as spec/adapters.toml writes those a
    system lacks, and, where ``only`` names some, every dtype it does not name: ``lacked[(code, bits, lanes)]``
    (a :class:`DType` is such a key) says whether a dtype is one. Each dtype's answer is worked out the first
    time it is asked and kept, so a later lookup is a dict's (its length: the dtypes asked so far)."""

    __slots__ = ("only", "patterns")

    def __init__(self, patterns: Iterable[str] = (), only: Iterable[str] | None = None) -> None:
        super().__init__()
        self.patterns = tuple(patterns)
        self.only = frozenset(only) if only is not None else None

    def __missing__(self, dtype: tuple[int, int, int]) -> bool:
        d = DType(*dtype)
        found = self[dtype] = named_in(d, self.patterns) or (self.only is not None and d.name not in self.only)
        return found

    def __repr__(self) -> str:
        only = "" if self.only is None else f", only={sorted(self.only)!r}"
        return f"DTypeSet({list(self.patterns)!r}{only})"


def pairs_named_in(patterns: Iterable[str]) -> tuple[tuple[int, int], ...]:
    """The ``(code, bits)`` of the dtypes whose names match ``patterns`` (:func:`named_in`), among those a tensor
    may have at import, in order."""
    patterns = tuple(patterns)
    widths = sorted((code, found) for code, found in DTYPE_ACCEPTED_WIDTHS.items() if found is not None)
    return tuple(
        (code, bits) for code, found in widths for bits in sorted(found) if named_in(DType(code, bits), patterns)
    )


_FORMAT_CACHE: dict[str, DType] = {}


def from_format(fmt: str) -> DType:
    """Buffer-protocol format -> DType; non-native byte order is refused (DLPack data is native-endian)."""
    cached = _FORMAT_CACHE.get(fmt)
    if cached is not None:
        return cached
    body = fmt
    if body[:1] in "@=<>!":
        order, body = body[0], body[1:]
        if (order in ">!" and _NATIVE != ">") or (order == "<" and _NATIVE != "<"):
            raise BufferError(f"format {fmt!r} is not native-endian: DLPack data must be native-endian")
    key = FORMAT_DTYPES.get(body)
    if key is None:
        raise BufferError(f"buffer format {fmt!r} has no DLPack dtype")
    result = _FORMAT_CACHE[fmt] = DType(*key)
    return result


def from_numpy(dtype: Any) -> DType:
    """numpy dtype (or anything ``numpy.dtype`` accepts) -> DType."""
    import numpy as np

    dt = np.dtype(dtype)
    if dt.byteorder not in ("=", "|") and dt.byteorder != _NATIVE:
        raise BufferError(f"dtype {dt} is not native-endian: DLPack data must be native-endian")
    if dt.name in DTYPE_BY_NAME:  # builtin names, and ml_dtypes' (float8_e5m2 even claims kind 'f')
        code, bits = DTYPE_BY_NAME[dt.name]
        return DType(code, bits)
    kind_code = _NUMPY_KINDS.get(dt.kind)
    if kind_code is not None and dt.fields is None:
        widths = DTYPE_ACCEPTED_WIDTHS.get(kind_code)
        if widths is None or dt.itemsize * 8 in widths:  # float8_* of ml_dtypes before its codes: no float:8
            return DType(kind_code, dt.itemsize * 8)
    raise BufferError(f"numpy dtype {dt} has no DLPack equivalent")
