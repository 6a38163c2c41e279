"""The checks of dlbind.testing: each one a small function, registered with its id, text and source."""

from __future__ import annotations

import gc
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, get_args

from dlbind import _backends, _capi
from dlbind import capsule as _capsule
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_VERSION, DataTypeCode, DeviceType, Flags
from dlbind._generated.tables import HOST_DEVICES
from dlbind.tensor import Tensor, from_managed
from dlbind.testing._devices import current


class CheckFailed(Exception):
    """The subject broke the rule the check is about."""


class Unsupported(Exception):
    """The subject cleanly refused something the spec lets it refuse."""


class Hazard(Exception):
    """The subject did what the spec allows but what is hazardous in use (a ``warn`` result, between ``pass``
    and ``fail``): the message says what happened, why it is allowed and what it risks, citing the rule or
    recommendation it goes by."""


CheckKind = Literal["producer", "consumer"]
Status = Literal["pass", "warn", "fail", "unsupported", "crash"]
#: What a check is run on (``Check.kind``).
PRODUCER, CONSUMER = get_args(CheckKind)
#: How a check ended (``Result.status``): passed; allowed by the spec but hazardous in use; failed; not
#: applicable to the subject; the process running it died.
PASS, WARN, FAIL, UNSUPPORTED, CRASH = get_args(Status)


@dataclass(frozen=True)
class Check:
    id: str
    kind: CheckKind
    text: str
    ref: str
    fn: Callable[..., str | None]


@dataclass(frozen=True)
class Result:
    check: str
    status: Status
    detail: str = ""


@dataclass
class Report:
    subject: str
    results: list[Result] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No check failed or crashed (a warning is allowed: the spec permits what it warns of)."""
        return all(r.status in (PASS, WARN, UNSUPPORTED) for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def summary(self) -> str:
        warned = f"{self.count('warn')} warned, " if self.count("warn") else ""
        head = (
            f"{self.subject}: {self.count('pass')} passed, {warned}{self.count('fail') + self.count('crash')} failed, "
            f"{self.count('unsupported')} unsupported"
        )
        shown = ("fail", "crash", "warn")
        bad = [f"  {r.status.upper()} {r.check}: {r.detail}" for r in self.results if r.status in shown]
        return "\n".join([head, *bad])


PRODUCER_CHECKS: list[Check] = []
CONSUMER_CHECKS: list[Check] = []


def _register(
    kind: CheckKind, id_: str, text: str, ref: str = ""
) -> Callable[[Callable[..., str | None]], Callable[..., str | None]]:
    def wrap(fn: Callable[..., str | None]) -> Callable[..., str | None]:
        (PRODUCER_CHECKS if kind == PRODUCER else CONSUMER_CHECKS).append(Check(id_, kind, text, ref, fn))
        return fn

    return wrap


def _np() -> Any:
    import numpy as np

    return np


# -- helpers -------------------------------------------------------------------------------------


def _name(capsule: object) -> bytes | None:
    if type(capsule) is not _capi.PyCapsuleType:
        raise CheckFailed(f"__dlpack__ returned {type(capsule).__name__}, not a PyCapsule")
    return _capi.capsule_name(capsule)


def _open(capsule: object) -> tuple[Any, Tensor]:
    """Consume a capsule: (the raw struct, a Tensor that owns it)."""
    _name(capsule)
    managed, versioned = _capsule.take(capsule)
    return managed, from_managed(managed, versioned, allow_vector=True)


def _values(t: Tensor) -> Any:
    """The tensor's values as numpy: a view of host memory, a host copy of device memory (by its backend)."""
    if int(t.device[0]) in HOST_DEVICES:
        return _np().asarray(t)
    from dlbind.consumer import from_dlpack

    return _np().asarray(from_dlpack(t, device="cpu", copy=True))


#: The note of a value read through the producer's own host copy (:func:`_values_of`).
_PRODUCER_COPY = "read through the producer's own host copy (__dlpack__(dl_device=(kDLCPU, 0), copy=True))"


def _values_of(x: Any, t: Tensor) -> tuple[Any, str | None]:
    """(the values of ``t``, what ``x`` exported, as numpy; a note or None). Host memory is read as it is and
    device memory through its dlbind backend's host copy; memory that no dlbind backend serves (dpnp's
    oneAPI memory: spec/devices.toml names no backend for it) through the producer's own host copy, asked of
    ``x`` with ``dl_device=(kDLCPU, 0), copy=True`` as the array API lets a consumer ask. Where ``x`` refuses
    that too, nothing can read the values: :class:`Unsupported`, naming the device and the refusal."""
    device = int(t.device[0])
    if device in HOST_DEVICES or _backends.serving(device) is not None:
        return _values(t), None
    from dlbind.consumer import from_dlpack
    from dlbind.devices import device_name

    try:
        host = from_dlpack(x, device="cpu", copy=True)
    except (BufferError, TypeError, ValueError, NotImplementedError) as exc:
        where = f"{device_name(device)}:{int(t.device[1])}"
        raise Unsupported(
            f"its values on {where} cannot be read: no dlbind backend serves {device_name(device)} memory, and "
            f"the {type(x).__name__}'s own host copy (dl_device=(kDLCPU, 0), copy=True) was refused: "
            f"{type(exc).__name__}: {_first_line(exc)}"
        ) from None
    return _np().asarray(host), _PRODUCER_COPY


def _same(got: Any, want: Any, what: str) -> None:
    np = _np()
    if got.shape != want.shape:
        raise CheckFailed(f"{what}: shape {got.shape}, expected {want.shape}")
    if got.dtype != want.dtype:
        raise CheckFailed(f"{what}: dtype {got.dtype}, expected {want.dtype}")
    same = got.tobytes() == want.tobytes() if want.dtype.kind == "V" else np.array_equal(got, want)
    if not same:
        raise CheckFailed(f"{what}: values differ ({got.tolist()!r} vs {want.tolist()!r})")


def _make(make: Callable[[Any], Any], sample: Any) -> Any:
    try:
        return make(sample)
    except Exception as exc:  # the library cannot hold this array: nothing to check
        raise Unsupported(f"cannot make this array: {type(exc).__name__}: {_first_line(exc)}") from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0][:200] + ("..." if len(text[0]) > 200 or len(text) > 1 else "")) if text else ""


def _sample(shape: tuple[int, ...] = (2, 3), dtype: str = "float32") -> Any:
    np = _np()
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


def _sample_at(offset: int, shape: tuple[int, ...] = (2, 3), dtype: str = "float32") -> Any:
    """A sample whose data starts ``offset`` bytes past a 64-byte boundary. A library may take memory it
    can alias (jax's CPU client aliases 64-byte aligned host memory) down another path than memory it
    copies; numpy's own allocations land on either by chance, so checks that can differ ask for both."""
    values = _sample(shape, dtype)
    raw = _np().zeros(values.nbytes + 64 + offset, dtype="uint8")
    start = (-raw.ctypes.data) % 64 + offset
    out = raw[start : start + values.nbytes].view(values.dtype).reshape(shape)
    out[...] = values
    return out


def _versioned(x: Any, **kw: Any) -> object:
    return x.__dlpack__(max_version=DLPACK_VERSION, **kw)


# -- systems that export without __dlpack__ (export.via of their row in spec/adapters.toml) -------------------


def _via(x: Any) -> str | None:
    """How ``x``'s system exports it when ``x`` has no ``__dlpack__``: its row's ``export.via`` (a method
    ``"name()"`` or a function giving a capsule or a buffer), or None (``x`` has ``__dlpack__``, or no row
    says otherwise)."""
    if callable(getattr(x, "__dlpack__", None)):
        return None
    from dlbind.sources import export_plan

    plan = export_plan(type(x))  # the row of its library's installed release, read once per type
    return None if plan.via is None or plan.row is None else plan.row.export.via


def _no_protocol(x: Any) -> str | None:
    """Why ``x`` has no ``__dlpack__`` that a check could call, said as its system's row says; None when it has
    one. Systems of spec/adapters.toml that export another way, and device arrays that carry only the CUDA
    Array Interface, are reported so; anything else without ``__dlpack__`` fails the check."""
    if callable(getattr(x, "__dlpack__", None)):
        return None
    via = _via(x)
    if via is not None:
        return f"no __dlpack__: {type(x).__name__} exports through {via} (export.via in spec/adapters.toml)"
    if hasattr(x, "__cuda_array_interface__"):
        return f"no __dlpack__: {type(x).__name__} carries only __cuda_array_interface__ (dlbind.asdlpack takes it)"
    if _buffer_of_a_system(x):
        return f"no __dlpack__ in this release: {type(x).__name__} gives its buffer (dlbind.asdlpack takes it)"
    raise CheckFailed(f"{type(x).__name__} has no __dlpack__")


def _buffer_of_a_system(x: Any) -> bool:
    """``x`` is an array of a system of spec/adapters.toml whose installed release gives its buffer, not
    ``__dlpack__`` (pyarrow's Tensor before 21)."""
    from dlbind.sources import export_plan

    if export_plan(type(x)).row is None:
        return False
    try:
        memoryview(x).release()
    except TypeError:
        return False
    return True


def _protocol(x: Any, what: str) -> Any:
    """``x`` for a check of its ``__dlpack__`` keywords (``what``); unsupported, with the reason, for a system
    that exports another way."""
    reason = _no_protocol(x)
    if reason is not None:
        raise Unsupported(f"{reason}: {what}")
    return x


def _export(x: Any) -> tuple[object, str | None]:
    """What ``x`` gives as DLPack, the way its system exports (``__dlpack__``, versioned when it can, or its
    row's ``export.via``): (a capsule or a buffer, None or how it was given)."""
    if callable(getattr(x, "__dlpack__", None)):
        return _versioned_or_legacy(x), None
    reason = _no_protocol(x)
    via = _via(x)
    if via is None:
        raise Unsupported(reason or f"{type(x).__name__} has no __dlpack__")
    from dlbind.sources import library_export

    try:
        given = library_export(x)
    except BufferError as exc:
        raise Unsupported(f"{via} refused it: {exc}") from None
    return given, via


def _is_capsule(obj: object) -> bool:
    return type(obj) is _capi.PyCapsuleType


def _exported_values(x: Any) -> tuple[Any, Any, str | None]:
    """(the raw struct or None, the values as numpy, a note) of what ``x`` exports (:func:`_export`); a buffer
    (a host copy some systems give instead of a capsule) is read as it is. Device memory no dlbind backend
    serves (dpnp's oneAPI memory) is read through the producer's own host copy (:func:`_values_of`)."""
    given, via = _export(x)
    return _given_values(given, via, x)


def _given_values(given: object, via: str | None, x: Any) -> tuple[Any, Any, str | None]:
    """:func:`_exported_values` of what :func:`_export` gave for ``x``."""
    if _is_capsule(given):
        managed, t = _open(given)
        values, note = _values_of(x, t)
        notes = [n for n in (None if via is None else f"through {via}", note) if n]
        return managed, values, "; ".join(notes) or None
    from dlbind.consumer import from_dlpack

    note = f"through {via}: a host copy ({type(given).__name__}), not a DLPack capsule"
    return None, _np().asarray(from_dlpack(given)), note


# -- producer checks ----------------------------------------------------------------------------------
P: Final = PRODUCER


@_register(P, "protocol", "has __dlpack__ and __dlpack_device__", "array API __dlpack__")
def p_protocol(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    reason = _no_protocol(x)
    if reason is not None:
        raise Unsupported(reason)
    missing = [m for m in ("__dlpack__", "__dlpack_device__") if not callable(getattr(x, m, None))]
    if missing:
        raise CheckFailed(f"missing {', '.join(missing)}")
    return None


@_register(P, "device", "__dlpack_device__() is (known device type, id >= 0)", "array API __dlpack_device__")
def p_device(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    note = None
    if not callable(getattr(x, "__dlpack_device__", None)) and _via(x) is not None:
        managed, _values_read, note = _exported_values(x)
        if managed is None:
            raise Unsupported(f"no __dlpack_device__ and no capsule: {note}")
        dev = (int(managed.dl_tensor.device.device_type), int(managed.dl_tensor.device.device_id))
        note = f"no __dlpack_device__: the device {dev} read from the capsule given {note}"
    elif not callable(getattr(x, "__dlpack_device__", None)) and _buffer_of_a_system(x):
        raise Unsupported(f"no __dlpack_device__ in this release: {type(x).__name__} gives its buffer")
    else:
        dev = x.__dlpack_device__()
    if not isinstance(dev, tuple) or len(dev) != 2:
        raise CheckFailed(f"returned {dev!r}, not a 2-tuple")
    for part, what in ((dev[0], "device type"), (dev[1], "device id")):
        try:
            operator.index(part)
        except TypeError:
            raise CheckFailed(f"returned {dev!r}: the {what} is a {type(part).__name__}, not an int") from None
    if int(dev[0]) not in DeviceType._value2member_map_ or int(dev[1]) < 0:
        raise CheckFailed(f"returned {dev!r}")
    place = current()
    if place is not None and int(dev[0]) in (int(DeviceType.kDLCPU), int(DeviceType.kDLCUDAHost)):
        raise CheckFailed(f"an array made on {place.name} reports {dev!r}")
    return note


@_register(
    P, "legacy_capsule", "__dlpack__() gives a 'dltensor' capsule (or BufferError)", "python_spec: max_version=None"
)
def p_legacy(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    if _no_protocol(x) is not None:
        given, via = _export(x)
        if not _is_capsule(given):
            raise Unsupported(f"no capsule: {via} gives a host copy ({type(given).__name__})")
        if _name(given) != _capsule.LEGACY:
            raise CheckFailed(f"{via} gave a {_name(given)!r} capsule")
        _open(given)
        return f"{via} gives a legacy capsule"
    try:
        c = x.__dlpack__()
    except BufferError:
        return "refuses legacy capsules with BufferError (allowed since March 2025)"
    if _name(c) != _capsule.LEGACY:
        raise CheckFailed(f"a call without max_version returned a {_name(c)!r} capsule")
    _open(c)
    return None


@_register(
    P, "versioned_capsule", "__dlpack__(max_version=(1, 0)) gives 'dltensor_versioned'", "python_spec: max_version"
)
def p_versioned(make: Callable[[Any], Any]) -> str | None:
    c = _protocol(_make(make, _sample()), "max_version").__dlpack__(max_version=(1, 0))
    if _name(c) != _capsule.VERSIONED:
        raise CheckFailed(f"max_version=(1, 0) returned a {_name(c)!r} capsule: read-only data cannot travel")
    _open(c)
    return None


@_register(
    P,
    "future_max_version",
    "max_version=(2, 0) still gives a capsule this consumer can read",
    "python_spec: max_version",
)
def p_future(make: Callable[[Any], Any]) -> str | None:
    c = _protocol(_make(make, _sample()), "max_version").__dlpack__(max_version=(2, 0))
    if _name(c) == _capsule.VERSIONED:
        managed, _ = _capsule.take(c)
        major = int(managed.version.major)
        from_managed(managed, True, allow_vector=True)
        if major != 1:
            raise CheckFailed(
                f"version {major}.x for a consumer that accepts 2.0 only if it is 1.x or 2.x: got {major}"
            )
    return None


@_register(
    P,
    "unknown_keyword_typeerror",
    "an unknown keyword raises TypeError (consumers fall back on it)",
    "python_spec fallback",
)
def p_unknown_kw(make: Callable[[Any], Any]) -> str | None:
    x = _protocol(_make(make, _sample()), "keywords")
    try:
        x.__dlpack__(not_a_keyword=1)
    except TypeError:
        return None
    except Exception as exc:
        raise CheckFailed(f"raised {type(exc).__name__}: {exc}") from None
    raise CheckFailed("accepted an unknown keyword")


@_register(P, "values", "the data, shape and dtype arrive intact", "")
def p_values(make: Callable[[Any], Any]) -> str | None:
    sample = _sample()
    _, values, note = _exported_values(_make(make, sample))
    _same(values, sample, "2x3 float32")
    return note


def _versioned_or_legacy(x: Any) -> object:
    try:
        return x.__dlpack__(max_version=DLPACK_VERSION)
    except TypeError:
        return x.__dlpack__()


@_register(P, "strides_emitted", "strides are non-NULL for ndim > 0", "dlpack.h 1.2 (dmlc/dlpack#178), numpy#29872")
def p_strides(make: Callable[[Any], Any]) -> str | None:
    managed, _values_read, note = _exported_values(_make(make, _sample()))
    if managed is None:
        raise Unsupported(f"no capsule to read strides from: {note}")
    if managed.dl_tensor.strides == ffi.NULL:
        raise CheckFailed("NULL strides (allowed before DLPack 1.2, refused by 1.2 consumers)")
    return None


def _layout_check(make: Callable[[Any], Any], base: Any, view: Callable[[Any], Any], what: str) -> str | None:
    """The array of ``view(base)`` exports its values. On the CPU the library makes its array of the numpy
    view; on a device it makes ``base`` there and takes the view with its own indexing (a copy to the device
    would lose the layout)."""
    sample = view(base)
    if current() is None:
        x = _make(make, sample)
    else:
        on_device = _make(make, base)
        try:
            x = view(on_device)
        except Exception as exc:
            raise Unsupported(f"cannot make this view: {type(exc).__name__}: {_first_line(exc)}") from None
    _, values, note = _exported_values(x)
    _same(values, _np().array(sample, order="C"), what)
    return note


@_register(P, "transposed", "a transposed array keeps its strides", "")
def p_transposed(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 4)), lambda a: a.T, "transposed")


@_register(P, "negative_strides", "negative strides arrive intact (or the array is copied)", "pytorch#188023")
def p_negative(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 4)), lambda a: a[::-1, ::-2], "negative strides")


@_register(P, "zero_size", "a zero-size array exports", "onnxruntime#27450, cccl#11605")
def p_zero_size(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((0, 3)), lambda a: a, "shape (0, 3)")


@_register(P, "zero_d", "a 0-d array exports", "numpy#29872")
def p_zero_d(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _np().array(2.5, dtype="float32"), lambda a: a, "0-d")


@_register(P, "size1_dims", "size-1 dimensions export", "pytorch#99803")
def p_size1(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 1, 2)), lambda a: a, "shape (3, 1, 2)")


@_register(P, "offset_view", "a view that starts inside its buffer exports (data/byte_offset)", "pytorch#168177")
def p_offset(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((4, 5)), lambda a: a[1:, 2:], "view [1:, 2:]")


@_register(P, "copy_true", "copy=True copies and sets IS_COPIED", "array API __dlpack__ copy")
def p_copy_true(make: Callable[[Any], Any]) -> str | None:
    x = _protocol(_make(make, _sample()), "copy=")
    original, _t0 = _open(_versioned(x))
    try:
        c = _versioned(x, copy=True)
    except BufferError as exc:
        raise Unsupported(f"BufferError: {exc}") from None
    except TypeError as exc:
        raise CheckFailed(f"does not take copy= ({exc})") from None
    versioned = _name(c) == _capsule.VERSIONED
    managed, _t = _open(c)
    if managed.dl_tensor.data == original.dl_tensor.data:
        raise CheckFailed("copy=True returned the same memory")
    if not versioned:
        return "copied, in a legacy capsule (no IS_COPIED flag to set)"
    if not int(managed.flags) & Flags.IS_COPIED:
        raise CheckFailed("copy=True without the IS_COPIED flag")
    return None


@_register(P, "copy_false", "copy=False does not copy", "array API __dlpack__ copy")
def p_copy_false(make: Callable[[Any], Any]) -> str | None:
    try:
        c = _versioned(_protocol(_make(make, _sample()), "copy="), copy=False)
    except TypeError as exc:
        raise CheckFailed(f"does not take copy= ({exc})") from None
    versioned = _name(c) == _capsule.VERSIONED
    managed, _t = _open(c)
    if versioned and int(managed.flags) & Flags.IS_COPIED:
        raise CheckFailed("copy=False returned a copy")
    return None


@_register(P, "dl_device_same", "dl_device equal to its own device is accepted", "array API __dlpack__ dl_device")
def p_dl_device_same(make: Callable[[Any], Any]) -> str | None:
    x = _protocol(_make(make, _sample()), "dl_device=")
    dev = tuple(x.__dlpack_device__())
    try:
        _open(_versioned(x, dl_device=dev))
    except TypeError as exc:
        raise CheckFailed(f"does not take dl_device= ({exc})") from None
    return None


@_register(P, "dl_device_unsupported", "an unsupported dl_device raises BufferError", "array API __dlpack__ dl_device")
def p_dl_device_bad(make: Callable[[Any], Any]) -> str | None:
    x = _protocol(_make(make, _sample()), "dl_device=")
    try:
        _versioned(x, dl_device=(int(DeviceType.kDLExtDev), 0))
    except BufferError:
        return None
    except Exception as exc:
        raise CheckFailed(f"raised {type(exc).__name__} (the spec says BufferError): {_first_line(exc)}") from None
    raise CheckFailed("exported to a device it cannot reach")


@_register(P, "stream_none", "stream=None is accepted", "array API __dlpack__ stream")
def p_stream_none(make: Callable[[Any], Any]) -> str | None:
    _open(_versioned(_protocol(_make(make, _sample()), "stream="), stream=None))
    return None


@_register(P, "stream_refused_on_cpu", "a stream on a CPU array is refused", "array API: only None on CPU")
def p_stream_cpu(make: Callable[[Any], Any]) -> str | None:
    # both an aligned and a merely 16-byte aligned sample: jax 0.10 refuses stream=1 (JaxRuntimeError) on an
    # array it copied but accepts it on one that aliases 64-byte aligned numpy memory
    note = None
    for offset in (0, 16):
        x = _protocol(_make(make, _sample_at(offset)), "stream=")
        if int(x.__dlpack_device__()[0]) != DeviceType.kDLCPU:
            raise Unsupported("not a CPU array")
        try:
            c = _versioned(x, stream=1)
        except Exception as exc:
            if not isinstance(exc, BufferError):
                note = note or f"refused with {type(exc).__name__} (the spec names no type)"
            continue
        _open(c)
        where = "64-byte aligned" if offset == 0 else "16-byte aligned (not 64)"
        raise CheckFailed(f"accepted stream=1 for a CPU array made from {where} memory (silently ignored)")
    return note


_DTYPES: list[tuple[str, int, int]] = [
    ("bool", DataTypeCode.kDLBool, 8),
    ("int8", DataTypeCode.kDLInt, 8),
    ("uint16", DataTypeCode.kDLUInt, 16),
    ("int32", DataTypeCode.kDLInt, 32),
    ("int64", DataTypeCode.kDLInt, 64),
    ("float16", DataTypeCode.kDLFloat, 16),
    ("float32", DataTypeCode.kDLFloat, 32),
    ("float64", DataTypeCode.kDLFloat, 64),
    ("complex64", DataTypeCode.kDLComplex, 64),
    ("complex128", DataTypeCode.kDLComplex, 128),
    ("bfloat16", DataTypeCode.kDLBfloat, 16),
    ("float8_e4m3fn", DataTypeCode.kDLFloat8_e4m3fn, 8),
    ("float8_e5m2", DataTypeCode.kDLFloat8_e5m2, 8),
]


def _dtype_sample(name: str) -> Any:
    np = _np()
    if name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        try:
            import ml_dtypes
        except ImportError:
            raise Unsupported("needs ml_dtypes") from None
        dtype = np.dtype(getattr(ml_dtypes, name))
    else:
        dtype = np.dtype(name)
    return (np.arange(6) % 2).astype(dtype).reshape(2, 3)


def _producer_dtype_check(name: str, code: int, bits: int) -> Callable[..., str | None]:
    def run(make: Callable[[Any], Any]) -> str | None:
        sample = _dtype_sample(name)
        x = _make(make, sample)
        try:
            given, via = _export(x)
        except BufferError as exc:
            raise Unsupported(f"BufferError: {exc}") from None
        managed, values, note = _given_values(given, via, x)
        if managed is not None:
            dtype = managed.dl_tensor.dtype
            got = (int(dtype.code), int(dtype.bits), int(dtype.lanes))
            if got != (code, bits, 1):
                raise CheckFailed(f"exported as (code, bits, lanes) {got}, expected {(code, bits, 1)}")
        _same(values, sample, name)
        return note

    return run


for _n, _c, _b in _DTYPES:
    _register(P, f"dtype_{_n}", f"{_n} exports as (code {_c}, {_b} bits)", "dlpack.h DLDataTypeCode")(
        _producer_dtype_check(_n, _c, _b)
    )


# -- checks on a device only (python -m dlbind check --device cuda) --------------------------------------------

#: Checks that run only on a device (``--device``, ``check_producer(..., device=...)``): CUDA streams.
DEVICE_PRODUCER_CHECKS: list[Check] = []
DEVICE_CONSUMER_CHECKS: list[Check] = []


def _register_device(
    kind: CheckKind, id_: str, text: str, ref: str = ""
) -> Callable[[Callable[..., str | None]], Callable[..., str | None]]:
    def wrap(fn: Callable[..., str | None]) -> Callable[..., str | None]:
        (DEVICE_PRODUCER_CHECKS if kind == PRODUCER else DEVICE_CONSUMER_CHECKS).append(Check(id_, kind, text, ref, fn))
        return fn

    return wrap


def checks_for(device: str | None) -> tuple[list[Check], list[Check]]:
    """(producer checks, consumer checks) that run on ``device`` (None: the CPU)."""
    if device is None:
        return PRODUCER_CHECKS, CONSUMER_CHECKS
    return [*PRODUCER_CHECKS, *DEVICE_PRODUCER_CHECKS], [*CONSUMER_CHECKS, *DEVICE_CONSUMER_CHECKS]


def _place() -> Any:
    place = current()
    if place is None:
        raise Unsupported("a check of device streams: run it on a device (python -m dlbind check --device cuda)")
    return place


@_register_device(
    P,
    "stream_values",
    "__dlpack__(stream=...) takes the legacy default stream (1), a non-blocking stream and -1",
    "array API __dlpack__ stream",
)
def p_stream_values(make: Callable[[Any], Any]) -> str | None:
    place = _place()
    sample = _sample((64,))
    x = _protocol(_make(make, sample), "stream=")
    stream = place.new_stream()
    notes = []
    try:
        for value, what in ((1, "1 (legacy default)"), (stream, "a non-blocking stream"), (-1, "-1 (no sync)"),
                            (2, "2 (per-thread default)")):  # fmt: skip
            try:
                c = _versioned(x, stream=value)
            except BufferError as exc:
                if value != 2:
                    raise CheckFailed(f"stream={what} refused: {_first_line(exc)}") from None
                notes.append(f"refuses stream=2 with BufferError ({_first_line(exc)})")
                continue
            except Exception as exc:
                raise CheckFailed(f"stream={what}: {type(exc).__name__}: {_first_line(exc)}") from None
            _, t = _open(c)
            if value != -1:  # -1 comes after 1: the first call already waited for the producer's work
                place.synchronize(value)
            _same(_values(t), sample, f"stream={what}")
    finally:
        place.destroy_stream(stream)
    return "; ".join(notes) or None


@_register_device(P, "stream_zero_refused", "stream=0 is refused on CUDA (ambiguous)", "array API __dlpack__ stream")
def p_stream_zero(make: Callable[[Any], Any]) -> str | None:
    _place()
    x = _protocol(_make(make, _sample()), "stream=")
    try:
        c = _versioned(x, stream=0)
    except (BufferError, ValueError):
        return None
    except Exception as exc:
        return f"refused with {type(exc).__name__} (the spec's types: BufferError, ValueError): {_first_line(exc)}"
    _open(c)
    raise CheckFailed("accepted stream=0, which on CUDA could mean None, 1 or 2")


@_register_device(
    P,
    "stream_ordered",
    "the consumer's stream is ordered after the producer's queued writes (a busy producer stream)",
    "array API __dlpack__ stream; dlbind issue 21",
)
def p_stream_ordered(make: Callable[[Any], Any]) -> str | None:
    from dlbind.testing._devices import BUSY_WRITERS, DEVICE_ARRAYS, VALUE

    place = _place()
    library = getattr(make, "dlbind_library", None)
    row = DEVICE_ARRAYS.get(place.name, {}).get(library or "")
    writer = BUSY_WRITERS.get(row.streams) if row is not None else None
    if writer is None:
        raise Unsupported(f"dlbind.testing has no way to keep {library or 'this library'}'s stream busy (streams)")
    n = 1 << 20
    np = _np()
    try:
        busy = writer(n)
    except Exception as exc:
        raise Unsupported(f"cannot keep the stream busy here: {type(exc).__name__}: {_first_line(exc)}") from None
    _protocol(busy.array, "stream=")
    stream = place.new_stream()
    out = place.tensor(np.zeros(n, dtype="float32"))
    try:
        with busy.current():
            _, t = _open(_versioned(busy.array, stream=stream))
            place.copy_async(out.data_ptr + out.byte_offset, t.data_ptr + t.byte_offset, n * 4, stream)
            still = busy.busy()
        place.synchronize(stream)
        got = _values(out)
        busy.sync()
    finally:
        place.destroy_stream(stream)
    stale = int((got != VALUE).sum())
    if stale:
        when = "while it was still busy" if still else "after it had finished (yet stale)"
        raise CheckFailed(f"the consumer's stream read {stale} of {n} elements before the producer wrote them ({when})")
    return None if still else "inconclusive: the producer had finished before the consumer's read was queued"


def check_producer(
    make_array: Callable[[Any], Any],
    *,
    name: str = "producer",
    only: list[str] | None = None,
    device: str | None = None,
) -> Report:
    """Run the producer checks on arrays made by ``make_array(numpy_array)``; ``device`` ("cuda"): the arrays
    are made there (``make_array`` makes them there), with the device's own checks (streams) added."""
    from dlbind.testing._devices import placed

    with placed(device):
        return _run(checks_for(device)[0], name, only, make_array)


def _run(checks: list[Check], name: str, only: list[str] | None, *args: Any) -> Report:
    report = Report(name)
    for check in checks:
        if only is not None and check.id not in only:
            continue
        report.results.append(run_check(check, *args))
    return report


def run_check(check: Check, *args: Any) -> Result:
    try:
        detail = check.fn(*args)
        status: Status = PASS
    except Unsupported as exc:
        status, detail = UNSUPPORTED, str(exc)
    except Hazard as exc:
        status, detail = WARN, str(exc)
    except CheckFailed as exc:
        status, detail = FAIL, str(exc)
    except Exception as exc:
        status, detail = FAIL, f"{type(exc).__name__}: {_first_line(exc)}"
    finally:
        # what the check left in cycles (an exception's traceback and its frames, the capsules they hold) is
        # freed before the next check; it is young: a full collection costs ~0.2 s in a process holding torch
        # and jax, per check (the checks that count deleters collect fully themselves)
        gc.collect(1)
    return Result(check.id, status, detail or "")
