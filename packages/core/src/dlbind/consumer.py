"""Consumer side: :func:`from_dlpack`, and the negotiation with producers of every DLPack version."""

from __future__ import annotations

from typing import Any

from dlbind import _capi, exchange
from dlbind._generated.enums import DLPACK_VERSION, Flags
from dlbind.devices import check_stream, parse_device, producer_device
from dlbind.tensor import Tensor, from_capsule

__all__ = ["from_dlpack"]

_UNEXPECTED = ("unexpected keyword", "takes no keyword arguments", "got an unexpected", "positional argument")


def _keyword_refused(exc: TypeError) -> bool:
    return any(text in str(exc) for text in _UNEXPECTED)


def call_dlpack(
    x: Any, *, stream: int | None, dl_device: Any, copy: bool | None, first_error: TypeError | None = None
) -> object:
    """Call ``x.__dlpack__`` with the newest keywords, falling back as the spec says.

    ``first_error``: the TypeError the versioned call already raised (the compiled fast path made it).
    """
    method = x.__dlpack__
    kwargs: dict[str, Any] = {"stream": stream, "max_version": DLPACK_VERSION}
    if dl_device is not None:
        kwargs["dl_device"] = dl_device
    if copy is not None:
        kwargs["copy"] = copy
    try:
        if first_error is not None:
            raise first_error
        result = method(**kwargs)
    except TypeError as exc:
        if not _keyword_refused(exc):
            raise
        if dl_device is not None or copy is not None:
            asked = ", ".join(k for k in ("dl_device", "copy") if k in kwargs)
            raise BufferError(
                f"{type(x).__name__}.__dlpack__ does not accept {asked}, so it cannot honour them"
            ) from exc
        try:
            result = method(stream=stream)
        except TypeError as exc2:
            if not _keyword_refused(exc2) or stream is not None:
                raise
            result = method()
    if type(result) is not _capi.PyCapsuleType:
        raise TypeError(f"{type(x).__name__}.__dlpack__() returned {type(result).__name__}, not a DLPack capsule")
    return result


# How an object without __dlpack__ is exported for import (dlbind.producer.asdlpack: the buffer protocol,
# the array interface); the producers sit above this layer, so dlbind._wiring sets it at import.
export_other: Any = None


def after_type_error(x: Any, error: TypeError) -> Tensor:
    """Continue a plain ``from_dlpack(x)`` whose versioned ``__dlpack__`` call raised ``error``."""
    return from_capsule(call_dlpack(x, stream=None, dl_device=None, copy=None, first_error=error))


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
        try:
            x = export_other(x)  # a buffer or array interface: exported zero-copy by dlbind itself
        except TypeError:
            raise TypeError(
                f"from_dlpack needs a DLPack producer (an object with __dlpack__ and __dlpack_device__), a "
                f"DLPack capsule or an object with a buffer or array interface, not {type(x).__name__}"
            ) from None
    if device is None and copy is None and stream is None and not allow_vector:
        fast = exchange.import_object(x)
        if fast is not None:
            return fast
    target = None if device is None else parse_device(device)
    here = producer_device(x)
    check_stream(here[0], stream)
    dl_device = target if target is not None and target != here else None
    capsule = call_dlpack(x, stream=stream, dl_device=dl_device, copy=copy)
    tensor = from_capsule(capsule, allow_vector=allow_vector)
    if target is not None and tensor.device != target:
        raise BufferError(f"the producer returned a tensor on {tensor.device}, not on {target}")
    if copy is False and tensor.flags & Flags.IS_COPIED:
        raise BufferError("copy=False, but the producer made a copy")
    if copy is True and not tensor.flags & Flags.IS_COPIED:
        tensor = tensor.copy()  # a legacy producer cannot say whether it copied: copy here
    return tensor
