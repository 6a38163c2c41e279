"""``dlbind.convert``: hand an array from one library to another, zero-copy whenever the spec allows,
by the fastest correct route, with each library's known deviations bridged.

Routes, tried in order:

1. ``x`` is already of the target library (and no device/copy asked): ``x`` itself.
2. The target's array type has a DLPack 1.3 exchange table (torch): the source's table or its
   ``__dlpack__`` gives a ``DLManagedTensorVersioned`` that the target's
   ``managed_tensor_to_py_object_no_sync`` turns into its array, in C (compiled build).
3. Otherwise ``x`` is imported as a :class:`dlbind.Tensor` (zero-copy) and handed to the target's
   ``from_dlpack``, after bridging what the target gets wrong (``spec/adapters.toml``):
   read-only data for consumers that never ask for versioned capsules (a legacy capsule is served
   when the consumer's arrays are immutable, a copy otherwise) or that import it writable (a copy,
   unless ``copy=False``), negative strides for consumers that crash on them (a copy), keywords the
   target's ``from_dlpack`` does not take.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any, NamedTuple

from dlbind import consumer
from dlbind._ffi import native
from dlbind._generated.adapters import ADAPTERS, Adapter
from dlbind.tensor import Tensor

# the dispatching from_dlpack: C for the common call in the compiled build
from_dlpack = native.from_dlpack if native is not None else consumer.from_dlpack
# to -> (target array type, refuse negative strides), read by the compiled convert
_C_ROUTES: dict[Any, tuple[type, int]] = {}

__all__ = ["compat", "convert", "library_of", "resolve"]

_BY_TYPE: dict[type, Adapter | None] = {}


def library_of(x: Any) -> Adapter | None:
    """The adapter of ``x``'s library, found from its type's name (the library is never imported)."""
    kind = type(x)
    try:
        return _BY_TYPE[kind]
    except KeyError:
        pass
    found = None
    for klass in kind.__mro__:
        name = f"{klass.__module__}.{klass.__qualname__}"
        found = next((a for a in ADAPTERS.values() if name in a.array_types), None)
        if found is not None:
            break
    _BY_TYPE[kind] = found
    return found


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


class _Route(NamedTuple):
    adapter: Adapter
    from_dlpack: Any
    table_type: type | None  # the target array type, when it has an exchange table
    refuse_negative_strides: bool  # the target crashes on them: copy first
    legacy_only: bool  # the target never asks for versioned capsules: read-only data needs a bridge
    ignores_readonly: bool  # the target imports read-only data writable: copy it first
    keywords: frozenset[str]  # what the installed from_dlpack accepts (read from its signature)

    @property
    def bridges(self) -> bool:
        return self.refuse_negative_strides or self.legacy_only or self.ignores_readonly

    @property
    def refuse(self) -> int:
        """What the C route must hand back to Python: 1 negative strides, 2 read-only data."""
        return int(self.refuse_negative_strides) | 2 * int(self.ignores_readonly)


_ROUTES: dict[tuple[Any, ...], _Route] = {}


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


def _route(to: Any) -> _Route:
    key = (to,) if isinstance(to, str | type | ModuleType) else (id(to),)
    route = _ROUTES.get(key)
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
        route = _ROUTES[key] = _Route(
            adapter,
            fn,
            table_type,
            "negative_strides_abort" in quirks,
            bool(quirks & {"no_max_version", "legacy_call"}),
            "readonly_ignored" in quirks,
            _keywords(fn, adapter),
        )
        if table_type is not None and isinstance(to, str):
            _C_ROUTES[to] = (table_type, route.refuse)
    return route


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
        from dlbind import capsule
        from dlbind.producer import export_view

        if max_version is not None or dl_device is not None or copy:
            return export_view(self.tensor, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)
        t = self.tensor
        return capsule.export(
            t.data_ptr, t.shape, t.strides, t.dtype, t.device, t.byte_offset, t, versioned=False,
        )  # fmt: skip


def convert(x: Any, to: Any, *, device: Any = None, copy: bool | None = None, stream: int | None = None) -> Any:
    """``x`` (any DLPack producer) as an array of library ``to`` (a name, module or array type).

    Zero-copy whenever the spec allows; ``device``/``copy`` as in the array API's ``from_dlpack``;
    ``stream`` is the consumer's stream for synchronisation.
    """
    route = _ROUTES.get((to,)) if isinstance(to, str) else None
    if route is None:
        route = _route(to)
    plain = device is None and copy is None and stream is None
    if plain:
        if library_of(x) is route.adapter:
            return x
        if route.table_type is not None and native is not None:
            out = native.convert_to(x, route.table_type, route.refuse)
            if out is not NotImplemented:
                return out
    tensor = x if type(x) is Tensor and stream is None else from_dlpack(x, stream=stream)
    if plain and not route.bridges:
        return route.from_dlpack(tensor)
    return _bridged(route, tensor, device, copy)


def _bridged(route: _Route, tensor: Tensor, device: Any, copy: bool | None) -> Any:
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
    if route.ignores_readonly and tensor.readonly and copy is not False:
        producer = tensor = tensor.copy()  # writes through the result must not reach read-only memory
    if route.legacy_only and tensor.readonly:
        if route.adapter.immutable:
            producer = _LegacyReadOnly(tensor)
        elif copy is False:
            raise BufferError(f"{route.adapter.name} cannot import read-only data and copy=False forbids a copy")
        else:
            producer = tensor.copy()
    return route.from_dlpack(producer, **kwargs)


def compat(x: Any) -> Any:
    """Wrap any producer so that it answers every keyword of the current spec correctly.

    Older producers (only ``stream``, no ``max_version``, no ``dl_device``/``copy``) are re-negotiated
    on every export; anything with a buffer or an array interface is exported directly.
    """
    from dlbind.producer import Exporter, asdlpack

    if hasattr(x, "__dlpack__") and not isinstance(x, Exporter):
        return Exporter(None, x)
    return asdlpack(x)
