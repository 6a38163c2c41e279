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
from typing import TYPE_CHECKING, Any

from dlbind import _capi, _load, capsule
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME, VERSIONED_CAPSULES
from dlbind._libraries import MISSING, TypeCache, dotted, release_row_of_type
from dlbind.devices import device_name, stream_free
from dlbind.dtypes import DType, lookup
from dlbind.export import contiguous_strides

if TYPE_CHECKING:
    from dlbind._generated.adapters import Adapter

__all__ = [
    "BARE",
    "STREAM",
    "ExportPlan",
    "asked_capsule",
    "call_dlpack",
    "check_guards",
    "export_plan",
    "exported",
    "help_for",
    "host_export",
    "library_export",
    "refuse_guarded",
    "truthy_guard",
    "type_name",
]

STREAM, BARE = 1, 2  # call styles: __dlpack__ takes stream= only / no keywords (learned once per type)


class ExportPlan:
    """What dlbind does to import from one producer type (one plan per type, made by :func:`export_plan`).

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
    type's own ``__dlpack__`` (:meth:`learn`): never from a method taking ``*args``/``**kwargs`` (a wrapper, whose
    answer is one instance's), and forgotten when the type's ``__dlpack__`` is replaced;
    ``lasting``: the type lives as long as the process (its plan is kept for good);
    ``pairs``: the decisions of ``dlbind.convert`` for this type, per target, device type and keyword shape
    (made by :func:`dlbind.routes.decide` once each).
    """

    __slots__ = (
        "__weakref__",
        "_style",
        "_style_of",
        "bits",
        "bits_via",
        "bool_method",
        "bool_name",
        "capsules",
        "complex_guards",
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
        "row",
        "unsigned_strides",
        "via",
    )

    row: Adapter | None
    library: str
    capsules: str
    bits: Any
    bits_via: str
    guards: tuple[tuple[str, bool], ...]
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
    layout: str
    lasting: bool
    readonly: bool
    unsigned_strides: bool
    refused_streams: frozenset[tuple[int, int]]
    interface: str
    _style: int
    _style_of: tuple[Any, Any] | None
    pairs: dict[tuple[Any, ...], Any]

    def __init__(self, row: Adapter | None) -> None:
        self.row = row
        self._style, self._style_of = 0, None
        self.lasting = False
        self.pairs = {}  # dlbind.routes.key(...) -> dlbind.routes.Decision
        self.capsules, self.bits, self.bits_via = "versioned", None, ""
        self.refused_streams = frozenset()
        if row is None:
            self.library, self.guards, self.immutable, self.refusal = "", (), False, BufferError
            self.complex_guards, self.refusal_help = frozenset(), ()
            self.via, self.host, self.bool_method, self.bool_name, self.python = None, "", "", "", False
            self.host_only, self.layout, self.readonly = False, "any", True
            self.unsigned_strides, self.interface = False, ""
            return
        self.library = row.name
        self.guards = tuple((sys.intern(g.removesuffix("()")), g.endswith("()")) for g in row.export_guards)
        # truthy for complex arrays only: the compiled exchange reads them after the table says the dtype (the
        # Python path reads every guard before the export: the same answer, as the others are never truthy)
        self.complex_guards = frozenset(sys.intern(g.removesuffix("()")) for g in row.export_complex_guards)
        self.refusal_help = row.export_refusal_help
        self.immutable = row.immutable
        self.refusal = TypeError if row.export_refusal == "TypeError" else BufferError
        self.via = None if row.export_via == "__dlpack__" else _exporter(row.export_via)
        self.host = row.export_host.removesuffix("()")
        self.python = row.export_bool == "uint8"
        self.bool_method = row.export_dtype.removesuffix("()") if self.python else ""
        self.bool_name = row.export_bool_name if self.python else ""
        devices = [DEVICE_BY_NAME.get(name) for name in row.export_devices]
        self.host_only = bool(devices) and all(d is not None and stream_free(d) for d in devices)
        self.layout = row.export_layout
        self.readonly = row.immutable or row.export_readonly
        self.unsigned_strides = row.export_negative_strides == "unsigned"
        self.interface = row.export_interface
        self.capsules = row.export_capsules
        self.refused_streams = frozenset(_refused_stream(entry) for entry in row.export_streams_refused)
        if row.bits and row.export_bits_via:
            self.bits, self.bits_via = _Bits(row.bits_of, row.bits), row.export_bits_via.removesuffix("()")

    @property
    def call_style(self) -> int:
        """How the type's ``__dlpack__`` is asked (0: with every keyword; :data:`STREAM`, :data:`BARE`), as
        learned from the method now on the type (the C fast path reads this too)."""
        if self._style and self._style_of is not None:
            kind, method = self._style_of[0](), self._style_of[1]
            if kind is None or getattr(kind, "__dlpack__", None) is not method:  # replaced since: ask anew
                self._style = 0  # first: a thread between the two writes reads "every keyword", always safe
                self._style_of = None
        return self._style

    def style_for(self, method: Any) -> int:
        """:attr:`call_style` when ``method`` (a bound ``__dlpack__``) is the one it was learned from, else 0: a
        method replaced on the class between the two reads is asked with every keyword."""
        style = self.call_style
        func = getattr(method, "__func__", None)  # None: a builtin's method (its type's, which cannot be replaced)
        if style and func is not None and func is not self._style_of[1]:  # type: ignore[index]
            return 0
        return style

    def learn(self, x: Any, style: int, called: Any) -> None:
        """Keep ``style``, how ``x.__dlpack__`` (``called``, the bound method that took it) took an older call,
        for ``x``'s type: only when the method is the type's own answer — a signature without
        ``*args``/``**kwargs``, or one that cannot be read (a builtin, whose refusal named the keyword) — never a
        forwarding wrapper's, which is asked per call. Kept for the function called, not the one the class holds
        now: another thread may have replaced it since (the next read of :attr:`call_style` then forgets it)."""
        import inspect
        import weakref

        kind = type(x)
        method = getattr(called, "__func__", None) or getattr(kind, "__dlpack__", None)  # a builtin's: its type's
        try:
            parameters = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
        except (TypeError, ValueError):
            parameters = ()  # type: ignore[assignment]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            return
        self._style_of = (weakref.ref(kind), method)  # first: a reader sees the new style with its own method
        self._style = style

    def __repr__(self) -> str:
        return f"ExportPlan({self.library or 'no row'})"


def _refused_stream(entry: str) -> tuple[int, int]:
    """An ``export.streams_refused`` entry (``"cuda:2"``) as ``(device type, stream)``."""
    name, _, stream = entry.partition(":")
    return int(DEVICE_BY_NAME[name]), int(stream)


def _exporter(via: str) -> Any:
    """``export.via`` as a function of the array: a method ``name()`` or a dotted function."""
    if via.endswith("()"):
        name = via[:-2]
        return lambda x: getattr(x, name)()
    return _Lazy(via)


class _Lazy:
    """A dotted function imported on its first call (its module is the library's own: imported by then)."""

    __slots__ = ("fn", "path")

    def __init__(self, path: str) -> None:
        self.path, self.fn = path, None

    def __call__(self, x: Any) -> Any:
        fn = self.fn
        if fn is None:
            fn = self.fn = dotted(self.path)
        return fn(x)


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


_PLANS = TypeCache()  # type -> its ExportPlan (kept no longer than the type)


def export_plan(kind: type) -> ExportPlan:
    """The :class:`ExportPlan` of producer type ``kind``: made from its row on first use, then kept."""
    found = _PLANS.lasting.get(kind, MISSING)  # the common case without a method call
    if found is MISSING:
        found = _PLANS.passing.get(kind, MISSING)
        if found is MISSING:
            found = ExportPlan(release_row_of_type(kind))
            found.lasting = _PLANS.put(kind, found)  # kept as long as the process: its type will not be freed
    return found  # type: ignore[no-any-return]


def truthy_guard(x: Any, plan: ExportPlan) -> tuple[str, bool] | None:
    """The first export guard of ``x``'s plan that is truthy for ``x`` (``(name, is a method)``), or None.

    Such an array must never be exported: its library's ``__dlpack__`` refuses it, or (a library that
    forgets a check) would export it with the wrong values."""
    for name, call in plan.guards:
        try:
            value = getattr(x, name)
        except AttributeError:  # an older release without it: the guard does not apply
            continue
        if call:
            value = value()
        if value:
            return name, call
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
            name = plan.row.export_via if plan.row is not None else "its exporter"
            raise BufferError(
                f"{type(x).__name__} cannot be exported by {name}: {type(exc).__name__}: {exc}{help_for(plan, exc)}"
            ) from exc
        return getattr(x, plan.host)()  # a host copy by the system's own method


def check_guards(x: Any, plan: ExportPlan) -> None:
    """Refuse ``x`` (:func:`refuse_guarded`) when an export guard of its plan is truthy for it."""
    guard = truthy_guard(x, plan)
    if guard is not None:
        refuse_guarded(x, *guard, plan)


_UNEXPECTED = ("unexpected keyword", "takes no keyword arguments", "got an unexpected", "positional argument")


def _keyword_refused(exc: TypeError) -> bool:
    return any(text in str(exc) for text in _UNEXPECTED)


def help_for(plan: ExportPlan, exc: BaseException) -> str:
    """What the user can do instead of an export ``exc`` refused (``export.refusal_help``), as the end of a
    message ("": nothing said)."""
    text = str(exc)
    found = [what for words, what in plan.refusal_help if words in text]
    return f" ({'; '.join(found)})" if found else ""


def refusal_of(x: Any, exc: TypeError, plan: ExportPlan) -> BufferError | None:
    """``exc`` as the spec's BufferError when it is how ``x``'s system refuses an array (its plan's
    ``refusal`` is TypeError and ``exc`` is not about keywords), else None."""
    if _keyword_refused(exc) or plan.refusal is not TypeError:
        return None
    refusal = BufferError(f"{type(x).__name__}.__dlpack__ refused: {exc}{help_for(plan, exc)}")
    refusal.__cause__ = exc
    return refusal


def refuse_guarded(x: Any, name: str, is_method: bool, plan: ExportPlan) -> None:
    """Raise the BufferError of ``x``, whose export guard ``name`` is truthy (``export_guards`` in
    spec/adapters.toml): its library's own, from its ``__dlpack__``, or dlbind's when that forgets the check;
    either ends with what to do instead where ``plan`` (its type's, handed down) has ``refusal_help``.
    """
    try:
        x.__dlpack__()  # raises the library's BufferError (torch: conjugate bit, requires_grad, ...)
    except BufferError as exc:
        if not (said := help_for(plan, exc)):
            raise
        raise BufferError(f"{exc}{said}") from exc
    shown = f"{name}()" if is_method else name
    refusal = f"{type(x).__name__}.{shown} is true: its DLPack export would drop that (wrong values), so it is refused"
    raise BufferError(refusal + help_for(plan, BufferError(refusal)))


def call_dlpack(
    x: Any,
    *,
    stream: int | None,
    dl_device: Any,
    copy: bool | None,
    plan: ExportPlan,
    first_error: TypeError | None = None,
    explicit: bool = True,
) -> object:
    """Call ``x.__dlpack__`` with the newest keywords, falling back as the spec says.

    ``first_error``: the TypeError the versioned call already raised (the compiled fast path made it);
    ``plan``: ``x``'s export plan (it keeps how the type accepted an older call); ``explicit``: the consumer
    named ``stream`` (False: it is the device rule's default for the consumer's None, which a producer that
    takes no keywords may be asked without).
    """
    method = x.__dlpack__
    if not VERSIONED_CAPSULES:  # a DLPack 0.x consumer: the call of its time, which asks for a legacy capsule
        return _legacy_call(x, method, stream=stream, dl_device=dl_device, plan=plan, explicit=explicit)
    kwargs: dict[str, Any] = {"stream": stream, "max_version": DLPACK_VERSION}
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    style = plan.style_for(method) if first_error is None else 0
    if style and (style == STREAM or stream is None or not explicit):
        if "dl_device" in kwargs:  # copy= is honoured by from_dlpack itself (a copy of the plain import)
            raise BufferError(f"{type(x).__name__}.__dlpack__ does not accept dl_device, so it cannot move the data")
        try:
            result = method(stream=stream) if style == STREAM else method()
        except TypeError as exc:
            refusal = refusal_of(x, exc, plan)
            if refusal is not None:
                raise refusal from exc
            raise
    elif first_error is None:
        try:
            result = method(**kwargs)
        except TypeError as exc:
            result = _older_call(x, method, exc, stream, kwargs, plan, explicit)
    else:  # never raised again here: a traceback through this frame would keep x in a cycle
        result = _older_call(x, method, first_error, stream, kwargs, plan, explicit)
    if type(result) is not _capi.PyCapsuleType:
        raise TypeError(f"{type(x).__name__}.__dlpack__() returned {type(result).__name__}, not a DLPack capsule")
    return result


def _legacy_call(
    x: Any, method: Any, *, stream: int | None, dl_device: Any, plan: ExportPlan, explicit: bool = True
) -> object:
    """``x.__dlpack__(stream=...)``, then without keywords if it takes none: a consumer of a 0.x header
    (``dl_device`` and ``copy`` came with max_version: it cannot ask to move data; copy= is honoured by
    from_dlpack itself, copying the import)."""
    if dl_device is not None:
        raise BufferError(
            f"a DLPack {DLPACK_VERSION[0]}.{DLPACK_VERSION[1]} consumer cannot ask {type(x).__name__}.__dlpack__ "
            "to move the data (dl_device came with DLPack 1.0): import it where it is"
        )
    try:
        result = method(stream=stream)
    except TypeError as exc:
        refusal = refusal_of(x, exc, plan)
        if refusal is not None:
            raise refusal from exc
        if not _keyword_refused(exc) or (stream is not None and explicit):
            raise
        result = method()
    if type(result) is not _capi.PyCapsuleType:
        raise TypeError(f"{type(x).__name__}.__dlpack__() returned {type(result).__name__}, not a DLPack capsule")
    return result


def _older_call(
    x: Any,
    method: Any,
    error: TypeError,
    stream: int | None,
    kwargs: dict[str, Any],
    plan: ExportPlan,
    explicit: bool = True,
) -> object:
    """The versioned call raised ``error``: a producer of an older spec takes fewer keywords."""
    if not _keyword_refused(error):
        refusal = refusal_of(x, error, plan)
        if refusal is not None:
            raise refusal from error
        try:
            raise error
        finally:
            del error
    if "dl_device" in kwargs:  # copy= is honoured by from_dlpack itself (a copy of the plain import)
        raise BufferError(
            f"{type(x).__name__}.__dlpack__ does not accept dl_device, so it cannot move the data"
        ) from error
    try:
        result = method(stream=stream)
    except TypeError as exc:
        refusal = refusal_of(x, exc, plan)
        if refusal is not None:
            plan.learn(x, STREAM, method)  # it took the keywords; it refused the array
            raise refusal from exc
        if not _keyword_refused(exc) or (stream is not None and explicit):
            raise
    else:
        plan.learn(x, STREAM, method)
        return result
    result = method()
    plan.learn(x, BARE, method)
    return result


# How a host producer whose __dlpack__ refuses is exported instead (dlbind.producer.export_host: its buffer
# protocol or array interface); the producers sit above this layer, so dlbind._wiring sets it at import.
export_host: Any = None


def host_export(x: Any) -> Any:
    """``x`` exported through its buffer protocol or array interface (:data:`export_host`), or None."""
    if export_host is None:
        _load.ensure()  # a module imported on its own: the package wires export_host when it loads
        if export_host is None:
            return None
    try:
        return export_host(x)
    except (TypeError, ValueError, BufferError):
        return None


# How an object without __dlpack__ is exported for import (dlbind.producer.asdlpack: the buffer protocol,
# the array interface); the producers sit above this layer, so dlbind._wiring sets it at import.
export_other: Any = None


def exported(x: Any) -> tuple[Any, ExportPlan]:
    """The producer to ask and its plan: ``x``, or dlbind's own zero-copy export of an object with a buffer or
    array interface and no ``__dlpack__`` (nor an export function of its system's)."""
    plan = export_plan(type(x))
    if plan.via is not None or hasattr(x, "__dlpack__"):
        return x, plan
    if export_other is None:
        _load.ensure()  # a module imported on its own: the package wires export_other when it loads
    try:
        x = export_other(x)
    except TypeError:
        if hasattr(x, "__array_interface__") or hasattr(x, "__cuda_array_interface__"):
            raise  # an interface that says something wrong: its own message names what
        raise TypeError(
            "from_dlpack needs a DLPack producer (an object with __dlpack__ and __dlpack_device__), a "
            f"DLPack capsule or an object with a buffer or array interface, not {type(x).__name__}"
        ) from None
    return x, export_plan(type(x))


def asked_capsule(
    x: Any, plan: ExportPlan, here: Any, asked: int | None, dl_device: Any, copy: bool | None, *, device: Any,
    stream: int | None, by_backend: bool,
) -> object:  # fmt: skip
    """The capsule of ``x.__dlpack__`` asked on stream ``asked`` for ``dl_device`` and ``copy`` (``by_backend``: a
    plain import, which the device's backend then copies to the host); where it refuses a host array that it
    may export plainly, dlbind's own export of its buffer or array interface; a refused device said with what
    was asked of whom (``device``: as the caller gave it)."""
    asked_device, asked_copy = (None, None) if by_backend else (dl_device, copy)
    try:
        return call_dlpack(
            x, stream=asked, dl_device=asked_device, copy=asked_copy, plan=plan, explicit=stream is not None
        )
    except (BufferError, ValueError) as e:
        if isinstance(e, ValueError) and dl_device is None:
            raise
        fallback = host_export(x) if stream is None and copy is not False and dl_device is None else None
        if fallback is None and dl_device is not None:
            # the producer's own message alone ("unsupported device requested") names neither; numpy before 2.3
            # refuses a device with ValueError, the spec says BufferError
            raise BufferError(
                f"from_dlpack(device={device!r}): {type_name(x)} on "
                f"{device_name(here[0])}:{here[1]} cannot export to {device_name(dl_device[0])}:{dl_device[1]}"
                f"{' with copy=False' if copy is False else ''}: {e}"
            ) from e
        if fallback is None:
            raise
        return fallback.__dlpack__(max_version=DLPACK_VERSION)  # dlbind's own producer of x's host memory


def type_name(x: Any) -> str:
    """``module.Type`` of a producer for messages; dlbind's own types by their public names (the compiled
    build's exporter is ``dlbind._fastpath.BufferExporter``, users know it as ``dlbind.Exporter``)."""
    kind = type(x)
    if kind.__module__ == capsule.PACKAGE or kind.__module__.startswith(capsule.PACKAGE + "."):
        public = "Tensor" if any(k.__name__ == "Tensor" for k in kind.__mro__) else "Exporter"
        return f"{capsule.PACKAGE}.{public}"
    return f"{kind.__module__}.{kind.__qualname__}"
