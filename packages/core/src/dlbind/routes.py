"""Targets: how each system :func:`dlbind.convert` gives arrays to imports (a :class:`Route`, made once per
target by :func:`route_to` from its row of ``spec/adapters.toml`` for the installed release), and the
:class:`Decision` for one producer type, target, device type and shape of keywords (:func:`decide`): the
route's kind (the producer itself, the host routes, hand the producer over directly, stand in between and
why, ``__cuda_array_interface__``, a host copy first, or refuse with the reason), the importer's keywords,
the copy dlbind makes. The compiled build's convert reads the same Route records (:data:`ROUTES`) and, for a
producer type, the direct hand-overs decided (``ExportPlan.direct``, noted by :func:`decide`).

Routes and Decisions are made once and kept (:data:`ROUTES`, the producer's
:class:`dlbind.sources.ExportPlan`): an exchange runs them and looks no row up on the way
(``dlbind._libraries.row_lookups`` stays still). Running a Decision is :func:`dlbind.bridges.run`'s job.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from enum import IntEnum
from types import ModuleType
from typing import Any, NamedTuple

import dlbind._backends as _backends
import dlbind.exchange as exchange
from dlbind._ffi import native
from dlbind._generated.adapters import (
    ADAPTERS,
    Adapter,
    Asks,
    Capsules,
    Copy,
    Import,
    ImportBool,
    Layout,
    Readonly,
    Takes,
)
from dlbind._generated.tables import DEVICE_BY_NAME, DEVICE_NAMES
from dlbind._libraries import _LOOKUPS, MISSING, TypeCache, dotted, for_release, named
from dlbind.crossing import undefined
from dlbind.devices import HOST_ACCESSIBLE, STREAM_FREE, DevicePair, device_name
from dlbind.dtypes import DTypeSet, pairs_named_in
from dlbind.sources import ExportPlan
from dlbind.validate import PACKAGE

__all__ = [
    "DIRECT",
    "HOST",
    "HOST_COPY",
    "INTERFACE",
    "NO_HOST",
    "REFUSE",
    "RELAY",
    "ROUTES",
    "ROUTES_BY_TYPE",
    "SAME",
    "Decision",
    "DeviceCount",
    "Direct",
    "Host",
    "Interface",
    "Payload",
    "Plan",
    "Refused",
    "Route",
    "Same",
    "decide",
    "device_count",
    "make_route",
    "resolve",
    "route_to",
]

_LAYOUT_PROMISE = {"any": 0, "nonnegative": 1, "compact": 2}  # how much a layout promises


def resolve(to: Any) -> Adapter:
    """A library name (``"torch"``), its module, or one of its array types -> its adapter (a row lookup)."""
    _LOOKUPS[0] += 1
    if isinstance(to, str):
        return named(to)
    if isinstance(to, ModuleType):
        root = to.__name__
        for adapter in ADAPTERS.values():
            if root == adapter.import_name or adapter.import_name.startswith(root + "."):
                return adapter
            if sys.modules.get(adapter.import_name) is to:  # imported by its name, named otherwise (cuda.core.cu13)
                return adapter
        raise ValueError(f"module {root} is not an array library {PACKAGE} knows")
    if isinstance(to, type):
        for klass in to.__mro__:
            name = f"{klass.__module__}.{klass.__qualname__}"
            for adapter in ADAPTERS.values():
                if name in adapter.array_types:
                    return adapter
        raise ValueError(f"{to.__qualname__} is not the array type of a library {PACKAGE} knows")
    raise TypeError(f"to= is a library name, module or array type, not {type(to).__name__}")


class Route(NamedTuple):
    """How :func:`dlbind.convert` reaches one target system: its row of spec/adapters.toml, resolved for the
    installed release, with what the exchange needs at hand (made once per target by :func:`route_to`)."""

    adapter: Adapter
    importer: Any  # the target's from_dlpack (import.function), or the importer under test
    table_type: type | None  # the target array type, when it has an exchange table
    handover_type: type | None  # the target array type, when the compiled build may hand over in C (below)
    refuse_negative_strides: bool  # layout: the target cannot take negative strides (torch aborts on them)
    legacy_only: bool  # asks: the target never asks for versioned capsules: read-only data needs a bridge
    ignores_readonly: bool  # readonly: the target imports read-only data writable: copy it first
    keywords: frozenset[str]  # what the installed importer accepts (read from its signature)
    viewer: Any = None  # views a Tensor of a dtype its importer lacks (lacks_dtypes)
    lacks: DTypeSet = DTypeSet()  # the dtypes its importer lacks (import.lacks_dtypes; by_dtype: those it has not)
    lacks_nd: DTypeSet = DTypeSet()  # those its importer of arrays that are not 1-D lacks (lacks_dtypes_nd too)
    view_lacks: DTypeSet = DTypeSet()  # those among `lacks` that its viewer lacks too (import.view_lacks)
    vectors: DTypeSet = DTypeSet()  # the vector dtypes (lanes > 1) its importer takes (import.lanes)
    devices: dict[Any, Any] | None = None  # (type, id) -> the target's device object (device "namespace")
    imports: frozenset[int] = frozenset()  # device types its importer takes (import.devices)
    stream_of: Any = None  # device index -> its current stream there (a DLPack stream int), or None
    interface: Any = None  # its importer of __cuda_array_interface__ objects (import.interface), or None
    interface_types: frozenset[int] = frozenset()  # device types imported through `interface`
    legacy_safe: bool = False  # read-only data may reach it in a legacy capsule (it never lets it be written)
    bits: dict[str, str] | None = None  # dlbind dtype name -> its own, for dtypes imported as their bits
    copy_with: Any = None  # its own constructor copying in data of `copy_from` devices (import.copy_with)
    copy_from: frozenset[int] = frozenset()
    importer_nd: Any = None  # its importer of arrays that are not 1-D (import.function_nd), or None
    by_dtype: dict[str, Any] | None = None  # dtype name -> its importer of that dtype (import.by_dtype), or None

    bridges: bool = False  # an array of it may need a bridge on the host routes (a copy, a wrapper, a viewer)
    # what the C route must copy first: 1 negative strides, 2 read-only data, 4 a byte_offset of a part of an element
    refuse: int = 0
    # device type -> (how many devices of it the target has here, or None where only trying tells; in words)
    counts: dict[int, DeviceCount] | None = None
    # the compiled convert may answer for this target itself (table_type or handover_type): what the compiled
    # build tries before calling the Python convert
    in_c: bool = False
    # `imports` as the C routes read it: bit d set where its importer takes device type d (none past 63)
    c_imports: int = 0
    # the dtypes its importer lacks (lacks_dtypes, and lacks_dtypes_nd), two bytes each (code, bits), in order: the
    # C routes hand a tensor of one to Python's bridge, as they hand one of a vector dtype (None: it lacks none)
    c_lacks: bytes | None = None
    # whether its importer narrows the dtypes of import.narrows now (their setting, import.narrows_unless, read
    # as each array is bridged: it may change while the process runs); None: it narrows none
    narrowing: Callable[[], bool] | None = None


class DeviceCount(NamedTuple):
    """How many devices of a type a target has here (:func:`device_count`), and how that is known, in words."""

    number: int | None  # None: only trying tells
    why: str
    at_least: bool = False  # `number` is a lower bound (its device_count answered a truth: True, one at least)


# its route by the name or module convert's to= gave (an id for anything else), made once; convert looks to= up
# here before calling plan, and so does the compiled convert, which reads a Route's fields by their places in
# Route._fields (table_type, handover_type, refuse, importer, stream_of, c_imports, c_lacks)
ROUTES: dict[Any, Route] = {}
ROUTES_BY_TYPE = TypeCache()  # array type -> its route (kept no longer than the type)


def _array_type(adapter: Adapter) -> type | None:
    for name in adapter.array_types:
        module_name, _, qualname = name.rpartition(".")
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
        found = getattr(module, qualname, None)
        if isinstance(found, type):
            return found
    return None


def route_to(to: Any) -> Route:
    """The route to system ``to`` (a name, module or array type), made once and kept in :data:`ROUTES`."""
    if isinstance(to, type):
        route = ROUTES_BY_TYPE.get(to)
        if route is MISSING:
            route = route_to(resolve(to).name)  # a type's route is its library's
            ROUTES_BY_TYPE.put(to, route)
        return route  # type: ignore[no-any-return]
    key = to if isinstance(to, str | ModuleType) else id(to)
    route = ROUTES.get(key)
    if route is None:
        named = resolve(to)
        try:
            importlib.import_module(named.import_name)
        except ImportError as exc:
            raise ImportError(f"{PACKAGE}.convert(..., to={named.name!r}) needs {named.import_name}: {exc}") from None
        route = ROUTES[key] = make_route(for_release(named))  # the facts of the installed release
    return route


def _row_importer(adapter: Adapter) -> Any:
    """The row's ``import.function``, called with ``import.function_keywords`` where it has them (cuda.core's
    ``stream_ptr=-1``)."""
    fn = dotted(adapter.import_.function)
    return functools.partial(fn, **dict(adapter.import_.function_keywords)) if adapter.import_.function_keywords else fn


def make_route(adapter: Adapter, importer: Any = None, *, interface: Any = None, stream_of: Any = None) -> Route:
    """The route of a system whose row (resolved for the installed release) is ``adapter``: its importer
    (``importer``, else the row's ``import.function``), array type, what the C routes may do, the keywords its
    installed importer takes, its device forms, current stream and ``__cuda_array_interface__`` importer
    (``interface`` and ``stream_of`` override the row's, for a system under test that no row names)."""
    imp = adapter.import_  # how it takes DLPack (its row's [import])
    fn = importer if importer is not None else _row_importer(adapter)
    if imp.setup:
        dotted(imp.setup)()  # once per route: its importer needs it (warp.init)
    simple = _simple(imp)
    table_type = _array_type(adapter) if imp.exchange_api and simple and exchange.AVAILABLE else None
    legacy_only = imp.asks != Asks.VERSIONED
    # The C handover route (compiled build): the source's struct goes to the target's from_dlpack in a minimal
    # producer whose first versioned __dlpack__ call hands it over; for consumers the tests verified against the
    # installed release that ask for versioned capsules and have no exchange table (that route is faster still).
    verified_simple = simple and adapter.verified and not legacy_only
    handover_type = _array_type(adapter) if table_type is None and verified_simple else None
    if interface is None and imp.interface:
        try:
            interface = dotted(imp.interface)
        except (ImportError, AttributeError):  # absent in this configuration (numba's CUDA simulator)
            interface = None
    refuse_negative_strides = imp.layout != Layout.ANY
    ignores_readonly = imp.readonly == Readonly.IGNORED
    lacked = imp.lacks_dtypes + undefined(adapter)  # its row's, and those its release has no dtype object of
    viewer = dotted(imp.view_with) if lacked and imp.view_with else None
    bits = {ours: theirs for theirs, ours in adapter.export.bits} if imp.bits_via else None
    imports = _device_types(imp.devices)
    return Route(
        adapter=adapter,
        importer=fn,
        table_type=table_type,
        handover_type=handover_type,
        refuse_negative_strides=refuse_negative_strides,
        legacy_only=legacy_only,
        ignores_readonly=ignores_readonly,
        keywords=_keywords(fn, adapter),
        viewer=viewer,
        devices={} if imp.device == "namespace" else None,
        imports=imports,
        stream_of=stream_of if stream_of is not None else _stream_of(adapter),
        interface=interface,
        interface_types=_device_types(imp.interface_devices) if interface is not None else frozenset(),
        # every import read-only, or immutable arrays whose exports say read-only: a legacy capsule is safe
        legacy_safe=imp.readonly == Readonly.ALWAYS
        or (adapter.immutable and adapter.export.capsules == Capsules.VERSIONED),
        bits=bits,
        copy_with=dotted(imp.copy_with) if imp.copy_with else None,
        copy_from=_device_types(imp.copy_from),
        importer_nd=dotted(imp.function_nd) if imp.function_nd else None,
        by_dtype={name: dotted(fn) for name, fn in imp.by_dtype} if imp.by_dtype else None,
        bridges=refuse_negative_strides or legacy_only or ignores_readonly or viewer is not None
        or bits is not None or _bridges(imp) or bool(lacked),
        refuse=int(refuse_negative_strides) | 2 * int(ignores_readonly) | 4 * int(imp.byte_offset_items),
        counts={},
        in_c=(table_type or handover_type) is not None,
        c_imports=sum(1 << kind for kind in imports if kind < 64),
        **_lacked(imp, lacked),
        narrowing=_narrowing(imp) if imp.narrows else None,
    )


def _lacked(imp: Import, lacked: tuple[str, ...]) -> dict[str, Any]:
    """The Route's fields that say which dtypes the row's importer lacks: ``lacks`` (``lacked``: ``lacks_dtypes``
    and the dtypes its release has no object of, :func:`dlbind.crossing.undefined`; and every dtype outside
    ``by_dtype`` where it has one), ``lacks_nd`` (``lacks_dtypes_nd`` too), ``view_lacks``, the C routes'
    ``c_lacks``; and the vector dtypes it takes (``vectors``: ``lanes``)."""
    only = [name for name, _ in imp.by_dtype] if imp.by_dtype else None  # it has an importer of these dtypes only
    nd = lacked + imp.lacks_dtypes_nd
    return {
        "lacks": DTypeSet(lacked, only),
        "lacks_nd": DTypeSet(nd, only),
        "view_lacks": DTypeSet(imp.view_lacks),
        "vectors": DTypeSet(imp.lanes),
        "c_lacks": bytes(b for pair in _c_lacked(nd, imp.packed) for b in pair) or None,
    }


def _c_lacked(lacked: tuple[str, ...], packed: bool) -> list[tuple[int, int]]:
    """The ``(code, bits)`` the C routes hand to Python's bridge, by code: the dtypes ``lacked``, and unless the
    importer takes ``packed`` sub-byte data every sub-byte dtype (the bridge reads the tensor's padded flag:
    packed data it refuses, dlbind.bridges.packed)."""
    pairs = set(pairs_named_in(lacked))
    if not packed:
        pairs.update((code, bits) for code, bits in pairs_named_in(["*"]) if bits < 8)
    return sorted(pairs)


def _narrowing(imp: Import) -> Callable[[], bool]:
    """Whether the importer narrows ``import.narrows`` now: always, or while its setting (``import.narrows_unless``,
    a dotted attribute: ``jax.config.jax_enable_x64``) is false, read at each call."""
    if not imp.narrows_unless:
        return lambda: True
    holder, _, name = imp.narrows_unless.rpartition(".")
    # read where an array is bridged, never where the route is made: its importer may be absent until called
    return lambda: not getattr(dotted(holder), name)


def _simple(imp: Import) -> bool:
    """Whether an importer takes what the C routes give it as it is: a producer, of any layout and offset, copies
    honoured, no alignment, bool as bool, every device's data, shape and dtype through one function."""
    return (
        imp.takes == Takes.PRODUCER and imp.layout != Layout.COMPACT and imp.byte_offset
        and imp.copy == Copy.HONOURED and not imp.alignment and imp.bool_as == ImportBool.BOOL
        and not imp.copy_from  # data of those devices goes through its own constructor (import.copy_with)
        and not imp.ndims  # a shape it refuses is refused by the bridge
        and not imp.by_dtype  # its importer is picked by the dtype, by the bridge
        and not imp.narrows  # its importer copies some dtypes into narrower ones: the bridge says so
    )  # fmt: skip


def _bridges(imp: Import) -> bool:
    """Whether an array may need a bridge to the row's importer on the host routes for what the row says of the
    importer's layout, byte_offset, what it takes, its dimensions, dtypes, bool and alignment."""
    return (
        imp.layout == Layout.COMPACT or not imp.byte_offset or imp.byte_offset_items or imp.takes != Takes.PRODUCER
        or bool(imp.ndims) or bool(imp.lacks_dtypes or imp.lacks_dtypes_nd or imp.by_dtype)
        or imp.bool_as != ImportBool.BOOL or bool(imp.alignment) or bool(imp.narrows)
    )  # fmt: skip


def device_count(route: Route, device_type: int) -> DeviceCount:
    """How many devices of ``device_type`` the route's target has here, and how that is known, in words
    (:class:`DeviceCount`: a number of None where only trying can tell, ``at_least`` where it is only a
    lower bound). Asked once per target and device type.

    From the row first: a device type outside its ``import.devices`` holds none of its arrays. Then the target
    itself: its array API namespace's devices (``import.device = "namespace"``), or its ``import.device_count``
    function. Else the machine, as the dlbind backend of that device type finds it (no device there: none for
    any target); where no backend is installed, only trying tells."""
    counts = route.counts if route.counts is not None else {}
    found = counts.get(device_type)
    if found is None:
        found = counts[device_type] = _count(route, device_type)
    return found


def _count(route: Route, device_type: int) -> DeviceCount:
    a = route.adapter
    name = _named(device_type)
    if name not in a.import_.devices:
        return DeviceCount(0, f"{a.name} holds no {name} arrays (its devices: {', '.join(a.import_.devices)})")
    if device_type in STREAM_FREE and device_type in HOST_ACCESSIBLE:
        return DeviceCount(1, "the host")
    if a.import_.device == "namespace":
        found = namespace_devices(a)
        if route.devices is not None:
            route.devices.update(found)  # its device objects, for device= (dlbind.bridges.device_arg)
        listed = ", ".join(f"{device_name(t)}:{i}" for t, i in found) or "none"
        held = sum(1 for t, _ in found if t == device_type)
        return DeviceCount(held, f"{a.import_.namespace}'s devices here: {listed}")
    if a.import_.device_count:
        try:
            count_of = dotted(a.import_.device_count)
        except (ImportError, AttributeError):  # absent in this release: the machine may still say
            count_of = None
        if count_of is not None:
            try:
                said = count_of()
            except Exception as exc:  # its runtime has no device (CuPy without a driver raises)
                return DeviceCount(0, f"{a.import_.device_count}() raised {type(exc).__name__}: {exc}")
            if said is True:  # a truth, not a count (numba.cuda.is_available): one device at least
                return DeviceCount(1, f"{a.import_.device_count}() is True", at_least=True)
            return DeviceCount(int(said), f"{a.import_.device_count}() is {int(said)}")
    machine, why = _backends.device_count(device_type)
    if machine is None:
        return DeviceCount(None, f"{a.name}'s row names no device count, and {why}")
    return DeviceCount(None if machine else 0, why)  # a device here is not yet one the target has: only trying tells


def namespace_devices(adapter: Adapter) -> dict[tuple[int, int], Any]:
    """The devices of the target's array API namespace (``import.namespace``) that can hold an array here:
    ``(device type, index)``, each read from an empty array's ``__dlpack_device__``, -> the namespace's device."""
    namespace = importlib.import_module(adapter.import_.namespace)
    found: dict[tuple[int, int], Any] = {}
    for candidate in namespace.__array_namespace_info__().devices():
        if candidate is None:
            continue
        try:
            where = namespace.empty((0,), device=candidate).__dlpack_device__()
        except Exception:  # a device that cannot hold an array here
            continue
        found.setdefault((int(where[0]), int(where[1])), candidate)
    return found


def _device_types(names: tuple[str, ...]) -> frozenset[int]:
    return frozenset(DEVICE_BY_NAME[n] for n in names if n in DEVICE_BY_NAME)


def _stream_of(adapter: Adapter) -> Any:
    """The target's current stream on a device of its own as a function of the device index (``import.stream``):
    its stream object's handle, read as a DLPack stream integer (a null handle is the device rule's default
    stream, which the caller applies). None when the row does not say."""
    if not adapter.import_.stream:
        return None
    call, attribute = adapter.import_.stream, adapter.import_.stream_attribute
    found: list[Any] = []

    def current(index: int) -> int | None:
        if not found:
            found.append(dotted(call))
        handle = getattr(found[0](index), attribute)
        return int(handle) if handle else None

    return current


def _keywords(fn: Any, adapter: Adapter) -> frozenset[str]:
    """The keywords the installed release's importer takes; the table's when it cannot be read."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        return frozenset(adapter.import_.keywords)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return frozenset(adapter.import_.keywords)
    return frozenset(k for k in ("device", "copy") if k in params and k in adapter.import_.keywords)


# -- decisions -----------------------------------------------------------------------------------------


#: The kinds of decision: the producer is the target's own array (itself, or the target's own importer of it);
#: stream-free memory, exchanged by the host routes (C where they apply, bridged in Python otherwise); a
#: device with streams where nothing can need a bridge: the producer goes straight to the target's importer
#: (one exchange, asked on the target's own stream); a device with streams where dlbind stands in between
#: (a relay that imports on the stream the target asks with, checks, and copies on the device when a bridge
#: needs it); memory the target imports through ``__cuda_array_interface__``; device memory the target
#: cannot import, moved to the host first (at bus speed, by the device's backend); refused.
class Kind(IntEnum):
    """The kind of a :class:`Decision` (the C fast path reads it as the int it is)."""

    SAME = 0
    HOST = 1
    DIRECT = 2
    RELAY = 3
    INTERFACE = 4
    HOST_COPY = 5
    REFUSE = 6


SAME, HOST, DIRECT, RELAY, INTERFACE, HOST_COPY, REFUSE = Kind
KINDS = tuple(kind.name.lower().replace("_", " ") for kind in Kind)  # "same", ..., "host copy", "refuse"


class DeviceKeyword(IntEnum):
    """The device= keyword of a Decision: not passed; the importer's device= in its own form; the importer takes
    none, so the device asked must be where the data is (its index is compared as the exchange runs)."""

    NO_DEVICE = 0
    DEVICE_ARG = 1
    DEVICE_HERE = 2


NO_DEVICE, DEVICE_ARG, DEVICE_HERE = DeviceKeyword


class StreamShape(IntEnum):
    """The shape of ``stream=`` in a Decision's key: not given; -1 (the producer is not to synchronise); a stream."""

    NONE = 0
    UNSYNCHRONISED = 1
    GIVEN = 2


class Same(NamedTuple):
    """What a SAME decision adds: the target's own array."""

    itself: bool = False  # the producer itself is the answer (when on the device asked)


class Host(NamedTuple):
    """What a HOST or HOST_COPY decision adds: how the data reaches the host routes."""

    to_host: bool = False  # the data is copied to the host first (HOST_COPY always; device= asks it there)
    in_place: bool = False  # with to_host: memory the host reads where it is (pinned), asked for as the CPU's, no copy
    copy_in: bool = False  # HOST: the target's own constructor copies the data in (import.copy_with)
    c_route: bool = False  # HOST: the compiled build's C route (a plain call, host memory, a table or handover)
    handover: bool = False  # HOST: the imported Tensor goes to the importer as it is (nothing to bridge)


class Interface(NamedTuple):
    """What an INTERFACE decision adds."""

    stream_of: bool = False  # ready on the target's current stream (import.stream)


class Direct(NamedTuple):
    """What a DIRECT decision adds."""

    # the producer refuses a stream the target may ask on (export.streams_refused): the target's current stream
    # is read first, and the exchange goes through dlbind's relay when it is one of those
    watch_stream: bool = False


class Refused(NamedTuple):
    """What a REFUSE decision adds."""

    describe: bool = True  # the message names the producer's array


#: What a Decision of each kind adds (RELAY: nothing).
Payload = Same | Host | Interface | Direct | Refused | None


class Decision(NamedTuple):
    """Everything :func:`dlbind.convert` does with arrays of one producer type for one target, on one device
    type, for one shape of keywords (made once by :func:`decide`, kept in the producer's plan; the exchange
    runs it in one pass and decides nothing again). What is left to the data itself is the bridge of the
    host routes (negative strides, read-only data, a dtype the target lacks: facts of one array).

    Its fields mean the same for every kind; what one kind alone says is its ``payload``: :class:`Same`,
    :class:`Host` (HOST and HOST_COPY), :class:`Interface`, :class:`Direct`, :class:`Refused` (RELAY: None)."""

    kind: Kind
    why: str = ""  # RELAY: why dlbind stands in between; REFUSE (and SAME when not itself): the refusal
    device_kw: DeviceKeyword = NO_DEVICE  # how device= reaches the importer
    copy_kw: bool | None = None  # copy= for the importer (None: not passed)
    copy_here: bool = False  # copy=True, and the importer cannot be asked for one: dlbind copies
    payload: Payload = None

    def __repr__(self) -> str:
        return f"Decision({KINDS[self.kind]}{': ' + self.why if self.why else ''})"


#: The Host payload read for a decision of another kind (``d.payload if isinstance(d.payload, Host) else NO_HOST``).
NO_HOST = Host()


class Plan(NamedTuple):
    """One call of :func:`dlbind.convert`, planned (by ``dlbind.conversion.plan``): the Decision for the producer's
    type, the target, the device type and the keywords' shape, and what this call adds — the producer as it is
    exchanged, where its data is, the importer's keywords resolved, the refusal of this call. ``convert`` runs
    it (:func:`dlbind.bridges.run`) and decides nothing again; ``explain`` renders it. What the data itself adds
    (its bridge: negative strides, read-only data, a dtype the target lacks) is read from the one import by
    :func:`dlbind.bridges.bridge_of`, the same for both."""

    decision: Decision
    producer: Any  # what is exchanged: the array as asked, dlbind's producer of it, or its import (below)
    source: ExportPlan  # the producer's plan
    route: Route
    here: DevicePair  # where the producer's data is
    device: Any = None  # device= as asked (None: not given), as the user wrote it (for messages)
    copy: bool | None = None
    stream: int | None = None
    kwargs: dict[str, Any] | None = None  # the importer's keywords for this call (device= in its own form)
    refused: str = ""  # why this call is refused ("": it is not)
    itself: bool = False  # the producer is the answer
    untested: str = ""  # what only trying can tell of this call (explain says it in words)
    copied_by: str = ""  # the producer's own export is a new copy each time (export.copies): by what
    asked: DevicePair | None = None  # device= parsed (None: not given)


def decide(
    source: ExportPlan,
    route: Route,
    device_type: int,
    device: int | None = None,
    copy: bool | None = None,
    stream: StreamShape = StreamShape.NONE,
    lacked: bool = False,
) -> Decision:
    """The decision for arrays of ``source``'s type on ``device_type`` converted to ``route``'s system, with
    ``device=`` a device of type ``device`` (None: not given), ``copy=`` ``copy`` and ``stream=`` of shape
    ``stream`` (:class:`StreamShape`): made once per (type, target, device type, keyword shape) and
    kept in the producer's plan (``ExportPlan.pairs``, under :func:`key`). ``lacked``: the target's own array,
    of a dtype its own importer lacks (asked only where the first decision hands such an array to that importer)."""
    at = key(route, device_type, device, copy, stream, lacked)
    found = source.pairs.get(at)
    if found is None:
        found = source.pairs[at] = _decide(source, route, device_type, device, copy, stream, lacked)
        plain = device is None and copy is None and stream == StreamShape.NONE
        if plain and isinstance(found.payload, Direct):
            # the plain call hands the producer straight to the importer (after reading the target's current
            # stream, where the producer refuses some: watch_stream): the compiled convert does it in C
            name = route.adapter.name
            source.direct[name] = {**source.direct.get(name, {}), int(device_type): found.payload.watch_stream}
    return found


def key(
    route: Route, device_type: int, device: int | None, copy: bool | None, stream: StreamShape, lacked: bool = False
) -> tuple[Any, ...]:
    """A Decision's key in its producer's plan: (target, device type, device= type, copy=, stream= shape), and
    ``True`` after them for the target's own array of a dtype its importer lacks."""
    plain = (route.adapter.name, device_type, device, copy, stream)
    return (*plain, True) if lacked else plain


def _refused(why: str, describe: bool = False) -> Decision:
    return Decision(REFUSE, why, payload=Refused(describe))


def _decide(
    source: ExportPlan, route: Route, here: int, device: int | None, copy: bool | None, stream: StreamShape,
    lacked: bool = False,
) -> Decision:  # fmt: skip
    kind, why = _kind(source, route, here)
    a = route.adapter
    if kind == SAME:  # the target's own array: itself, or what the target's own importer makes of it
        keywords = _keywords_for(route, here, device, copy)
        if isinstance(keywords, Decision):  # refused, unless the producer itself is the answer
            return Decision(SAME, keywords.why, payload=Same(itself=not copy and not stream))
        device_kw, copy_kw, copy_here = keywords
        if not copy and not stream:
            return Decision(SAME, device_kw=device_kw, copy_kw=copy_kw, payload=Same(itself=True))
        # (an importer of numpy arrays: not its own; an array of a dtype its own importer lacks, which its export
        # refuses too, such as numpy's bfloat16: through dlbind's import, whose bridge views it)
        if not copy_here and not stream and a.import_.takes == Takes.PRODUCER and not lacked:
            return Decision(SAME, device_kw=device_kw, copy_kw=copy_kw, payload=Same())
        kind = HOST if here in STREAM_FREE else RELAY
        why = "a copy dlbind makes" if copy_here else "ordered on the stream given"
    if device is not None and here not in HOST_ACCESSIBLE and device in HOST_ACCESSIBLE:
        kind = HOST  # the host asked for: the producer's host copy (or the backend's), then the host routes
    if kind == HOST:
        return _host(route, here, device, copy, stream)
    if kind == REFUSE:
        return _refused(why, describe=True)
    if kind == HOST_COPY:
        if copy is False:
            return _refused(f"{why}: the data needs a host copy, and copy=False forbids it")
        return Decision(HOST_COPY, why, payload=Host(to_host=True))
    if kind == INTERFACE:
        if device is not None and device != here:
            return _refused(f"{a.import_.interface} takes the data where it is, not on {device_name(device)}")
        if copy is False and a.import_.copy == Copy.ALWAYS:
            return _refused(f"{a.name} copies on every import, and copy=False forbids it")
        on_target = not stream and route.stream_of is not None and here not in HOST_ACCESSIBLE
        return Decision(
            INTERFACE, why, device_kw=NO_DEVICE if device is None else DEVICE_HERE, copy_here=bool(copy),
            payload=Interface(stream_of=on_target),
        )  # fmt: skip
    keywords = _keywords_for(route, here, device, copy)
    if isinstance(keywords, Decision):
        return keywords
    device_kw, copy_kw, copy_here = keywords
    if kind == DIRECT and a.import_.lands_on and DEVICE_BY_NAME[a.import_.lands_on] != here:
        # its arrays are on a device of their own whatever the data's: the plan checks that device first
        kind, why = RELAY, f"{a.name}'s arrays are on {a.import_.lands_on}"
    if kind == DIRECT and not copy_here and not stream:
        watch = any(device == here for device, _ in source.refused_streams)
        return Decision(DIRECT, device_kw=device_kw, copy_kw=copy_kw, payload=Direct(watch_stream=watch))
    if kind == DIRECT:
        why = "a copy dlbind makes on the device" if copy_here else "ordered on the stream given"
    return Decision(RELAY, why, device_kw=device_kw, copy_kw=copy_kw, copy_here=copy_here)


def _named(device_type: int) -> str:
    """A device type's name for a Decision, read from the generated table (as ``devices.device_name`` says it,
    without a call out of the module that decides)."""
    return DEVICE_NAMES.get(device_type) or f"device type {device_type}"


def _host(route: Route, here: int, device: int | None, copy: bool | None, stream: int) -> Decision:
    """The host routes' decision: C where they apply (compiled build, a plain call, host data), else a zero-copy
    Tensor bridged in Python; device memory the target cannot import, or the host asked for by ``device=``, is
    copied to the host first (by the producer, which knows its device, or the device's backend); memory the host
    reads where it is (pinned) is asked for as the CPU's there, and ``copy=`` holds for it as for the CPU's."""
    a = route.adapter
    plain = device is None and copy is None and not stream
    on_host = here in HOST_ACCESSIBLE
    copy_in = here in route.copy_from and here not in route.imports
    if device is not None:
        to_host = device in HOST_ACCESSIBLE and device != here
        reads_host = device in HOST_ACCESSIBLE and not copy_in  # its importer is handed host data
    else:
        to_host = reads_host = not copy_in and _named(here) not in a.import_.devices
    if reads_host and "cpu" not in a.import_.devices:  # a target of device arrays only (CuPy)
        return _refused(f"{a.name} imports from {', '.join(a.import_.devices)} only")
    why = ""
    in_place = to_host and on_host  # host memory already (pinned): read in place as the CPU's, copied as the CPU's
    if in_place:
        why = f"{_named(here)} memory is readable by the host: imported as cpu memory"
    elif to_host:
        if copy is False:
            return _refused(f"{a.name} needs a host copy of {_named(here)} data, and copy=False forbids it")
        if device is not None:
            why = f"device={device_name(device)} asked"
        else:
            why = f"{a.name} imports from {', '.join(a.import_.devices)} only"
        copy_in = False
    elif copy_in:
        copy_in = device is None or device in route.imports
        why = f"{a.name} holds {', '.join(a.import_.devices)} arrays only: its constructor copies the data in"
        if copy_in and copy is False:
            return _refused(
                f"{a.name} holds {', '.join(a.import_.devices)} memory only: importing {_named(here)} data copies, and "
                "copy=False forbids it"
            )
    # C where the producer is asked as Python asks it: a plain call of data the target imports where it is (host
    # memory the host is asked for, pinned or managed, is asked for on the CPU, in Python)
    c_route = plain and on_host and not to_host and native is not None and route.in_c
    keywords: tuple[DeviceKeyword, Any, bool] = (NO_DEVICE, None, False)  # a copy-in takes none (its constructor's own)
    if not copy_in:  # the importer's, for data where it is given it (on the host after a host copy)
        found = _keywords_for(
            route, DEVICE_BY_NAME["cpu"] if to_host else here, device, copy if in_place or not to_host else None
        )
        if isinstance(found, Decision):
            return found
        keywords = found
    device_kw, copy_kw, copy_here = keywords
    handover = plain and not route.bridges
    move = Host(to_host=to_host, in_place=in_place, copy_in=copy_in, c_route=c_route, handover=handover)
    return Decision(HOST, why, device_kw=device_kw, copy_kw=copy_kw, copy_here=copy_here, payload=move)


def _keywords_for(
    route: Route, here: int, device: int | None, copy: bool | None
) -> tuple[DeviceKeyword, Any, bool] | Decision:
    """How ``device=`` and ``copy=`` reach the target's importer of data on ``here``: (device keyword, its
    ``copy=`` or None, whether dlbind must make the copy ``copy=True`` asks for), or the refusal when
    ``copy=False`` or ``device=`` cannot be honoured."""
    a = route.adapter
    device_kw = NO_DEVICE
    if device is not None:
        # the importer's own device=; else the device asked must be where the data is (the exchange compares
        # them, and names both when they differ)
        device_kw = DEVICE_ARG if "device" in route.keywords and a.import_.device != "none" else DEVICE_HERE
    copy_kw, copy_here = None, False
    if copy and not (a.import_.copy == Copy.HONOURED and "copy" in route.keywords) and a.import_.copy != Copy.ALWAYS:
        copy_here = True  # the importer cannot be asked for a copy: dlbind makes it
    elif copy is False and a.import_.copy == Copy.ALWAYS:
        return _refused(f"{a.name} copies on every import ({a.import_.function}), and copy=False forbids it")
    elif copy is not None and "copy" in route.keywords and a.import_.copy == Copy.HONOURED:
        copy_kw = copy
    return device_kw, copy_kw, copy_here


def _kind(source: ExportPlan, route: Route, device_type: int) -> tuple[int, str]:
    """The kind of route for arrays of ``source``'s type on ``device_type`` to ``route``'s system, and why."""
    a = route.adapter
    if source.library == a.name:
        return SAME, ""
    if device_type not in DEVICE_NAMES:
        return REFUSE, (
            f"device type {device_type} is not named by this dlbind's DLPack header, so no policy says how "
            f"{a.name} could take its memory (a header bump that names it would)"
        )
    if device_type in route.interface_types:
        return INTERFACE, f"{a.import_.function} refuses {DEVICE_NAMES[device_type]} memory"
    if device_type in STREAM_FREE:
        return HOST, ""
    if device_type not in route.imports:
        if any(t in HOST_ACCESSIBLE for t in route.imports) or device_type in HOST_ACCESSIBLE:
            return HOST_COPY, f"{a.name} imports from {', '.join(a.import_.devices)} only"
        return REFUSE, f"{a.name} imports from {', '.join(a.import_.devices)} only"
    why = _between(source, route, device_type)
    return (RELAY, why) if why else (DIRECT, "")


def _between(source: ExportPlan, route: Route, device_type: int) -> str:
    """Why dlbind must stand between producers of ``source``'s type and ``route``'s importer on a device with
    streams ("" when nothing can need a bridge: the producer is handed over as it is)."""
    a = route.adapter
    reasons = []
    if route.stream_of is None and any(device == device_type for device, _ in source.refused_streams):
        # a target that does not say its stream may ask one of them: asked through the relay, which knows
        reasons.append(f"its __dlpack__ refuses streams {a.name} may ask on")
    if source.row is None:
        reasons.append("its producer has no row (what it exports is checked on the way)")
    if source.via is not None:
        reasons.append(f"it exports through {source.row.export.via if source.row else 'a function'}, not __dlpack__")
    if source.unsigned_strides:
        reasons.append("its capsules carry negative strides as unsigned numbers")
    if _LAYOUT_PROMISE[source.layout] < _LAYOUT_PROMISE[a.import_.layout]:
        reasons.append(f"{a.name} imports {a.import_.layout} strides only")
    if not a.import_.byte_offset:
        reasons.append(f"{a.name} ignores byte_offset")
    if a.import_.alignment:
        reasons.append(f"{a.name} views {a.import_.alignment}-byte aligned data only")
    if source.readonly and (route.ignores_readonly or (route.legacy_only and not route.legacy_safe)):
        reasons.append(f"{a.name} would take read-only data writable")
    if route.legacy_only and source.readonly:
        reasons.append(f"{a.name} asks for legacy capsules, which cannot say read-only")
    elif source.readonly and source.capsules == Capsules.LEGACY and not route.legacy_safe:
        reasons.append(
            f"its exports are legacy capsules, which cannot say read-only: {a.name} would take them writable"
        )
    if route.lacks.patterns or route.bits:
        reasons.append(f"{a.name} lacks some dtypes, or takes them as their bits")
    if a.import_.narrows:
        reasons.append(f"{a.name} narrows {', '.join(ours for ours, _ in a.import_.narrows)}")
    if a.import_.bool_as != ImportBool.BOOL or source.python:
        reasons.append("bool travels under another dtype")
    if a.import_.takes != Takes.PRODUCER:
        reasons.append(f"{a.import_.function} takes a {a.import_.takes}, not a producer")
    if a.import_.ndims:
        reasons.append(f"{a.name} imports {a.import_.ndims[0]} to {a.import_.ndims[1]} dimensions only")
    return "; ".join(reasons)
