"""What crosses between array systems besides tensors: their dtypes, read from any system dlbind knows and made
for any (:func:`dtype`).

Each system's dtype objects are its row's ``[dtypes]`` of spec/adapters.toml (``Adapter.dtype_form``, its module
and its own names), never a branch per system here. A dtype is read into a :class:`dlbind.DType`: a ``DType``
itself, one of dlbind's names (``"bfloat16"``), a system's own spelling with ``of=`` (numpy's ``"float"`` is
float64, torch's float32), anything with ``__dlpack_data_type__`` (the DLPack data type protocol, dmlc/dlpack#172:
tvm-ffi's and Paddle's dtypes), or a system's dtype object (``torch.float32``, ``jax.numpy.bfloat16``, numpy's
dtypes and scalar types). ``to=`` makes the target system's own dtype object of it. Both directions are cached per
object: a dtype read once is a dictionary lookup after.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from types import ModuleType
from typing import Any

from dlbind._generated.adapters import ADAPTERS, Adapter, DtypeForm
from dlbind._generated.tables import DTYPE_BY_NAME
from dlbind._libraries import dotted, installed, named
from dlbind._names import suggestion
from dlbind.devices import parse_device
from dlbind.dtypes import DType, from_numpy, lookup, named_in

__all__ = ["device", "dtype", "lacks_own", "undefined"]

_PACKAGE = __name__.rpartition(".")[0]  # dlbind, or a vendored copy's package

# what numpy reads as a dtype but names none (None and float are float64 there, float32 in torch): refused (by
# identity: numpy's dtypes equal the Python types)
_PYTHON_TYPES = (bool, int, float, complex, str, bytes, object)
_PYTHON_VALUES = (str, bytes, int, float, complex, tuple, list, dict)
_READ: dict[type, dict[Any, DType]] = {}  # type of a dtype object -> {the object: its DType}
_TO: dict[Any, dict[type, dict[Any, Any]]] = {}  # to= -> type of a dtype object -> {the object: the target's}
_MADE: dict[str, dict[DType, Any]] = {}  # system -> {DType: its dtype object}, every one it has
_SPELLED: dict[str, dict[Any, DType]] = {}  # system -> {its dtype object or spelling: DType}


def dtype(obj: Any, to: Any = None, *, of: Any = None) -> Any:
    """``obj`` read as a :class:`dlbind.DType`, or with ``to=`` (a system's name or module, as ``convert`` takes)
    as that system's own dtype object.

    ``obj``: a ``DType``; one of dlbind's dtype names (spec/dtypes.toml: ``"float32"``, ``"bfloat16"``); a system's
    own spelling when ``of=`` names the system (``dlbind.dtype("float", of="numpy")`` is float64); an object with
    ``__dlpack_data_type__``; or a dtype object of a system dlbind knows.

    Raises ``TypeError`` for an object that is no dtype, ``ValueError`` for a name no system spells so, a dtype with
    no DLPack code (numpy's object or datetime dtypes, a non-native byte order) or one the target lacks.

    >>> import dlbind, numpy
    >>> dlbind.dtype(numpy.float32)
    DType(code=<DataTypeCode.kDLFloat: 2>, bits=32, lanes=1)
    >>> dlbind.dtype("float", of="numpy").name
    'float64'
    >>> dlbind.dtype("int16", to="numpy")
    dtype('int16')
    """
    if of is None:  # read before: two lookups (three with to=), no call
        try:
            return (_READ if to is None else _TO[to])[type(obj)][obj]
        except (KeyError, TypeError):  # not yet, or unhashable
            pass
    return _first(obj, to, of)


def _first(obj: Any, to: Any, of: Any) -> Any:
    """:func:`dtype` of an object not read before (or not hashable): read, made, and kept for the next call."""
    found = _read(obj, of)
    if of is None:
        with contextlib.suppress(TypeError):  # unhashable: not kept
            _READ.setdefault(type(obj), {})[obj] = found
    if to is None:
        return found
    made = _made(found, _system(to))
    if of is None:
        with contextlib.suppress(TypeError):
            _TO.setdefault(to, {}).setdefault(type(obj), {})[obj] = made
    return made


def _read(obj: Any, of: Any) -> DType:
    """``obj`` as a DType (:func:`dtype`'s reading)."""
    kind = type(obj)
    if kind is DType:
        return obj  # type: ignore[no-any-return]
    if kind is str:
        return lookup(obj) if of is None else _spelled(obj, _system(of))
    if of is not None:
        raise TypeError(f"of= names whose spelling a dtype name is: give a str, not {kind.__name__}")
    found = _protocol(obj)
    return _of_system(obj) if found is None else found


def _protocol(obj: Any) -> DType | None:
    """What ``obj.__dlpack_data_type__()`` says (a dtype object's, not a class's), or None without one."""
    read = getattr(obj, "__dlpack_data_type__", None)
    if read is None or isinstance(obj, type):
        return None
    said = read()
    try:
        code, bits, lanes = (int(v) for v in said)
    except (TypeError, ValueError):
        raise ValueError(
            f"{type(obj).__name__}.__dlpack_data_type__() gave {said!r}, not (code, bits, lanes)"
        ) from None
    return DType(code, bits, lanes)


def _root(obj: Any) -> str:
    """The top-level package that defines ``obj`` (a class, or the class of an instance)."""
    module = (obj if isinstance(obj, type) else type(obj)).__module__ or ""
    return module.partition(".")[0]


def _of_system(obj: Any) -> DType:
    """``obj`` read as the dtype object of a system that names it (its row's dtype objects), else as whatever
    numpy reads it as (ml_dtypes, jax's and CuPy's dtypes are numpy's); TypeError when it is no dtype."""
    root = _root(obj)
    for adapter in ADAPTERS.values():
        if adapter.dtype_form in (DtypeForm.NONE, DtypeForm.NUMPY, DtypeForm.SPELLING):
            continue
        if (adapter.dtype_module or adapter.import_name).partition(".")[0] != root or root not in sys.modules:
            continue
        spellings = _spellings(adapter)
        try:
            found = spellings.get(obj)
        except TypeError:  # unhashable
            found = None
        if found is not None:
            return found
        if any(type(its) is type(obj) for its in spellings):  # its dtype, of none of DLPack's (torch.complex32)
            raise ValueError(f"{adapter.name} dtype {obj!r} has no DLPack dtype {_PACKAGE} names (spec/dtypes.toml)")
    numpy = sys.modules.get("numpy")  # read by numpy only where it is loaded: an object numpy made, or knows
    plain = (
        obj is None or any(obj is t for t in _PYTHON_TYPES) or isinstance(obj, _PYTHON_VALUES)
    )  # numpy's readings, not dtypes
    if numpy is not None and not plain:
        try:
            dt = numpy.dtype(obj)
        except (TypeError, ValueError):
            dt = None
        if dt is not None:
            try:
                return from_numpy(dt)
            except BufferError as exc:  # an object, datetime or big-endian dtype: no DLPack code
                raise ValueError(f"{obj!r} has no DLPack dtype: {exc}") from None
    raise TypeError(
        f"{obj!r} ({type(obj).__name__}) is not a dtype {_PACKAGE} can read: give a {_PACKAGE}.DType, a dtype name "
        f"('float32'), an object with __dlpack_data_type__, or the dtype of a system {_PACKAGE} knows"
    )


def _system(to: Any, *, devices: bool = False) -> Adapter:
    """The row of system ``to``: its name (``"torch"``), its import name or module; one whose dtype objects (or
    with ``devices``, device objects) its row says how to make."""
    name = to.__name__ if isinstance(to, ModuleType) else to
    if not isinstance(name, str):
        raise TypeError(f"a system is named by its name ('torch') or module, not {type(to).__name__}")
    adapter = named(name)
    if devices and not adapter.device_make_args:
        raise ValueError(f"{_PACKAGE} does not make {adapter.name}'s device objects (spec/adapters.toml)")
    if not devices and adapter.dtype_form == DtypeForm.NONE:
        raise ValueError(f"{_PACKAGE} does not know {adapter.name}'s dtype objects (spec/adapters.toml)")
    return adapter


def _made(d: DType, adapter: Adapter) -> Any:
    """System ``adapter``'s own dtype object of ``d``; ValueError naming what it has when it has none."""
    made = _MADE.get(adapter.name)
    if made is None:
        made = _dtypes_of(adapter)
    found = made.get(d)
    if found is None:
        has = ", ".join(sorted(k.name for k in made)) or "none here"
        raise ValueError(f"{adapter.name} has no dtype {d.name}{_why_lacking(d, adapter)}; it has {has}")
    return found


def _why_lacking(d: DType, adapter: Adapter) -> str:
    """Why a numpy-dtype system lacks ``d`` where an installation would give it (ml_dtypes), else ``""``."""
    if adapter.dtype_form == DtypeForm.NUMPY and d.name not in ("bool",) and "ml_dtypes" not in sys.modules:
        try:
            import ml_dtypes  # noqa: F401
        except ImportError:
            return (
                " (numpy names bfloat16 and the float8, float6 and float4 types with ml_dtypes: pip install ml_dtypes)"
            )
    return ""


def _dtypes_of(adapter: Adapter) -> dict[DType, Any]:
    """Every dtype object system ``adapter`` has for one of dlbind's dtype names, made once (its module imported)."""
    theirs = dict(adapter.dtype_names)
    form = adapter.dtype_form
    holder = None
    if form in (DtypeForm.ATTRIBUTE, DtypeForm.CALL, DtypeForm.CONSTRUCTOR):
        holder = _holder(adapter)
    made: dict[DType, Any] = {}
    for ours, key in DTYPE_BY_NAME.items():
        name = theirs.get(ours, ours)
        if not name:
            continue  # it has none (its own name is empty)
        d = DType(*key)
        try:
            if form == DtypeForm.NUMPY:
                obj = d.to_numpy()
            elif form == DtypeForm.ATTRIBUTE:
                obj = getattr(holder, name)
            elif form == DtypeForm.CALL:
                obj = getattr(holder, name)()
            elif form == DtypeForm.CONSTRUCTOR:
                obj = holder(name)  # type: ignore[misc]
            else:
                obj = adapter.dtype_spelling.format(name=name)
        except (AttributeError, ValueError, TypeError, RuntimeError):
            continue  # this release has none (its dtype objects are what it has)
        made[d] = obj
    _MADE[adapter.name] = made
    return made


def undefined(adapter: Adapter) -> tuple[str, ...]:
    """dlbind's dtype names whose dtype object system ``adapter``'s installed release does not define, where its
    row's ``[dtypes]`` reads them from the release's attributes (form "attribute" or "call"; a name of its own that
    is not empty): its importer cannot make an array of such a dtype, so its route lacks them as it lacks
    ``import.lacks_dtypes`` (torch 2.13 has no float8_e3m4), but for those it narrows (``import.narrows``: mlx's
    complex128 becomes complex64). A constructor's refusal of a name (tvm_ffi.dtype("complex64")) is a spelling
    it lacks, not proof: not read. Empty where the release is not installed."""
    if adapter.dtype_form not in (DtypeForm.ATTRIBUTE, DtypeForm.CALL):
        return ()
    made = _MADE.get(adapter.name)
    if made is None:
        try:
            made = _dtypes_of(adapter)
        except (ImportError, AttributeError):  # its module is absent: nothing to read
            return ()
    theirs = dict(adapter.dtype_names)
    has = {d.name for d in made} | {ours for ours, _ in adapter.import_.narrows}
    return tuple(ours for ours in DTYPE_BY_NAME if theirs.get(ours, ours) and ours not in has)


def _made_arg(pattern: str, name: str, index: int) -> Any:
    """One argument of a system's device maker: ``"{index}"`` alone is the int; ``"@a.b.{name}"`` the object at
    that dotted path (mlx's ``mlx.core.DeviceType.cpu``); any other pattern the string it formats."""
    if pattern == "{index}":
        return index
    text = pattern.format(name=name, NAME=name.upper(), index=index)
    return _holder_of(text[1:]) if text.startswith("@") else text


def _holder(adapter: Adapter) -> Any:
    """The module, class or constructor that holds system ``adapter``'s dtype objects, imported."""
    return _holder_of(adapter.dtype_module or adapter.import_name, adapter.name)


def _holder_of(path: str, system: str = "") -> Any:
    """The module, class or function at dotted ``path``, imported."""
    root = path.partition(".")[0]
    if not installed(root):
        raise ImportError(f"{system or root} needs {root}, which is not installed")
    try:
        return importlib.import_module(path)
    except ImportError:
        return dotted(path)  # a class or a function of a module


def _spellings(adapter: Adapter) -> dict[Any, DType]:
    """System ``adapter``'s dtype objects (and, for a spelling system, its strings) -> DType."""
    found = _SPELLED.get(adapter.name)
    if found is None:
        made = _MADE.get(adapter.name)
        if made is None:
            made = _dtypes_of(adapter)
        found = _SPELLED[adapter.name] = {obj: d for d, obj in made.items()}
    return found


def _spelled(name: str, adapter: Adapter) -> DType:
    """A dtype name as system ``adapter`` spells it (numpy's ``"float"``, torch's ``"float"``)."""
    form = adapter.dtype_form
    try:
        if form == DtypeForm.NUMPY:
            return _read(dotted("numpy.dtype")(name), None)
        if form == DtypeForm.SPELLING:
            found = _spellings(adapter).get(name)
            if found is not None:
                return found
        elif form in (DtypeForm.ATTRIBUTE, DtypeForm.CALL):
            obj = getattr(_holder(adapter), name)
            return _read(obj() if form == DtypeForm.CALL else obj, None)
        else:
            return _read(_holder(adapter)(name), None)
    except (AttributeError, TypeError, ValueError):
        pass
    spelled = [str(v) if isinstance(v, str) else k.name for v, k in _spellings(adapter).items()]
    raise ValueError(
        f"{adapter.name} has no dtype named {name!r}{suggestion(name, spelled)}; "
        f"its dtypes: {', '.join(sorted(spelled))}"
    )


def device(obj: Any, to: Any = None) -> Any:
    """``obj`` read as a :class:`dlbind.Device`, or with ``to=`` (a system's name or module) as that system's own
    device object.

    ``obj``: ``"cuda:1"``, a system's own spelling (TensorFlow's ``"/device:GPU:1"``, tinygrad's
    ``"CUDA:1"``), ``(2, 1)`` or ``("cuda", 1)``, a ``Device``, an object with ``__dlpack_device__`` (Paddle's
    places), or a device object of a system spec/adapters.toml describes (``torch.device``, jax's, tvm-ffi's,
    CuPy's, MXNet's, Arrow's). Every ``device=`` of dlbind reads the same. Making one needs no device: a
    ``torch.device("cuda", 1)`` is made on a machine without a GPU (jax and MAX make only the devices they have).

    >>> import dlbind
    >>> str(dlbind.device("CUDA:1")), dlbind.device((1, 0)) == (dlbind.DeviceType.kDLCPU, 0)
    ('cuda:1', True)
    """
    found = parse_device(obj)
    if to is None:
        return found
    adapter = _system(to, devices=True)
    made_by = dict(adapter.device_make_by)
    # the kinds it has objects of: a function per kind (MAX's), or its one kind (CuPy's devices are CUDA's)
    kinds = sorted(made_by) if made_by else [adapter.device_kind] if adapter.device_kind else None
    if kinds is not None and found.name not in kinds:
        has = ", ".join(kinds)
        raise ValueError(f"{adapter.name} has no device objects of {found.name}: it makes those of {has}")
    name = dict(adapter.device_kind_names).get(found.name, found.name)
    args = [_made_arg(pattern, name, found.device_id) for pattern in adapter.device_make_args]
    function = made_by.get(found.name, adapter.device_make)
    if not function:
        return args[0]  # its devices are strings
    make = _holder_of(function, adapter.name)
    try:
        made = make(*args)
        return made[found.device_id] if adapter.device_pick else made
    except Exception as exc:  # its own refusal (jax has no such device here, an unknown name)
        raise ValueError(f"{adapter.name} cannot make a device {found}: {type(exc).__name__}: {exc}") from exc


_LACKED: dict[tuple[str, Any], bool] = {}  # (target, its array's dtype object) -> lacks_own


def lacks_own(adapter: Adapter, x: Any) -> bool:
    """``x``, an array of the system ``adapter`` is the row of, handed to that system's own importer, has a dtype
    the importer lacks (which its export refuses too: numpy's bfloat16), or none DLPack has; cached per dtype
    object (``convert`` reads it to route such an array through dlbind's import)."""
    lacks = adapter.import_.lacks_dtypes
    if not lacks:
        return False
    kind = getattr(x, "dtype", None)
    at: tuple[str, Any] | None = (adapter.name, kind)
    try:
        return _LACKED[at]  # type: ignore[index]
    except KeyError:
        pass
    except TypeError:  # a dtype object that cannot be a key: read each time
        at = None
    try:
        found = named_in(dtype(kind), lacks)
    except (TypeError, ValueError):  # no dtype DLPack has (numpy's structured and object arrays)
        found = True
    if at is not None:
        _LACKED[at] = found
    return found
