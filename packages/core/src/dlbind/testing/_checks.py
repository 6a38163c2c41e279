"""The checks of dlbind.testing: each one a small function, registered with its id, text and source."""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from dlbind import _capi
from dlbind import capsule as _capsule
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_VERSION, DataTypeCode, DeviceType, Flags
from dlbind.tensor import Tensor, from_managed


class CheckFailed(Exception):
    """The subject broke the rule the check is about."""


class Unsupported(Exception):
    """The subject cleanly refused something the spec lets it refuse."""


@dataclass(frozen=True)
class Check:
    id: str
    kind: str  # "producer" | "consumer"
    text: str
    ref: str
    fn: Callable[..., str | None]


@dataclass(frozen=True)
class Result:
    check: str
    status: str  # "pass" | "fail" | "unsupported" | "crash"
    detail: str = ""


@dataclass
class Report:
    subject: str
    results: list[Result] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.status in ("pass", "unsupported") for r in self.results)

    def count(self, status: str) -> int:
        return sum(r.status == status for r in self.results)

    def summary(self) -> str:
        head = (
            f"{self.subject}: {self.count('pass')} passed, {self.count('fail') + self.count('crash')} failed, "
            f"{self.count('unsupported')} unsupported"
        )
        bad = [f"  {r.status.upper()} {r.check}: {r.detail}" for r in self.results if r.status in ("fail", "crash")]
        return "\n".join([head, *bad])


PRODUCER_CHECKS: list[Check] = []
CONSUMER_CHECKS: list[Check] = []


def _register(
    kind: str, id_: str, text: str, ref: str = ""
) -> Callable[[Callable[..., str | None]], Callable[..., str | None]]:
    def wrap(fn: Callable[..., str | None]) -> Callable[..., str | None]:
        (PRODUCER_CHECKS if kind == "producer" else CONSUMER_CHECKS).append(Check(id_, kind, text, ref, fn))
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
    return _np().asarray(t)


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


# -- producer checks ----------------------------------------------------------------------------------
P = "producer"


@_register(P, "protocol", "has __dlpack__ and __dlpack_device__", "array API __dlpack__")
def p_protocol(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    missing = [m for m in ("__dlpack__", "__dlpack_device__") if not callable(getattr(x, m, None))]
    if missing:
        raise CheckFailed(f"missing {', '.join(missing)}")
    return None


@_register(P, "device", "__dlpack_device__() is (known device type, id >= 0)", "array API __dlpack_device__")
def p_device(make: Callable[[Any], Any]) -> str | None:
    dev = _make(make, _sample()).__dlpack_device__()
    if not isinstance(dev, tuple) or len(dev) != 2:
        raise CheckFailed(f"returned {dev!r}, not a 2-tuple")
    if int(dev[0]) not in DeviceType._value2member_map_ or int(dev[1]) < 0:
        raise CheckFailed(f"returned {dev!r}")
    return None


@_register(
    P, "legacy_capsule", "__dlpack__() gives a 'dltensor' capsule (or BufferError)", "python_spec: max_version=None"
)
def p_legacy(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
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
    c = _make(make, _sample()).__dlpack__(max_version=(1, 0))
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
    c = _make(make, _sample()).__dlpack__(max_version=(2, 0))
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
    x = _make(make, _sample())
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
    _, t = _open(_versioned_or_legacy(_make(make, sample)))
    _same(_values(t), sample, "2x3 float32")
    return None


def _versioned_or_legacy(x: Any) -> object:
    try:
        return x.__dlpack__(max_version=DLPACK_VERSION)
    except TypeError:
        return x.__dlpack__()


@_register(P, "strides_emitted", "strides are non-NULL for ndim > 0", "dlpack.h 1.2 (dmlc/dlpack#178), numpy#29872")
def p_strides(make: Callable[[Any], Any]) -> str | None:
    managed, _t = _open(_versioned_or_legacy(_make(make, _sample())))
    if managed.dl_tensor.strides == ffi.NULL:
        raise CheckFailed("NULL strides (allowed before DLPack 1.2, refused by 1.2 consumers)")
    return None


def _layout_check(make: Callable[[Any], Any], sample: Any, what: str) -> str | None:
    _, t = _open(_versioned_or_legacy(_make(make, sample)))
    _same(_values(t), _np().array(sample, order="C"), what)
    return None


@_register(P, "transposed", "a transposed array keeps its strides", "")
def p_transposed(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 4)).T, "transposed")


@_register(P, "negative_strides", "negative strides arrive intact (or the array is copied)", "pytorch#188023")
def p_negative(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 4))[::-1, ::-2], "negative strides")


@_register(P, "zero_size", "a zero-size array exports", "onnxruntime#27450, cccl#11605")
def p_zero_size(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((0, 3)), "shape (0, 3)")


@_register(P, "zero_d", "a 0-d array exports", "numpy#29872")
def p_zero_d(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _np().array(2.5, dtype="float32"), "0-d")


@_register(P, "size1_dims", "size-1 dimensions export", "pytorch#99803")
def p_size1(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((3, 1, 2)), "shape (3, 1, 2)")


@_register(P, "offset_view", "a view that starts inside its buffer exports (data/byte_offset)", "pytorch#168177")
def p_offset(make: Callable[[Any], Any]) -> str | None:
    return _layout_check(make, _sample((4, 5))[1:, 2:], "view [1:, 2:]")


@_register(P, "copy_true", "copy=True copies and sets IS_COPIED", "array API __dlpack__ copy")
def p_copy_true(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
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
        c = _versioned(_make(make, _sample()), copy=False)
    except TypeError as exc:
        raise CheckFailed(f"does not take copy= ({exc})") from None
    versioned = _name(c) == _capsule.VERSIONED
    managed, _t = _open(c)
    if versioned and int(managed.flags) & Flags.IS_COPIED:
        raise CheckFailed("copy=False returned a copy")
    return None


@_register(P, "dl_device_same", "dl_device equal to its own device is accepted", "array API __dlpack__ dl_device")
def p_dl_device_same(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    dev = tuple(x.__dlpack_device__())
    try:
        _open(_versioned(x, dl_device=dev))
    except TypeError as exc:
        raise CheckFailed(f"does not take dl_device= ({exc})") from None
    return None


@_register(P, "dl_device_unsupported", "an unsupported dl_device raises BufferError", "array API __dlpack__ dl_device")
def p_dl_device_bad(make: Callable[[Any], Any]) -> str | None:
    x = _make(make, _sample())
    try:
        _versioned(x, dl_device=(int(DeviceType.kDLExtDev), 0))
    except BufferError:
        return None
    except Exception as exc:
        raise CheckFailed(f"raised {type(exc).__name__} (the spec says BufferError): {_first_line(exc)}") from None
    raise CheckFailed("exported to a device it cannot reach")


@_register(P, "stream_none", "stream=None is accepted", "array API __dlpack__ stream")
def p_stream_none(make: Callable[[Any], Any]) -> str | None:
    _open(_versioned(_make(make, _sample()), stream=None))
    return None


@_register(P, "stream_refused_on_cpu", "a stream on a CPU array is refused", "array API: only None on CPU")
def p_stream_cpu(make: Callable[[Any], Any]) -> str | None:
    # both an aligned and a merely 16-byte aligned sample: jax 0.10 refuses stream=1 (JaxRuntimeError) on an
    # array it copied but accepts it on one that aliases 64-byte aligned numpy memory
    note = None
    for offset in (0, 16):
        x = _make(make, _sample_at(offset))
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
            capsule = _versioned_or_legacy(x)
        except BufferError as exc:
            raise Unsupported(f"BufferError: {exc}") from None
        managed, t = _open(capsule)
        got = (int(managed.dl_tensor.dtype.code), int(managed.dl_tensor.dtype.bits), int(managed.dl_tensor.dtype.lanes))
        if got != (code, bits, 1):
            raise CheckFailed(f"exported as (code, bits, lanes) {got}, expected {(code, bits, 1)}")
        _same(_values(t), sample, name)
        return None

    return run


for _n, _c, _b in _DTYPES:
    _register(P, f"dtype_{_n}", f"{_n} exports as (code {_c}, {_b} bits)", "dlpack.h DLDataTypeCode")(
        _producer_dtype_check(_n, _c, _b)
    )


def check_producer(
    make_array: Callable[[Any], Any], *, name: str = "producer", only: list[str] | None = None
) -> Report:
    """Run the producer checks on arrays made by ``make_array(numpy_array)``."""
    return _run(PRODUCER_CHECKS, name, only, make_array)


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
        status = "pass"
    except Unsupported as exc:
        status, detail = "unsupported", str(exc)
    except CheckFailed as exc:
        status, detail = "fail", str(exc)
    except Exception as exc:
        status, detail = "fail", f"{type(exc).__name__}: {_first_line(exc)}"
    finally:
        gc.collect()
    return Result(check.id, status, detail or "")
