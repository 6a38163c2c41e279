"""dlbind: the Python binding to DLPack, generated from ``dlpack.h``.

Importing dlbind loads no array library and no device backend.
"""

from __future__ import annotations

from dlbind import _wiring, exchange, spec
from dlbind._backends import backends
from dlbind._ffi import native as _native
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
from dlbind.consumer import from_dlpack
from dlbind.conversion import compat, convert
from dlbind.dtypes import DType
from dlbind.producer import Exporter, asdlpack, from_pointer
from dlbind.tensor import Tensor

__version__ = "0.1.0"

# DLPack 1.3: consumers find dlbind's C exchange table on the type.
Tensor.__dlpack_c_exchange_api__ = exchange.table()

# The compiled build answers the common calls in C and hands every other case to the Python
# implementations imported above (same signatures, same errors).
_wiring.configure()
if _native is not None:
    asdlpack = _native.asdlpack
    from_dlpack = _native.from_dlpack
    convert = _native.convert

__all__ = [
    "DLPACK_FLAG_BITMASK_IS_COPIED",
    "DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED",
    "DLPACK_FLAG_BITMASK_READ_ONLY",
    "DLPACK_MAJOR_VERSION",
    "DLPACK_MINOR_VERSION",
    "DLPACK_VERSION",
    "DType",
    "DataTypeCode",
    "DeviceType",
    "Exporter",
    "Flags",
    "Tensor",
    "__version__",
    "asdlpack",
    "backends",
    "compat",
    "convert",
    "ffi_build",
    "from_dlpack",
    "from_pointer",
    "spec",
]


def ffi_build() -> str:
    """Which cffi build is loaded: ``"compiled"`` (API mode) or ``"pure"`` (ABI mode, no compiler)."""
    from dlbind._ffi import BUILD

    return BUILD
