"""Asking a producer for its capsule: ``__dlpack__`` called with the newest keywords, an older producer's refusal
retried as the DLPack spec says, and what the import does when the producer refuses.

The producer's type and its :class:`dlbind.sources.ExportPlan` are known by then (:mod:`dlbind.sources`), and so
are the device and the stream it is asked for (:mod:`dlbind.devices`). Here: the call (:func:`call_dlpack`),
with a 0.x consumer's call of its time; the way the type took an older call, learned once and kept in its plan
(:func:`learn`, read by :func:`style_for` and by the C fast path through ``call_style``); a system's refusal
raised as TypeError turned into the spec's BufferError (:func:`refusal_of`); a host array whose ``__dlpack__``
refuses, exported from its buffer or array interface instead (:func:`host_export`); the refusal of an array
that a system's own export function gave, said with that function's name (:func:`through_refused`); and the one
call the import makes (:func:`asked_capsule`).
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import dlbind._capi as _capi
from dlbind._ffi import native
from dlbind._generated.adapters import KEYWORD_REFUSALS
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind.described import Exporter, export_host
from dlbind.devices import device_name
from dlbind.sources import BARE, STREAM, Ask, ExportPlan, help_for
from dlbind.validate import type_name

__all__ = [
    "FELL_BACK",
    "asked_capsule",
    "call_dlpack",
    "device_refused",
    "host_export",
    "learn",
    "refusal_of",
    "style_for",
    "through_refused",
]


def _keyword_refused(exc: TypeError) -> bool:
    """``exc`` says a keyword was refused, in the words of one of the bindings of spec/adapters.toml's
    ``[[keyword_refusal]]`` (CPython's, nanobind's, pybind11's)."""
    message = str(exc)
    return any(text in message for text in KEYWORD_REFUSALS)


def refusal_of(x: Any, exc: TypeError, plan: ExportPlan) -> BufferError | None:
    """``exc`` as the spec's BufferError when it is how ``x``'s system refuses an array (its plan's
    ``refusal`` is TypeError and ``exc`` is not about keywords), else None."""
    if _keyword_refused(exc) or plan.refusal is not TypeError:
        return None
    refusal = BufferError(f"{type(x).__name__}.__dlpack__ refused: {exc}{help_for(plan, exc)}")
    refusal.__cause__ = exc
    return refusal


def style_for(plan: ExportPlan, method: Any) -> int:
    """``plan.call_style`` (:attr:`dlbind.sources.ExportPlan.call_style`) when ``method`` (a bound ``__dlpack__``)
    is the one it was learned from, else 0: a method replaced on the class between the two reads is asked with
    every keyword."""
    learned = plan._learned
    if learned is None:  # nothing learned (most types): every keyword, without reading the method
        return 0
    func = getattr(method, "__func__", None)  # None: a builtin's method (its type's, which cannot be replaced)
    if func is not None and func is not learned[2]:
        return 0
    return plan.call_style if func is None else learned[0]


def learn(plan: ExportPlan, x: Any, style: int, called: Any) -> None:
    """Keep ``style``, how ``x.__dlpack__`` (``called``, the bound method that took it) took an older call,
    for ``x``'s type: only when the method is the type's own answer — a signature without
    ``*args``/``**kwargs``, or one that cannot be read (a builtin, whose refusal named the keyword) — never a
    forwarding wrapper's, which is asked per call. Kept for the function called, not the one the class holds
    now: another thread may have replaced it since (the next read of ``plan.call_style`` then forgets it)."""
    import inspect
    import weakref

    kind = type(x)
    if issubclass(kind, Exporter):  # dlbind's own takes every keyword: a TypeError is its source's, asked per export
        return
    method = getattr(called, "__func__", None) or getattr(kind, "__dlpack__", None)  # a builtin's: its type's
    try:
        parameters = inspect.signature(method).parameters.values()  # type: ignore[arg-type]
    except (TypeError, ValueError):
        parameters = ()  # type: ignore[assignment]
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
        return
    plan._learned = (style, weakref.ref(kind), method)  # one record: read and replaced whole
    if native is not None:  # the compiled fast path's entry for the type read the style before: made again
        native.forget_type(kind)


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
    style = style_for(plan, method) if first_error is None else 0
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
            learn(plan, x, STREAM, method)  # it took the keywords; it refused the array
            raise refusal from exc
        if not _keyword_refused(exc) or (stream is not None and explicit):
            raise
    else:
        learn(plan, x, STREAM, method)
        return result
    result = method()
    learn(plan, x, BARE, method)
    return result


#: The producers whose refusal an import answered with dlbind's own export of their memory (:func:`host_export`),
#: kept while a caller watches (a list; None: nobody does). :func:`dlbind.explain` watches its one import: where
#: the producer's own export refused, the compiled convert's C route hands the call to Python.
FELL_BACK: ContextVar[list[Any] | None] = ContextVar("dlbind_fell_back", default=None)


def host_export(x: Any) -> Any:
    """``x`` exported through its buffer protocol or array interface (:func:`dlbind.described.export_host`), or
    None: what an import falls back to where ``x``'s ``__dlpack__`` refused (kept in :data:`FELL_BACK`)."""
    try:
        made = export_host(x)
    except (TypeError, ValueError, BufferError):
        return None
    watching = FELL_BACK.get()
    if watching is not None:
        watching.append(x)
    return made


def asked_capsule(
    ask: Ask, here: Any, asked: int | None, dl_device: Any, copy: bool | None, *, device: Any, stream: int | None,
    by_backend: bool,
) -> object:  # fmt: skip
    """The capsule ``ask.producer.__dlpack__`` gives asked on stream ``asked`` for ``dl_device`` and ``copy``
    (``by_backend``: a plain import, which the device's backend then copies to the host); where it refuses a host
    array (data on the CPU, which no stream orders) that it may export plainly, dlbind's own export of its buffer or
    array interface. A refusal is said with
    what was asked of whom (a device: ``device``, as the caller gave it), and where the producer is what the array's
    system gave for it (:class:`dlbind.sources.Ask`), as that system's export's (:func:`through_refused`)."""
    x, plan = ask.producer, ask.plan
    asked_device, asked_copy = (None, None) if by_backend else (dl_device, copy)
    if asked_copy and plan.refuses_copy:  # its __dlpack__ refuses copy=True (export.refuses_copy): from_dlpack copies
        asked_copy = None
    try:
        return call_dlpack(
            x, stream=asked, dl_device=asked_device, copy=asked_copy, plan=plan, explicit=stream is not None
        )
    except (BufferError, ValueError) as e:
        if isinstance(e, ValueError) and dl_device is None:
            raise
        refusal = e if dl_device is None else device_refused(x, here, dl_device, copy, device, e)
        if x is not ask.array:  # an array its system's own export gave: refused as that export's
            refusal = through_refused(ask.array, ask.array_plan, x, refusal)
        # zero-copy (copy=False too), for data on the CPU only: no stream orders it, so the CPU may read it now (a
        # refusal of data on another device, managed memory a stream orders included, is the producer's to say)
        on_cpu = stream is None and dl_device is None and int(here[0]) == DeviceType.kDLCPU
        fallback = host_export(x) if on_cpu else None
        if fallback is not None:
            return fallback.__dlpack__(max_version=DLPACK_VERSION)  # dlbind's own producer of x's host memory
        try:
            if refusal is e:
                raise
            raise refusal from e
        finally:  # no cycle refusal -> traceback -> this frame -> refusal
            del refusal


def device_refused(x: Any, here: Any, dl_device: Any, copy: bool | None, device: Any, e: BaseException) -> BufferError:
    """The BufferError of ``x`` (on ``here``) refusing to export to ``dl_device`` (``device``: as the caller gave it),
    with ``e``, the producer's own words: those alone ("unsupported device requested") name neither; numpy before
    2.3 refuses a device with ValueError, the spec says BufferError."""
    return BufferError(
        f"from_dlpack(device={device!r}): {type_name(x)} on {device_name(here[0])}:{here[1]} cannot export to "
        f"{device_name(dl_device[0])}:{dl_device[1]}{' with copy=False' if copy is False else ''}: {e}"
    )


def through_refused(x: Any, plan: ExportPlan, made: Any, exc: BaseException) -> BufferError:
    """The BufferError of ``x``, whose system's own export function (``export.via``) gave ``made``, an array
    whose DLPack export refused with ``exc``: naming that function and what ``made`` holds, and ending with what
    to do instead where ``x``'s plan has ``refusal_help``."""
    name = plan.row.export.via if plan.row is not None else "its export function"
    try:  # said before dlbind's own export of the array is tried: its wording must not fail the import
        dtype = getattr(made, "dtype", None)
    except Exception:
        dtype = None
    held = f"{type(made).__module__}.{type(made).__qualname__}" + ("" if dtype is None else f" of dtype {dtype}")
    err = f"{type(x).__name__} exported by {name} as a {held}, which DLPack cannot carry: {exc}{help_for(plan, exc)}"
    return BufferError(err)
