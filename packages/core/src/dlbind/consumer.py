"""Consumer side: :func:`from_dlpack`, and :func:`imported`, the one import of a producer as a Tensor.

The import runs top to bottom, each step in the module that holds it: what the producer's type exports
(:mod:`dlbind.sources`: its plan, its export guards, its own export function), the device and stream rules
(:mod:`dlbind.devices`), the call that asks it (:mod:`dlbind.asking`: ``__dlpack__`` with the keywords of every
DLPack version, its buffer when ``__dlpack__`` refuses), the capsule's struct checked (:mod:`dlbind.validate`),
a host copy by the device's backend (:mod:`dlbind.export`), and the Tensor (:mod:`dlbind.tensor`: made and
finished as the plan says). Nothing below calls back up here.
"""

from __future__ import annotations

from typing import Any, cast

import dlbind._backends as _backends
import dlbind._capi as _capi
import dlbind.exchange as exchange
from dlbind._ffi import native
from dlbind._generated.enums import DLPACK_VERSION, DeviceType
from dlbind.asking import asked_capsule, call_dlpack, host_export, refusal_of
from dlbind.devices import HOST_ACCESSIBLE, STREAM_FREE, parse_device, producer_device, streams
from dlbind.sources import ExportPlan, export_plan, to_ask
from dlbind.tensor import Tensor, from_capsule, received

__all__ = ["from_dlpack", "imported", "resume"]

_CPU = parse_device("cpu")


def resume(
    refused: tuple[BaseException, bool, tuple[int, int] | None] | None, /, *args: Any, **keywords: Any
) -> Tensor:
    """The compiled ``from_dlpack``'s one fall-back into Python, told where its C code stopped: ``refused`` None,
    the whole call ``from_dlpack(*args, **keywords)`` is Python's; else ``(error, older, ready)``, the plain
    ``from_dlpack(x)`` (``args``) whose ``__dlpack__`` call raised ``error`` (asked on the stream of ``ready``,
    ``(device type, stream)``, where not None), continued here without asking again."""
    if refused is None:
        return from_dlpack(*args, **keywords)
    return _after_refusal(args[0], *refused)


def _after_refusal(x: Any, error: BaseException, older: bool, ready: tuple[int, int] | None = None) -> Tensor:
    """Continue the plain ``from_dlpack(x)`` whose versioned ``__dlpack__`` call raised ``error`` (``older``: the
    call its type accepted once ``max_version`` was refused, which is never made twice; ``ready``: the
    ``(device type, stream)`` it was asked on, the device rule's default for ``stream=None``, or None).

    A TypeError: an older producer, asked with fewer keywords (``older``: its own error, or its system's
    refusal type). A BufferError: the producer cannot export this array (numpy before 2.1 refuses
    read-only arrays; numpy refuses ml_dtypes' bfloat16 and float8), but its buffer protocol or array
    interface may carry it: exported from there, for data on the CPU only (no stream orders it; a refusal of data
    on another device, managed memory included, stands).
    """
    plan = export_plan(type(x))
    made = None
    if isinstance(error, TypeError) and older:
        refusal = refusal_of(x, error, plan)
        if refusal is None:
            try:
                raise error
            finally:  # no cycle error -> traceback -> this frame -> error
                del error
        error = refusal
    elif isinstance(error, TypeError):
        try:
            asked = None if ready is None else ready[1]
            made = call_dlpack(x, stream=asked, dl_device=None, copy=None, plan=plan, first_error=error, explicit=False)
        except BufferError as refusal:  # a refusal its system raises as TypeError (export.refusal)
            error = refusal
    if made is None:
        fallback = host_export(x) if ready is None and _on_cpu(x, plan) else None
        if fallback is None:
            try:
                raise error
            finally:  # no cycle error -> traceback -> this frame -> error
                del error
        made = fallback.__dlpack__(max_version=DLPACK_VERSION)
    return from_capsule(made, x=x, plan=plan, ready=ready)


def _on_cpu(x: Any, plan: ExportPlan) -> bool:
    """Whether ``x``'s data is on the CPU (host-only, or its ``__dlpack_device__`` says kDLCPU): the only data
    whose refusal its buffer protocol or array interface may answer."""
    if plan.host_only:
        return True
    try:
        return int(producer_device(x)[0]) == DeviceType.kDLCPU
    except Exception:  # a device it cannot say: its refusal stands
        return False


def from_dlpack(
    x: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None, allow_vector: bool = False
) -> Tensor:
    """Import ``x`` (a DLPack producer or a raw capsule) as a zero-copy :class:`dlbind.Tensor`.

    ``device``: where the result must live (None: where ``x`` is); ``copy``: True always copies,
    False never does (``BufferError`` if one is needed), None copies only when needed; ``stream``:
    the consumer's stream, passed to the producer for synchronisation (CUDA/ROCm rules);
    ``allow_vector``: kept for code written against earlier releases (dtypes with ``lanes > 1`` are carried
    either way, and refused where a policy needs what they lack).

    Raises ``BufferError`` where the producer cannot export as asked or gives a tensor dlbind refuses (an invalid
    one, a device or copy it cannot make), and for a raw capsule with ``device``, ``copy=True`` or ``stream``
    (what only its producer could be asked), saying why; ``TypeError`` for an object that is no producer and for
    a ``copy`` that is not a bool.
    """
    if copy is not None and not isinstance(copy, bool):
        raise TypeError(f"copy must be None, True or False, not {copy!r}")
    if type(x) is not _capi.PyCapsuleType:
        return imported(x, None, None, device=device, copy=copy, stream=stream, allow_vector=allow_vector)
    if device is not None or copy or stream is not None:  # what the producer's __dlpack__ is asked with
        keywords = (("device", device), ("copy", copy), ("stream", stream))
        given = ", ".join(f"{name}={value!r}" for name, value in keywords if value is not None and value is not False)
        raise BufferError(
            f"from_dlpack({given}) of a raw capsule: it was exported already, so it cannot be moved, copied or put "
            "on a stream; pass the producer instead"
        )
    return from_capsule(x, allow_vector=allow_vector)


def imported(
    x: Any, plan: ExportPlan | None, here: Any, *, device: Any = None, copy: bool | None = None,
    stream: int | None = None, allow_vector: bool = False, own_export: bool = False,
) -> Tensor:  # fmt: skip
    """``x`` imported as a Tensor, in one pass: :func:`from_dlpack` (``plan`` None: ``x`` may be anything it
    takes), and what ``dlbind.convert`` runs with the producer's plan and device (``here``; None: asked here).
    ``device``, ``copy`` (checked by the caller) and ``stream`` as in :func:`from_dlpack`. A plain call imports
    through the producer's DLPack 1.3 exchange table where its type has one; else the producer is asked once: its
    ``__dlpack__`` (an older producer's refusal of the newest keywords retried as the spec says, the way its type
    took them kept in its plan; a refused host array exported from its buffer or array interface), or the export
    function its row names (``own_export``: even where ``x`` has ``__dlpack__``, as ``convert`` asks it)."""
    plain = device is None and copy is None and stream is None and not allow_vector
    if native is not None and plan is not None and plain and not own_export:
        # convert's plain import, in C: its from_dlpack reads the same plan (and checks its guards); a call it hands
        # back to Python comes through from_dlpack, without a plan
        return cast(Tensor, native.from_dlpack(x))
    ask = to_ask(x, plan, own_export)  # the producer (or the capsule its system gave), its guards checked
    x, plan, made = ask.producer, ask.plan, ask.capsule
    given = made is not None
    if not given and plain and ask.array is x:
        fast = exchange.import_object(x)  # its 1.3 exchange table
        if fast is not None:
            return fast
    if here is None or x is not ask.array:  # where its data is (another array its system gave: that one's)
        here = _CPU if given or plan.host_only else producer_device(x)  # host-only: no device to ask
    target = None if device is None else parse_device(device)
    asked, wanted = streams(here[0], stream, plan.refused_streams)
    dl_device = target if target is not None and target != here else None
    to_host = dl_device is not None and dl_device[0] in HOST_ACCESSIBLE and here[0] not in HOST_ACCESSIBLE
    # a host copy of device data: by the device's backend from a plain import (pinned memory), else the producer's
    by_backend = to_host and copy is not False and _backends.serving(here[0]) is not None
    if dl_device is not None and dl_device[0] in STREAM_FREE and not by_backend:
        asked = wanted = None  # the producer is asked for host data on no stream (DLPack's rule), and synchronises
    ready = (int(here[0]), asked) if asked is not None and not given else None  # its work is ordered before it
    if made is None:
        made = asked_capsule(ask, here, asked, dl_device, copy, device=device, stream=stream, by_backend=by_backend)
    return received(
        made, ask.array, ask.array_plan, ready, (asked, wanted), allow_vector=allow_vector,
        to_host=dl_device if by_backend else None, target=target, copy=copy, given=given,
    )  # fmt: skip
