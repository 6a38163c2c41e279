"""Which library an array belongs to, and what dlbind knows of its type, cached per type (weakly).

Low in the layers (below the consumer) so that every route can ask: :func:`library_of` (the adapter
of an array's library, from ``spec/adapters.toml``), :func:`type_traits` (what the compiled fast path
caches per producer type: the export guards and whether the library's arrays are immutable), and
:class:`TypeCache`, the per-type cache that keeps no class alive.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from dlbind._generated.adapters import ADAPTERS, Adapter

__all__ = [
    "MISSING",
    "TypeCache",
    "bool_query",
    "dotted",
    "for_release",
    "library_export",
    "library_of",
    "prepare_for_check",
    "refuses_with",
    "type_traits",
]

MISSING: Any = object()
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE


class TypeCache:
    """A per-type cache that keeps no class alive (issue 8 defect 6).

    Classes that live as long as the process anyway go in a plain dict, the fastest lookup: static
    (C) types, which are never freed, and classes their module names (``numpy.ndarray``,
    ``torch.Tensor``, ``dlbind.Tensor``), which live as long as the module. Every other class (one
    made at run time, used once and dropped) is held weakly and leaves the cache when it dies.
    """

    __slots__ = ("lasting", "passing")

    def __init__(self) -> None:
        self.lasting: dict[type, Any] = {}
        self.passing: weakref.WeakKeyDictionary[type, Any] = weakref.WeakKeyDictionary()

    def get(self, kind: type) -> Any:
        """The value cached for ``kind``, or :data:`MISSING`."""
        found = self.lasting.get(kind, MISSING)
        if found is MISSING:
            found = self.passing.get(kind, MISSING)
        return found

    def put(self, kind: type, value: Any) -> None:
        if _lasting(kind):
            self.lasting[kind] = value
        else:
            self.passing[kind] = value


def _lasting(kind: type) -> bool:
    if not kind.__flags__ & _HEAPTYPE:
        return True
    name = getattr(kind, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, kind.__qualname__, None) is kind


_BY_TYPE = TypeCache()  # type -> its library's adapter or None


def library_of(x: Any) -> Adapter | None:
    """The adapter of ``x``'s library, found from its type's name (the library is never imported)."""
    kind = type(x)
    found = _BY_TYPE.lasting.get(kind, MISSING)  # the common case without a method call
    if found is not MISSING:
        return found  # type: ignore[no-any-return]
    found = _BY_TYPE.passing.get(kind, MISSING)
    if found is not MISSING:
        return found  # type: ignore[no-any-return]
    return _find(kind)


def adapter_of_type(kind: type) -> Adapter | None:
    """:func:`library_of` for a type."""
    found = _BY_TYPE.get(kind)
    return _find(kind) if found is MISSING else found


def _find(kind: type) -> Adapter | None:
    found = None
    for klass in kind.__mro__:
        name = f"{klass.__module__}.{klass.__qualname__}"
        found = next((a for a in ADAPTERS.values() if name in a.array_types), None)
        if found is not None:
            break
    _BY_TYPE.put(kind, found)
    return found


def refuses_with(x: Any) -> type[Exception]:
    """The exception ``x``'s ``__dlpack__`` raises when it cannot export an array (``export.refusal``):
    BufferError as the spec says, or TypeError (numpy before 1.24)."""
    adapter = library_of(x)
    if adapter is None:
        return BufferError
    return TypeError if for_release(adapter).export_refusal == "TypeError" else BufferError


def immutable(x: Any) -> bool:
    """``x``'s library never writes its arrays: what is imported from it must be read-only."""
    adapter = library_of(x)
    return adapter is not None and for_release(adapter).immutable


_TRAITS = TypeCache()  # type -> type_traits(type)


def type_traits(kind: type) -> tuple[tuple[tuple[str, bool], ...], bool, bool]:
    """What the compiled fast path keeps per producer type: its library's export guards as
    ``(name, is a method)`` pairs, whether its arrays are immutable, and whether Python must import
    them (a fact of its row the C path does not apply: bool that its capsules call uint8)."""
    found = _TRAITS.get(kind)
    if found is MISSING:
        adapter = adapter_of_type(kind)
        if adapter is None:
            found = ((), False, False)
        else:
            adapter = for_release(adapter)
            guards = tuple((sys.intern(g.removesuffix("()")), g.endswith("()")) for g in adapter.export_guards)
            found = (guards, adapter.immutable, adapter.export_bool == "uint8")
        _TRAITS.put(kind, found)
    return found  # type: ignore[no-any-return]


def bool_query(x: Any) -> tuple[str, str] | None:
    """For an array whose capsules say uint8 for bool (``export.bool = "uint8"``): the method naming its
    dtype and the name that means bool; None otherwise."""
    if not type_traits(type(x))[2]:
        return None
    adapter = library_of(x)
    if adapter is None:
        return None
    row = for_release(adapter)
    return row.export_dtype.removesuffix("()"), row.export_bool_name


def truthy_guard(x: Any) -> tuple[str, bool] | None:
    """The first export guard of ``x``'s library that is truthy for ``x`` (``(name, is a method)``), or None.

    Such an array must never be exported: its library's ``__dlpack__`` refuses it, or (a library that
    forgets a check) would export it with the wrong values."""
    for name, call in type_traits(type(x))[0]:
        try:
            value = getattr(x, name)
        except AttributeError:  # an older release without it: the guard does not apply
            continue
        if call:
            value = value()
        if value:
            return name, call
    return None


def prepare_for_check(adapter: Adapter) -> None:
    """What ``python -m dlbind check`` does first for the system (``check.setup`` in spec/adapters.toml)."""
    import importlib

    importlib.import_module(adapter.import_name)
    row = for_release(adapter)
    if row.check_setup:
        dotted(row.check_setup)(*row.check_setup_args)


def dotted(path: str) -> Any:
    """The object at a dotted path (``pkg.mod.fn`` or ``pkg.mod.Class.method``), importing its module."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(f"cannot import {path}")


def library_export(x: Any) -> Any:
    """What ``x``'s system gives for it when it exports without ``__dlpack__`` (``export.via`` in
    spec/adapters.toml: a method or function giving a DLPack capsule or a buffer), or None."""
    adapter = library_of(x)
    if adapter is None:
        return None
    row = for_release(adapter)
    via = row.export_via
    if via == "__dlpack__":
        return None
    try:
        return getattr(x, via[:-2])() if via.endswith("()") else dotted(via)(x)
    except Exception as exc:  # its export refused this array (a dtype it cannot export, ...)
        if not row.export_host:
            raise BufferError(f"{type(x).__name__} cannot be exported by {via}: {type(exc).__name__}: {exc}") from exc
        return getattr(x, row.export_host[:-2])()  # a host copy by the system's own method


_RELEASES: dict[str, Adapter] = {}  # system name -> its row resolved for the installed release


def for_release(adapter: Adapter) -> Adapter:
    """``adapter`` with the ``when`` entries that match the installed release applied.

    The release is the ``__version__`` of the system's top-level package (imported already: its
    arrays exist, or it is a conversion target). An unreadable version applies no entry.
    """
    if not adapter.when:
        return adapter
    found = _RELEASES.get(adapter.name)
    if found is None:
        module = sys.modules.get(adapter.import_name.partition(".")[0])
        version = _release(getattr(module, "__version__", None))
        found = adapter
        if version is not None:
            for versions, overrides in adapter.when:
                if all(_matches(version, part.strip()) for part in versions.split(",")):
                    found = found._replace(**dict(overrides))
        if module is not None:
            _RELEASES[adapter.name] = found
    return found


def _release(text: Any) -> tuple[int, ...] | None:
    """``"2.0.2"``, ``"2.13.0+cpu"``, ``"0.12.0.1"``, ``"2.1.0rc1"`` -> the leading numbers; None if unreadable."""
    import re

    found = re.match(r"\d+(?:\.\d+)*", text) if isinstance(text, str) else None
    return tuple(int(p) for p in found.group().split(".")) if found else None


def _matches(version: tuple[int, ...], bound: str) -> bool:
    for op in ("<=", ">=", "==", "<", ">"):
        if bound.startswith(op):
            other = tuple(int(p) for p in bound[len(op) :].split("."))
            width = max(len(version), len(other))
            a = version + (0,) * (width - len(version))
            b = other + (0,) * (width - len(other))
            return {"<=": a <= b, ">=": a >= b, "==": a == b, "<": a < b, ">": a > b}[op]
    raise ValueError(f"bad version bound {bound!r}")
