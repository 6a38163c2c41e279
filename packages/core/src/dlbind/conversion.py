"""``dlbind.convert``: hand an array from one library to another, zero-copy whenever the spec allows,
by the fastest correct route, with each library's known deviations bridged.

One walk, top to bottom: the plan (:mod:`dlbind.routes`: the target's route, and the decision for the
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

from types import ModuleType
from typing import Any, NamedTuple

from dlbind._capi import PyCapsuleType
from dlbind._libraries import MISSING
from dlbind.bridges import bridge_of, described, importer_name, interface_copies, run
from dlbind.consumer import imported
from dlbind.devices import HOST_ACCESSIBLE, device_name, parse_device, producer_device, stream_free
from dlbind.producer import Exporter, asdlpack
from dlbind.routes import (
    C_DIRECT,
    C_ROUTES,
    DEVICE_ARG,
    DIRECT,
    HOST,
    HOST_COPY,
    INTERFACE,
    REFUSE,
    RELAY,
    ROUTES,
    ROUTES_BY_TYPE,
    SAME,
    Decision,
    Route,
    decide,
    route_to,
)
from dlbind.sources import ExportPlan, export_plan, help_for
from dlbind.tensor import Tensor

__all__ = ["Explanation", "compat", "convert", "explain"]

_CPU = parse_device("cpu")


def convert(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """``x`` (any DLPack producer) as an array of library ``to`` (a name, module or array type).

    Zero-copy whenever the spec allows; ``device``/``copy`` as in the array API's ``from_dlpack``;
    ``stream`` is the stream the result will be used on (the consumer's): the producer's work is ordered
    before it. Without it, the target's own current stream is (it asks the producer itself).
    """
    if isinstance(to, str | ModuleType):
        route = ROUTES.get((to,))
    else:  # an array type's route is kept per type
        route = ROUTES_BY_TYPE.get(to) if isinstance(to, type) else None
        route = None if route is MISSING else route
    # dlbind.convert (compiled) tried the C route of a name it knows before calling here: not twice
    tried = route is not None and type(to) is str and to in C_ROUTES
    if route is None:
        route = route_to(to)
    try:
        x, source, here, decision = _decision(x, route, device, copy, stream)
        plain = decision.kind == DIRECT and decision.copy_kw is None and not decision.device_kw
        plain = plain and not decision.watch_stream  # its target's current stream is read first, in Python
        if plain and type(to) is str and source.lasting and type(x) not in C_DIRECT.get(to, ()):
            C_DIRECT.setdefault(to, {})[type(x)] = (int(here[0]), route.importer)  # the compiled convert: C
        return run(decision, x, source, route, here, device, copy, stream, tried)
    except _PASSED_ON:
        raise
    except Exception as exc:
        raise target_error(x, route.adapter.name, exc, device) from exc


def _decision(
    x: Any, route: Route, device: Any, copy: bool | None, stream: int | None
) -> tuple[Any, ExportPlan, Any, Decision]:
    """The producer as asked (dlbind's own producer of an object that only has a buffer, array interface or
    ``__cuda_array_interface__``), its plan, its device, and the Decision for them and the keywords."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    source = export_plan(type(x))
    here = None
    if source.via is None and not hasattr(x, "__dlpack__"):
        if source.library != route.adapter.name or type(x) is PyCapsuleType:
            # a raw capsule: its Tensor; else dlbind's own producer of it, which knows its device and its stream
            x = imported(x, None, None) if type(x) is PyCapsuleType else asdlpack(x)
            source = export_plan(type(x))
        elif not hasattr(x, "__dlpack_device__"):
            # the target's own array, without DLPack (numba's CUDA arrays carry __cuda_array_interface__ only):
            # itself where no copy is asked; its device is the one its interface says
            here = asdlpack(x).__dlpack_device__()
    if here is None:
        # stream-free host memory, or a system exporting through a function of its own: no device to ask
        here = _CPU if source.host_only or source.via is not None else producer_device(x)
    shape = 0 if stream is None else 1 if stream == -1 else 2
    dev = None if device is None else parse_device(device)[0]
    found = source.pairs.get((route.adapter.name, here[0], dev, copy, shape))  # routes.key: made once, then read
    if found is None:
        found = decide(source, route, here[0], dev, copy, shape)
    return x, source, here, found


class Explanation(NamedTuple):
    """What :func:`convert` does with one array for one target and keywords, and why (:func:`explain`).

    ``kind``: ``"itself"`` (the producer is the answer), ``"zero-copy"``, ``"copy"`` (on the data's device, or
    the target's own), ``"host copy"`` (the data moves to the host first) or ``"refused"``; ``text``: the
    sentence, ``str()`` of the explanation; ``decision``: the cached :class:`dlbind.routes.Decision` for the
    producer's type, the target, the device type and the keywords' shape (what the data adds: its bridge)."""

    kind: str
    text: str
    decision: Decision

    def __str__(self) -> str:
        return self.text


def explain(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Explanation:
    """What ``dlbind.convert(x, to, device=..., copy=..., stream=...)`` would do, and why, without doing it.

    The same Decision the exchange runs (made now if it was not, and kept), and the bridge ``x``'s own data
    needs (negative strides, read-only data, a dtype the target lacks): for that, ``x`` is imported zero-copy
    where it is (host memory and devices with streams; a host copy decision is not run). Nothing is copied
    and nothing reaches the target.
    """
    if type(x) is PyCapsuleType:
        raise TypeError("dlbind.explain takes the producer, not a raw capsule: reading a capsule consumes it")
    route = route_to(to)
    x, source, here, d = _decision(x, route, device, copy, stream)
    a = route.adapter
    where = f"{device_name(here[0])}:{here[1]}"
    kind = d.kind
    if kind == REFUSE:
        why = f"dlbind.convert cannot give {a.name} {described(x)}: {d.why}" if d.describe else d.why
        return Explanation("refused", f"refused: {why}", d)
    if kind == SAME:
        if d.itself and (device is None or parse_device(device) == here):
            return Explanation("itself", f"itself: the producer is already a {a.name} array", d)
        if d.why:
            return Explanation("refused", f"refused: {d.why}", d)
        copies = "copy" if d.copy_kw is True or a.copy == "always" else "zero-copy"
        return Explanation(copies, f"{copies}: {a.from_dlpack}{_shown(d)}, {a.name}'s own import", d)
    if kind == HOST and d.to_host and here[0] in HOST_ACCESSIBLE:
        return Explanation("zero-copy", f"zero-copy: {d.why}, then {a.name}'s host route", d)
    if kind == HOST_COPY or (kind == HOST and d.to_host):
        return Explanation("host copy", f"a host copy of the {where} data ({d.why}), then {a.name}'s host route", d)
    if kind == HOST and d.copy_in:
        return Explanation("copy", f"copy: {a.copy_with} copies the data onto {a.devices[0]} ({d.why})", d)
    on = (
        "the stream given" if stream is not None else
        f"{a.name}'s current stream" if route.stream_of is not None or kind == DIRECT else
        "the device's default stream"
    )  # fmt: skip
    if kind == DIRECT:
        text = f"zero-copy: {a.from_dlpack}{_shown(d)} of the producer itself, asked on {on}"
        if d.watch_stream:
            text += (
                f" (through dlbind's relay, asked on the device's default stream, when {on} is one that "
                f"{type(x).__name__}.__dlpack__ refuses)"
            )
        return Explanation("zero-copy", text, d)
    # INTERFACE, HOST and RELAY: the bridge this array's data needs, read from a zero-copy import of it where it is
    try:
        if type(x) is Tensor:
            tensor = x
        elif source.via is not None:
            tensor = imported(x, source, None, own_export=True)
        else:  # on a device with streams, unordered (-1): only the metadata is read
            tensor = imported(x, source, here, stream=None if stream_free(here[0]) else -1)
    except BufferError as exc:  # the producer refuses this array (Arrow's nulls): so would the exchange
        return Explanation("refused", f"refused: {exc}", d)
    if kind == INTERFACE:
        if d.copy_here or not interface_copies(route, tensor):
            copies = "copy" if d.copy_here else "zero-copy"
            return Explanation(copies, f"{copies}: through {a.interface_function} ({d.why}), ready on {on}", d)
        text = (
            f"a copy on {where}, then through {a.interface_function} ({d.why}; read-only data, which {a.name} "
            f"would take writable), ready on {on}"
        )
        return Explanation("copy", text, d)
    bridge, why = bridge_of(route, tensor, copy if kind == HOST else d.copy_here or None)
    if bridge == "refused":
        return Explanation("refused", f"refused: {why}", d)
    cites = "".join(f"; {q.text} ({q.ref})" for q in a.quirks if _cited(q.id, why))
    if kind == RELAY:
        copies = "copy" if bridge == "copy" else "zero-copy"
        head = f"{'a copy' if bridge == 'copy' else 'zero-copy'} on {where}, ordered on {on}"
        reason = f": {why}{cites}" if why else ""
        return Explanation(copies, f"{head}{reason} (dlbind's relay stands between: {d.why})", d)
    if bridge == "copy":
        return Explanation("copy", f"a copy on the host: {why}{cites}", d)
    if bridge == "view":
        return Explanation("zero-copy", f"zero-copy: {why}", d)
    if d.c_route and route.table_type is not None:
        how = f"the producer's DLManagedTensorVersioned goes to {a.name}'s DLPack 1.3 exchange table, in C"
    elif d.c_route:
        how = f"the producer's DLManagedTensorVersioned is handed to {a.from_dlpack}, in C"
    elif a.takes == "ndarray":
        how = f"{importer_name(route, tensor)} of a numpy view of the data"
    else:
        how = f"{a.from_dlpack} of a dlbind.Tensor ({'legacy' if route.legacy_only else 'versioned'} capsule)"
    return Explanation("zero-copy", f"zero-copy: {how}", d)


def _cited(quirk: str, why: str) -> bool:
    """Whether the quirk ``quirk`` (its id) explains a bridge whose reason is ``why``."""
    return any(phrase in why and quirk.startswith(start) for phrase, start in _CITES)


# which of a target's quirks a bridge's reason cites: a phrase of the reason, the start of the quirk's id
_CITES = (("negative strides", "negative_strides"), ("read-only", "readonly"), ("compact", "compact"))


def _shown(d: Decision) -> str:
    """The keywords a Decision passes the importer, as written in a call."""
    shown = ["device=..." if d.device_kw == DEVICE_ARG else "", "" if d.copy_kw is None else f"copy={d.copy_kw}"]
    return f"({', '.join(s for s in shown if s)})"


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
    # the producer's own refusal, met inside the target's importer (Arrow's nulls): what the user can do instead
    helped = help_for(export_plan(type(x)), exc)
    err = BufferError(f"{name} cannot import {described(x)}{asked}: {type(exc).__name__}: {first}{helped}")
    err.__cause__ = exc
    return err


def compat(x: Any) -> Any:
    """Wrap any producer so that it answers every keyword of the current spec correctly.

    Older producers (only ``stream``, no ``max_version``, no ``dl_device``/``copy``) are re-negotiated
    on every export; anything with a buffer or an array interface is exported directly.
    """
    if hasattr(x, "__dlpack__") and not isinstance(x, Exporter):
        return Exporter(None, x)
    plan = export_plan(type(x))
    if plan.via is not None:  # a system exporting through a method or function of its own
        return imported(x, plan, None, own_export=True)
    return asdlpack(x)
