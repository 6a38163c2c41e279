"""Picks the cffi build; nothing else in dlbind knows which one is loaded.

* ``compiled``: the API-mode extension ``dlbind._api``, built from the generated
  ``_generated/build_api.py`` when the core is installed with a C compiler.
* ``pure``: the generated ABI-mode module ``dlbind._generated._abi``; used when the extension is
  absent or ``DLBIND_PURE=1`` is set.

Both expose the same ``ffi`` (types, ``sizeof``, ``offsetof``, ``new``, ``cast``).
"""

from __future__ import annotations

import os
from typing import Any

ffi: Any
#: The compiled module with the fast-path functions (``export``, ``take``, ...), or None (pure build).
native: Any = None
BUILD: str

if os.environ.get("DLBIND_PURE", "") not in ("", "0"):
    from dlbind._generated._abi import ffi

    BUILD = "pure"
else:
    try:
        from dlbind import _api as native  # type: ignore[attr-defined,no-redef,unused-ignore]
    except ImportError:
        from dlbind._generated._abi import ffi

        BUILD = "pure"
    else:
        if native.lib.dlbind_install() != 0:  # pragma: no cover - registers plain CPython functions
            raise ImportError("dlbind._api could not register its functions")
        ffi = native.ffi
        BUILD = "compiled"

__all__ = ["BUILD", "ffi", "native"]
