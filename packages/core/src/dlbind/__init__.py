"""dlbind: the Python binding to DLPack, generated from ``dlpack.h``.

Importing dlbind loads no array library and no device backend.

PYTEST_DONT_REWRITE: dlbind ships a pytest plugin (``dlbind.testing.pytest_plugin``), so pytest marks the
package for assertion rewriting in every run; this marker lets ``import dlbind`` come before an in-process
``pytest.main()`` without a PytestAssertRewriteWarning (an error under ``filterwarnings = error``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dlbind import _wiring, exchange
from dlbind._backends import backends
from dlbind._ffi import native as _native
from dlbind._generated import enums as _enums

# The header's enums, flags and constants (DLPACK_VERSION, DeviceType, DataTypeCode, Flags,
# DLPACK_FLAG_BITMASK_*, ...): all of them, whichever header version the runtime is generated from.
from dlbind._generated.enums import *  # noqa: F403
from dlbind.consumer import from_dlpack
from dlbind.dtypes import DType
from dlbind.producer import Exporter, asdlpack, from_pointer
from dlbind.tensor import Tensor

if TYPE_CHECKING:  # imported on first use (__getattr__ below), not at `import dlbind`
    from dlbind import spec
    from dlbind.conversion import compat, convert

__version__ = "0.1.0"

# DLPack 1.3: consumers find dlbind's C exchange table on the type (when the header declares the API).
_table = exchange.table()
if _table is not None:
    Tensor.__dlpack_c_exchange_api__ = _table

# The compiled build answers the common calls in C and hands every other case to the Python
# implementations imported above (same signatures, same errors).
_wiring.configure()
if _native is not None:
    asdlpack = _native.asdlpack
    from_dlpack = _native.from_dlpack
    convert = _native.convert


def __getattr__(name: str) -> Any:
    """What ``import dlbind`` leaves for first use (it needs none of it): ``spec`` (the per-version tables),
    ``compat`` and, in the pure build, ``convert`` (the planner and the rows of ``spec/adapters.toml``)."""
    import importlib

    if name == "spec":
        return importlib.import_module(".spec", __name__)  # relative: a vendored copy imports its own
    if name in ("compat", "convert"):
        conversion = importlib.import_module(".conversion", __name__)
        value = getattr(conversion, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dlbind' has no attribute {name!r}")

__all__ = [
    "DType",
    "Exporter",
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
__all__ += _enums.__all__


def ffi_build() -> str:
    """Which cffi build is loaded: ``"compiled"`` (API mode) or ``"pure"`` (ABI mode, no compiler)."""
    from dlbind._ffi import BUILD

    return BUILD
