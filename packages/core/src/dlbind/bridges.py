"""The bridges :func:`dlbind.convert` builds when its plan (:mod:`dlbind.routes`) says dlbind stands between a
producer and a target: copies (on the data's own device, ordered on the consumer's stream), the legacy capsule
an immutable consumer may take of read-only data, bool under another dtype, a capsule or numpy view for
importers that take those, the device form a target's ``device=`` takes, and :class:`Relay`, the producer a
target imports through on a device with streams.

Every bridge is a fact of the target's row; none looks a row up (the route carries what it needs).
"""

from __future__ import annotations

import sys
from typing import Any, Literal, NamedTuple, get_args

import dlbind.capsule as capsule
from dlbind._ffi import native
from dlbind._generated.adapters import Adapter, Asks, Copy, Given, ImportBool, Takes
from dlbind._generated.enums import DLPACK_VERSION
from dlbind._libraries import MISSING
from dlbind.consumer import imported
from dlbind.described import through_interface
from dlbind.devices import (
    HOST_ACCESSIBLE,
    DevicePair,
    check_stream,
    default_stream,
    device_name,
    parse_device,
    stream_free,
)
from dlbind.dtypes import BOOL, SUBBYTE_PADDED, UINT1, UINT8, DType
from dlbind.export import export_view, versioned_asked, wait_for
from dlbind.routes import (
    DEVICE_ARG,
    DEVICE_HERE,
    DIRECT,
    HOST,
    HOST_COPY,
    INTERFACE,
    NO_HOST,
    RELAY,
    SAME,
    Decision,
    Direct,
    Host,
    Interface,
    Plan,
    Route,
    namespace_devices,
    route_to,
)
from dlbind.sources import ExportPlan
from dlbind.tensor import Tensor, reexported

__all__ = [
    "AS_IS",
    "COPY",
    "OWN_COPY",
    "PACKS",
    "REFUSED",
    "VIEW",
    "Bridge",
    "Relay",
    "bridge_of",
    "bridged",
    "copied_in",
    "copy_in_refusal",
    "data_bridge",
    "described",
    "device_arg",
    "import_for",
    "import_on",
    "importer",
    "importer_name",
    "keywords",
    "on_device",
    "run",
]

_READ_ONLY = capsule.READ_ONLY
_CPU = parse_device("cpu")


def importer(adapter: Adapter) -> Any:
    """The system's importer as a function of a DLPack producer, given what its row says it takes
    (a producer, a capsule it asks for as its row says, or a numpy view of dlbind's import of the producer: to
    its importer of arrays of that many dimensions); for ``python -m dlbind check``."""
    route = route_to(adapter.name)  # its importers, resolved for the installed release, its setup run
    adapter, fn = route.adapter, route.importer
    if adapter.import_.takes == Takes.CAPSULE:
        return lambda x: fn(_capsule_for(adapter, x))
    if adapter.import_.takes == Takes.NDARRAY:
        import numpy

        def from_ndarray(x: Any) -> Any:
            # what convert hands it: a numpy view of dlbind's import (numpy's own from_dlpack would put numpy's
            # ways with producers, not the system's, into the system's report)
            t = imported(x, None, None)
            unfit = _unfit(route, t)  # as convert's bridge says
            if unfit is not None:
                raise BufferError(unfit)
            return _importer_of(route, t)(numpy.asarray(t))

        return from_ndarray
    if route.by_dtype is not None:

        def by_dtype(x: Any) -> Any:
            # the importer of x's dtype is given x itself: what a user of the system calls
            t = imported(x, None, None)
            if _lacks(route, t):
                raise BufferError(_cannot(route, t))
            return _importer_of(route, t)(x)

        return by_dtype
    return fn


def _importer_of(route: Route, tensor: Tensor) -> Any:
    """The target's importer of ``tensor``: the one of its dtype (``import.by_dtype``), of its dimensions
    (``import.function_nd``), else ``import.function``."""
    if route.by_dtype is not None:
        return route.by_dtype[tensor.dtype.name]  # a dtype it lacks was refused by the bridge
    return route.importer_nd if _nd(route, tensor) else route.importer


def _nd(route: Route, tensor: Tensor) -> bool:
    """``tensor`` goes to the target's importer of arrays that are not 1-D (``import.function_nd``)."""
    return route.importer_nd is not None and len(tensor.shape) != 1


def _unfit(route: Route, tensor: Tensor) -> str | None:
    """Why the target takes no array like ``tensor`` whatever is copied: a vector dtype but those of
    ``import.lanes``, or a number of dimensions outside ``import.ndims``; None when it may."""
    adapter = route.adapter
    if tensor._lanes != 1 and not route.vectors[tensor._code, tensor._bits, tensor._lanes]:
        takes, name = adapter.import_.lanes, tensor.dtype.name
        if takes:
            return f"{adapter.name} takes no vector dtype {name} (lanes={tensor._lanes}): only {', '.join(takes)}"
        return f"{adapter.name} takes no vector dtypes ({name}, lanes={tensor._lanes})"
    if adapter.import_.ndims and not adapter.import_.ndims[0] <= len(tensor.shape) <= adapter.import_.ndims[1]:
        low, high = adapter.import_.ndims
        return f"{adapter.name} imports arrays of {low} to {high} dimensions, not {len(tensor.shape)}"
    return None


def _packs(adapter: Adapter, tensor: Tensor) -> bool:
    """The target's importer packs ``tensor``'s bool bytes into bits (``import.bool = "packed"``): a copy."""
    return adapter.import_.bool_as == ImportBool.PACKED and tensor._code == BOOL.code and tensor._bits == 8


def _capsule_for(adapter: Adapter, producer: Any, stream: int | None = None) -> object:
    """The capsule an importer that takes only capsules gets: asked for as its row's ``asks`` says."""
    if adapter.import_.asks != Asks.VERSIONED:
        return producer.__dlpack__() if stream is None else producer.__dlpack__(stream=stream)
    return producer.__dlpack__(stream=stream, max_version=DLPACK_VERSION)


def _lacks(route: Route, tensor: Tensor, nd: bool = False) -> bool:
    """The target's importer lacks ``tensor``'s dtype (``lacks_dtypes``; ``nd``: its importer of arrays that are
    not 1-D, which lacks ``lacks_dtypes_nd`` too), or has no importer of it (``by_dtype``)."""
    return (route.lacks_nd if nd else route.lacks)[tensor._code, tensor._bits, tensor._lanes]


def _narrows(route: Route, tensor: Tensor) -> str | None:
    """How the target's importer narrows ``tensor``'s dtype (``import.narrows``: into a narrower copy of its own),
    in words, or None where it keeps it (its setting, ``import.narrows_unless``, is on)."""
    if route.narrowing is None:
        return None
    imp = route.adapter.import_
    into = dict(imp.narrows).get(tensor.dtype.name) if tensor._lanes == 1 else None
    if into is None or not route.narrowing():
        return None
    unless = f" while {imp.narrows_unless} is off" if imp.narrows_unless else ""
    return f"{imp.function} narrows {tensor.dtype.name} to {into}{unless}"


def importer_name(route: Route, tensor: Tensor) -> str:
    """The dotted name of the target's importer that ``tensor`` goes to (``import.by_dtype``'s of its dtype, or
    ``import.function_nd`` for arrays that are not 1-D, where the row has one), for messages."""
    a = route.adapter
    if a.import_.by_dtype:
        return dict(a.import_.by_dtype).get(tensor.dtype.name) or f"{a.name}'s {len(a.import_.by_dtype)} array types"
    return a.import_.function_nd if _nd(route, tensor) else a.import_.function


def _ready_on(t: Tensor, stream: Any) -> None:
    """What a bridge's own ``__dlpack__`` does for the consumer's ``stream``: checked by the rule
    ``Tensor.__dlpack__`` checks it by, then made to wait for the work ``t``'s data is ready on (its stream)."""
    check_stream(t._device_type, stream)
    if t._stream is not None:
        wait_for(t._stream, stream, t.device)


class _LegacyReadOnly:
    """Serves a legacy capsule of read-only memory to a consumer whose arrays are immutable.

    A legacy capsule cannot carry the read-only flag, so dlbind refuses to make one in general;
    for a consumer that never writes its arrays (``immutable`` in spec/adapters.toml) and never
    asks for versioned capsules (jax-ml/jax#40789), that refusal only blocks a safe exchange.
    """

    __slots__ = ("tensor",)

    def __init__(self, tensor: Tensor) -> None:
        self.tensor = tensor

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> object:
        if max_version is not None or dl_device is not None or copy:
            return export_view(self.tensor, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        t = self.tensor
        check_stream(t._device_type, stream)  # the consumer's stream first, as Tensor.__dlpack__ checks it
        why = t.dtype.legacy_refusal(padded=bool(t._flags & SUBBYTE_PADDED))
        if why is not None:
            raise BufferError(why)
        _ready_on(t, stream)
        return capsule.export(
            t.data_ptr, t.shape, t.strides, t.dtype, t.device, t.byte_offset, t, versioned=False,
        )  # fmt: skip


class _BoolAs:
    """Serves bool data to an importer that takes bool under another dtype (``import.bool``):
    ``"uint1"``, a legacy capsule of ``(kDLUInt, 1, 1)`` a byte per element; ``"uint8"``, a capsule that
    says uint8 from a producer whose ``dtype.name`` is ``"bool"`` (the importer reads it there)."""

    __slots__ = ("encoding", "tensor")
    encoding: Literal["uint1", "uint8"]  # how the bool reaches the importer (its row's import.bool)
    tensor: Tensor

    def __init__(self, tensor: Tensor, encoding: Literal["uint1", "uint8"]) -> None:
        self.tensor, self.encoding = tensor, encoding

    @property
    def dtype(self) -> DType:
        return self.tensor.dtype

    def __dlpack_device__(self) -> Any:
        return self.tensor.__dlpack_device__()

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> object:
        t = self.tensor
        versioned = versioned_asked(max_version)
        if (
            dl_device is not None
            or copy
            or (versioned and self.encoding == ImportBool.UINT1)
            or (t.readonly and not versioned)
        ):
            raise BufferError(f"bool as {self.encoding} is served only as the importer's row says it asks for it")
        _ready_on(t, stream)
        dtype = UINT1 if self.encoding == ImportBool.UINT1 else UINT8
        flags = _READ_ONLY if t.readonly else 0
        return capsule.export(
            t.data_ptr, t.shape, t.strides, dtype, t.device, t.byte_offset, t, versioned=versioned, flags=flags,
        )  # fmt: skip


def device_arg(route: Route, dev: DevicePair) -> Any:
    """A device (``(DeviceType, id)``, parsed) in the form the target's importer takes."""
    adapter = route.adapter
    if route.devices is not None:  # "namespace": one of its array API namespace's device objects
        found = route.devices.get(dev, MISSING)
        if found is MISSING:
            found = route.devices[dev] = namespace_devices(adapter).get((int(dev[0]), dev[1]))
        if found is None:
            raise BufferError(f"{adapter.name} has no device {device_name(dev[0])}:{dev[1]}")
        return found
    name = device_name(dev[0])
    name = dict(adapter.import_.device_names).get(name, name)
    return adapter.import_.device.format(name=name, index=dev[1])


def bridged(p: Plan, tensor: Tensor, bridge: Bridge) -> Any:
    """Hand ``tensor`` (in stream-free memory) to the plan's importer as ``bridge`` (:func:`bridge_of`) says.

    Every bridge is a fact of the target's row: the layout it views, ``byte_offset``, read-only
    data, whether it asks for versioned capsules, what its ``copy=`` does, the device form it
    takes, what it takes (a producer, a capsule, a numpy array). A bridge copies once (and the copy
    serves every later bridge); the importer's keywords are the plan's."""
    route = p.route
    adapter = route.adapter
    kind = bridge.kind
    if kind == REFUSED:
        raise BufferError(bridge.why)
    if kind == VIEW:  # a viewer that copies itself (view_copies) is given the data as it is
        return _view(route, tensor.copy() if bridge.copies and not adapter.import_.view_copies else tensor)
    kwargs = dict(p.kwargs) if p.kwargs else {}
    if kind == COPY:
        tensor = tensor.copy()
        kwargs.pop("copy", None)  # that copy is the one copy=True asks for: the importer views it
    if kind in (COPY, PACKS) and route.viewer is not None and not kwargs:
        # dlbind's own copy is writable: its viewer hands it over as such (a legacy import would
        # be read-only in numpy<2.1: numpy/numpy#28600)
        return _view(route, tensor)
    producer = _wrapped(route, tensor)
    if adapter.import_.takes == Takes.CAPSULE:
        producer = _capsule_for(adapter, producer)
    elif adapter.import_.takes == Takes.NDARRAY:
        import numpy

        theirs = route.bits.get(tensor.dtype.name) if route.bits else None
        if theirs is not None:  # its importer cannot read this dtype back: its bits go in, reinterpreted there
            bits = numpy.asarray(tensor).view(f"u{tensor.dtype.itemsize}")
            method = adapter.import_.bits_via.removesuffix("()")
            return getattr(route.importer(bits, **kwargs), method)(theirs)
        producer = numpy.asarray(tensor)  # a zero-copy view of the Tensor (read-only where it is: numpy says so)
    return _importer_of(route, tensor)(producer, **kwargs)


def copied_in(route: Route, tensor: Tensor, kwargs: dict[str, Any]) -> Any:
    """Data on a device the target holds no arrays of (``import.copy_from``: dpnp's importer answers numpy arrays
    for host data), copied in by the target's own constructor (``import.copy_with``) with the plan's keywords
    (``device=``: the device asked, else the first device it imports from, index 0: :func:`keywords`).
    ``copy=False`` is refused by the Decision (a copy-in copies); a dtype the target lacks, here (its words:
    :func:`copy_in_refusal`)."""
    refused = copy_in_refusal(route, tensor)
    if refused is not None:
        raise BufferError(refused)
    if route.adapter.import_.copy_takes == Given.NDARRAY:
        import numpy

        return route.copy_with(numpy.asarray(tensor), **kwargs)
    return route.copy_with(tensor, **kwargs)


def copy_in_refusal(route: Route, tensor: Tensor) -> str | None:
    """Why the target's own constructor cannot copy ``tensor`` in (a dtype its row lacks: dpnp's arrays hold no
    bfloat16), or None; what :func:`copied_in` raises and ``dlbind.explain`` says."""
    return _cannot(route, tensor) if route.lacks.patterns and _lacks(route, tensor) else None


def _wrapped(route: Route, tensor: Tensor) -> Any:
    """``tensor`` as the producer the target's importer is given: bool under the dtype it takes it as, or the
    legacy capsule an immutable legacy consumer may take of read-only data."""
    adapter = route.adapter
    if adapter.import_.bool_as in (ImportBool.UINT1, ImportBool.UINT8) and tensor.dtype == BOOL:
        return _BoolAs(tensor, adapter.import_.bool_as)
    if route.legacy_only and tensor._flags & _READ_ONLY:
        return _LegacyReadOnly(tensor)  # only targets for which it is safe get here (needs_copy, legacy_safe)
    return tensor


def _cannot(route: Route, tensor: Tensor) -> str:
    """The refusal of a dtype the target's importer of ``tensor`` lacks."""
    a = route.adapter
    if a.import_.by_dtype:  # an importer per dtype: none of this one (another would cast the data silently)
        return (
            f"{a.name} has no array type of {tensor.dtype.name} (its importers of other dtypes would cast the data): "
            f"cast it to one of {', '.join(name for name, _ in a.import_.by_dtype)} first"
        )
    shape = f" of {len(tensor.shape)} dimensions" if _nd(route, tensor) else ""
    lacks = f"{a.name} cannot import {tensor.dtype.name}{shape} ({importer_name(route, tensor)} lacks it)"
    return f"{lacks}: cast it to a dtype {a.name} has first"


def needs_copy(route: Route, tensor: Tensor) -> str | None:
    """Why the target cannot view ``tensor`` as it is (a copy can), or None."""
    adapter = route.adapter
    layout = (adapter.import_.layout_nd or adapter.import_.layout) if _nd(route, tensor) else adapter.import_.layout
    if layout == "nonnegative" and any(s < 0 for s in tensor.strides):
        return "negative strides"
    if layout == "compact" and not tensor.is_contiguous():
        return "strides that are not compact (row-major)"
    if not adapter.import_.byte_offset and tensor.byte_offset:
        return "a byte_offset (it ignores it)"
    item = tensor._bits * tensor._lanes // 8  # whole bytes; sub-byte elements have no byte_offset of a part
    if adapter.import_.byte_offset_items and item and tensor.byte_offset % item:
        return f"a byte_offset of {tensor.byte_offset} bytes, not a whole number of {item}-byte elements"
    if tensor._flags & _READ_ONLY:  # the int, not the Flags enum of Tensor.readonly: this is every convert's path
        if route.ignores_readonly:
            return "read-only data (it imports read-only data writable)"
        if route.legacy_only and not route.legacy_safe:
            if adapter.immutable:  # its arrays are immutable, but their exports would hand the memory on writable
                return "read-only data (its exports are unmarked legacy capsules: writable to every consumer)"
            return "read-only data (it asks for legacy capsules, which cannot say read-only)"
    return None


#: What the data of one array adds to its plan (a :class:`Bridge`'s kind): handed over as it is; a copy dlbind
#: makes first (on the data's own device for a relay); viewed by the row's ``view_with`` (a dtype the importer
#: lacks); a copy the target's importer makes itself (it packs bool into bits, it copies unaligned data, or
#: copy=True asks it to); refused.
BridgeKind = Literal["as is", "copy", "view", "packs", "own copy", "refused"]
AS_IS, COPY, VIEW, PACKS, OWN_COPY, REFUSED = get_args(BridgeKind)


class Bridge(NamedTuple):
    """What one array's data adds to its plan (:func:`bridge_of`): ``kind`` (:data:`AS_IS`, :data:`COPY`,
    :data:`VIEW`, :data:`PACKS`, :data:`OWN_COPY` or :data:`REFUSED`), ``why`` in words (the refusal's message
    for REFUSED), and for VIEW whether the view is of a copy (``copy=True``). :func:`run` executes it and
    :func:`dlbind.explain` renders it: one answer for both."""

    kind: BridgeKind
    why: str = ""
    copies: bool = False


_AS_IS = Bridge(AS_IS)
_TOO_LARGE = Bridge(REFUSED, "the tensor is too large to copy")
_LARGEST_COPY = sys.maxsize // 2  # PY_SSIZE_T_MAX / 2, as the C copy (_fastpath/convert.c) bounds it


def bridge_of(
    route: Route, tensor: Tensor, copy: bool | None, copy_here: bool = False, device: Any = None,
    on_device: bool = False,
) -> Bridge:  # fmt: skip
    """What ``tensor``'s data needs to reach the route's importer: the checks the target's row asks of one
    array (its dimensions and lanes, a dtype it lacks, bool it packs, a layout, byte_offset or read-only data it
    cannot view, alignment), each written once. ``copy``: as asked (``False`` refuses every copy);
    ``copy_here``: dlbind makes the copy ``copy=True`` asks for (the importer cannot be asked); ``device``: the
    device asked (a viewer views data where it is); ``on_device``: the data is on a device with streams,
    where copies are made on that device and viewers and packing do not apply."""
    a = route.adapter
    imp = a.import_  # how it takes DLPack (its row's [import])
    unfit = _unfit(route, tensor)
    if unfit is not None:
        return Bridge(REFUSED, unfit)
    nd = _nd(route, tensor)
    if _lacks(route, tensor, nd):
        return _lacked_bridge(route, tensor, copy, device, on_device)
    is_packed = packed(tensor)
    if is_packed and not imp.packed:
        return Bridge(REFUSED, _packed_refusal(tensor, f"{a.name} cannot import", importer_name(route, tensor)))
    if route.legacy_only and imp.takes != Takes.NDARRAY:  # a legacy capsule has no flag for padded sub-byte data
        legacy = tensor.dtype.legacy_refusal(padded=bool(tensor._flags & SUBBYTE_PADDED))
        if legacy is not None:
            return Bridge(REFUSED, legacy)
    narrows = _narrows(route, tensor)
    if narrows is not None and copy is False:
        return Bridge(REFUSED, f"{narrows}, a copy, and copy=False forbids it")
    if not on_device and not nd and _packs(a, tensor):
        packs = f"{a.name} holds bool as bits: {imp.function} packs the bytes"
        if copy is False:
            return Bridge(REFUSED, f"{packs} (a copy), and copy=False forbids it")
        return Bridge(PACKS, packs)
    why = needs_copy(route, tensor)
    if why is not None and copy is False:
        return Bridge(REFUSED, f"{a.name} cannot import {why}, so it needs a copy and copy=False forbids it")
    if why is not None or copy_here:  # a copy dlbind makes, or its refusal where no address space could hold it
        if tensor.nbytes > _LARGEST_COPY:  # a broadcast view of 2**62 bytes: the C copy refuses it in these words
            return _TOO_LARGE
        if not on_device and is_packed and not tensor.is_contiguous():  # as dlbind.export.export_memory says
            return Bridge(REFUSED, f"cannot copy strided packed {tensor.dtype.name} data")
        then = "" if narrows is None else f"; then {narrows} (its own copy)"
        if why is not None:
            return Bridge(COPY, f"{a.name} cannot import {why}{then}")
        return Bridge(COPY, f"copy=True asked, which {imp.function} cannot be asked for: dlbind copies{then}")
    if narrows is not None:
        return Bridge(OWN_COPY, narrows)
    if imp.alignment and tensor.size and (tensor.data_ptr + tensor.byte_offset) % imp.alignment:  # no element: none
        aligned = f"{a.name} views only {imp.alignment}-byte aligned data"
        if on_device:
            return Bridge(COPY, aligned)
        if copy is False:
            return Bridge(REFUSED, f"{aligned}, and copy=False forbids a copy")
        return Bridge(OWN_COPY, f"{a.name} copies data that is not {imp.alignment}-byte aligned (its own import)")
    if imp.copy == Copy.ALWAYS:
        return Bridge(OWN_COPY, f"{imp.function} copies on every import")
    if copy and not on_device:
        return Bridge(OWN_COPY, "copy=True asked")
    return _AS_IS


def packed(tensor: Tensor) -> bool:
    """``tensor``'s elements are packed below a byte (DLPack's default for sub-byte dtypes: no
    IS_SUBBYTE_TYPE_PADDED flag), which only a target whose row says ``import.packed`` takes."""
    return bool(tensor._bits * tensor._lanes % 8) and not tensor._flags & SUBBYTE_PADDED


def _packed_refusal(tensor: Tensor, cannot: str, importer: str) -> str:
    """The refusal of packed sub-byte data (:func:`packed`) by a target that takes whole bytes an element."""
    name = tensor.dtype.name
    return (
        f"{cannot} {name} data packed below a byte ({importer} takes whole bytes an element, as DLPack's "
        "IS_SUBBYTE_TYPE_PADDED flag says them)"
    )


def _lacked_bridge(route: Route, tensor: Tensor, copy: bool | None, device: Any, on_device: bool) -> Bridge:
    """The bridge of a dtype the target's importer lacks: viewed by its ``view_with`` where it has one that takes it
    (on the host, where the data is), else refused (:func:`bridge_of`)."""
    a = route.adapter
    imp = a.import_
    lacks = f"{importer_name(route, tensor)} lacks it"
    if on_device:
        return Bridge(REFUSED, f"{a.name} cannot import {tensor.dtype.name} on a device ({lacks})")
    if route.viewer is None or route.view_lacks[tensor._code, tensor._bits, tensor._lanes]:  # nor its viewer
        return Bridge(REFUSED, _cannot(route, tensor))
    if packed(tensor):  # a viewer views whole bytes an element
        return Bridge(REFUSED, _packed_refusal(tensor, f"{a.name} cannot import", imp.view_with))
    if device is not None and device != tensor.device:
        where = f"{device_name(device[0])}:{device[1]}"
        return Bridge(REFUSED, f"{imp.view_with} views {tensor.dtype.name} data where it is, not on {where}")
    if tensor.device[0] not in HOST_ACCESSIBLE:
        return Bridge(REFUSED, f"{a.name} views {tensor.dtype.name} data in host memory only")
    if imp.view_copies:
        if copy is False:
            return Bridge(REFUSED, f"{imp.view_with} copies {tensor.dtype.name} ({imp.function} lacks it), and "
                          "copy=False forbids it")  # fmt: skip
        return Bridge(VIEW, f"{imp.view_with} copies {tensor.dtype.name} ({imp.function} lacks it)", True)
    return Bridge(VIEW, f"{imp.view_with} views {tensor.dtype.name} ({imp.function} lacks it)", bool(copy))


def _view(route: Route, tensor: Tensor) -> Any:
    """The target's array of ``tensor`` made by its ``view_with`` (given the tensor or a numpy view of it)."""
    if route.adapter.import_.view_takes == Given.NDARRAY:
        import numpy

        return route.viewer(numpy.asarray(tensor))
    return route.viewer(tensor)


# -- devices with streams ------------------------------------------------------------------------------


def import_on(
    x: Any, source: ExportPlan, here: DevicePair, stream: int | None, device: Any = None, copy: bool | None = None
) -> Tensor:
    """``x`` (of ``source``'s type, its data on ``here``) imported as a Tensor ready on ``stream`` (the
    consumer's; None: the device rule's default), on ``device`` (None: where it is), ``copy`` as in
    ``from_dlpack``; a system that exports through a function of its own is asked through that function.

    A producer whose capsules carry negative strides as unsigned numbers (``export.negative_strides``) and
    whose capsule dlbind refuses for it is imported through the interface its row names instead
    (``__cuda_array_interface__``: signed byte strides, and the stream its data is ready on)."""
    own = source.via is not None
    asked, at = x, None if own else here
    plan: ExportPlan | None = source
    while True:  # at most twice: the producer, then (its capsule refused) dlbind's own producer of its interface
        try:
            return imported(asked, plan, at, device=device, copy=copy, stream=stream, own_export=own)
        except BufferError:
            if plan is None or not (source.unsigned_strides and source.interface and hasattr(x, source.interface)):
                raise
        # dlbind's own producer of it (its plan is looked up there), where the data is
        asked, plan, at, own = through_interface(x, source.interface), None, here, False


def on_device(tensor: Tensor, stream: int | None) -> Tensor:
    """A compact copy of a device ``tensor`` on its own device, made by the device's backend and enqueued on
    ``stream`` (None: the device rule's default): ready there, never through the host."""
    if stream is None:
        stream = default_stream(tensor._device_type)
    return reexported(tensor, stream, copy=True, own=True)


def device_bridge(route: Route, tensor: Tensor, copy: bool, stream: int | None) -> Any:
    """``tensor`` (on a device with streams, ready on ``stream``) bridged for the target as :func:`bridge_of`
    says: refused where only policy the target lacks could serve (vector dtypes, dtypes its importer lacks),
    copied on the device where the target cannot view it (``copy``: the caller asks for a copy anyway),
    wrapped for bool or legacy read-only; the result is the producer the target's importer is given."""
    bridge = bridge_of(route, tensor, None, copy, on_device=True)
    if bridge.kind == REFUSED:
        raise BufferError(bridge.why)
    if bridge.kind == COPY:
        tensor = on_device(tensor, stream)
    return _wrapped(route, tensor)


class Relay:
    """The producer a target imports through when dlbind must stand between it and ``source`` on a device
    with streams (a RELAY decision of :mod:`dlbind.routes`).

    It asks the source nothing until the target asks it: then it imports the source on the stream the
    target named (the stream ``convert(..., stream=)`` gave wins, and the target's then waits for it),
    bridges what the target cannot take — a copy on the device, enqueued on that stream — and answers the
    target's call from there. One exchange with the source, ordered on the consumer's own stream.
    """

    __slots__ = ("copy", "device", "plan", "route", "source", "stream")

    def __init__(
        self, source: Any, plan: ExportPlan, route: Route, device: DevicePair, stream: int | None, copy: bool
    ) -> None:
        self.source, self.plan, self.route, self.device = source, plan, route, device
        self.stream, self.copy = stream, copy

    def __dlpack_device__(self) -> DevicePair:
        return self.device

    def __dlpack__(
        self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None
    ) -> object:
        on = self.stream if self.stream is not None else stream
        if on == -1:  # the target orders nothing: the source's default stream is ordered instead
            on = None
        tensor = import_on(self.source, self.plan, self.device, on)
        producer = device_bridge(self.route, tensor, self.copy, on)
        if isinstance(producer, Tensor) and producer is not tensor:  # a copy the bridge made for this consumer
            if copy:
                copy = None  # it is the copy the target asked for
            return export_view(producer, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy,
                               copied=True)  # fmt: skip
        return producer.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __repr__(self) -> str:
        return f"{capsule.PACKAGE}.bridges.Relay(of {type(self.source).__name__} for {self.route.adapter.name})"


def capsule_for_target(route: Route, producer: Any, index: int) -> object:
    """The capsule a target that takes capsules gets on a device with streams: asked on its current stream
    (``import.stream``) where the row names it, else on the device rule's default."""
    stream = route.stream_of(index) if route.stream_of is not None else None
    return _capsule_for(route.adapter, producer, stream)


# -- the executor --------------------------------------------------------------------------------------


def run(p: Plan, tried: bool = False, taken: Tensor | None = None) -> Any:
    """Run plan ``p`` in one pass: one exchange with the producer, the bridge its data needs
    (:func:`bridge_of`), the hand-over to the target. ``tried``: the compiled convert tried the C route already;
    ``taken``: the Tensor its C route imported there and left to Python (the producer refused that call, or the
    target the struct), the exchange's one import on a host route.

    Where the target's importer asks the producer itself (SAME, DIRECT, RELAY) it is handed what it asks;
    otherwise the producer is imported here once (:func:`import_for`), then bridged and handed over. Nothing
    is decided here: every branch is the plan's."""
    if p.refused:
        raise BufferError(p.refused)
    if p.itself:
        return p.producer
    d, route, x, here = p.decision, p.route, p.producer, p.here
    kind, payload = d.kind, d.payload
    kwargs = p.kwargs or {}
    direct = isinstance(payload, Direct) and not (payload.watch_stream and refused_here(p.source, route, here))
    if kind == SAME or direct:
        return route.importer(x, **kwargs)  # one exchange, asked on the target's stream
    if kind in (DIRECT, RELAY):  # RELAY (or a stream the producer refuses): the target asks the relay, which imports
        relay = Relay(x, p.source, route, here, p.stream, d.copy_here)
        if route.adapter.import_.takes != Takes.PRODUCER:
            return route.importer(capsule_for_target(route, relay, here[1]), **kwargs)
        return route.importer(relay, **kwargs)
    move = payload if isinstance(payload, Host) else NO_HOST  # HOST, HOST_COPY: how the data reaches the host routes
    if kind == HOST and move.c_route and not tried:
        out = native.convert_to(x, route)
        if type(out) is tuple and out[0] is NotImplemented:  # imported in C, finished here (no second ask)
            taken = out[1]
        elif out is not NotImplemented:
            return out
    tensor = taken if taken is not None and kind == HOST and move.c_route else import_for(p)
    if kind == INTERFACE:
        return route.interface(tensor.copy() if d.copy_here or interface_copies(route, tensor) else tensor)
    if move.copy_in:
        return copied_in(route, tensor, kwargs)  # onto its device, by its own constructor
    if move.handover and tensor._lanes == 1 and tensor._bits >= 8:  # sub-byte data: the bridge says if it is packed
        return route.importer(tensor)
    return bridged(p, tensor, data_bridge(p, tensor))


def data_bridge(p: Plan, tensor: Tensor) -> Bridge:
    """The bridge of the plan's import ``tensor``: on a device with streams (a relay), the one the relay makes
    there; on the host routes, after the host copy the plan makes, where it makes one (that copy is the one
    ``copy=True`` asked for, and the device asked is where it is; pinned memory read in place is not one)."""
    d = p.decision
    copy, copy_here, device = p.copy, d.copy_here, p.asked
    if d.kind == RELAY:  # as the Relay's
        copy, device = None, None
    elif isinstance(d.payload, Host) and d.payload.to_host and not d.payload.in_place:
        copy, copy_here, device = None, False, None if d.kind == HOST_COPY else p.asked
    return bridge_of(p.route, tensor, copy, copy_here, device, on_device=d.kind == RELAY)


def import_for(p: Plan, *, metadata: bool = False) -> Tensor:
    """The plan's one import of its producer, asked as its Decision says: copied to the host first (HOST_COPY,
    or the host asked for by ``device=``), ready on the target's current stream (INTERFACE, where its row names
    that), else on the stream given. ``metadata``: for :func:`dlbind.explain`, which reads the data's facts and
    copies nothing: a producer's import where it is (pinned memory read in place: as the CPU's, as the exchange
    reads it), unordered on a device with streams."""
    d, here, stream = p.decision, p.here, p.stream
    if metadata:
        in_place = isinstance(d.payload, Host) and d.payload.in_place
        if type(p.producer) is Tensor and not in_place:
            return p.producer
        return import_on(p.producer, p.source, here, None if stream_free(here[0]) else -1, _in_place(p, in_place))
    to: DevicePair | None = None
    on, asked_copy = stream, None
    if d.kind == HOST_COPY:
        to, asked_copy = _CPU, True
    elif d.kind == INTERFACE:
        # ready on the target's current stream where its row names that (else on the stream given, or the
        # device's default); the interface then says that stream, so the target orders its own after it
        on_target = isinstance(d.payload, Interface) and d.payload.stream_of
        on = None if stream_free(here[0]) else p.route.stream_of(here[1]) if on_target else stream
    elif isinstance(d.payload, Host) and d.payload.to_host:
        to = p.asked or _CPU
    elif type(p.producer) is Tensor and stream is None:
        return p.producer
    return import_on(p.producer, p.source, here, on, to, asked_copy)


def _in_place(p: Plan, in_place: bool) -> DevicePair | None:
    """Where explain's import of pinned memory read in place asks it (the device asked, or the CPU), as the
    exchange asks it; None where it is imported where it is."""
    return (p.asked or _CPU) if in_place else None


def refused_here(source: ExportPlan, route: Route, here: Any) -> bool:
    """Whether the target's current stream on ``here`` is one the producer refuses (``export.streams_refused``):
    then the exchange goes through dlbind's relay, which asks the producer on the device's default stream."""
    return route.stream_of is not None and (here[0], route.stream_of(here[1])) in source.refused_streams


def interface_copies(route: Route, tensor: Tensor) -> bool:
    """Whether the target's ``__cuda_array_interface__`` importer needs a copy of ``tensor``: read-only data
    for a target that takes it writable (the interface's flag is not read)."""
    return bool(tensor._flags & _READ_ONLY) and route.ignores_readonly


def keywords(d: Decision, route: Route, here: Any, device: DevicePair | None) -> dict[str, Any]:
    """The keywords of the target's importer, as ``d`` says (the device's index is the one thing left); a
    ``BufferError`` where the device asked cannot be given (a device its namespace lacks, or one the importer
    cannot be asked for and the data is not on)."""
    imp = route.adapter.import_  # how it takes DLPack (its row's [import])
    kwargs: dict[str, Any] = {}
    if isinstance(d.payload, Host) and d.payload.copy_in:  # the target's constructor copies the data in: onto the
        # device asked, else its first one
        kwargs["device"] = device_arg(route, device if device is not None else parse_device(imp.devices[0]))
    elif d.device_kw == DEVICE_ARG and device is not None:
        kwargs["device"] = device_arg(route, device)
    elif d.device_kw == DEVICE_HERE and device is not None and device != here:
        raise BufferError(
            f"{imp.function} takes no device= (asked: {device_name(device[0])}:{device[1]}, the data is "
            f"on {device_name(here[0])}:{here[1]}): convert on the source's device"
        )
    if d.copy_kw is not None:
        kwargs["copy"] = d.copy_kw
    return kwargs


def described(x: Any) -> str:
    """``x`` in a message: its type, and its device where it says."""
    try:
        kind, index = x.__dlpack_device__()
        return f"a {type(x).__name__} on {device_name(int(kind))}:{int(index)}"
    except Exception:
        return f"a {type(x).__name__}"
