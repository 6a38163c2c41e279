"""``dlbind.convert``: hand an array from one library to another, zero-copy whenever the spec allows,
by the fastest correct route, with each library's known deviations bridged.

Routes, tried in order:

1. ``x`` is already of the target library (and no device/copy asked): ``x`` itself.
2. The target's array type has a DLPack 1.3 exchange table (torch): the source's table or its
   ``__dlpack__`` gives a ``DLManagedTensorVersioned`` that the target's
   ``managed_tensor_to_py_object_no_sync`` turns into its array, in C (compiled build). A verified
   target without a table that asks for versioned capsules (numpy) gets that struct through its
   ``from_dlpack`` instead, handed over in C by a minimal producer (compiled build).
3. Otherwise ``x`` is imported as a :class:`dlbind.Tensor` (zero-copy) and handed to the target's
   ``from_dlpack``, after bridging what the target gets wrong (``spec/adapters.toml``):
   read-only data for consumers that never ask for versioned capsules (a legacy capsule is served
   when the consumer's arrays are immutable, a copy otherwise) or that import it writable (a copy,
   unless ``copy=False``), negative strides for consumers that crash on them (a copy), keywords the
   target's ``from_dlpack`` does not take.

The planning (which library, which route, which bridges) is :mod:`dlbind.planner`'s.
"""

from __future__ import annotations

from typing import Any

from dlbind import consumer
from dlbind._ffi import native
from dlbind._libraries import library_export
from dlbind.devices import HOST_ACCESSIBLE, device_name, parse_device
from dlbind.planner import C_ROUTES, ROUTES, bridged, library_of, plan
from dlbind.producer import Exporter, asdlpack
from dlbind.tensor import Tensor

# the dispatching from_dlpack: C for the common call in the compiled build
from_dlpack = native.from_dlpack if native is not None else consumer.from_dlpack

__all__ = ["compat", "convert"]


def convert(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """``x`` (any DLPack producer) as an array of library ``to`` (a name, module or array type).

    Zero-copy whenever the spec allows; ``device``/``copy`` as in the array API's ``from_dlpack``;
    ``stream`` is the consumer's stream for synchronisation.
    """
    route = ROUTES.get((to,)) if isinstance(to, str) else None
    # dlbind.convert (compiled) tried the C route of a name it knows before calling here: not twice
    tried = route is not None and type(to) is str and to in C_ROUTES
    if route is None:
        route = plan(to)
    try:
        plain = device is None and copy is None and stream is None
        if plain:
            lib = library_of(x)
            if lib is not None and lib.name == route.adapter.name:
                return x
            if native is not None and not tried:
                if route.table_type is not None:
                    out = native.convert_to(x, route.table_type, route.refuse)
                elif route.handover_type is not None:
                    out = native.convert_to(x, route.handover_type, route.refuse, route.from_dlpack)
                else:
                    out = NotImplemented
                if out is not NotImplemented:
                    return out
        tensor = x if type(x) is Tensor and stream is None else from_dlpack(x, stream=stream)
        # host memory of device data is the producer's to make (dl_device: it knows its device), when
        # device= names the host or, without device=, when the target cannot import from that device
        kind = tensor._device_type  # the int: no DeviceType made on every convert
        here = device_name(kind)
        if device is not None:
            host = kind not in HOST_ACCESSIBLE and parse_device(device)[0] in HOST_ACCESSIBLE
        else:
            host = here not in route.adapter.devices
            if host and "cpu" not in route.adapter.devices:
                raise BufferError(f"{route.adapter.name} imports from {', '.join(route.adapter.devices)} only")
        if host:
            if copy is False:
                raise BufferError(f"{route.adapter.name} needs a host copy of {here} data, and copy=False forbids it")
            tensor, copy = from_dlpack(x, device=device or "cpu", stream=stream), None
        if plain and not route.bridges:
            return route.from_dlpack(tensor)
        return bridged(route, tensor, device, copy)
    except _PASSED_ON:
        raise
    except Exception as exc:
        raise target_error(x, route.adapter.name, exc) from exc


# what a target may raise as it is; anything else it raises becomes a BufferError naming it
_PASSED_ON = (BufferError, TypeError, ValueError, MemoryError, SystemError)


def target_error(x: Any, to: str, exc: BaseException) -> BaseException:
    """The exception :func:`convert` raises when target ``to`` failed to import ``x`` with ``exc``.

    A target's own refusal of what it cannot import (a device, dtype or layout it lacks) comes as its
    ``RuntimeError``, ``AssertionError``, ...; the spec's type for it is ``BufferError``, naming the
    target and keeping the original as ``__cause__``. The spec's own types pass unchanged. Called by
    the compiled build's convert too.
    """
    if isinstance(exc, _PASSED_ON) or not isinstance(exc, Exception):
        return exc
    name = ROUTES[(to,)].adapter.name if (to,) in ROUTES else to
    first = str(exc).strip().partition("\n")[0]  # torch appends a C++ backtrace
    err = BufferError(f"{name} cannot import {_described(x)}: {type(exc).__name__}: {first}")
    err.__cause__ = exc
    return err


def _described(x: Any) -> str:
    try:
        kind, index = x.__dlpack_device__()
        return f"a {type(x).__name__} on {device_name(int(kind))}:{int(index)}"
    except Exception:
        return f"a {type(x).__name__}"


def compat(x: Any) -> Any:
    """Wrap any producer so that it answers every keyword of the current spec correctly.

    Older producers (only ``stream``, no ``max_version``, no ``dl_device``/``copy``) are re-negotiated
    on every export; anything with a buffer or an array interface is exported directly.
    """
    if hasattr(x, "__dlpack__") and not isinstance(x, Exporter):
        return Exporter(None, x)
    given = library_export(x)  # a system exporting through a method or function of its own
    if given is not None:
        return consumer.import_library_export(x, given)
    return asdlpack(x)
