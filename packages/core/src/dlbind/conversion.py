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

import textwrap
from types import ModuleType
from typing import Any, Literal, NamedTuple, get_args

from dlbind import _backends
from dlbind._capi import PyCapsuleType
from dlbind._generated.adapters import ADAPTERS, Copy, Takes
from dlbind._generated.tables import DEVICE_BY_NAME
from dlbind._libraries import MISSING
from dlbind.asking import FELL_BACK
from dlbind.bridges import (
    AS_IS,
    COPY,
    OWN_COPY,
    PACKS,
    REFUSED,
    VIEW,
    Bridge,
    copy_in_refusal,
    data_bridge,
    described,
    import_for,
    importer_name,
    interface_copies,
    keywords,
    run,
)
from dlbind.consumer import imported
from dlbind.crossing import lacks_own
from dlbind.devices import (
    HOST_ACCESSIBLE,
    check_stream,
    device_name,
    parse_device,
    producer_device,
    stream_free,
)
from dlbind.export import waits
from dlbind.producer import Exporter, SourceExporter, asdlpack
from dlbind.routes import (
    DEVICE_ARG,
    DIRECT,
    HOST_COPY,
    INTERFACE,
    NO_HOST,
    REFUSE,
    RELAY,
    ROUTES,
    ROUTES_BY_TYPE,
    SAME,
    Decision,
    Direct,
    Host,
    Plan,
    Refused,
    Route,
    Same,
    StreamShape,
    decide,
    device_count,
    route_to,
)
from dlbind.sources import ExportPlan, check_guards, export_plan, exported, help_for
from dlbind.tensor import Tensor, from_capsule
from dlbind.validate import PACKAGE

__all__ = ["Explanation", "compat", "convert", "explain", "plan"]

_CPU = parse_device("cpu")
_NO_STREAM, _UNSYNCHRONISED, _STREAM = StreamShape


def convert(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """``x`` (any DLPack producer) as an array of library ``to``: a system's name, its module, or its array type.
    The names: {systems}.

    Zero-copy wherever the DLPack spec allows. ``device`` and ``copy`` as in the array API's ``from_dlpack``
    (``copy=True`` always copies, ``False`` never does, ``None`` copies only where needed). ``stream`` is the
    stream the result will be used on (the consumer's): the producer's work is ordered before it. Without it,
    the work is ordered before the target's own current stream, as the target's own import would order it.

    Raises ``BufferError`` where the exchange cannot be made as asked (a copy that ``copy=False`` forbids, a device
    the target lacks, data the target cannot import), saying why; ``TypeError`` for an argument of the wrong type
    (``copy`` not a bool, ``x`` not a producer); ``ValueError`` for a ``to`` that names no system dlbind knows.
    :func:`explain` says beforehand what this call does.
    """
    if isinstance(to, str | ModuleType):
        route = ROUTES.get(to)
    else:  # an array type's route is kept per type
        route = ROUTES_BY_TYPE.get(to) if isinstance(to, type) else None
        route = None if route is MISSING else route
    # dlbind.convert (compiled) tried the C route of a name it knows before calling here: not twice
    tried = route is not None and type(to) is str and route.in_c
    if route is None:
        route = route_to(to)
    return _ran(x, route, device, copy, stream, tried)


def _ran(
    x: Any, route: Route, device: Any, copy: bool | None, stream: int | None, tried: bool, taken: Tensor | None = None
) -> Any:
    """:func:`convert`'s plan of ``x`` for ``route``, run (``tried``: the compiled build's C route asked ``x``
    already; ``taken``: the Tensor it imported there and left to Python), its failures raised as convert raises
    them."""
    try:
        p = _plan(x, route, device, copy, stream)
        # the C route asked x itself: not dlbind's producer of what x describes (a buffer), nor the array a system's
        # own export function gave, which it may take now
        tried = tried and p.producer is x
        x = p.producer
        return run(p, tried, taken if tried else None)
    except _PASSED_ON:
        raise
    except Exception as exc:
        raise target_error(x, route.adapter.name, exc, device) from exc


# the names convert's to= takes, from spec/adapters.toml (one row each)
_NAMES = textwrap.fill(", ".join(map(repr, ADAPTERS)), 112, initial_indent="    ", subsequent_indent="    ").strip()
convert.__doc__ = (convert.__doc__ or "").replace("{systems}", _NAMES)


def plan(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Plan:
    """What ``dlbind.convert(x, to, ...)`` will do, as a value (:class:`dlbind.routes.Plan`): the Decision for the
    producer's type, the target, the device type and the keywords' shape, and what this call adds (the importer's
    keywords, the refusal of this call). :func:`convert` runs it; :func:`explain` renders it."""
    return _plan(x, route_to(to), device, copy, stream)


def _plan(x: Any, route: Route, device: Any, copy: bool | None, stream: int | None) -> Plan:
    x, source, here, d, asked = _decision(x, route, device, copy, stream)
    p = Plan(d, x, source, route, here, device, copy, stream, asked=asked)
    if source.via is not None and d.kind not in (SAME, REFUSE):
        p = _through_export(p)  # a system exporting through a function of its own: planned for what it gave
        if p.refused:
            return p
        x, source, here, d = p.producer, p.source, p.here, p.decision
    kind = d.kind
    if stream is not None and stream_free(here[0]):
        try:  # the device's stream rule (a TypeError for a stream that is not an int passes on)
            check_stream(here[0], stream)
        except BufferError as exc:
            return p._replace(refused=str(exc))
    if kind == REFUSE:
        describe = isinstance(d.payload, Refused) and d.payload.describe
        why = f"{PACKAGE}.convert cannot give {route.adapter.name} {described(x)}: {d.why}" if describe else d.why
        return p._replace(refused=why)
    if isinstance(d.payload, Same) and d.payload.itself and (asked is None or asked == here):
        return p._replace(itself=True)
    if kind in (DIRECT, SAME) and source.guards:
        # the producer itself handed to the importer, which asks its export: its guards first (torch's neg bit)
        try:
            check_guards(x, source)
        except BufferError as exc:
            return p._replace(refused=str(exc))
    if asked is not None and (asked != here or not _holds(route, here[0])):
        refused, untested = _device_asked(route, asked, device)
        if refused:
            return p._replace(refused=refused)
        p = p._replace(untested=untested)
    imp = route.adapter.import_  # how it takes DLPack (its row's [import])
    move = d.payload if isinstance(d.payload, Host) else NO_HOST  # HOST, HOST_COPY: how the data reaches the host
    lands_on = imp.devices[0] if move.copy_in else imp.lands_on  # where its arrays are whatever the data's, if anywhere
    lands = (DEVICE_BY_NAME[lands_on], 0) if lands_on else None
    if (asked is None or asked == here) and not move.to_host and here[0] not in HOST_ACCESSIBLE:
        # the data's own device, where the target is given it: one it has (torch's CPU build has no cuda:0)
        refused = _device_asked(route, here, f"{device_name(here[0])}:{here[1]}")[0]
        if refused:
            return p._replace(refused=refused)
    if lands is not None and lands[0] != here[0] and (asked is None or asked == here):
        # its arrays are on a device of its own whatever the data's (dpnp's copy-in, numba's to_device): that one
        # (a device asked elsewhere was checked above)
        refused, untested = _device_asked(route, lands, f"{device_name(lands[0])}:0")
        if refused:
            return p._replace(refused=refused)
        p = p._replace(untested=untested)
    if kind == SAME and d.why:  # the target's own importer cannot be asked for this (copy=False, always copies)
        return p._replace(refused=d.why)
    if kind == INTERFACE:
        if asked is not None and asked != here:
            return p._replace(refused=f"{route.adapter.import_.interface} takes the data where it is, not on {device}")
        return p
    try:  # for data on the host after a host copy, the importer's keywords are for the host
        kwargs = keywords(d, route, _CPU if move.to_host else here, None if kind == HOST_COPY else asked)
    except BufferError as exc:
        return p._replace(refused=str(exc))
    return p._replace(kwargs=kwargs)


def _through_export(p: Plan) -> Plan:
    """``p``, the plan of an array whose system exports through a function of its own, made for the import that
    export gives, where its data is (its export says where): that export is the exchange's one (refused where it
    refuses the array: awkward's jagged ones)."""
    source, row = p.source, p.source.row
    copied_by = f"{row.export.via} exports a new copy" if row is not None and row.export.copies else ""
    try:
        x = imported(p.producer, source, None, own_export=True)
    except BufferError as exc:
        return p._replace(refused=str(exc))
    made = export_plan(Tensor)
    d = decide(made, p.route, x.device[0], None if p.asked is None else p.asked[0], p.copy)
    return p._replace(decision=d, producer=x, source=made, here=x.device, copied_by=copied_by)


def _holds(route: Route, device_type: int) -> bool:
    """Whether the target takes data on ``device_type`` in any way: a device asked that it holds no arrays of is
    refused, the data's own too (pinned memory for numpy)."""
    return device_type in route.imports or device_type in route.interface_types or device_type in route.copy_from


def _device_asked(route: Route, asked: tuple[int, int], device: Any) -> tuple[str, str]:
    """Whether the target has the device asked for (``device=``, another than the data's): ``(refusal, "")`` when
    it has not (or none of that index), ``("", what only trying tells)`` where dlbind cannot know, ``("", "")``
    when it has."""
    count, why, at_least = device_count(route, asked[0])
    if count is not None and asked[1] < count:
        return "", ""
    if count is None or at_least:
        return "", f"whether {route.adapter.name} has device {device!r} is known only by trying: {why}"
    a = route.adapter
    name = device_name(asked[0])
    if count == 0:
        return f"no device {device!r} for {a.name}: {why}", ""
    return f"no device {device!r} for {a.name}: it has {count} {name} device{'s' * (count > 1)} here ({why})", ""


def _decision(
    x: Any, route: Route, device: Any, copy: bool | None, stream: int | None
) -> tuple[Any, ExportPlan, Any, Decision, Any]:
    """The producer as asked (dlbind's own producer of an object that only has a buffer, array interface or
    ``__cuda_array_interface__``), its plan, its device, the Decision for them and the keywords, and ``device=``
    parsed (None: not given)."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    if type(x) is PyCapsuleType:
        x = from_capsule(x)  # a raw capsule: its Tensor
    # dlbind's own producer of an object without DLPack, which knows its device and its stream (as from_dlpack asks
    # it); the target's own array stays itself (device_of: what says where the data is)
    x, source, device_of = exported(x, route.adapter.name)
    # stream-free host memory, or a system exporting through a function of its own: no device to ask
    here: Any = _CPU
    if not (source.host_only or source.via is not None):
        here = _where_is(device_of, source, route, device, copy, stream)
    if here is None:  # the target's own array asked plainly, which cannot say where it is: itself all the same
        return x, source, None, _ITSELF, None
    shape = _NO_STREAM if stream is None else _UNSYNCHRONISED if stream == -1 else _STREAM  # routes.key's
    asked = None if device is None else parse_device(device)
    dev = None if asked is None else asked[0]
    found = source.pairs.get((route.adapter.name, here[0], dev, copy, shape))  # routes.key: made once, then read
    if found is None:
        found = decide(source, route, here[0], dev, copy, shape)
    own = isinstance(found.payload, Same) and not found.payload.itself and not found.why  # to its own importer
    if own and lacks_own(route.adapter, x):
        found = decide(source, route, here[0], dev, copy, shape, lacked=True)  # through dlbind's import and bridge
    return x, source, here, found, asked


#: the Decision of the target's own array asked plainly (routes: SAME, itself, wherever the array is)
_ITSELF = Decision(SAME, payload=Same(itself=True))


def _where_is(x: Any, source: ExportPlan, route: Route, device: Any, copy: bool | None, stream: int | None) -> Any:
    """Where ``x``'s data is (``__dlpack_device__``); None where it cannot say (torch's meta tensors raise) and the
    call needs no device: the target's own array, with no ``copy=True`` or ``stream`` (``device=`` None), is itself
    wherever it is (the compiled build's convert answers it so before asking)."""
    try:
        return producer_device(x)
    except Exception:
        if source.library != route.adapter.name or device is not None or copy or stream is not None:
            raise
        return None


Said = Literal["itself", "zero-copy", "copy", "host copy", "refused"]  # an Explanation's kind


class ExplanationKind:
    """The kinds of :class:`Explanation` (its ``kind``)."""

    ITSELF, ZERO_COPY, COPY, HOST_COPY, REFUSED = get_args(Said)


class Explanation(NamedTuple):
    """What :func:`convert` does with one array for one target and keywords, and why (:func:`explain`).

    ``kind``: ``"itself"`` (the producer is the answer), ``"zero-copy"``, ``"copy"`` (on the data's device, or
    the target's own), ``"host copy"`` (the data moves to the host first) or ``"refused"``; ``text``: the
    sentence, ``str()`` of the explanation; ``decision``: the cached :class:`dlbind.routes.Decision` for the
    producer's type, the target, the device type and the keywords' shape; ``plan``: the whole
    :class:`dlbind.routes.Plan` it renders; ``bridge``: what the data itself adds (:class:`dlbind.bridges.Bridge`;
    None where the producer goes to the target's importer as it is)."""

    kind: Said
    text: str
    decision: Decision
    plan: Plan | None = None
    bridge: Bridge | None = None

    def __str__(self) -> str:
        return self.text


def explain(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Explanation:
    """What ``dlbind.convert(x, to, device=..., copy=..., stream=...)`` would do, and why, without doing it.

    It renders the :func:`plan` that ``convert`` runs, and decides nothing of its own. Where the plan's bridge
    depends on the data (negative strides, read-only data, a dtype the target lacks), it is read from a
    zero-copy import of ``x`` where it is (the plan's one import, unordered on a device with streams); nothing is
    copied and nothing reaches the target.
    """
    if type(x) is PyCapsuleType:
        raise TypeError(f"{PACKAGE}.explain takes the producer, not a raw capsule: reading a capsule consumes it")
    p = plan(x, to, device=device, copy=copy, stream=stream)
    said = _rendered(p)
    if p.copied_by and said.kind == ExplanationKind.ZERO_COPY:  # the producer's own export is a copy (tinygrad's)
        then = said.text.removeprefix("zero-copy: ")
        said = said._replace(kind=ExplanationKind.COPY, text=f"a copy: {p.copied_by}, then {then}")
    if p.untested and said.kind != ExplanationKind.REFUSED:
        said = said._replace(text=f"{said.text} ({p.untested})")
    return said


def _rendered(p: Plan) -> Explanation:
    """The plan in words: what the Decision alone says, else what the data's bridge adds (read from the plan's
    one import where the data is)."""
    said = _by_decision(p)
    if said is not None:
        return said
    d, a = p.decision, p.route.adapter
    # INTERFACE, HOST and RELAY: the bridge this array's data needs, read from the plan's import where it is
    read = _read(p)
    if isinstance(read, Explanation):
        return read
    tensor, fell_back = read
    if d.kind == INTERFACE:
        if d.copy_here or not interface_copies(p.route, tensor):
            copies: Said = ExplanationKind.COPY if d.copy_here else ExplanationKind.ZERO_COPY
            text = f"{copies}: through {a.import_.interface} ({d.why}), ready on {_on(p)}"
            return Explanation(copies, text, d, p)
        text = (
            f"a copy on {_where(p)}, then through {a.import_.interface} ({d.why}; read-only data, which {a.name} "
            f"would take writable), ready on {_on(p)}"
        )
        return Explanation(ExplanationKind.COPY, text, d, p)
    said = _by_bridge(p, tensor, fell_back)
    if isinstance(d.payload, Host) and d.payload.in_place and said.kind != ExplanationKind.REFUSED:
        said = said._replace(text=f"{said.text} ({d.why})")  # pinned memory, read as the CPU's where it is
    return said


def _read(p: Plan) -> tuple[Tensor, bool] | Explanation:
    """The plan's one import, where the data is (the facts of its data), and whether the producer's own export
    refused it (then dlbind exported its buffer or array interface itself); or the refusal convert meets where the
    producer's export refuses this array (Arrow's nulls, torch's sparse layouts), in convert's words."""
    watching: list[Any] = []
    token = FELL_BACK.set(watching)
    try:
        return import_for(p, metadata=True), any(x is p.producer for x in watching)
    except BufferError as exc:  # the producer refuses this array: so would the exchange
        return Explanation(ExplanationKind.REFUSED, f"refused: {exc}", p.decision, p)
    except _PASSED_ON:
        raise
    except Exception as exc:  # what convert would raise of it: the same BufferError
        why = target_error(p.producer, p.route.adapter.name, exc, p.device)
        return Explanation(ExplanationKind.REFUSED, f"refused: {why}", p.decision, p)
    finally:
        FELL_BACK.reset(token)


def _where(p: Plan) -> str:
    return f"{device_name(p.here[0])}:{p.here[1]}"


def _on(p: Plan) -> str:
    """The stream the producer is asked on, in words."""
    if p.stream is not None:
        return "the stream given"
    if p.route.stream_of is not None or p.decision.kind == DIRECT:
        return f"{p.route.adapter.name}'s current stream"
    return "the device's default stream"


def _by_decision(p: Plan) -> Explanation | None:
    """What the plan says without the data: refused, the producer itself, the target's own import, a host
    copy, a copy-in, the producer handed over as it is; None where the data's bridge decides."""
    d, a, kind = p.decision, p.route.adapter, p.decision.kind
    imp = a.import_  # how it takes DLPack (its row's [import])
    move = d.payload if isinstance(d.payload, Host) else NO_HOST
    if p.refused:
        return Explanation(ExplanationKind.REFUSED, f"refused: {p.refused}", d, p)
    if p.itself:
        return Explanation(ExplanationKind.ITSELF, f"itself: the producer is already a {a.name} array", d, p)
    if kind == SAME:  # its own importer asks the producer's export: where that refuses this array, so does convert
        read = _read(p)
        if isinstance(read, Explanation):
            return read
        copied = d.copy_kw is True or imp.copy == Copy.ALWAYS
        copies: Said = ExplanationKind.COPY if copied else ExplanationKind.ZERO_COPY
        return Explanation(copies, f"{copies}: {imp.function}{_shown(d)}, {a.name}'s own import", d, p)
    if move.to_host and not move.in_place:  # HOST_COPY, or HOST with the host asked for
        needs = _backend_missing(p)
        if needs:
            return Explanation(ExplanationKind.REFUSED, f"refused: {needs}", d, p)
        text = f"a host copy of the {_where(p)} data ({d.why}), then {a.name}'s host route"
        return Explanation(ExplanationKind.HOST_COPY, text, d, p)
    if move.copy_in:
        if p.route.lacks.patterns:  # its constructor lacks some dtypes: this array's, read where it is
            read = _read(p)
            if isinstance(read, Explanation):
                return read
            refused = copy_in_refusal(p.route, read[0])
            if refused is not None:
                return Explanation(ExplanationKind.REFUSED, f"refused: {refused}", d, p)
        return Explanation(
            ExplanationKind.COPY, f"copy: {imp.copy_with} copies the data onto {imp.devices[0]} ({d.why})", d, p
        )
    if isinstance(d.payload, Direct):
        text = f"zero-copy: {imp.function}{_shown(d)} of the producer itself, asked on {_on(p)}"
        if d.payload.watch_stream:
            text += (
                f" (through dlbind's relay, asked on the device's default stream, when {_on(p)} is one that "
                f"{type(p.producer).__name__}.__dlpack__ refuses)"
            )
        needs = _backend_missing(p)
        if needs:
            return Explanation(ExplanationKind.REFUSED, f"refused: {needs}", d, p)
        return Explanation(ExplanationKind.ZERO_COPY, text, d, p)
    return None


def _backend_missing(p: Plan, bridge: Bridge | None = None) -> str:
    """Why the exchange the plan makes needs a dlbind backend of the data's device that is not here, in the words
    dlbind.export.export_memory refuses it with; "" where none is needed, or it serves. What export_memory does
    with dlbind's own memory (a dlbind.Tensor or Exporter: another producer orders and copies its own) and with
    the relay's import: a reader on another stream than the data's waits for it (waits; a host reader of
    managed memory synchronises it), memory the host cannot read is copied to the host by the backend
    (copy_host), and a copy on the device is the backend's (copy_device: the relay's ``bridge`` copies, or
    copy=True reaches dlbind's own producer)."""
    here, index = p.here
    if stream_free(here):
        return ""
    d = p.decision
    own = type(p.producer) in (Tensor, Exporter)
    ready = _ready_on(p.producer) if own else None
    where = f"{device_name(here)}:{index}"
    needs: list[str] = []  # in the order the exchange meets them
    if isinstance(d.payload, Host):  # read by the host (a copy to it, or managed and pinned memory in place)
        if own and waits(ready, None, here):
            needs.append("")
        if own and d.payload.to_host and not d.payload.in_place and here not in HOST_ACCESSIBLE:
            needs.append(f"copying {device_name(here)} memory to the host")
    elif d.kind in (DIRECT, RELAY):
        target = _target_stream(p)
        on = p.stream if p.stream is not None and d.kind == RELAY else target  # what the producer is asked on
        if own and waits(ready, None if on == -1 else on, here):
            needs.append("")
        if d.kind == DIRECT and own and d.copy_kw is True:  # the importer asks dlbind's producer for the copy
            needs.append(f"copying {where} memory on the device")
        if bridge is not None and bridge.kind == COPY:  # the relay's copy on the device
            needs.append(f"copying {where} memory on the device")
        if d.kind == RELAY and on not in (None, -1) and waits(on, target, here):  # ready on the stream given
            needs.append("")
    for need in needs:
        try:
            _backends.for_device(here, need)
        except BufferError as exc:
            return str(exc)
    return ""


def _ready_on(producer: Any) -> int | None:
    """The stream dlbind's own producer's data is ready on (None: nothing orders it)."""
    return producer._stream if type(producer) is Tensor else producer._described().stream


def _target_stream(p: Plan) -> int | None:
    """The stream the target's importer asks on (its current stream, where its row names one; else the
    default, None)."""
    current = p.route.stream_of
    if current is None:
        return None
    try:
        return current(p.here[1])  # type: ignore[no-any-return]
    except Exception:  # its runtime cannot say here (no such device): its importer would ask the default
        return None


def _by_bridge(p: Plan, tensor: Tensor, fell_back: bool = False) -> Explanation:
    """What the data's bridge adds on a host route or the relay: refused, a copy (and where, and its size), a
    viewer, or the producer as it is (in C where the plan says, unless the producer's own export refused it:
    ``fell_back``, dlbind exported its memory, on Python's route)."""
    d, route = p.decision, p.route
    a = route.adapter
    bridge = data_bridge(p, tensor)
    b, why = bridge.kind, bridge.why
    if b == REFUSED:
        return Explanation(ExplanationKind.REFUSED, f"refused: {why}", d, p, bridge)
    needs = _backend_missing(p, bridge)
    if needs:
        return Explanation(ExplanationKind.REFUSED, f"refused: {needs}", d, p, bridge)
    cites = "".join(f"; {q.text} ({q.ref})" for q in a.quirks if _cited(q.id, why))
    copied = b in (COPY, PACKS, OWN_COPY) or (b == VIEW and bridge.copies)
    if d.kind == RELAY:
        head = f"{'a copy' if copied else 'zero-copy'} on {_where(p)}, ordered on {_on(p)}"
        reason = f": {why}{cites}" if why else ""
        text = f"{head}{reason} (dlbind's relay stands between: {d.why})"
        return Explanation(ExplanationKind.COPY if copied else ExplanationKind.ZERO_COPY, text, d, p, bridge)
    if b in (COPY, PACKS, OWN_COPY):
        return Explanation(ExplanationKind.COPY, f"a copy on the host{_size(tensor)}: {why}{cites}", d, p, bridge)
    if b == VIEW:
        said: Said = ExplanationKind.COPY if copied else ExplanationKind.ZERO_COPY
        return Explanation(said, f"{said}: {why}", d, p, bridge)
    assert b == AS_IS
    c_route = isinstance(d.payload, Host) and d.payload.c_route and not fell_back
    if c_route and route.table_type is not None:
        how = f"the producer's DLManagedTensorVersioned goes to {a.name}'s DLPack 1.3 exchange table, in C"
    elif c_route:
        how = f"the producer's DLManagedTensorVersioned is handed to {a.import_.function}, in C"
    elif a.import_.takes == Takes.NDARRAY:
        how = f"{importer_name(route, tensor)} of a numpy view of the data"
    else:
        how = f"{a.import_.function} of a dlbind.Tensor ({'legacy' if route.legacy_only else 'versioned'} capsule)"
    if fell_back:
        how = f"{type(p.producer).__name__}.__dlpack__ refuses it, so dlbind exports its memory; {how}"
    return Explanation(ExplanationKind.ZERO_COPY, f"zero-copy: {how}", d, p, bridge)


def _size(tensor: Tensor) -> str:
    """The size of a compact copy of ``tensor``, for a copy's explanation (" of 2.0 EiB")."""
    size = float(tensor.nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if size < 1024 or unit == "EiB":
            return f" of {size:.0f} {unit}" if unit == "B" else f" of {size:.1f} {unit}"
        size /= 1024
    return ""


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


def resume(failed: BaseException | Tensor | None, /, *args: Any, **keywords: Any) -> Any:
    """The compiled ``convert``'s one fall-back into Python, told where its C code stopped: ``failed`` None, the
    whole call ``convert(*args, **keywords)`` is Python's; a Tensor, the one import of ``x`` its C route of
    ``convert(x, to)`` (``args``) made and left to Python (``x`` refused that call, or the target the struct),
    finished by Python's route without asking ``x`` again; else the exception that the target's importer raised
    in that C route, raised as :func:`convert` raises it (:func:`target_error`)."""
    if failed is None:
        return convert(*args, **keywords)
    x, to = args
    if isinstance(failed, Tensor):
        return _ran(x, route_to(to), None, None, None, True, failed)
    if isinstance(failed, Exception) and not isinstance(failed, _PASSED_ON):
        # the target's failure on data of a device it has none of says so, in the words Python's plan refuses with
        here = producer_device(x) if hasattr(x, "__dlpack_device__") else _CPU
        if here[0] not in HOST_ACCESSIBLE:
            refused = _device_asked(route_to(to), here, f"{device_name(here[0])}:{here[1]}")[0]
            if refused:
                raise BufferError(refused) from failed
    raise target_error(x, to, failed)


def target_error(x: Any, to: str, exc: BaseException, device: Any = None) -> BaseException:
    """The exception :func:`convert` raises when target ``to`` failed to import ``x`` with ``exc``.

    A target's own refusal of what it cannot import (a device, dtype or layout it lacks) comes as its
    ``RuntimeError``, ``AssertionError``, ...; the spec's type for it is ``BufferError``, naming the
    target, the device asked for (``device=``, when given: what the user asked, beside where the data is)
    and keeping the original as ``__cause__``. The spec's own types pass unchanged. Raised by the compiled
    build's convert too, through :func:`resume` (its C routes take no ``device=``).
    """
    if isinstance(exc, _PASSED_ON) or not isinstance(exc, Exception):
        return exc
    name = ROUTES[to].adapter.name if to in ROUTES else to
    first = str(exc).strip().partition("\n")[0]  # torch appends a C++ backtrace
    asked = "" if device is None else f" to device={device!r}"
    # the producer's own refusal, met inside the target's importer (Arrow's nulls): what the user can do instead
    helped = help_for(export_plan(type(x)), exc)
    err = BufferError(f"{name} cannot import {described(x)}{asked}: {type(exc).__name__}: {first}{helped}")
    err.__cause__ = exc
    return err


def compat(x: Any) -> Exporter | Tensor:
    """Wrap any producer so that it answers every keyword of the current spec correctly.

    Older producers (only ``stream``, no ``max_version``, no ``dl_device``/``copy``) are re-negotiated
    on every export; anything with a buffer or an array interface is exported directly.
    """
    if hasattr(x, "__dlpack__") and not isinstance(x, Exporter):
        return SourceExporter(x)
    plan = export_plan(type(x))
    if plan.via is not None:  # a system exporting through a method or function of its own
        return imported(x, plan, None, own_export=True)
    return asdlpack(x)
