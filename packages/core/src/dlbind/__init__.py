"""dlbind: the Python binding to DLPack, generated from ``dlpack.h``.

Importing dlbind is cheap: it loads the generated tables only; the cffi backend
(:mod:`dlbind._ffi`) loads on first use, and no array library is ever imported here.
"""

from __future__ import annotations

from dlbind import spec
from dlbind._generated.enums import (
    DLPACK_FLAG_BITMASK_IS_COPIED,
    DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED,
    DLPACK_FLAG_BITMASK_READ_ONLY,
    DLPACK_MAJOR_VERSION,
    DLPACK_MINOR_VERSION,
    DLPACK_VERSION,
    DataTypeCode,
    DeviceType,
    Flags,
)

__version__ = "0.1.0"

__all__ = [
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_MAJOR_VERSION",
    "DLPACK_MINOR_VERSION",
    "DLPACK_VERSION",
    "DataTypeCode",
    "DeviceType",
    "Flags",
    "__version__",
    "ffi_build",
    "spec",
]


def ffi_build() -> str:
    """Which cffi build is loaded: ``"compiled"`` (API mode) or ``"pure"`` (ABI mode, no compiler)."""
    from dlbind._ffi import BUILD

    return BUILD
