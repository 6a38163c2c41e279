"""DLPack data types: ``(code, bits, lanes)`` with names, numpy and buffer-format conversions.

Everything here is tables (built from the generated :class:`~dlbind.DataTypeCode`), not branches.
numpy and ml_dtypes are imported only when a conversion asks for them.
"""

from __future__ import annotations

import sys
from typing import Any, NamedTuple

from dlbind._generated.enums import DataTypeCode

__all__ = [
    "DType",
    "byte_size",
    "from_format",
    "from_numpy",
    "lookup",
]

_C = DataTypeCode

# (code, bits) -> canonical short name. Sub-byte float names follow ml_dtypes.
_NAMES: dict[tuple[int, int], str] = {  # keys are (int code, bits)
    (_C.kDLBool, 8): "bool",
    **{(_C.kDLInt, b): f"int{b}" for b in (8, 16, 32, 64)},
    **{(_C.kDLUInt, b): f"uint{b}" for b in (8, 16, 32, 64)},
    **{(_C.kDLFloat, b): f"float{b}" for b in (16, 32, 64)},
    (_C.kDLBfloat, 16): "bfloat16",
    (_C.kDLComplex, 64): "complex64",
    (_C.kDLComplex, 128): "complex128",
    **{
        (member, int(member.name[len("kDLFloat") :].split("_")[0])): "float" + member.name[len("kDLFloat") :]
        for member in DataTypeCode
        if member.name.startswith(("kDLFloat8_", "kDLFloat6_", "kDLFloat4_"))
    },
}
_BY_NAME = {name: key for key, name in _NAMES.items()}

# Buffer-protocol format characters (native, standard sizes on every supported platform).
_FORMATS: dict[str, tuple[int, int]] = {
    "?": (_C.kDLBool, 8),
    "b": (_C.kDLInt, 8), "B": (_C.kDLUInt, 8), "c": (_C.kDLUInt, 8),
    "h": (_C.kDLInt, 16), "H": (_C.kDLUInt, 16),
    "i": (_C.kDLInt, 32), "I": (_C.kDLUInt, 32),
    "l": (_C.kDLInt, 64), "L": (_C.kDLUInt, 64),
    "q": (_C.kDLInt, 64), "Q": (_C.kDLUInt, 64),
    "n": (_C.kDLInt, 64), "N": (_C.kDLUInt, 64),
    "e": (_C.kDLFloat, 16), "f": (_C.kDLFloat, 32), "d": (_C.kDLFloat, 64),
    "Zf": (_C.kDLComplex, 64), "Zd": (_C.kDLComplex, 128),
}  # fmt: skip
_TO_FORMAT: dict[tuple[int, int], str] = {
    (_C.kDLBool, 8): "?",
    (_C.kDLInt, 8): "b", (_C.kDLUInt, 8): "B", (_C.kDLInt, 16): "h", (_C.kDLUInt, 16): "H",
    (_C.kDLInt, 32): "i", (_C.kDLUInt, 32): "I", (_C.kDLInt, 64): "q", (_C.kDLUInt, 64): "Q",
    (_C.kDLFloat, 16): "e", (_C.kDLFloat, 32): "f", (_C.kDLFloat, 64): "d",
    (_C.kDLComplex, 64): "Zf", (_C.kDLComplex, 128): "Zd",
}  # fmt: skip
_NATIVE = "<" if sys.byteorder == "little" else ">"
# numpy's dtype.kind -> DLPack code for the builtin kinds
_NUMPY_KINDS: dict[str, int] = {"b": _C.kDLBool, "i": _C.kDLInt, "u": _C.kDLUInt, "f": _C.kDLFloat, "c": _C.kDLComplex}


class DType(NamedTuple):
    """A DLPack ``DLDataType``: type code, bits per lane, lanes (a named tuple: ``code, bits, lanes = dt``)."""

    code: int
    bits: int
    lanes: int = 1

    @property
    def name(self) -> str:
        base = _NAMES.get((self.code, self.bits))
        if base is None:
            try:
                code_name = DataTypeCode(self.code).name
            except ValueError:
                code_name = f"code{self.code}"
            base = f"{code_name}:{self.bits}"
        return base if self.lanes == 1 else f"{base}x{self.lanes}"

    @property
    def is_subbyte(self) -> bool:
        return self.bits < 8

    @property
    def itemsize(self) -> int:
        """Bytes per element when each element fills whole bytes (packed sub-byte types: 1)."""
        return max(1, (self.bits * self.lanes + 7) // 8)

    def nbytes(self, count: int, *, padded: bool = False) -> int:
        """Bytes that ``count`` elements take: sub-byte types are packed unless ``padded``."""
        if self.bits * self.lanes % 8 == 0 or padded:
            return count * self.itemsize
        return (count * self.bits * self.lanes + 7) // 8

    @property
    def format(self) -> str:
        """The buffer-protocol format string; ValueError for types the buffer protocol cannot express."""
        fmt = _TO_FORMAT.get((self.code, self.bits))
        if fmt is None or self.lanes != 1:
            raise ValueError(f"{self.name} has no buffer-protocol format")
        return fmt

    def to_numpy(self) -> Any:
        """The numpy dtype (``ml_dtypes`` supplies bfloat16 and the fp8/fp6/fp4 types)."""
        import numpy as np

        if self.lanes != 1:  # a vector type: each element is a sub-array of `lanes` scalars
            return np.dtype((DType(self.code, self.bits).to_numpy(), (self.lanes,)))
        fmt = _TO_FORMAT.get((self.code, self.bits))
        if fmt is not None:
            return np.dtype({"Zf": "complex64", "Zd": "complex128"}.get(fmt, fmt))
        name = _NAMES.get((self.code, self.bits))
        if name is not None:
            try:
                import ml_dtypes
            except ImportError:
                raise ValueError(f"{self.name} needs ml_dtypes: pip install ml_dtypes") from None
            if hasattr(ml_dtypes, name):
                return np.dtype(getattr(ml_dtypes, name))
        raise ValueError(f"numpy has no dtype for {self.name}")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"dlbind.DType({self.name})"


INT64_MAX = 2**63 - 1


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
    nbytes = dtype.nbytes(size, padded=padded)
    if nbytes > INT64_MAX:
        raise BufferError(f"{size} elements of {dtype.name} do not fit in int64 bytes")
    return nbytes


def lookup(name: str) -> DType:
    """``"float32"``, ``"bfloat16"``, ``"float8_e4m3fn"`` -> DType."""
    try:
        code, bits = _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown DLPack dtype name {name!r}; known: {', '.join(sorted(_BY_NAME))}") from None
    return DType(code, bits)


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
    key = _FORMATS.get(body)
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
    if dt.name in _BY_NAME:  # builtin names, and ml_dtypes' (float8_e5m2 even claims kind 'f')
        code, bits = _BY_NAME[dt.name]
        return DType(code, bits)
    kind_code = _NUMPY_KINDS.get(dt.kind)
    if kind_code is not None and dt.fields is None:
        return DType(kind_code, dt.itemsize * 8)
    raise BufferError(f"numpy dtype {dt} has no DLPack equivalent")
