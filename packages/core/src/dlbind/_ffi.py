"""Picks the cffi build; nothing else in dlbind knows which one is loaded.

* ``compiled``: the API-mode extension ``dlbind._api`` (the generated declarations, built from
  ``_generated/build_api.py``) and the C extension ``dlbind._fastpath`` (the hot paths), both built
  when the core is installed with a C compiler. Used only when both import.
* ``pure``: the generated ABI-mode module ``dlbind._generated._abi``; used when either extension is
  absent or ``DLBIND_PURE=1`` is set.

Both expose the same ``ffi`` (types, ``sizeof``, ``offsetof``, ``new``, ``cast``).
"""

from __future__ import annotations

import os
from typing import Any

import dlbind._load as _load

ffi: Any
#: The C extension ``dlbind._fastpath`` (``export``, ``take``, ``TensorCore``, ...), or None (pure build).
native: Any = None
BUILD: str


def _compiled() -> tuple[Any, Any] | None:
    try:
        # the two extensions beside this module (a vendored copy's imports are re-rooted to its own package)
        import dlbind._api as api  # type: ignore[import-not-found]  # built at install: no source to check
        import dlbind._fastpath as fastpath
    except ImportError:
        return None
    if not hasattr(fastpath, "configure"):  # the C sources' folder (a namespace package), not the extension
        return None
    return api.ffi, fastpath


_found = None if os.environ.get("DLBIND_PURE", "") not in ("", "0") else _compiled()
if _found is None:
    from dlbind._generated._abi import ffi

    BUILD = "pure"
else:
    ffi, native = _found
    BUILD = "compiled"
    # the fast path, called before the package has wired it (a module of dlbind imported on its own),
    # loads the runtime through the package first
    native.set_loader(_load.ensure)

__all__ = ["BUILD", "ffi", "native"]
