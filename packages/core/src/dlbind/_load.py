"""How a module of dlbind imported on its own gets the runtime loaded.

``import dlbind`` loads nothing of the runtime (its names load on first use), so a module imported
directly (``import dlbind.consumer``) may find the compiled fast path not yet wired to the Python layers.
The package sets :data:`loader`; the lower layers call :func:`ensure` where they need the wiring (the C
fast path does so through the function :mod:`dlbind._ffi` hands it). Imports nothing: it sits at the
bottom, so that the layers below the package may call up through it without importing it.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

#: The package's loader (``dlbind._load_runtime``) until the runtime is loaded; then None.
loader: "Any" = None
#: True while the loader runs (a call from inside it returns at once).
loading = False


def ensure() -> None:
    """Load and wire the runtime if the package has not yet done so."""
    if loader is not None:
        loader()
