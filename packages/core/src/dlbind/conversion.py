"""``dlbind.convert``: hand an array from one library to another, zero-copy whenever the spec allows,
by the fastest correct route, with each library's known deviations bridged.

One walk, top to bottom: the plan (:mod:`dlbind.planner`: the target's route, and the decision for the
producer's type, the target and the device the data is on), the exchange, the bridge
(:mod:`dlbind.bridges`), the target. The decisions:

- the producer is already the target's array: itself (``copy=True``: the target's copy);
- stream-free memory (the host): the target's array type has a DLPack 1.3 exchange table (torch): the
  source's table or its ``__dlpack__`` gives a ``DLManagedTensorVersioned`` that the target's
  ``managed_tensor_to_py_object_no_sync`` turns into its array, in C (compiled build); a verified target
  without a table that asks for versioned capsules (numpy) gets that struct through its ``from_dlpack``,
  handed over in C. Otherwise the data is imported as a :class:`dlbind.Tensor` (zero-copy) and handed to
  the target's importer after bridging what the target gets wrong (``spec/adapters.toml``);
- a device with streams (CUDA, ROCm), nothing that could need a bridge: the producer goes straight to the
  target's importer — one exchange, which the target asks on its own current stream;
- a device with streams, a bridge possible: a :class:`dlbind.bridges.Relay` goes to the target's importer;
  asked on the target's stream, it imports the producer on that same stream, copies on the device where
  the target cannot take the data as it is (read-only data for an importer that ignores the flag,
  negative strides for torch, ...), ordered on that stream, and answers;
- memory the target's importer refuses but its ``__cuda_array_interface__`` importer takes (pinned and
  managed memory for CuPy): through that interface;
- device memory the target cannot import: a host copy first, at bus speed (the device's backend);
- otherwise a ``BufferError`` naming why.
"""

from __future__ import annotations

from typing import Any

from dlbind import consumer
from dlbind._ffi import native
from dlbind._libraries import lasting
from dlbind.bridges import Relay, bridged, capsule_for_target, copied_in, import_on, keywords
from dlbind.devices import HOST_ACCESSIBLE, device_name, parse_device, producer_device, stream_free
from dlbind.planner import (
    C_DIRECT,
    C_ROUTES,
    DIRECT,
    HOST,
    HOST_COPY,
    INTERFACE,
    REFUSE,
    RELAY,
    ROUTES,
    SAME,
    Route,
    decide,
    plan,
)
from dlbind.plans import export_plan, library_export
from dlbind.producer import Exporter, asdlpack
from dlbind.tensor import Tensor

# the dispatching from_dlpack: C for the common call in the compiled build
from_dlpack = native.from_dlpack if native is not None else consumer.from_dlpack

__all__ = ["compat", "convert"]

_CPU = parse_device("cpu")


def convert(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """``x`` (any DLPack producer) as an array of library ``to`` (a name, module or array type).

    Zero-copy whenever the spec allows; ``device``/``copy`` as in the array API's ``from_dlpack``;
    ``stream`` is the stream the result will be used on (the consumer's): the producer's work is ordered
    before it. Without it, the target's own current stream is (it asks the producer itself).
    """
    route = ROUTES.get((to,)) if isinstance(to, str) else None
    # dlbind.convert (compiled) tried the C route of a name it knows before calling here: not twice
    tried = route is not None and type(to) is str and to in C_ROUTES
    if route is None:
        route = plan(to)
    try:
        if copy is not None and not isinstance(copy, bool):
            raise TypeError(f"copy must be None, True or False, not {copy!r}")
        source = export_plan(type(x))
        if not hasattr(x, "__dlpack__") and hasattr(x, "__cuda_array_interface__"):
            x = asdlpack(x)  # dlbind's own producer of it, which knows its device and the stream its data is on
            source = export_plan(type(x))
        # stream-free host memory, or a system exporting through a function of its own: no device to ask
        here = _CPU if source.host_only or not hasattr(x, "__dlpack__") else producer_device(x)
        decision = decide(source, route, here[0])
        kind = decision.kind
        if kind == SAME:  # the target's own array: itself, or what the target's own importer makes of it
            if not copy and stream is None and (device is None or parse_device(device) == here):
                return x
            kwargs, copy_here = keywords(route, here, device, copy)
            if not copy_here and stream is None:
                return route.from_dlpack(x, **kwargs)
            kind = HOST if stream_free(here[0]) else RELAY
        if device is not None and here[0] not in HOST_ACCESSIBLE and parse_device(device)[0] in HOST_ACCESSIBLE:
            kind = HOST  # the host asked for: the producer's host copy (or the backend's), then the host routes
        if kind == HOST:
            return _host(x, route, here, device, copy, stream, tried)
        if kind == REFUSE:
            raise BufferError(f"dlbind.convert cannot give {route.adapter.name} {_described(x)}: {decision.why}")
        if kind == HOST_COPY:
            if copy is False:
                raise BufferError(f"{decision.why}: the data needs a host copy, and copy=False forbids it")
            tensor = from_dlpack(x, device="cpu", copy=True, stream=stream)
            return bridged(route, tensor, None, None)
        if kind == INTERFACE:
            return _interface(x, route, here, device, copy, stream)
        kwargs, copy_here = keywords(route, here, device, copy)
        if kind == DIRECT and not copy_here and stream is None:
            if not kwargs and type(to) is str and type(x) not in C_DIRECT.get(to, ()) and lasting(type(x)):
                C_DIRECT.setdefault(to, {})[type(x)] = (int(here[0]), route.from_dlpack)  # the compiled convert: C
            return route.from_dlpack(x, **kwargs)  # one exchange, asked on the target's own stream
        relay = Relay(x, route, here, stream, copy_here)
        if route.adapter.takes != "producer":
            return route.from_dlpack(capsule_for_target(route, relay, here[1]), **kwargs)
        return route.from_dlpack(relay, **kwargs)
    except _PASSED_ON:
        raise
    except Exception as exc:
        raise target_error(x, route.adapter.name, exc, device) from exc


def _host(x: Any, route: Route, here: Any, device: Any, copy: bool | None, stream: int | None, tried: bool) -> Any:
    """The routes of stream-free memory: C where they apply (compiled build, host data), else a zero-copy Tensor
    bridged in Python. Device memory the target cannot import, or the host asked for by ``device=``, is copied
    to the host first (by the producer, which knows its device, or the device's backend). Whether it is, is
    decided from ``here`` (the producer's device) before the producer is asked: it is asked once."""
    plain = device is None and copy is None and stream is None
    kind = int(here[0])  # the int: no DeviceType made on every convert
    on_host = kind in HOST_ACCESSIBLE
    if plain and on_host and native is not None and not tried:
        if route.table_type is not None:
            out = native.convert_to(x, route.table_type, route.refuse)
        elif route.handover_type is not None:
            out = native.convert_to(x, route.handover_type, route.refuse, route.from_dlpack)
        else:
            out = NotImplemented
        if out is not NotImplemented:
            return out
    copy_in = kind in route.copy_from and kind not in route.imports
    if device is not None:
        host = not on_host and parse_device(device)[0] in HOST_ACCESSIBLE
    else:
        host = not copy_in and device_name(kind) not in route.adapter.devices
        if host and "cpu" not in route.adapter.devices:
            raise BufferError(f"{route.adapter.name} imports from {', '.join(route.adapter.devices)} only")
    if host:
        if copy is False:
            raise BufferError(
                f"{route.adapter.name} needs a host copy of {device_name(kind)} data, and copy=False forbids it"
            )
        tensor, copy = from_dlpack(x, device=device or "cpu", stream=stream), None
    else:
        tensor = x if type(x) is Tensor and stream is None else from_dlpack(x, stream=stream)
        if tensor._device_type != kind:  # a source whose device is not asked first (an export function of its own)
            return _host(tensor, route, tensor.device, device, copy, None, True)  # decided again, for dlbind's Tensor
        copy_in = kind in route.copy_from and kind not in route.imports
        if copy_in and (device is None or parse_device(device)[0] in route.imports):
            return copied_in(route, tensor, device, copy)  # onto its device, by its own constructor
    if plain and not route.bridges and tensor._lanes == 1:
        return route.from_dlpack(tensor)
    return bridged(route, tensor, device, copy)


def _interface(x: Any, route: Route, here: Any, device: Any, copy: bool | None, stream: int | None) -> Any:
    """Memory the target imports through ``__cuda_array_interface__`` (``import.interface``): a Tensor of it,
    ready on the target's current stream where its row names that (else on the stream given, or the device's
    default), whose interface says that stream, so the target orders its own after it."""
    if device is not None and parse_device(device) != here:
        raise BufferError(f"{route.adapter.interface_function} takes the data where it is, not on {device}")
    if copy is False and route.adapter.copy == "always":
        raise BufferError(f"{route.adapter.name} copies on every import, and copy=False forbids it")
    on = stream
    if on is None and route.stream_of is not None and here[0] not in HOST_ACCESSIBLE:
        on = route.stream_of(here[1])
    tensor = from_dlpack(x) if stream_free(here[0]) else import_on(x, on)
    if copy:
        tensor = tensor.copy()
    return route.interface(tensor)


# what a target may raise as it is; anything else it raises becomes a BufferError naming it
_PASSED_ON = (BufferError, TypeError, ValueError, MemoryError, SystemError)


def target_error(x: Any, to: str, exc: BaseException, device: Any = None) -> BaseException:
    """The exception :func:`convert` raises when target ``to`` failed to import ``x`` with ``exc``.

    A target's own refusal of what it cannot import (a device, dtype or layout it lacks) comes as its
    ``RuntimeError``, ``AssertionError``, ...; the spec's type for it is ``BufferError``, naming the
    target, the device asked for (``device=``, when given: what the user asked, beside where the data is)
    and keeping the original as ``__cause__``. The spec's own types pass unchanged. Called by the compiled
    build's convert too (which takes no ``device=``).
    """
    if isinstance(exc, _PASSED_ON) or not isinstance(exc, Exception):
        return exc
    name = ROUTES[(to,)].adapter.name if (to,) in ROUTES else to
    first = str(exc).strip().partition("\n")[0]  # torch appends a C++ backtrace
    asked = "" if device is None else f" to device={device!r}"
    err = BufferError(f"{name} cannot import {_described(x)}{asked}: {type(exc).__name__}: {first}")
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
