"""Route and bridge planning for :func:`dlbind.convert`: which library an array belongs to, which
library a ``to=`` names, and how to hand a :class:`dlbind.Tensor` to that library's ``from_dlpack``.

Each library's capabilities are a row of ``spec/adapters.toml`` (:data:`ADAPTERS`); :func:`plan`
reads the target's row once per target (its ``from_dlpack``, exchange table, the quirks that need a
bridge, the keywords the installed version accepts) and :func:`bridged` applies the bridges: a copy,
a legacy capsule for immutable consumers, or a ``BufferError`` when ``copy=False`` forbids the copy.
"""

from __future__ import annotations

import fnmatch
import importlib
import sys
from types import ModuleType
from typing import Any, NamedTuple

from dlbind import capsule, exchange
from dlbind._generated.adapters import ADAPTERS, Adapter
from dlbind._generated.enums import DLPACK_VERSION
from dlbind._generated.tables import VERSIONED_CAPSULES
from dlbind._libraries import MISSING, TypeCache, dotted, for_release, library_of
from dlbind.devices import HOST_ACCESSIBLE, device_name, parse_device
from dlbind.dtypes import BOOL, SUBBYTE_PADDED, UINT1, UINT8, DType
from dlbind.export import export_view
from dlbind.tensor import Tensor

__all__ = [
    "C_ROUTES",
    "ROUTES",
    "Route",
    "bridged",
    "device_arg",
    "importer",
    "library_of",
    "plan",
    "resolve",
]

# to -> (target array type, Route.refuse, from_dlpack for a handover route or None for the exchange
# table's), read by the compiled convert
C_ROUTES: dict[Any, tuple[type, int, Any]] = {}

_MISSING = MISSING
_READ_ONLY = capsule.READ_ONLY
_TypeCache = TypeCache


def resolve(to: Any) -> Adapter:
    """A library name (``"torch"``), its module, or one of its array types -> its adapter."""
    if isinstance(to, str):
        for adapter in ADAPTERS.values():
            if to in (adapter.name, adapter.import_name):
                return adapter
        raise ValueError(f"unknown array library {to!r}; dlbind knows {', '.join(ADAPTERS)}")
    if isinstance(to, ModuleType):
        root = to.__name__
        for adapter in ADAPTERS.values():
            if root == adapter.import_name or adapter.import_name.startswith(root + "."):
                return adapter
        raise ValueError(f"module {root} is not an array library dlbind knows")
    if isinstance(to, type):
        for klass in to.__mro__:
            name = f"{klass.__module__}.{klass.__qualname__}"
            for adapter in ADAPTERS.values():
                if name in adapter.array_types:
                    return adapter
        raise ValueError(f"{to.__qualname__} is not the array type of a library dlbind knows")
    raise TypeError(f"to= is a library name, module or array type, not {type(to).__name__}")


class Route(NamedTuple):
    """How :func:`dlbind.convert` reaches one target system (its row of spec/adapters.toml, resolved for
    the installed release)."""

    adapter: Adapter
    from_dlpack: Any
    table_type: type | None  # the target array type, when it has an exchange table
    handover_type: type | None  # the target array type, when the compiled build may hand over in C (below)
    refuse_negative_strides: bool  # layout: the target cannot take negative strides (torch aborts on them)
    legacy_only: bool  # asks: the target never asks for versioned capsules: read-only data needs a bridge
    ignores_readonly: bool  # readonly: the target imports read-only data writable: copy it first
    keywords: frozenset[str]  # what the installed importer accepts (read from its signature)
    viewer: Any = None  # views a Tensor of a dtype its importer lacks (lacks_dtypes)
    devices: dict[Any, Any] | None = None  # (type, id) -> the target's device object (device "namespace")

    @property
    def bridges(self) -> bool:
        a = self.adapter
        return (
            self.refuse_negative_strides or self.legacy_only or self.ignores_readonly or self.viewer is not None
            or a.layout == "compact" or not a.byte_offset or a.takes != "producer"
        )  # fmt: skip

    @property
    def refuse(self) -> int:
        """What the C route must hand back to Python: 1 negative strides, 2 read-only data."""
        return int(self.refuse_negative_strides) | 2 * int(self.ignores_readonly)


# (to,) -> its route, for library names and modules; convert looks names up here before calling plan
ROUTES: dict[tuple[Any, ...], Route] = {}
_ROUTES_BY_TYPE = _TypeCache()  # array type -> its route (kept no longer than the type)


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


def plan(to: Any) -> Route:
    """The route to system ``to`` (a name, module or array type), made once and kept in :data:`ROUTES`."""
    if isinstance(to, type):
        route = _ROUTES_BY_TYPE.get(to)
        if route is _MISSING:
            route = plan(resolve(to).name)  # a type's route is its library's
            _ROUTES_BY_TYPE.put(to, route)
        return route  # type: ignore[no-any-return]
    key = (to,) if isinstance(to, str | ModuleType) else (id(to),)
    route = ROUTES.get(key)
    if route is None:
        named = resolve(to)
        try:
            importlib.import_module(named.import_name)
        except ImportError as exc:
            raise ImportError(f"dlbind.convert(..., to={named.name!r}) needs {named.import_name}: {exc}") from None
        adapter = for_release(named)  # the facts of the installed release
        fn = dotted(adapter.from_dlpack)
        simple = (
            adapter.takes == "producer" and adapter.layout != "compact" and adapter.byte_offset
            and adapter.copy == "honoured" and not adapter.alignment and adapter.import_bool == "bool"
        )  # fmt: skip
        table_type = _array_type(adapter) if adapter.exchange_api and simple and exchange.AVAILABLE else None
        legacy_only = adapter.asks != "versioned"
        # The C handover route (compiled build): the source's struct goes to the target's from_dlpack
        # in a minimal producer whose first versioned __dlpack__ call hands over the struct itself.
        # Only for consumers whose row the tests verified against the installed release, that ask for
        # versioned capsules, and that have no exchange table (that route is faster still).
        verified_simple = simple and adapter.verified and not legacy_only
        handover_type = _array_type(adapter) if table_type is None and verified_simple else None
        route = ROUTES[key] = Route(
            adapter,
            fn,
            table_type,
            handover_type,
            adapter.layout != "any",
            legacy_only,
            adapter.readonly == "ignored",
            _keywords(fn, adapter),
            dotted(adapter.view_with) if adapter.lacks_dtypes else None,
            {} if adapter.device_form == "namespace" else None,
        )
        if isinstance(to, str):
            if table_type is not None:
                C_ROUTES[to] = (table_type, route.refuse, None)
            elif handover_type is not None:
                C_ROUTES[to] = (handover_type, route.refuse, fn)
    return route


def importer(adapter: Adapter) -> Any:
    """The system's importer as a function of a DLPack producer, given what its row says it takes
    (a producer, a capsule it asks for as its row says, or a numpy array); for ``python -m dlbind check``."""
    adapter = for_release(adapter)
    fn = dotted(adapter.from_dlpack)
    if adapter.takes == "capsule":
        return lambda x: fn(_capsule_for(adapter, x))
    if adapter.takes == "ndarray":
        import numpy

        return lambda x: fn(numpy.from_dlpack(x))
    return fn


def _capsule_for(adapter: Adapter, producer: Any) -> object:
    """The capsule an importer that takes only capsules gets: asked for as its row's ``asks`` says."""
    return producer.__dlpack__() if adapter.asks != "versioned" else producer.__dlpack__(max_version=DLPACK_VERSION)


_LACKS: dict[tuple[str, int, int, int], bool] = {}  # (system, dtype code, bits, lanes) -> _lacks


def _lacks(adapter: Adapter, tensor: Tensor) -> bool:
    """The system's importer lacks ``tensor``'s dtype (``lacks_dtypes``: name patterns), cached per dtype."""
    key = (adapter.name, tensor._code, tensor._bits, tensor._lanes)
    found = _LACKS.get(key)
    if found is None:
        name = tensor.dtype.name
        found = _LACKS[key] = any(fnmatch.fnmatchcase(name, pattern) for pattern in adapter.lacks_dtypes)
    return found


def _keywords(fn: Any, adapter: Adapter) -> frozenset[str]:
    """The keywords the installed release's importer takes; the table's when it cannot be read."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        return frozenset(adapter.keywords)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return frozenset(adapter.keywords)
    return frozenset(k for k in ("device", "copy") if k in params and k in adapter.keywords)


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
        why = t.dtype.legacy_refusal(padded=bool(t._flags & SUBBYTE_PADDED))
        if why is not None:
            raise BufferError(why)
        return capsule.export(
            t.data_ptr, t.shape, t.strides, t.dtype, t.device, t.byte_offset, t, versioned=False,
        )  # fmt: skip


class _BoolAs:
    """Serves bool data to an importer that takes bool under another dtype (``import.bool``):
    ``"uint1"``, a legacy capsule of ``(kDLUInt, 1, 1)`` a byte per element; ``"uint8"``, a capsule that
    says uint8 from a producer whose ``dtype.name`` is ``"bool"`` (the importer reads it there)."""

    __slots__ = ("encoding", "tensor")

    def __init__(self, tensor: Tensor, encoding: str) -> None:
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
        versioned = VERSIONED_CAPSULES and max_version is not None and max_version[0] >= 1
        if dl_device is not None or copy or (versioned and self.encoding == "uint1") or (t.readonly and not versioned):
            raise BufferError(f"bool as {self.encoding} is served only as the importer's row says it asks for it")
        dtype = UINT1 if self.encoding == "uint1" else UINT8
        flags = _READ_ONLY if t.readonly else 0
        return capsule.export(
            t.data_ptr, t.shape, t.strides, dtype, t.device, t.byte_offset, t, versioned=versioned, flags=flags,
        )  # fmt: skip


def device_arg(route: Route, device: Any) -> Any:
    """``device`` (``"cpu"``, ``"cpu:0"``, ``(type, id)``, ...) in the form the target's importer takes."""
    adapter = route.adapter
    dev = parse_device(device)
    if route.devices is not None:  # "namespace": one of its array API namespace's device objects
        found = route.devices.get(dev, _MISSING)
        if found is _MISSING:
            found = route.devices[dev] = _namespace_device(adapter, dev)
        if found is None:
            raise BufferError(f"{adapter.name} has no device {device_name(dev[0])}:{dev[1]}")
        return found
    name = device_name(dev[0])
    name = dict(adapter.device_names).get(name, name)
    return adapter.device_form.format(name=name, index=dev[1])


def _namespace_device(adapter: Adapter, dev: Any) -> Any:
    namespace = importlib.import_module(adapter.namespace)
    for candidate in namespace.__array_namespace_info__().devices():
        if candidate is None:
            continue
        try:
            where = namespace.empty((0,), device=candidate).__dlpack_device__()
        except Exception:  # a device that cannot hold an array here
            continue
        if parse_device(tuple(where)) == dev:
            return candidate
    return None


def bridged(route: Route, tensor: Tensor, device: Any, copy: bool | None) -> Any:
    """Hand ``tensor`` to the route's importer after bridging what the target cannot take.

    Every bridge is a fact of the target's row: the layout it views, ``byte_offset``, read-only
    data, whether it asks for versioned capsules, what its ``copy=`` does, the device form it
    takes, what it takes (a producer, a capsule, a numpy array). A bridge copies once (and the copy
    serves every later bridge), or raises ``BufferError`` naming why when ``copy=False`` forbids it.
    """
    adapter = route.adapter
    if route.viewer is not None and _lacks(adapter, tensor):
        return _viewed(route, tensor, device, copy)
    kwargs: dict[str, Any] = {}
    if device is not None:
        dev = parse_device(device)
        if "device" in route.keywords and adapter.device_form != "none":
            kwargs["device"] = device_arg(route, dev)
        elif dev != tensor.device:
            raise BufferError(f"{adapter.from_dlpack} takes no device=: convert on the source's device")
    copied = False
    if copy and not (adapter.copy == "honoured" and "copy" in route.keywords) and adapter.copy != "always":
        tensor, copied = tensor.copy(), True  # the importer cannot be asked for a copy: dlbind makes it
    elif copy is False and adapter.copy == "always":
        raise BufferError(f"{adapter.name} copies on every import ({adapter.from_dlpack}), and copy=False forbids it")
    elif copy is not None and "copy" in route.keywords and adapter.copy == "honoured":
        kwargs["copy"] = copy
    why = None if copied else _needs_copy(route, tensor)
    if why is not None:
        if copy is False:
            raise BufferError(f"{adapter.name} cannot import {why}, so it needs a copy and copy=False forbids it")
        tensor, copied = tensor.copy(), True
        kwargs.pop("copy", None)  # that copy is the one copy=True asks for: the importer views it
    elif copy is False and adapter.alignment and (tensor.data_ptr + tensor.byte_offset) % adapter.alignment:
        raise BufferError(
            f"{adapter.name} views only {adapter.alignment}-byte aligned data, and copy=False forbids a copy"
        )
    if copied and route.viewer is not None and not kwargs:
        # dlbind's own copy is writable: its viewer hands it over as such (a legacy import would
        # be read-only in numpy<2.1: numpy/numpy#28600)
        return _view(route, tensor)
    producer: Any = tensor
    if adapter.import_bool != "bool" and tensor.dtype == BOOL:
        producer = _BoolAs(tensor, adapter.import_bool)
    elif route.legacy_only and tensor._flags & _READ_ONLY:
        producer = _LegacyReadOnly(tensor)  # only immutable targets get here (_needs_copy)
    if adapter.takes == "capsule":
        producer = _capsule_for(adapter, producer)
    elif adapter.takes == "ndarray":
        import numpy

        producer = numpy.asarray(producer)  # a zero-copy view of the Tensor
    return route.from_dlpack(producer, **kwargs)


def _needs_copy(route: Route, tensor: Tensor) -> str | None:
    """Why the target cannot view ``tensor`` as it is (a copy can), or None."""
    adapter = route.adapter
    if adapter.layout == "nonnegative" and any(s < 0 for s in tensor.strides):
        return "negative strides"
    if adapter.layout == "compact" and not tensor.is_contiguous():
        return "strides that are not compact (row-major)"
    if not adapter.byte_offset and tensor.byte_offset:
        return "a byte_offset (it ignores it)"
    if tensor._flags & _READ_ONLY:  # the int, not the Flags enum of Tensor.readonly: this is every convert's path
        if route.ignores_readonly:
            return "read-only data (it imports read-only data writable)"
        if route.legacy_only and not adapter.immutable:
            return "read-only data (it asks for legacy capsules, which cannot say read-only)"
    return None


def _viewed(route: Route, tensor: Tensor, device: Any, copy: bool | None) -> Any:
    """A dtype the target's from_dlpack lacks (numpy and ml_dtypes' bfloat16): its viewer makes the array."""
    if device is not None and parse_device(device) != tensor.device:
        raise BufferError(f"{route.adapter.view_with} views {tensor.dtype.name} data where it is, not on {device}")
    if tensor.device[0] not in HOST_ACCESSIBLE:
        raise BufferError(f"{route.adapter.name} views {tensor.dtype.name} data in host memory only")
    return _view(route, tensor.copy() if copy else tensor)


def _view(route: Route, tensor: Tensor) -> Any:
    """The target's array of ``tensor`` made by its ``view_with`` (given the tensor or a numpy view of it)."""
    if route.adapter.view_takes == "ndarray":
        import numpy

        return route.viewer(numpy.asarray(tensor))
    return route.viewer(tensor)
