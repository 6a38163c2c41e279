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

from dlbind import capsule
from dlbind._generated.adapters import ADAPTERS, Adapter
from dlbind._libraries import MISSING, TypeCache, library_of
from dlbind.devices import HOST_ACCESSIBLE, parse_device
from dlbind.export import export_view
from dlbind.tensor import Tensor

__all__ = ["C_ROUTES", "ROUTES", "Route", "bridged", "library_of", "plan", "resolve"]

# to -> (target array type, Route.refuse, from_dlpack for a handover route or None for the exchange
# table's), read by the compiled convert
C_ROUTES: dict[Any, tuple[type, int, Any]] = {}

_MISSING = MISSING
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
    """How :func:`dlbind.convert` reaches one target library (from its row of spec/adapters.toml)."""

    adapter: Adapter
    from_dlpack: Any
    table_type: type | None  # the target array type, when it has an exchange table
    handover_type: type | None  # the target array type, when the compiled build may hand over in C (below)
    refuse_negative_strides: bool  # the target crashes on them: copy first
    legacy_only: bool  # the target never asks for versioned capsules: read-only data needs a bridge
    ignores_readonly: bool  # the target imports read-only data writable: copy it first
    keywords: frozenset[str]  # what the installed from_dlpack accepts (read from its signature)
    viewer: Any = None  # views a Tensor of a dtype its from_dlpack lacks (adapter.lacks_dtypes)

    @property
    def bridges(self) -> bool:
        return self.refuse_negative_strides or self.legacy_only or self.ignores_readonly or self.viewer is not None

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
    """The route to library ``to`` (a name, module or array type), made once and kept in :data:`ROUTES`."""
    if isinstance(to, type):
        route = _ROUTES_BY_TYPE.get(to)
        if route is _MISSING:
            route = plan(resolve(to).name)  # a type's route is its library's
            _ROUTES_BY_TYPE.put(to, route)
        return route  # type: ignore[no-any-return]
    key = (to,) if isinstance(to, str | ModuleType) else (id(to),)
    route = ROUTES.get(key)
    if route is None:
        adapter = resolve(to)
        try:
            importlib.import_module(adapter.import_name)
        except ImportError as exc:
            raise ImportError(f"dlbind.convert(..., to={adapter.name!r}) needs {adapter.import_name}: {exc}") from None
        module_name, _, attr = adapter.from_dlpack.rpartition(".")
        fn = getattr(importlib.import_module(module_name), attr)
        table_type = _array_type(adapter) if adapter.exchange_api else None
        quirks = {q.id for q in adapter.quirks}
        legacy_only = bool(quirks & {"no_max_version", "legacy_call"})
        # The C handover route (compiled build): the source's struct goes to the target's from_dlpack
        # in a minimal producer whose first versioned __dlpack__ call hands over the struct itself.
        # Only for consumers whose row the tests verified against the installed library, that ask for
        # versioned capsules, and that have no exchange table (that route is faster still).
        handover_type = _array_type(adapter) if table_type is None and adapter.verified and not legacy_only else None
        route = ROUTES[key] = Route(
            adapter,
            fn,
            table_type,
            handover_type,
            "negative_strides_abort" in quirks,
            legacy_only,
            "readonly_ignored" in quirks,
            _keywords(fn, adapter),
            _function(adapter.view_with) if adapter.lacks_dtypes else None,
        )
        if isinstance(to, str):
            if table_type is not None:
                C_ROUTES[to] = (table_type, route.refuse, None)
            elif handover_type is not None:
                C_ROUTES[to] = (handover_type, route.refuse, fn)
    return route


def _function(dotted: str) -> Any:
    module_name, _, attr = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), attr)


def _lacks(adapter: Adapter, dtype_name: str) -> bool:
    return any(fnmatch.fnmatchcase(dtype_name, pattern) for pattern in adapter.lacks_dtypes)


def _keywords(fn: Any, adapter: Adapter) -> frozenset[str]:
    """The keywords the installed version's from_dlpack takes; the table's when it cannot be read."""
    import inspect

    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # some builtins have no signature
        return frozenset(adapter.keywords)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return frozenset(adapter.keywords)
    return frozenset(k for k in ("device", "copy") if k in params)


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
        return capsule.export(
            t.data_ptr, t.shape, t.strides, t.dtype, t.device, t.byte_offset, t, versioned=False,
        )  # fmt: skip


def bridged(route: Route, tensor: Tensor, device: Any, copy: bool | None) -> Any:
    """Hand ``tensor`` to the route's ``from_dlpack`` after bridging what the target gets wrong."""
    if route.viewer is not None and _lacks(route.adapter, tensor.dtype.name):
        return _viewed(route, tensor, device, copy)
    producer: Any = tensor
    kwargs: dict[str, Any] = {}
    if copy is not None:
        if "copy" in route.keywords:
            kwargs["copy"] = copy
        elif copy:
            producer = tensor = tensor.copy()
    if device is not None:
        if "device" not in route.keywords:
            raise BufferError(f"{route.adapter.from_dlpack} takes no device=: convert on the source's device")
        kwargs["device"] = device
    if route.refuse_negative_strides and any(s < 0 for s in tensor.strides):
        if copy is False:
            raise BufferError(f"{route.adapter.name} cannot take negative strides and copy=False forbids a copy")
        producer = tensor = tensor.copy()
    if route.ignores_readonly and tensor.readonly:
        if copy is False:  # the target would hand out a writable alias of read-only memory
            raise BufferError(
                f"{route.adapter.name} imports read-only data writable, so it needs a copy and copy=False forbids it"
            )
        producer = tensor = tensor.copy()  # writes through the result must not reach read-only memory
    if route.legacy_only and tensor.readonly:
        if route.adapter.immutable:
            producer = _LegacyReadOnly(tensor)
        elif copy is False:
            raise BufferError(f"{route.adapter.name} cannot import read-only data and copy=False forbids a copy")
        else:
            producer = tensor.copy()
    return route.from_dlpack(producer, **kwargs)


def _viewed(route: Route, tensor: Tensor, device: Any, copy: bool | None) -> Any:
    """A dtype the target's from_dlpack lacks (numpy and ml_dtypes' bfloat16): its viewer makes the array."""
    if device is not None and parse_device(device) != tensor.device:
        raise BufferError(f"{route.adapter.view_with} views {tensor.dtype.name} data where it is, not on {device}")
    if tensor.device[0] not in HOST_ACCESSIBLE:
        raise BufferError(f"{route.adapter.name} views {tensor.dtype.name} data in host memory only")
    return route.viewer(tensor.copy() if copy else tensor)
