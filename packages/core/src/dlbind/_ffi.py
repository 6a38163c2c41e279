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
BUILD: str

if os.environ.get("DLBIND_PURE", "") not in ("", "0"):
    from dlbind._generated._abi import ffi

    BUILD = "pure"
else:
    try:
        from dlbind._api import ffi  # type: ignore[import-not-found,no-redef,unused-ignore]

        BUILD = "compiled"
    except ImportError:
        from dlbind._generated._abi import ffi

        BUILD = "pure"

__all__ = ["BUILD", "ffi"]
