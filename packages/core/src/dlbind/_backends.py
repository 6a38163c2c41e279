"""Device backends: found through the ``dlbind.backends`` entry-point group, loaded on first need.

A backend distribution (``dlbind-cuda``, ``dlbind-rocm``, ...) registers an object that has
``device_types`` (the DLPack device types it serves) and ``wait(producer_stream, consumer_stream,
device)`` (make the consumer's stream wait for the producer's work). The core only routes: it never
imports a backend at ``import dlbind`` time, and it says which distribution to install when one is
missing.
"""

from __future__ import annotations

from typing import Any

from dlbind._generated.tables import DEVICE_BACKENDS
from dlbind.devices import device_name

GROUP = "dlbind.backends"
# Which distribution serves which device type (for the "install ..." hint): spec/devices.toml.
DISTRIBUTIONS = DEVICE_BACKENDS
_LOADED: dict[str, Any] = {}
_ERRORS: dict[str, str] = {}


def _scan() -> None:
    if _LOADED or _ERRORS:
        return
    from importlib.metadata import entry_points

    for ep in entry_points(group=GROUP):
        try:
            _LOADED[ep.name] = ep.load()
        except Exception as exc:  # a broken or unusable backend is reported, not fatal
            _ERRORS[ep.name] = f"{type(exc).__name__}: {exc}"


def backends() -> dict[str, str]:
    """Installed backends and their state: ``"ok"`` or why the backend cannot load."""
    _scan()
    return {**{name: "ok" for name in _LOADED}, **_ERRORS}


def for_device(device_type: int) -> Any:
    """The loaded backend serving ``device_type``; BufferError naming what to install otherwise."""
    _scan()
    for backend in _LOADED.values():
        if device_type in getattr(backend, "device_types", ()):
            return backend
    name = DISTRIBUTIONS.get(device_type)
    hint = f"pip install 'dlbind[{name}]'" if name else "no dlbind backend exists for it yet"
    problem = f" (dlbind-{name} is installed but failed: {_ERRORS[name]})" if name in _ERRORS else ""
    raise BufferError(f"synchronising {device_name(device_type)} streams needs a dlbind backend: {hint}{problem}")
