"""Consumer checks: dlbind-made producers, some deliberately broken, fed to the consumer under test."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from dlbind import _capi
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_VERSION, Flags
from dlbind.producer import asdlpack
from dlbind.testing._checks import (
    _DTYPES,
    CONSUMER,
    CheckFailed,
    Hazard,
    Report,
    Unsupported,
    _dtype_sample,
    _first_line,
    _np,
    _register,
    _register_device,
    _run,
    _same,
    _sample,
    _values_of,
    checks_for,
)
from dlbind.testing._devices import current, placed

C: Final = CONSUMER
Consume = Callable[[Any], Any]
ToNumpy = Callable[[Any], Any]


# Structs handed out, by address, until their deleter runs: a consumer may free a tensor after the
# producer object is gone (as with any real producer, the deleter and the memory are static here).
_HANDED_OUT: dict[int, tuple[Any, ...]] = {}


def _static_deleter(address: int) -> None:
    entry = _HANDED_OUT.pop(address, None)
    if entry is not None:
        entry[-1][0] += 1  # the producer's counter cell


_DELETER_V = ffi.callback("void(uintptr_t)", _static_deleter)
_DELETER_ADDRESS = int(ffi.cast("uintptr_t", _DELETER_V))


class RawProducer:
    """A producer that builds its capsule field by field, so that every field can be wrong.

    It answers legacy calls with legacy capsules and versioned calls with versioned ones, as the
    spec asks, unless ``versioned`` forces one kind.

    Its deleter counts calls (``deleted``); ``names`` keeps each capsule to read its name later.
    """

    def __init__(
        self,
        array: Any,
        *,
        versioned: bool | None = None,
        major: int = 1,
        flags: int = 0,
        code: int | None = None,
        bits: int | None = None,
        lanes: int = 1,
        device: tuple[int, int] | None = None,
        null_data: bool = False,
        null_strides: bool = False,
        strides: tuple[int, ...] | None = None,
        byte_offset: int = 0,
        shape: tuple[int, ...] | None = None,
    ) -> None:
        from dlbind.dtypes import from_numpy

        self.array = array
        place = current()  # on a device (--device cuda), the memory is a device copy laid out as on the host
        if device is None:
            device = (place.device_type, 0) if place is not None else (1, 0)
        self._owner, self._address = (None, array.__array_interface__["data"][0])
        if place is not None and not null_data:
            self._owner, self._address = place.upload(array)
        dt = from_numpy(array.dtype)
        self.fields: dict[str, Any] = {
            "versioned": versioned, "major": major, "flags": flags, "code": dt.code if code is None else code,
            "bits": dt.bits if bits is None else bits, "lanes": lanes, "device": device, "null_data": null_data,
            "null_strides": null_strides, "byte_offset": byte_offset,
            "shape": tuple(array.shape) if shape is None else shape,
            "strides": tuple(s // array.itemsize for s in array.strides) if strides is None else strides,
        }  # fmt: skip
        self._cell = [0]  # deleter calls, shared with _HANDED_OUT entries
        self.calls: list[dict[str, Any]] = []
        self.capsules: list[object] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        device: tuple[int, int] = self.fields["device"]
        return device

    def __dlpack__(self, **kwargs: Any) -> object:
        self.calls.append(kwargs)
        f = self.fields
        ndim = len(f["shape"])
        dims = ffi.new("int64_t[]", [*f["shape"], *f["strides"]] or [0])
        versioned = f["versioned"]
        if versioned is None:
            mv = kwargs.get("max_version")
            versioned = mv is not None and mv[0] >= 1
        if not versioned and f["flags"] & Flags.READ_ONLY:
            raise BufferError("read-only data needs a versioned capsule: ask with max_version=(1, 0)")
        if versioned:
            m = ffi.new("DLManagedTensorVersioned *")
            m.version.major, m.version.minor, m.flags = f["major"], DLPACK_VERSION[1], f["flags"]
            m.deleter = ffi.cast("void (*)(DLManagedTensorVersioned *)", _DELETER_ADDRESS)
        else:
            m = ffi.new("DLManagedTensor *")
            m.deleter = ffi.cast("void (*)(DLManagedTensor *)", _DELETER_ADDRESS)
        t = m.dl_tensor
        t.data = ffi.NULL if f["null_data"] else ffi.cast("void *", self._address)
        t.device.device_type, t.device.device_id = f["device"]
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = f["code"], f["bits"], f["lanes"]
        t.shape = dims if ndim else ffi.NULL
        t.strides = ffi.NULL if f["null_strides"] or not ndim else dims + ndim
        t.byte_offset = f["byte_offset"]
        address = int(ffi.cast("uintptr_t", m))
        _HANDED_OUT[address] = (m, dims, self.array, self._owner, self._cell)
        name = b"dltensor_versioned" if versioned else b"dltensor"
        capsule = _capi.capsule_new(address, name, _capi.CapsuleDestructor())
        self.capsules.append(capsule)
        return capsule

    @property
    def deleted(self) -> int:
        return self._cell[0]

    def deleter_calls(self) -> int:
        return self._cell[0]


def _consume(consume: Consume, producer: Any) -> Any:
    try:
        return consume(producer)
    except BufferError as exc:
        raise Unsupported(f"BufferError: {exc}") from None
    except Exception as exc:
        raise CheckFailed(f"refused with {type(exc).__name__}, not BufferError: {_first_line(exc)}") from None


def _consume_dtype(consume: Consume, producer: Any) -> Any:
    try:
        return consume(producer)
    except Exception as exc:  # a refusal; the spec names BufferError, others are noted
        note = "" if isinstance(exc, BufferError) else " (the spec asks for BufferError)"
        raise Unsupported(f"{type(exc).__name__}: {exc}{note}") from None


def _read(to_numpy: ToNumpy, result: Any) -> Any:
    return _np().asarray(to_numpy(result))


def _refuses(consume: Consume, producer: RawProducer, what: str) -> str | None:
    try:
        result = consume(producer)
    except Exception:  # any clean exception is a refusal
        pass
    else:
        del result
        raise CheckFailed(f"accepted {what}")
    import gc

    gc.collect()
    # A consumer that refuses before renaming the capsule leaves it to the producer's destructor.
    if not producer.capsules:  # refused from __dlpack_device__ alone: nothing was handed over
        return "refused before asking for a capsule"
    unconsumed = _capi.capsule_name(producer.capsules[-1]) in (b"dltensor_versioned", b"dltensor")
    calls = producer.deleted + unconsumed
    if calls != 1:
        raise CheckFailed(f"refused {what} but the deleter would run {calls} times (took ownership, never freed)")
    return None


@_register(C, "sends_max_version", "asks for versioned capsules (max_version >= (1, 0))", "jax-ml/jax#40789")
def c_max_version(consume: Consume, to_numpy: ToNumpy) -> str | None:
    p = RawProducer(_sample())
    consume(p)
    mv = p.calls[0].get("max_version") if p.calls else None
    if mv is None or tuple(mv) < (1, 0):
        raise CheckFailed(f"called __dlpack__({p.calls[0] if p.calls else ''}): read-only data cannot reach it")
    return None


def _here() -> tuple[int, int]:
    """The device the consumer checks' producers say they are on: the current one, else the CPU."""
    place = current()
    return (place.device_type, 0) if place is not None else (1, 0)


class _LegacyOnly:
    def __init__(self, array: Any) -> None:
        place = current()
        self.inner = asdlpack(array) if place is None else place.tensor(array)

    def __dlpack_device__(self) -> Any:
        return self.inner.__dlpack_device__()

    def __dlpack__(self, stream: Any = None) -> object:
        return self.inner.__dlpack__()


@_register(C, "legacy_fallback", "imports from a producer that knows only __dlpack__(stream)", "python_spec fallback")
def c_legacy(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample()
    _same(_read(to_numpy, consume(_LegacyOnly(sample))), sample, "legacy producer")
    return None


class _Raising:
    def __init__(self, exc: BaseException) -> None:
        self.exc, self.calls = exc, 0

    def __dlpack_device__(self) -> tuple[int, int]:
        return _here()

    def __dlpack__(self, **kw: Any) -> object:
        self.calls += 1
        raise self.exc


@_register(
    C, "real_typeerror_propagates", "a TypeError that is not about keywords is not retried", "IntelPython/dpctl#1789"
)
def c_typeerror(consume: Consume, to_numpy: ToNumpy) -> str | None:
    p = _Raising(TypeError("unsupported operand type(s) for +: 'int' and 'str'"))
    try:
        consume(p)
    except TypeError:
        if p.calls != 1:
            raise CheckFailed(f"retried __dlpack__ {p.calls} times on an unrelated TypeError") from None
        return None
    except Exception as exc:
        raise CheckFailed(f"raised {type(exc).__name__} instead of the producer's TypeError") from None
    raise CheckFailed("swallowed the producer's TypeError")


@_register(C, "buffererror_propagates", "the producer's BufferError reaches the caller", "array API from_dlpack")
def c_buffererror(consume: Consume, to_numpy: ToNumpy) -> str | None:
    try:
        consume(_Raising(BufferError("cannot export this")))
    except BufferError:
        return None
    except Exception as exc:
        raise CheckFailed(f"turned BufferError into {type(exc).__name__}") from None
    raise CheckFailed("swallowed the producer's BufferError")


class _NotACapsule:
    def __dlpack_device__(self) -> tuple[int, int]:
        return _here()

    def __dlpack__(self, **kw: Any) -> object:
        return 42


@_register(C, "non_capsule_refused", "a __dlpack__ that returns a non-capsule is refused", "cupy#3611")
def c_non_capsule(consume: Consume, to_numpy: ToNumpy) -> str | None:
    try:
        consume(_NotACapsule())
    except Exception:
        return None
    raise CheckFailed("accepted 42 as a capsule")


@_register(C, "renames_capsule", "renames the capsule to used_* (ownership taken)", "python_spec capsules")
def c_rename(consume: Consume, to_numpy: ToNumpy) -> str | None:
    p = RawProducer(_sample())
    result = consume(p)
    name = _capi.capsule_name(p.capsules[-1])
    if name not in (b"used_dltensor_versioned", b"used_dltensor"):
        raise CheckFailed(f"capsule still named {name!r} after import: its destructor would free the data")
    del result
    return None


@_register(C, "deleter_once", "calls the deleter exactly once, when done", "cupy#1445, cudf#5212, pytorch#56789")
def c_deleter(consume: Consume, to_numpy: ToNumpy) -> str | None:
    import gc

    p = RawProducer(_sample())
    result = consume(p)
    got = _read(to_numpy, result)
    if p.deleted:  # fine for a consumer that copied on import; a use-after-free otherwise
        if current() is None and _np().shares_memory(got, p.array):
            raise CheckFailed("called the deleter while the result still uses the memory")
        return "copied on import and freed the producer's tensor at once"
    del result, got
    gc.collect()
    if p.deleter_calls() != 1:
        raise CheckFailed(f"deleter called {p.deleter_calls()} times (expected 1)")
    return None


@_register(C, "major_2_refused", "refuses a DLPack 2.x tensor and calls its deleter", "dlpack.h DLPackVersion")
def c_major(consume: Consume, to_numpy: ToNumpy) -> str | None:
    return _refuses(consume, RawProducer(_sample(), versioned=True, major=2), "a DLPack 2.3 tensor")


def _re_exported(result: Any) -> tuple[int, int, int, int] | None:
    """``(code, bits, lanes, device type)`` of what ``result`` exports again (``__dlpack__``), or None when it
    exports nothing: how a consumer that carries a field it has no policy for shows it carried it."""
    from dlbind import capsule

    if not hasattr(result, "__dlpack__"):
        return None
    try:
        made = result.__dlpack__(max_version=DLPACK_VERSION)
        managed, _ = capsule.take(made)
    except Exception:
        return None
    t = managed.dl_tensor
    fields = (int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes), int(t.device.device_type))
    capsule.call_deleter(managed)
    return fields


def _refuses_or_carries(consume: Consume, producer: RawProducer, what: str) -> str | None:
    """The consumer refuses ``producer``'s tensor cleanly (its deleter runs once), or carries it: what it
    exports again says the same code, bits, lanes and device type (DLPack's minor versions only add values,
    so a newer producer's code is carried and refused only where policy is needed)."""
    try:
        result = consume(producer)
    except Exception:  # any clean exception is a refusal
        return _refuses(consume, producer, what)
    f = producer.fields
    expected = (f["code"], f["bits"], f["lanes"], f["device"][0])
    found = _re_exported(result)
    del result
    if found is None:
        raise CheckFailed(f"accepted {what}, and what it made cannot say it carried it (no __dlpack__)")
    if found != expected:
        raise CheckFailed(f"accepted {what} as (code, bits, lanes, device type) {found}, not {expected}")
    return f"carried {what} (re-exported unchanged)"


@_register(C, "unknown_dtype_refused", "refuses an unknown dtype code, or carries it unchanged", "cupy#8801")
def c_unknown_dtype(consume: Consume, to_numpy: ToNumpy) -> str | None:
    return _refuses_or_carries(consume, RawProducer(_sample(), code=99, bits=32), "dtype code 99")


@_register(C, "lanes_refused", "refuses lanes != 1, or carries them unchanged", "dlpack.h DLDataType")
def c_lanes(consume: Consume, to_numpy: ToNumpy) -> str | None:
    producer = RawProducer(_sample((2, 4)), lanes=4, shape=(2,), strides=(4,))
    return _refuses_or_carries(consume, producer, "lanes=4")


@_register(
    C, "unknown_device_refused", "refuses an unknown device type, or carries it unchanged", "dlpack.h DLDeviceType"
)
def c_unknown_device(consume: Consume, to_numpy: ToNumpy) -> str | None:
    return _refuses_or_carries(consume, RawProducer(_sample(), device=(99, 0)), "device type 99")


@_register(C, "zero_size_null_data", "imports a zero-size tensor whose data is NULL", "cccl#11605")
def c_zero_size(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample((0, 3))
    _same(_read(to_numpy, _consume(consume, RawProducer(sample, null_data=True))), sample, "shape (0, 3), data NULL")
    return None


@_register(C, "zero_d", "imports a 0-d tensor", "numpy#29872")
def c_zero_d(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _np().array(1.5, dtype="float32")
    _same(_read(to_numpy, _consume(consume, RawProducer(sample))), sample, "0-d")
    return None


@_register(C, "negative_strides", "reads negative strides right (or refuses cleanly)", "pytorch#188023")
def c_negative(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample((3, 4))[::-1]
    _same(_read(to_numpy, _consume(consume, RawProducer(sample))), sample, "negative strides")
    return None


@_register(C, "byte_offset", "honours byte_offset", "pytorch#168177, cuda-python#2592")
def c_byte_offset(consume: Consume, to_numpy: ToNumpy) -> str | None:
    base = _sample((3, 4))
    p = RawProducer(base, shape=(2, 4), strides=(4, 1), byte_offset=16)
    _same(_read(to_numpy, _consume(consume, p)), base[1:], "byte_offset=16")
    return None


@_register(C, "null_strides", "reads NULL strides as row-major (producers before DLPack 1.2)", "dmlc/dlpack#178")
def c_null_strides(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample()
    _same(_read(to_numpy, _consume(consume, RawProducer(sample, null_strides=True))), sample, "NULL strides")
    return None


@_register(C, "size1_strides", "any stride on a size-1 dimension is fine", "tensorflow PR#61184")
def c_size1(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample((3, 1))
    _same(_read(to_numpy, _consume(consume, RawProducer(sample, strides=(1, 99)))), sample, "stride 99 on size 1")
    return None


#: What a consumer that imports read-only data writable is told (a warning): allowed, and what it risks.
READONLY_IGNORED = (
    "flag ignored: the result is writable over memory its producer marked read-only. Allowed: data-apis/array-api#749 "
    "recommends that a consumer without read-only arrays ignore the flag rather than refuse; hazardous: a write "
    "through the result changes (or crashes on) memory its owner lent read-only, and nothing warns the user"
)


@_register(
    C,
    "readonly_respected",
    "READ_ONLY data is imported read-only (warns if the flag is ignored, fails if refused)",
    "numpy#28600, data-apis/array-api#749",
)
def c_readonly(consume: Consume, to_numpy: ToNumpy) -> str | None:
    sample = _sample()
    try:
        result = consume(RawProducer(sample, flags=int(Flags.READ_ONLY)))
    except BufferError as exc:
        raise CheckFailed(f"cannot import read-only data: {exc}") from None
    out = to_numpy(result)
    if current() is not None:
        _same(_np().asarray(out), sample, "read-only data")
        return "imported (on a device the result's writability is not read)"
    writeable = getattr(getattr(out, "flags", None), "writeable", None)
    if writeable is None:  # to_numpy gave no flags to read
        return "imported (the result's writability is not read)"
    if not writeable:
        return "imported read-only"
    if not _np().shares_memory(_np().asarray(out), sample):
        return "imported as a copy: writable, and the read-only memory is not reached through it"
    raise Hazard(READONLY_IGNORED)


def _consumer_dtype_check(name: str, code: int, bits: int) -> Callable[..., str | None]:
    def run(consume: Consume, to_numpy: ToNumpy) -> str | None:
        sample = _dtype_sample(name)
        producer = RawProducer(sample)
        result = _consume_dtype(consume, producer)
        try:
            got = _read(to_numpy, result)
        except (BufferError, TypeError, ValueError) as exc:
            f = producer.fields
            if _re_exported(result) == (f["code"], f["bits"], f["lanes"], f["device"][0]):
                # a consumer of an older header carries the code it does not name, and cannot read it
                raise Unsupported(f"carried {name} (code {code}) without a name for it: {_first_line(exc)}") from None
            raise
        if (
            got.dtype != sample.dtype
            and got.dtype.itemsize == sample.dtype.itemsize
            and name.startswith(("bfloat", "float8"))
        ):
            got = got.view(sample.dtype)  # numpy without ml_dtypes sees only raw bytes
        _same(got, sample, f"{name} (code {code}, {bits} bits)")
        return None

    return run


for _n, _c, _b in _DTYPES:
    _register(C, f"dtype_{_n}", f"imports {_n} (code {_c}, {_b} bits)", "dlpack.h DLDataTypeCode")(
        _consumer_dtype_check(_n, _c, _b)
    )


def _default_to_numpy(result: Any) -> Any:
    """A consumer's result as numpy: numpy arrays as they are, anything else through dlbind (device memory no
    dlbind backend serves, such as dpnp's oneAPI memory, through the result's own host copy)."""
    np = _np()
    from dlbind.consumer import from_dlpack
    from dlbind.conversion import compat

    if isinstance(result, np.ndarray):
        return result
    return _values_of(result, from_dlpack(compat(result)))[0]


_MISSING = object()


@_register_device(
    C,
    "stream_passed",
    "asks a CUDA producer with its stream: an int, never 0 (None: the legacy default stream)",
    "array API from_dlpack; torch's test_dlpack_default_stream",
)
def c_stream_passed(consume: Consume, to_numpy: ToNumpy) -> str | None:
    if current() is None:
        raise Unsupported("a check of device streams: run it on a device (python -m dlbind check --device cuda)")
    sample = _sample()
    p = RawProducer(sample)
    _same(_read(to_numpy, _consume(consume, p)), sample, "2x3 float32")
    if not p.calls:
        raise CheckFailed("imported without calling __dlpack__")
    stream = p.calls[0].get("stream", _MISSING)
    if stream is _MISSING or stream is None:
        return "asked without a stream: the producer orders the legacy default stream (allowed)"
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise CheckFailed(f"passed stream={stream!r}, not an int")
    if stream == 0:
        raise CheckFailed("passed stream=0, which on CUDA could mean None, 1 or 2")
    return f"passed stream={stream}"


def check_consumer(
    from_dlpack: Consume,
    *,
    to_numpy: ToNumpy | None = None,
    name: str = "consumer",
    only: list[str] | None = None,
    device: str | None = None,
) -> Report:
    """Run the consumer checks on ``from_dlpack``; ``to_numpy`` reads a result back (default np.asarray).
    ``device`` ("cuda"): the producers hand it memory there, with the device's own checks (streams) added."""
    with placed(device):
        return _run(checks_for(device)[1], name, only, from_dlpack, to_numpy or _default_to_numpy)
