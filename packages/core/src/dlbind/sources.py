"""Producer types: what one exports and how it is asked (its :class:`ExportPlan`), decided once from its row.

Every fact of ``spec/adapters.toml`` that an import needs about its producer (the export guards to
check, how its ``__dlpack__`` refuses, whether its arrays are immutable, how its capsules carry bool,
how it exports when it has no ``__dlpack__``, how it must be called, which devices its arrays live on)
is read from the row of the installed release *once per type* into an :class:`ExportPlan`, kept by
:func:`export_plan` in a per-type cache. The consumer, the C fast path (which reads the same plan
objects: ``dlbind._wiring`` hands it :func:`export_plan`) and ``convert`` follow the plan; none of
them looks a row up again (``dlbind._libraries.row_lookups`` counts the lookups; a test holds it
still across repeated exchanges).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, NoReturn

import dlbind._capi as _capi
import dlbind.capsule as capsule
from dlbind._generated.enums import DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME
from dlbind._libraries import MISSING, TypeCache, dotted, release_row_of_type
from dlbind.described import Exporter, buffer_view, describe
from dlbind.devices import stream_free
from dlbind.dtypes import BOOL, DType, lookup
from dlbind.validate import contiguous_strides

if TYPE_CHECKING:
    from dlbind._generated.adapters import Adapter

__all__ = [
    "BARE",
    "PLANS",
    "STREAM",
    "Ask",
    "ExportPlan",
    "check_guards",
    "export_plan",
    "exported",
    "help_for",
    "library_export",
    "plan_of",
    "to_ask",
    "truthy_guard",
]

STREAM, BARE = 1, 2  # call styles: __dlpack__ takes stream= only / no keywords (learned once per type)


class ExportPlan:
    """What dlbind does to import from one producer type (one plan per type, made by :func:`export_plan` from its
    row: :func:`plan_of`), a frozen record built by keyword.

    ``row``: its library's row for the installed release (None: a type no row names); ``library``: its
    name (``""``); ``guards``: ``(attribute, is a method)`` pairs that, when truthy, forbid the export;
    ``complex_guards``: the names among them only a complex array can make truthy; ``refusal_help``: (words of a
    refusal, what the user can do instead) pairs;
    ``immutable``: imports are sealed read-only; ``refusal``: the exception its ``__dlpack__`` refuses an
    array with (BufferError, or TypeError before numpy 1.24); ``via``: the function exporting an array
    without ``__dlpack__`` (None: ``__dlpack__``); ``host``: the method giving a host copy when ``via``
    refuses; ``bool_method``/``bool_name``: how to tell bool from the uint8 its capsules say;
    ``python``: imports need Python's finishing (the bool reading); ``host_only``: its arrays live in
    stream-free host memory only (no ``__dlpack_device__`` call is needed to choose a stream);
    ``layout``/``readonly``: the strides and read-only data its exports may carry (for ``convert``'s
    decision to hand over without looking); ``unsigned_strides`` and ``interface``: its capsules carry
    negative strides as unsigned numbers, so such arrays are imported through ``interface`` instead;
    ``refused_streams``: ``(device type, stream)`` pairs its ``__dlpack__`` refuses although the device's rule
    allows them (``export.streams_refused``: asked on the device's default stream instead);
    ``call_style``: learned on the first refusal of ``max_version`` (:data:`STREAM` or :data:`BARE`) from the
    type's own ``__dlpack__`` (:func:`dlbind.asking.learn`): never from a method taking ``*args``/``**kwargs`` (a
    wrapper, whose answer is one instance's), and forgotten when the type's ``__dlpack__`` is replaced;
    ``lasting``: the type lives as long as the process (its plan is kept for good);
    ``pairs``: the decisions of ``dlbind.convert`` for this type, per target, device type and keyword shape
    (made by :func:`dlbind.routes.decide` once each); ``direct``: the targets whose plain ``convert`` (no keywords)
    of this type hands the producer straight to their importer, and the device types on which it does, each
    with whether the target's current stream is read first (``Direct.watch_stream``: the producer refuses some
    streams, and is then relayed): the DIRECT decisions among ``pairs``, noted by ``decide`` as it makes them;
    the compiled convert reads them.
    """

    __slots__ = (
        "__weakref__",
        "_learned",
        "bits",
        "bits_via",
        "bool_method",
        "bool_name",
        "capsules",
        "complex_guards",
        "direct",
        "guards",
        "host",
        "host_only",
        "immutable",
        "interface",
        "lasting",
        "layout",
        "library",
        "pairs",
        "python",
        "readonly",
        "refusal",
        "refusal_help",
        "refused_streams",
        "refuses_copy",
        "row",
        "unsigned_strides",
        "via",
    )

    row: Adapter | None
    library: str
    capsules: Literal["legacy", "versioned"]  # the row's export.capsules
    bits: Any
    bits_via: str
    guards: tuple[tuple[str, bool, bool], ...]
    complex_guards: frozenset[str]
    refusal_help: tuple[tuple[str, str], ...]
    immutable: bool
    refusal: type[Exception]
    via: Any
    host: str
    bool_method: str
    bool_name: str
    python: bool
    host_only: bool
    layout: Literal["any", "compact", "nonnegative"]  # the row's export.layout
    lasting: bool
    readonly: bool
    unsigned_strides: bool
    refused_streams: frozenset[tuple[int, int]]
    interface: str
    refuses_copy: bool  # its __dlpack__ refuses copy=True: asked without it, the import is copied instead
    _learned: tuple[int, Any, Any] | None  # (style, weakref to the type, the __dlpack__ it was learned from)
    pairs: dict[tuple[Any, ...], Any]
    direct: dict[str, dict[int, bool]]

    def __init__(
        self,
        *,
        row: Adapter | None = None,
        library: str = "",
        capsules: Literal["legacy", "versioned"] = "versioned",
        bits: Any = None,
        bits_via: str = "",
        guards: tuple[tuple[str, bool, bool], ...] = (),
        complex_guards: frozenset[str] = frozenset(),
        refusal_help: tuple[tuple[str, str], ...] = (),
        immutable: bool = False,
        refusal: type[Exception] = BufferError,
        via: Any = None,
        host: str = "",
        bool_method: str = "",
        bool_name: str = "",
        python: bool = False,
        host_only: bool = False,
        layout: Literal["any", "compact", "nonnegative"] = "any",
        readonly: bool = True,
        unsigned_strides: bool = False,
        refused_streams: frozenset[tuple[int, int]] = frozenset(),
        interface: str = "",
        refuses_copy: bool = False,
    ) -> None:
        """A plan of the facts given (:func:`plan_of` gives a row's); the defaults are a type no row names."""
        facts = dict(locals())
        del facts["self"]
        for name, value in facts.items():
            object.__setattr__(self, name, value)
        object.__setattr__(self, "_learned", None)
        object.__setattr__(self, "lasting", False)
        object.__setattr__(self, "pairs", {})  # dlbind.routes.key(...) -> dlbind.routes.Decision
        object.__setattr__(self, "direct", {})  # target name -> {device type: watch_stream} of plain DIRECT decisions

    def __setattr__(self, name: str, value: Any) -> None:
        """A plan is frozen but for what is learned of its type after it is made: how its ``__dlpack__`` takes an
        older call (``_learned``) and whether the type lasts (``lasting``)."""
        if name not in ("_learned", "lasting"):
            raise AttributeError(f"an ExportPlan is frozen: {name} is made with it ({capsule.PACKAGE}.sources.plan_of)")
        object.__setattr__(self, name, value)

    @property
    def call_style(self) -> int:
        """How the type's ``__dlpack__`` is asked (0: with every keyword; :data:`STREAM`, :data:`BARE`), as
        learned from the method now on the type (the C fast path reads this too). What was learned is one record,
        read and replaced whole: another thread never sees one learning's style with another's method."""
        learned = self._learned
        if learned is None:
            return 0
        style, kind, method = learned
        kind = kind()
        if kind is None or getattr(kind, "__dlpack__", None) is not method:  # replaced since: ask anew
            self._learned = None
            return 0
        return style

    def refuse(self, x: Any, name: str, is_method: bool, negated: bool = False) -> NoReturn:
        """Raise the BufferError of ``x``, of this plan's type, whose export guard ``name`` holds
        (``export.guards`` in spec/adapters.toml: truthy, or falsy where ``negated``): its library's own, from its
        ``__dlpack__``, or dlbind's when that forgets the check; either ends with what to do instead where the
        plan has ``refusal_help``. The compiled build's exchange calls it too (for a guard it found holding)."""
        try:
            x.__dlpack__()  # raises the library's BufferError (torch: conjugate bit, requires_grad, ...)
        except BufferError as exc:
            if not (said := help_for(self, exc)):
                raise
            raise BufferError(f"{exc}{said}") from exc
        shown = f"{name}()" if is_method else name
        said = "false: its DLPack export would not say so" if negated else "true: its DLPack export would drop that"
        refusal = f"{type(x).__name__}.{shown} is {said} (wrong values), so it is refused"
        raise BufferError(refusal + help_for(self, BufferError(refusal)))

    def uint8_read_as(self, x: Any) -> int:
        """The dtype code that a uint8 import of ``x`` (of this plan's type) is read as: kDLBool where ``x``
        is a bool array whose capsules cannot say bool (``export.bool = "uint8"``: ``bool_method`` answers
        ``bool_name``), else -1 (uint8 it is). Both builds' imports finish through it (``python`` plans only)."""
        if not self.python or BOOL.code < 0:  # no row fact, or a header without kDLBool
            return -1
        return BOOL.code if str(getattr(x, self.bool_method)()) == self.bool_name else -1

    def __repr__(self) -> str:
        return f"ExportPlan({self.library or 'no row'})"


def plan_of(row: Adapter | None) -> ExportPlan:
    """The :class:`ExportPlan` of a type that ``row`` names (None: no row), each fact read from the row."""
    if row is None:
        return ExportPlan()
    from dlbind._generated.adapters import ExportBool, NegativeStrides, Refusal  # loaded with the row already

    e = row.export  # the row's [export] table
    python = e.bool_as == ExportBool.UINT8
    devices = [DEVICE_BY_NAME.get(name) for name in e.devices]
    bits = e.bits and e.bits_via
    return ExportPlan(
        row=row,
        library=row.name,
        capsules=e.capsules,
        bits=_Bits(e.bits_of, e.bits) if bits else None,
        bits_via=e.bits_via.removesuffix("()") if bits else "",
        guards=tuple(_guard(g) for g in e.guards),
        # truthy for complex arrays only: the compiled exchange reads them after the table says the dtype (the
        # Python path reads every guard before the export: the same answer, as the others are never truthy)
        complex_guards=frozenset(sys.intern(g.removesuffix("()")) for g in e.complex_guards),
        refusal_help=e.refusal_help,
        immutable=row.immutable,
        refusal=TypeError if e.refusal == Refusal.TYPE_ERROR else BufferError,
        via=None if e.via == "__dlpack__" else _exporter(e.via, e.via_keywords),
        host=e.host.removesuffix("()"),
        python=python,
        bool_method=e.dtype.removesuffix("()") if python else "",
        bool_name=e.bool_name if python else "",
        host_only=bool(devices) and all(d is not None and stream_free(d) for d in devices),
        layout=e.layout,
        readonly=row.immutable or e.readonly,
        unsigned_strides=e.negative_strides == NegativeStrides.UNSIGNED,
        refused_streams=frozenset(_refused_stream(entry) for entry in e.streams_refused),
        interface=e.interface,
        refuses_copy=e.refuses_copy,
    )


def _guard(entry: str) -> tuple[str, bool, bool]:
    """An ``export.guards`` entry (``"is_conj()"``, ``"requires_grad"``, ``"not is_contiguous"``) as ``(name, is
    a method, negated)``: a negated guard holds when the value is falsy."""
    name = entry.removeprefix("not ")
    return sys.intern(name.removesuffix("()")), name.endswith("()"), name != entry


def _refused_stream(entry: str) -> tuple[int, int]:
    """An ``export.streams_refused`` entry (``"cuda:2"``) as ``(device type, stream)``."""
    name, _, stream = entry.partition(":")
    return int(DEVICE_BY_NAME[name]), int(stream)


def _exporter(via: str, keywords: tuple[tuple[str, Any], ...] = ()) -> Any:
    """``export.via`` as a function of the array: a method ``name()`` or a dotted function (called with
    ``export.via_keywords``)."""
    if via.endswith("()"):
        name = via[:-2]
        return lambda x: getattr(x, name)()
    return _Lazy(via, dict(keywords))


class _Lazy:
    """A dotted function imported on its first call (its module is the library's own: imported by then)."""

    __slots__ = ("fn", "keywords", "path")

    def __init__(self, path: str, keywords: dict[str, Any]) -> None:
        self.path, self.fn, self.keywords = path, None, keywords

    def __call__(self, x: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = dotted(self.path)
        return fn(x, **self.keywords) if self.keywords else fn(x)


class _Bits:
    """A library's dtypes that travel as their bits (``export.bits``): its dtype objects (attributes of the module
    ``bits_of``, looked up on first use: the library is imported by then) -> dlbind's dtype."""

    __slots__ = ("by_dtype", "module", "names")

    def __init__(self, module: str, names: tuple[tuple[str, str], ...]) -> None:
        self.module, self.names = module, names
        self.by_dtype: list[tuple[Any, DType]] | None = None

    def of(self, dtype: Any) -> DType | None:
        """dlbind's dtype for the library's ``dtype`` when it travels as its bits, else None."""
        if self.by_dtype is None:
            try:
                module = dotted(self.module)
            except ImportError:  # an array of the library's type without the library's dtypes module: none apply
                module = None
            found = [(name, ours) for name, ours in self.names if hasattr(module, name)]
            self.by_dtype = [(getattr(module, name), lookup(ours)) for name, ours in found]
        return next((ours for theirs, ours in self.by_dtype if dtype == theirs), None)


_UNSIGNED = {8: "uint8", 16: "uint16", 32: "uint32", 64: "uint64"}


def _bits_export(x: Any, plan: ExportPlan, via: Any) -> object | None:
    """A capsule of ``x``'s host copy made through its bits (``export.bits``: its export would widen the dtype),
    read as dlbind's dtype; None when ``x``'s dtype is none of them."""
    ours = plan.bits.of(getattr(x, "dtype", None))
    if ours is None:
        return None
    host = via(getattr(x, plan.bits_via)(_UNSIGNED[ours.bits]))  # e.g. x.bitcast("uint16").numpy()
    iface = host.__array_interface__
    item = ours.itemsize
    strides = iface["strides"]
    elements = contiguous_strides(tuple(host.shape)) if strides is None else tuple(s // item for s in strides)
    return capsule.export(
        iface["data"][0], tuple(host.shape), elements, ours, (DeviceType.kDLCPU, 0), 0, host, versioned=True,
    )  # fmt: skip


#: type -> its ExportPlan (kept no longer than the type), made by :func:`export_plan`; the compiled build reads it,
#: and hands a type without one to Python, whose import or convert makes it
PLANS = TypeCache()


def export_plan(kind: type) -> ExportPlan:
    """The :class:`ExportPlan` of producer type ``kind``: made from its row on first use, then kept."""
    found = PLANS.lasting.get(kind, MISSING)  # the common case without a method call
    if found is MISSING:
        found = PLANS.passing.get(kind, MISSING)
        if found is MISSING:
            found = plan_of(release_row_of_type(kind))
            found.lasting = PLANS.put(kind, found)  # kept as long as the process: its type will not be freed
    return found  # type: ignore[no-any-return]


def truthy_guard(x: Any, plan: ExportPlan) -> tuple[str, bool, bool] | None:
    """The first export guard of ``x``'s plan that holds for ``x`` (``(name, is a method, negated)``: its value
    is truthy, or falsy where negated), or None.

    Such an array must never be exported: its library's ``__dlpack__`` refuses it, or (a library that
    forgets a check) would export it with the wrong values."""
    for name, call, negated in plan.guards:
        try:
            value = getattr(x, name)
        except AttributeError:  # an older release without it: the guard does not apply
            continue
        if call:
            value = value()
        if bool(value) != negated:
            return name, call, negated
    return None


def library_export(x: Any, plan: ExportPlan | None = None) -> Any:
    """What ``x``'s system gives for it when it exports without ``__dlpack__`` (``export.via``: a method or
    function giving a DLPack capsule or a buffer), or None when it exports through ``__dlpack__``."""
    if plan is None:
        plan = export_plan(type(x))
    via = plan.via
    if via is None:
        return None
    try:
        if plan.bits is not None:
            made = _bits_export(x, plan, via)
            if made is not None:
                return made
        return via(x)
    except Exception as exc:  # its export refused this array (a dtype it cannot export, ...)
        if not plan.host:
            name = plan.row.export.via if plan.row is not None else "its exporter"
            raise BufferError(
                f"{type(x).__name__} cannot be exported by {name}: {type(exc).__name__}: {exc}{help_for(plan, exc)}"
            ) from exc
        return getattr(x, plan.host)()  # a host copy by the system's own method


def check_guards(x: Any, plan: ExportPlan) -> None:
    """Refuse ``x`` (:meth:`ExportPlan.refuse`) when an export guard of its plan holds for it."""
    guard = truthy_guard(x, plan)
    if guard is not None:
        name, call, negated = guard
        plan.refuse(x, name, call, negated)


def help_for(plan: ExportPlan, exc: BaseException) -> str:
    """What the user can do instead of an export ``exc`` refused (``export.refusal_help``), as the end of a
    message ("": nothing said)."""
    text = str(exc)
    found = [what for words, what in plan.refusal_help if words in text]
    return f" ({'; '.join(found)})" if found else ""


def exported(x: Any, target: str | None = None) -> tuple[Any, ExportPlan, Any]:
    """The producer to ask, its plan, and what says where its data is: what ``from_dlpack`` and ``convert`` ask
    alike. ``x`` itself where it is a producer (it has ``__dlpack__``, or its system exports through a function of
    its own); else dlbind's own zero-copy producer of the memory its buffer or array interface describes
    (:mod:`dlbind.described`), which knows its device and its stream. ``target``: the system ``convert`` hands to,
    whose own arrays without DLPack stay themselves (numba's CUDA arrays carry ``__cuda_array_interface__`` only),
    their device said by dlbind's producer where they cannot say it."""
    plan = export_plan(type(x))
    if plan.via is not None or hasattr(x, "__dlpack__"):
        return x, plan, x
    own = target is not None and plan.library == target
    if own and hasattr(x, "__dlpack_device__"):
        return x, plan, x
    view = buffer_view(x)
    try:  # an Exporter (dlbind.described) of the memory its buffer or array interface describes
        mine = describe(x, view)
    except TypeError:
        if hasattr(x, "__array_interface__") or hasattr(x, "__cuda_array_interface__"):
            raise  # an interface that says something wrong: its own message names what
        values = isinstance(x, list | tuple | int | float | complex | range)  # Python values, no array memory
        raise TypeError(
            f"{capsule.PACKAGE} needs a DLPack producer (an object with __dlpack__ and __dlpack_device__), a DLPack "
            f"capsule or an object with a buffer or array interface, not {type(x).__name__}"
            + (": make an array of it first, e.g. numpy.asarray(x)" if values else "")
        ) from None
    return (x, plan, mine) if own else (mine, export_plan(Exporter), mine)


class Ask(NamedTuple):
    """What an import asks, found by :func:`to_ask`: ``producer`` and its ``plan``; the ``array`` given and its
    ``array_plan``, what the import is finished as (the same two, unless the array's system exports through a
    function of its own that gave another array); ``capsule``, the capsule such a function gave (None: ask
    ``producer``)."""

    producer: Any
    plan: ExportPlan
    array: Any
    array_plan: ExportPlan
    capsule: object | None = None


def to_ask(x: Any, plan: ExportPlan | None, own_export: bool = False) -> Ask:
    """What importing ``x`` asks (``plan`` None: ``x`` may be anything :func:`dlbind.from_dlpack` takes, and its
    plan is looked up now): ``x`` refused where an export guard of its plan holds (before a DLPack 1.3 exchange
    table too, which exports what ``__dlpack__`` refuses: torch's); the export function of a system exporting
    through one (``own_export``: even where ``x`` has ``__dlpack__``, as ``convert`` asks it), whose capsule is
    taken as it is and whose array is asked in turn."""
    if plan is None:
        x, plan, _ = exported(x)
    if plan.guards:
        check_guards(x, plan)
    if plan.via is None or (hasattr(x, "__dlpack__") and not own_export):
        return Ask(x, plan, x, plan)
    made = library_export(x, plan)  # a capsule, or an array
    if made is None or type(made) is _capi.PyCapsuleType:
        return Ask(x, plan, x, plan, made)
    producer, made_plan, _ = exported(made)
    return Ask(producer, made_plan, x, plan)
