"""Consumer side: :func:`from_dlpack`, and the negotiation with producers of every DLPack version."""

from __future__ import annotations

from typing import Any

from dlbind import _backends, _capi, _load, capsule, exchange
from dlbind._ffi import native
from dlbind._generated.enums import DLPACK_VERSION
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind.devices import HOST_ACCESSIBLE, check_stream, default_stream, device_name, parse_device, producer_device
from dlbind.dtypes import BOOL, UINT8, DType
from dlbind.export import export_view
from dlbind.sources import BARE, STREAM, ExportPlan, export_plan, library_export, truthy_guard
from dlbind.tensor import ExtentError, Tensor, from_capsule

__all__ = ["from_dlpack", "imported"]

_UNEXPECTED = ("unexpected keyword", "takes no keyword arguments", "got an unexpected", "positional argument")


def _keyword_refused(exc: TypeError) -> bool:
    return any(text in str(exc) for text in _UNEXPECTED)


def _refusal(x: Any, exc: TypeError, plan: ExportPlan) -> BufferError | None:
    """``exc`` as the spec's BufferError when it is how ``x``'s system refuses an array (its plan's
    ``refusal`` is TypeError and ``exc`` is not about keywords), else None."""
    if _keyword_refused(exc) or plan.refusal is not TypeError:
        return None
    refusal = BufferError(f"{type(x).__name__}.__dlpack__ refused: {exc}")
    refusal.__cause__ = exc
    return refusal


# How a type's __dlpack__ accepted the call once max_version was refused is its plan's call_style: STREAM
# (stream= only) or BARE (no keywords), so that every later import from the type costs one call; the
# compiled fast path reads the same plan.
_STREAM, _BARE = STREAM, BARE

_READ_ONLY = capsule.READ_ONLY
_IS_COPIED = capsule.IS_COPIED


def refuse_guarded(x: Any, name: str, is_method: bool) -> None:
    """Raise the BufferError of ``x``, whose export guard ``name`` is truthy (``export_guards`` in
    spec/adapters.toml): its library's own, from its ``__dlpack__``, or dlbind's when that forgets the check.
    """
    x.__dlpack__()  # raises the library's BufferError (torch: conjugate bit, requires_grad, ...)
    shown = f"{name}()" if is_method else name
    raise BufferError(
        f"{type(x).__name__}.{shown} is true: its DLPack export would drop that (wrong values), so it is refused"
    )


def sealed(tensor: Tensor, x: Any, plan: ExportPlan | None = None) -> Tensor:
    """``tensor`` imported from ``x``, read-only when ``x``'s library never writes its arrays
    (``immutable`` in spec/adapters.toml): a legacy capsule cannot say so, and a writable alias would
    let a consumer change an immutable array. A copy the producer made for us stays writable. Bool that
    ``x``'s capsules call uint8 (``export.bool``) is read as bool. ``plan``: ``x``'s export plan."""
    if plan is None:
        plan = export_plan(type(x))
    flags = tensor._flags
    if not flags & (_READ_ONLY | _IS_COPIED) and plan.immutable:
        if native is not None:
            native.seal(tensor)
        else:
            fill: Any = tensor  # the pure core's slot, which the typed Tensor view declares read-only
            fill._flags = flags | _READ_ONLY
    reads_bool = plan.python and BOOL.code >= 0 and tensor.dtype == UINT8
    if reads_bool and str(getattr(x, plan.bool_method)()) == plan.bool_name:
        return _retyped(tensor, BOOL)
    return tensor


def producer_error(x: Any, exc: BaseException) -> BaseException:
    """The error of a tensor ``x``'s ``__dlpack__`` gave that cannot be imported: a BufferError naming ``x`` when
    the producer is at fault (its extent reaches beyond int64 or the address space), else ``exc`` itself.
    The compiled build's from_dlpack calls it too."""
    if not isinstance(exc, ExtentError):
        return exc
    err = BufferError(f"{_type_name(x)}.__dlpack__ gave a tensor dlbind refuses: {exc}")
    err.__cause__ = exc
    return err


def ordered(tensor: Tensor, stream: int) -> Tensor:
    """Record on ``tensor`` the stream its data is ready on (a device with streams): exporting it again to a
    consumer on another stream then makes that stream wait (``dlbind.export.export_memory``)."""
    fill: Any = tensor  # the slot the typed Tensor view declares read-only
    fill._stream = stream
    return tensor


def _retyped(tensor: Tensor, dtype: DType) -> Tensor:
    """A zero-copy Tensor of ``tensor``'s memory read as ``dtype`` (of the same width); it keeps ``tensor``."""
    made = capsule.export(
        tensor.data_ptr, tensor.shape, tensor.strides, dtype, tensor.device, tensor.byte_offset, tensor,
        versioned=VERSIONED_CAPSULES, flags=_READ_ONLY if tensor.readonly else 0,
    )  # fmt: skip
    return from_capsule(made)


def call_dlpack(
    x: Any,
    *,
    stream: int | None,
    dl_device: Any,
    copy: bool | None,
    first_error: TypeError | None = None,
    plan: ExportPlan | None = None,
    explicit: bool = True,
) -> object:
    """Call ``x.__dlpack__`` with the newest keywords, falling back as the spec says.

    ``first_error``: the TypeError the versioned call already raised (the compiled fast path made it);
    ``plan``: ``x``'s export plan (it keeps how the type accepted an older call); ``explicit``: the consumer
    named ``stream`` (False: it is the device rule's default for the consumer's None, which a producer that
    takes no keywords may be asked without).
    """
    if plan is None:
        plan = export_plan(type(x))
    method = x.__dlpack__
    if not VERSIONED_CAPSULES:  # a DLPack 0.x consumer: the call of its time, which asks for a legacy capsule
        return _legacy_call(x, method, stream=stream, dl_device=dl_device, plan=plan, explicit=explicit)
    kwargs: dict[str, Any] = {"stream": stream, "max_version": DLPACK_VERSION}
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    style = plan.call_style if first_error is None else 0
    if style and (style == _STREAM or stream is None or not explicit):
        if "dl_device" in kwargs:  # copy= is honoured by from_dlpack itself (a copy of the plain import)
            raise BufferError(f"{type(x).__name__}.__dlpack__ does not accept dl_device, so it cannot move the data")
        try:
            result = method(stream=stream) if style == _STREAM else method()
        except TypeError as exc:
            refusal = _refusal(x, exc, plan)
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
        refusal = _refusal(x, exc, plan)
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
        refusal = _refusal(x, error, plan)
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
        refusal = _refusal(x, exc, plan)
        if refusal is not None:
            plan.call_style = _STREAM  # it took the keywords; it refused the array
            raise refusal from exc
        if not _keyword_refused(exc) or (stream is not None and explicit):
            raise
    else:
        plan.call_style = _STREAM
        return result
    result = method()
    plan.call_style = _BARE
    return result


# How an object without __dlpack__ is exported for import (dlbind.producer.asdlpack: the buffer protocol,
# the array interface); the producers sit above this layer, so dlbind._wiring sets it at import.
export_other: Any = None


# How a host producer whose __dlpack__ refuses is exported instead (dlbind.producer.export_host: its buffer
# protocol or array interface); set with export_other.
export_host: Any = None


def after_refusal(x: Any, error: BaseException, older: bool = False) -> Tensor:
    """Continue a plain ``from_dlpack(x)`` whose versioned ``__dlpack__`` call raised ``error`` (``older``:
    the call its type accepted once ``max_version`` was refused, which is never made twice).

    A TypeError: an older producer, asked with fewer keywords (``older``: its own error, or its system's
    refusal type). A BufferError: the producer cannot export this array (numpy before 2.1 refuses
    read-only arrays; numpy refuses ml_dtypes' bfloat16 and float8), but its buffer protocol or array
    interface may carry it: exported from there.
    """
    plan = export_plan(type(x))
    if isinstance(error, TypeError) and older:
        refusal = _refusal(x, error, plan)
        if refusal is None:
            try:
                raise error
            finally:  # no cycle error -> traceback -> this frame -> error
                del error
        error = refusal
    elif isinstance(error, TypeError):
        try:
            made = call_dlpack(x, stream=None, dl_device=None, copy=None, first_error=error, plan=plan)
            return sealed(from_capsule(made), x, plan)
        except BufferError as refusal:  # a refusal its system raises as TypeError (export.refusal)
            error = refusal
    fallback = _host_fallback(x)
    if fallback is None:
        try:
            raise error
        finally:  # no cycle error -> traceback -> this frame -> error
            del error
    return sealed(from_capsule(fallback.__dlpack__(max_version=DLPACK_VERSION)), x, plan)


def _host_fallback(x: Any) -> Any:
    """``x`` exported through its buffer protocol or array interface, or None."""
    if export_host is None:
        _load.ensure()  # a module imported on its own: the package wires export_host when it loads
        if export_host is None:
            return None
    try:
        return export_host(x)
    except (TypeError, ValueError, BufferError):
        return None


def import_library_export(
    x: Any,
    given: Any,
    device: Any = None,
    copy: bool | None = None,
    stream: int | None = None,
    allow_vector: bool = False,
) -> Tensor:
    """Import what ``x``'s system gave for it (a capsule or a buffer), with from_dlpack's keywords."""
    if type(given) is not _capi.PyCapsuleType:
        return sealed(from_dlpack(given, device=device, copy=copy, stream=stream, allow_vector=allow_vector), x)
    tensor = sealed(from_capsule(given, stream=stream, allow_vector=allow_vector), x)
    if device is not None and parse_device(device) != tensor.device:
        raise BufferError(f"{type(x).__name__} exports on {tensor.device} only; import it there and move it")
    if copy and not tensor._flags & _IS_COPIED:
        tensor = tensor.copy()
    return tensor


def _type_name(x: Any) -> str:
    """``module.Type`` of a producer for messages; dlbind's own types by their public names (the compiled
    build's exporter is ``dlbind._fastpath.BufferExporter``, users know it as ``dlbind.Exporter``)."""
    kind = type(x)
    if kind.__module__ == capsule.PACKAGE or kind.__module__.startswith(capsule.PACKAGE + "."):
        return f"{capsule.PACKAGE}.{'Tensor' if isinstance(x, Tensor) else 'Exporter'}"
    return f"{kind.__module__}.{kind.__qualname__}"


def from_dlpack(
    x: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None, allow_vector: bool = False
) -> Tensor:
    """Import ``x`` (a DLPack producer or a raw capsule) as a zero-copy :class:`dlbind.Tensor`.

    ``device``: where the result must live (None: where ``x`` is); ``copy``: True always copies,
    False never does (``BufferError`` if one is needed), None copies only when needed; ``stream``:
    the consumer's stream, passed to the producer for synchronisation (CUDA/ROCm rules);
    ``allow_vector``: accept dtypes with ``lanes > 1`` (refused by default, as most consumers do).
    """
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    if type(x) is _capi.PyCapsuleType:
        if device is not None or copy:
            raise BufferError("a raw capsule cannot be moved or copied on import: pass the producer instead")
        return from_capsule(x, stream=stream, allow_vector=allow_vector)
    if not hasattr(x, "__dlpack__"):
        # a system that exports through a method or function of its own
        given = library_export(x, export_plan(type(x)))
        if given is not None:
            return import_library_export(x, given, device, copy, stream, allow_vector)
        if export_other is None:
            _load.ensure()  # a module imported on its own: the package wires export_other when it loads
        try:
            x = export_other(x)  # a buffer or array interface: exported zero-copy by dlbind itself
        except TypeError:
            raise TypeError(
                f"from_dlpack needs a DLPack producer (an object with __dlpack__ and __dlpack_device__), a "
                f"DLPack capsule or an object with a buffer or array interface, not {type(x).__name__}"
            ) from None
    return imported(x, None, None, device=device, copy=copy, stream=stream, allow_vector=allow_vector)


def imported(
    x: Any,
    plan: ExportPlan | None,
    here: Any,
    *,
    device: Any = None,
    copy: bool | None = None,
    stream: int | None = None,
    allow_vector: bool = False,
) -> Tensor:
    """``x`` (a producer with ``__dlpack__``, of ``plan``'s type, its data on ``here``) imported as a Tensor:
    :func:`from_dlpack` once the producer is known, and what ``dlbind.convert`` runs with the plan and the
    device it has already (neither looked up again; None: looked up here). ``device``, ``copy``, ``stream`` as
    in :func:`from_dlpack` (``copy`` checked by the caller). A plain call imports through the producer's
    DLPack 1.3 exchange table where its type has one."""
    if plan is None:
        plan = export_plan(type(x))
    guard = truthy_guard(x, plan)  # before the table too: a table exports what __dlpack__ refuses (torch)
    if guard is not None:
        refuse_guarded(x, *guard)
    if device is None and copy is None and stream is None and not allow_vector:
        fast = exchange.import_object(x)
        if fast is not None:
            return fast
    if here is None:
        here = producer_device(x)
    target = None if device is None else parse_device(device)
    check_stream(here[0], stream)
    # None on a device with streams names its default stream: said explicitly, as torch and CuPy do
    asked = stream if stream is not None else default_stream(here[0])
    dl_device = target if target is not None and target != here else None
    to_host = dl_device is not None and dl_device[0] in HOST_ACCESSIBLE and here[0] not in HOST_ACCESSIBLE
    if to_host and copy is not False:
        # a host copy of device data: the device's backend moves the bytes once at the bus's speed (pinned
        # memory); without one installed, the producer makes it (dl_device)
        backend = _backends.serving(here[0])
        if backend is not None:
            tensor = imported(x, plan, here, stream=stream, allow_vector=allow_vector)
            return from_capsule(export_view(tensor, max_version=DLPACK_VERSION, dl_device=dl_device, copy=True))
    try:
        capsule = call_dlpack(x, stream=asked, dl_device=dl_device, copy=copy, plan=plan, explicit=stream is not None)
    except (BufferError, ValueError) as e:
        if isinstance(e, ValueError) and dl_device is None:
            raise
        fallback = _host_fallback(x) if stream is None and copy is not False and dl_device is None else None
        if fallback is None and dl_device is not None:
            # say what was asked of whom: the producer's own message alone ("unsupported device requested")
            # names neither; numpy before 2.3 refuses a device with ValueError, the spec says BufferError
            raise BufferError(
                f"from_dlpack(device={device!r}): {_type_name(x)} on "
                f"{device_name(here[0])}:{here[1]} cannot export to {device_name(dl_device[0])}:{dl_device[1]}"
                f"{' with copy=False' if copy is False else ''}: {e}"
            ) from e
        if fallback is None:
            raise
        own_plan, own_device = export_plan(type(fallback)), producer_device(fallback)
        own = imported(fallback, own_plan, own_device, copy=copy, allow_vector=allow_vector)
        return sealed(own, x, plan)
    try:
        tensor = sealed(from_capsule(capsule, allow_vector=allow_vector), x, plan)
    except ExtentError as exc:
        raise producer_error(x, exc)  # noqa: B904 (its __cause__ is exc)
    if asked is not None and asked != -1 and tensor._device_type == here[0]:
        ordered(tensor, asked)  # the producer ordered its work before `asked`: the data is ready there
    if target is not None and tensor.device != target:
        raise BufferError(f"the producer returned a tensor on {tensor.device}, not on {target}")
    if copy is False and tensor._flags & _IS_COPIED:
        raise BufferError("copy=False, but the producer made a copy")
    if copy is True and not tensor._flags & _IS_COPIED:
        tensor = tensor.copy()  # a legacy producer cannot say whether it copied: copy here
    return tensor
