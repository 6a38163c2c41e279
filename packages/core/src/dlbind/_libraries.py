"""The rows of ``spec/adapters.toml``: which library an array belongs to, and its row for the installed release.

Low in the layers (below the consumer): :func:`library_of` (the adapter of an array's library),
:func:`for_release` (a row with the ``when`` entries of the installed release applied), :func:`dotted`,
and :class:`TypeCache`, the per-type cache that keeps no class alive. These are the *row lookups*: the
plans (:mod:`dlbind.sources` per producer type, :mod:`dlbind.routes` per target and pair) make them once
and every exchange follows its plan; :func:`row_lookups` counts them, so that a test can hold an
exchange to "no lookup after the first".
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlbind._generated.adapters import Adapter

__all__ = [
    "MISSING",
    "TypeCache",
    "adapter_of_type",
    "dotted",
    "for_release",
    "installed",
    "lasting",
    "library_of",
    "named",
    "prepare_for_check",
    "release_row_of_type",
    "row_lookups",
    "rows",
]

MISSING: Any = object()
_LOOKUPS = [0]  # row lookups made (library_of, adapter_of_type, for_release): see row_lookups


def rows() -> dict[str, Adapter]:
    """The rows of ``spec/adapters.toml`` (``dlbind._generated.adapters.ADAPTERS``), imported on first use: not at
    ``import dlbind``, which needs none of them."""
    from dlbind._generated.adapters import ADAPTERS

    return ADAPTERS


def named(name: str) -> Adapter:
    """The row of the system called ``name`` (``"torch"``) or imported as ``name`` (``"mlx.core"``); ValueError with
    the names it was probably meant to be otherwise."""
    found = rows()
    for adapter in found.values():
        if name in (adapter.name, adapter.import_name):
            return adapter
    from dlbind._names import suggestion

    said = suggestion(name, [n for a in found.values() for n in (a.name, a.import_name)])
    raise ValueError(f"unknown array library {name!r}{said}; {__name__.rpartition('.')[0]} knows {', '.join(found)}")


def installed(import_name: str) -> bool:
    """Whether the module ``import_name`` (``"cuda.core"``) can be imported here, found without importing it (its
    parent packages are imported). Its whole name, not its first part: ``cuda`` is there wherever any
    ``cuda.*`` distribution is (CuPy's ``cuda.pathfinder``), without ``cuda.core``."""
    import importlib.util

    try:
        return importlib.util.find_spec(import_name) is not None
    except ImportError:  # a parent package that is not there
        return False


def row_lookups() -> int:
    """How many row lookups ran so far in this process (each call of :func:`library_of`,
    :func:`adapter_of_type` and :func:`for_release`, and :func:`dlbind.routes.resolve`, counts one)."""
    return _LOOKUPS[0]


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

    def put(self, kind: type, value: Any) -> bool:
        """Keep ``value`` for ``kind``; True when it is kept for as long as the process (``kind`` lasts)."""
        if _lasting(kind):
            self.lasting[kind] = value
            return True
        self.passing[kind] = value
        return False


def lasting(kind: type) -> bool:
    """Whether ``kind`` lives as long as the process (a static type, or one its module names): a cache may then
    hold it strongly."""
    return _lasting(kind)


def _lasting(kind: type) -> bool:
    if not kind.__flags__ & _HEAPTYPE:
        return True
    name = getattr(kind, "__module__", None)
    module = sys.modules.get(name) if isinstance(name, str) else None
    return module is not None and getattr(module, kind.__qualname__, None) is kind


_BY_TYPE = TypeCache()  # type -> its library's adapter or None


def library_of(x: Any) -> Adapter | None:
    """The adapter of ``x``'s library, found from its type's name (the library is never imported)."""
    _LOOKUPS[0] += 1
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
    _LOOKUPS[0] += 1
    found = _BY_TYPE.get(kind)
    return _find(kind) if found is MISSING else found


def _find(kind: type) -> Adapter | None:
    found = None
    for klass in kind.__mro__:
        name = f"{klass.__module__}.{klass.__qualname__}"
        found = next((a for a in rows().values() if name in a.array_types), None)
        if found is not None:
            break
    _BY_TYPE.put(kind, found)
    return found


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


_RELEASES: dict[str, Adapter] = {}  # system name -> its row resolved for the installed release


def release_row_of_type(kind: type) -> Adapter | None:
    """The row of type ``kind``'s library for the installed release (:func:`adapter_of_type`, then
    :func:`for_release`), or None for a type no row names."""
    adapter = adapter_of_type(kind)
    return None if adapter is None else for_release(adapter)


def for_release(adapter: Adapter) -> Adapter:
    """``adapter`` with the ``when`` entries that match the installed release applied.

    The release is the ``__version__`` of the system's top-level package (imported already: its
    arrays exist, or it is a conversion target). An unreadable version applies no entry.
    """
    _LOOKUPS[0] += 1
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
                    found = _overridden(found, overrides)
        if module is not None:
            _RELEASES[adapter.name] = found
    return found


def _overridden(adapter: Adapter, overrides: tuple[tuple[str, Any], ...]) -> Adapter:
    """``adapter`` with the facts of one ``when`` entry: a row's field, or ``"export.<key>"``/``"import_.<key>"`` of
    one of its sub-records."""
    own: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in overrides:
        record, dot, key = name.partition(".")
        if dot:
            nested.setdefault(record, {})[key] = value
        else:
            own[name] = value
    for record, facts in nested.items():
        own[record] = getattr(adapter, record)._replace(**facts)
    return adapter._replace(**own)


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
