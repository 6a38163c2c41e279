"""dlbind.from_dlpack: raw capsules, negotiation with producers of every kind, and bad input."""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import DeviceType, Flags
from dlbind.validate import ExtentError
from faulty import float_values, make_capsule


def test_versioned_capsule() -> None:
    capsule, counter = make_capsule(shape=(4,), strides=(1,), flags=Flags.READ_ONLY)
    t = dlbind.from_dlpack(capsule)
    assert (t.shape, t.strides, t.version, t.readonly) == ((4,), (1,), dlbind.DLPACK_VERSION, True)
    assert t.dtype.name == "float32" and t.device == (DeviceType.kDLCPU, 0)
    assert counter.calls == 0
    del t
    gc.collect()
    assert counter.calls == 1


def test_legacy_capsule_and_null_strides() -> None:
    capsule, counter = make_capsule(name=b"dltensor", versioned=False, ndim=2, shape=(2, 3), strides=None)
    t = dlbind.from_dlpack(capsule)
    assert t.version is None and t.flags == Flags(0)
    assert t.strides == (3, 1) and t.is_contiguous()  # NULL strides: row-major (before DLPack 1.2)
    del t
    assert counter.calls == 1


def test_newer_minor_version_is_accepted() -> None:
    major, minor = dlbind.DLPACK_VERSION
    capsule, counter = make_capsule(minor=minor + 1)
    assert dlbind.from_dlpack(capsule).version == (major, minor + 1)
    gc.collect()
    assert counter.calls == 1


def test_zero_size_with_null_data_and_0d() -> None:
    capsule, _ = make_capsule(shape=(0, 3), strides=(3, 1), ndim=2, data=0)
    t = dlbind.from_dlpack(capsule)
    assert t.size == 0 and t.data_ptr == 0 and t.nbytes == 0
    assert np.from_dlpack(t).shape == (0, 3)
    capsule, _ = make_capsule(ndim=0, shape=(), strides=None, null_shape=True)
    t = dlbind.from_dlpack(capsule)
    assert t.shape == () and t.strides == () and t.size == 1


def test_byte_offset_is_honoured() -> None:
    source = np.arange(8, dtype=np.float32)
    capsule, _ = make_capsule(data=source.ctypes.data, shape=(2,), strides=(1,), byte_offset=12)
    t = dlbind.from_dlpack(capsule)
    assert t.byte_offset == 12
    assert float_values(t.data_ptr + t.byte_offset, 2) == [3.0, 4.0]
    assert np.from_dlpack(t).tolist() == [3.0, 4.0]
    assert np.asarray(t).tolist() == [3.0, 4.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"major": 2, "minor": 3}, "DLPack 2.3 tensor; dlbind understands major version 1 only"),
        ({"device_type": 2**31}, "invalid device type -2147483648"),
        ({"lanes": 0}, r"lanes=0 \(a DLPack dtype has at least one lane\)"),
        ({"shape": (4, 3), "strides": (-(2**62), 1)}, r"reach elements beyond int64"),
        ({"shape": (4,), "strides": (2**61,)}, r"reach bytes beyond int64"),
        ({"ndim": -1}, "invalid ndim -1"),
        ({"ndim": 2, "null_shape": True}, "ndim=2 but a NULL shape"),
        ({"shape": (-3,)}, r"negative dimension in shape \(-3,\)"),
        ({"bits": 0}, "bits=0"),
        ({"data": 0}, "4 elements but a NULL data pointer"),
    ],
)
def test_invalid_tensors_are_refused_and_freed(kwargs: dict[str, Any], message: str) -> None:
    capsule, counter = make_capsule(**kwargs)
    with pytest.raises(BufferError, match=message):
        dlbind.from_dlpack(capsule)
    assert counter.calls == 1  # the deleter ran exactly once although the tensor was refused


@pytest.mark.parametrize(
    ("kwargs", "shown"),
    [
        ({"code": 42}, ("code 42:32", 42, 32, 1, (1, 0))),
        ({"device_type": 99}, ("float32", 2, 32, 1, (99, 0))),
        ({"lanes": 4, "shape": (1,)}, ("float32x4", 2, 32, 4, (1, 0))),
    ],
)
def test_newer_codes_devices_and_vector_dtypes_are_carried(kwargs: dict[str, Any], shown: tuple[Any, ...]) -> None:
    """A dtype code or device type newer than the header (same major version) and a vector dtype import into a
    Tensor whose metadata reads back and whose re-export is unchanged; its deleter runs once when it goes."""
    capsule, counter = make_capsule(**kwargs)
    t = dlbind.from_dlpack(capsule)
    name, code, bits, lanes, device = shown
    assert (t.dtype.name, t._code, t._bits, t._lanes, tuple(t.device)) == (name, code, bits, lanes, device)
    again = dlbind.from_dlpack(t)
    assert (again._code, again._bits, again._lanes, tuple(again.device)) == (code, bits, lanes, device)
    del t, again
    import gc

    gc.collect()
    assert counter.calls == 1


def test_an_unnamed_device_is_refused_where_policy_is_needed() -> None:
    capsule, _ = make_capsule(device_type=99)
    t = dlbind.from_dlpack(capsule)
    assert repr(t).endswith("device=99:0)")
    refusals: list[Callable[[Any], Any]] = [np.asarray, lambda x: x.copy()]
    if dlbind.ffi_build() == "compiled" or sys.version_info >= (3, 12):  # the pure build's buffer protocol: 3.12+
        refusals.append(memoryview)
    refusals.append(lambda x: x.__dlpack__(stream=1))
    for refused in refusals:
        with pytest.raises(BufferError, match=r"device type 99.*a header bump would name it"):
            refused(t)
    with pytest.raises(BufferError, match="device type 99 is not named by this dlbind's DLPack header"):
        dlbind.convert(t, to="numpy")


@pytest.mark.parametrize("keywords", [{}, {"copy": False}, {"device": "cpu"}], ids=["plain", "copy=False", "device"])
def test_an_extent_beyond_int64_names_the_producer(keywords: dict[str, Any]) -> None:
    """A producer whose strides reach past int64 (CuPy before 14.3 carried negative strides as unsigned numbers):
    refused with BufferError naming it, before any consumer sees the tensor. The plain call and those with
    keywords (the compiled build's fast path and its Python import) name it alike."""
    source = np.arange(8.0)

    class Unsigned:
        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

        def __dlpack__(self, **kw: Any) -> object:
            capsule, _ = make_capsule(data=source.ctypes.data, code=2, bits=64, shape=(8,), strides=(2**61 - 1,))
            return capsule

    with pytest.raises(BufferError, match=r"Unsigned\.__dlpack__ gave a tensor dlbind refuses: .*beyond int64") as info:
        dlbind.from_dlpack(Unsigned(), **keywords)
    assert isinstance(info.value.__cause__, ExtentError)  # the validator's own finding, kept as the cause


def test_capsule_already_used() -> None:
    capsule, counter = make_capsule()
    t = dlbind.from_dlpack(capsule)
    with pytest.raises(BufferError, match="already consumed"):
        dlbind.from_dlpack(capsule)
    del t
    assert counter.calls == 1


@pytest.mark.parametrize("keywords", [{"device": "cpu"}, {"copy": True}, {"stream": 1}, {"stream": -1}])
def test_a_raw_capsule_refuses_what_only_its_producer_could_do(keywords: dict[str, Any]) -> None:
    """A capsule was exported already: a device, a copy or a stream is what its producer's ``__dlpack__`` is asked
    with, so each is refused before the capsule is taken, which a plain import then still takes."""
    capsule, counter = make_capsule()
    (name, value), = keywords.items()
    said = re.escape(f"from_dlpack({name}={value!r}) of a raw capsule: ")
    with pytest.raises(BufferError, match=f"^{said}.*pass the producer instead"):
        dlbind.from_dlpack(capsule, **keywords)
    t = dlbind.from_dlpack(capsule, copy=False)
    assert t.shape == (4,) and counter.calls == 0
    del t
    gc.collect()
    assert counter.calls == 1


def test_a_consumed_capsule_says_to_ask_the_producer_again() -> None:
    """The way out is a new capsule from the producer, in the same words in both builds (the compiled one's
    message is written in C)."""
    from dlbind import capsule

    cap = dlbind.asdlpack(np.arange(3.0)).__dlpack__(max_version=dlbind.DLPACK_VERSION)
    t = dlbind.from_dlpack(cap)
    with pytest.raises(BufferError) as raised:
        dlbind.from_dlpack(cap)
    assert str(raised.value).endswith(capsule.CONSUMED_HINT), raised.value
    assert "call its __dlpack__ again" in capsule.CONSUMED_HINT
    del t


@pytest.mark.parametrize("name", [b"tensor", b"numpy_dltensor", None])
def test_wrong_capsule_name(name: bytes | None) -> None:
    capsule, counter = make_capsule(name=name)
    with pytest.raises(BufferError, match="not a DLPack capsule"):
        dlbind.from_dlpack(capsule)
    assert counter.calls == 0  # not ours to free


class Producer:
    """A producer whose __dlpack__ behaves as configured."""

    def __init__(
        self, array: np.ndarray, *, legacy: bool = False, raises: BaseException | None = None, returns: object = None
    ):
        self.array, self.legacy, self.raises, self.returns = array, legacy, raises, returns
        self.calls: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __dlpack__(self, **kwargs: Any) -> object:
        self.calls.append(kwargs)
        if self.legacy and set(kwargs) - {"stream"}:
            raise TypeError(f"__dlpack__() got an unexpected keyword argument '{sorted(set(kwargs) - {'stream'})[0]}'")
        if self.raises is not None:
            raise self.raises
        if self.returns is not None:
            return self.returns
        return self.array.__dlpack__(**kwargs)


def test_versioned_keywords_are_sent() -> None:
    p = Producer(np.arange(3.0))
    dlbind.from_dlpack(p)
    assert p.calls == [{"stream": None, "max_version": dlbind.DLPACK_VERSION}]


def test_legacy_producer_gets_the_fallback() -> None:
    p = Producer(np.arange(3.0), legacy=True)
    t = dlbind.from_dlpack(p)
    assert t.version is None and np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0]
    assert p.calls == [{"stream": None, "max_version": dlbind.DLPACK_VERSION}, {"stream": None}]


def test_legacy_producer_gets_copy_from_dlbind_and_cannot_move() -> None:
    # issue 13: copy= is honoured for producers that do not take it (a copy of the plain import, or
    # the plain import itself); dl_device cannot be: the producer alone can move its data
    a = np.arange(3.0)
    t = dlbind.from_dlpack(Producer(a, legacy=True), copy=True)
    assert t.flags & dlbind.Flags.IS_COPIED and not np.shares_memory(np.from_dlpack(t), a)
    t = dlbind.from_dlpack(Producer(a, legacy=True), copy=False)
    assert np.shares_memory(np.from_dlpack(t), a)
    with pytest.raises(BufferError, match="does not accept dl_device"):
        dlbind.from_dlpack(Producer(a, legacy=True), device="cuda:0")


def test_real_type_errors_are_not_swallowed() -> None:
    p = Producer(np.arange(3.0), raises=TypeError("unsupported operand type(s)"))
    with pytest.raises(TypeError, match="unsupported operand"):
        dlbind.from_dlpack(p)
    assert len(p.calls) == 1


def test_producer_raising_propagates() -> None:
    with pytest.raises(BufferError, match="no can do"):
        dlbind.from_dlpack(Producer(np.arange(3.0), raises=BufferError("no can do")))


def test_producer_returning_non_capsule() -> None:
    with pytest.raises(TypeError, match=r"Producer.__dlpack__\(\) returned int, not a DLPack capsule"):
        dlbind.from_dlpack(Producer(np.arange(3.0), returns=42))


def test_missing_protocol() -> None:
    with pytest.raises(TypeError, match=r"needs a DLPack producer .* not object$"):
        dlbind.from_dlpack(object())


@pytest.mark.parametrize("value", [[1, 2], (1.0,), 3, 2.5j, range(4)], ids=type)
def test_python_values_name_the_way_out(value: object) -> None:
    """A list or a scalar holds no array memory: the refusal says to make an array of it, and that works."""
    with pytest.raises(TypeError, match=r"not \w+: make an array of it first, e.g. numpy.asarray\(x\)"):
        dlbind.from_dlpack(value)
    assert dlbind.from_dlpack(np.asarray(value)).size == np.asarray(value).size  # the way out, taken


def test_copy_true_copies_and_sets_flag() -> None:
    a = np.arange(6.0).reshape(2, 3)[:, ::2]
    t = dlbind.from_dlpack(a, copy=True)
    assert t.flags & Flags.IS_COPIED and not t.readonly
    assert t.data_ptr != a.ctypes.data and t.is_contiguous()
    assert np.from_dlpack(t).tolist() == a.tolist()


def test_copy_false_when_a_copy_is_needed() -> None:
    e = dlbind.from_pointer(0, (0,), "float32", device="cuda:0")
    with pytest.raises(BufferError, match="copy=False forbids one"):
        dlbind.from_dlpack(e, device="cpu", copy=False)


def test_stream_rules_for_cpu() -> None:
    with pytest.raises(BufferError, match="stream must be None for cpu tensors"):
        dlbind.from_dlpack(np.arange(3), stream=1)
    with pytest.raises(TypeError, match="stream must be None or an int"):
        dlbind.from_dlpack(np.arange(3), stream="default")


def test_vector_dtypes_when_asked_for() -> None:
    source = np.arange(8, dtype=np.float32)
    capsule, counter = make_capsule(data=source.ctypes.data, lanes=4, shape=(2,), strides=(1,))
    t = dlbind.from_dlpack(capsule, allow_vector=True)
    assert t.dtype.name == "float32x4" and t.nbytes == 32
    assert np.asarray(t).tolist() == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]
    del t
    assert counter.calls == 1


@pytest.mark.parametrize(
    ("obj", "readonly"), [(memoryview(b"ab"), True), (b"abc", True), (bytearray(b"xyz"), False)], ids=type
)
def test_from_dlpack_imports_buffers_zero_copy(obj: Any, readonly: bool) -> None:
    t = dlbind.from_dlpack(obj)
    assert (t.shape, t.dtype.name, t.readonly) == ((len(obj),), "uint8", readonly)
    assert np.asarray(t).tobytes() == bytes(obj)
    if isinstance(obj, bytearray):
        np.asarray(t)[0] = ord("X")
        assert obj == bytearray(b"Xyz")  # the same memory


def test_from_dlpack_names_what_it_accepts() -> None:
    with pytest.raises(TypeError, match="buffer or array interface, not list"):
        dlbind.from_dlpack([1, 2])


class _DeviceIdNone:
    """A producer whose __dlpack_device__ says (kDLCPU, None), as paddle 3.3.1's does."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __dlpack_device__(self) -> Any:
        return (1, None)

    def __dlpack__(self, **kwargs: Any) -> object:
        return self.a.__dlpack__(**kwargs)


@pytest.mark.parametrize("kwargs", [{}, {"device": "cpu"}, {"copy": True}, {"device": (1, 0), "copy": False}])
def test_device_id_none_is_read_as_zero(kwargs: dict[str, Any]) -> None:
    a = np.arange(5.0)
    t = dlbind.from_dlpack(_DeviceIdNone(a), **kwargs)
    assert t.device == (DeviceType.kDLCPU, 0)
    assert np.asarray(t).tolist() == a.tolist()
    assert dlbind.compat(_DeviceIdNone(a)).__dlpack_device__() == (DeviceType.kDLCPU, 0)


@pytest.mark.parametrize("dev", [(1,), "cpu", (1, 0.5), (True, 0), None])
def test_a_malformed_dlpack_device_is_a_buffer_error(dev: Any) -> None:
    class Odd(_DeviceIdNone):
        def __dlpack_device__(self) -> Any:
            return dev

    with pytest.raises(BufferError, match=r"__dlpack_device__\(\) returned"):
        dlbind.from_dlpack(Odd(np.arange(3.0)), device="cpu")


@pytest.mark.parametrize(("device", "asked"), [((2, 0), "cuda:0"), ("cuda:1", "cuda:1"), ((1, 3), "cpu:3")])
def test_a_refused_device_request_names_the_request_and_the_producer(device: Any, asked: str) -> None:
    """numpy's own refusal says only "unsupported device requested"; dlbind adds what was asked of whom."""
    with pytest.raises(BufferError) as info:
        dlbind.from_dlpack(np.arange(3.0), device=device)
    message = str(info.value)
    assert message.startswith(f"from_dlpack(device={device!r}): numpy.ndarray on cpu:0 cannot export to {asked}: ")
    # the producer's own refusal, kept (numpy before 2.3 raises ValueError)
    assert isinstance(info.value.__cause__, (BufferError, ValueError))


@pytest.mark.parametrize(
    ("make", "here", "device", "asked"),
    [
        (lambda: dlbind.asdlpack(bytearray(8)), "cpu:0", (2, 0), "cuda:0"),  # the compiled build's BufferExporter
        (lambda: dlbind.from_pointer(0x10000, (4,), "float32", device="cuda:0"), "cuda:0", "cpu", "cpu:0"),
        (lambda: dlbind.from_dlpack(np.arange(3.0)), "cpu:0", "cuda:1", "cuda:1"),
    ],
    ids=["asdlpack", "from_pointer", "tensor"],
)
def test_a_refused_device_request_names_dlbinds_own_types_publicly(
    make: Any, here: str, device: Any, asked: str
) -> None:
    with pytest.raises(BufferError) as info:
        dlbind.from_dlpack(make(), device=device)
    kind = "Tensor" if isinstance(make(), dlbind.Tensor) else "Exporter"
    expected = f"from_dlpack(device={device!r}): dlbind.{kind} on {here} cannot export to {asked}"
    assert str(info.value).startswith(expected)


def _bool_as_uint8_plan() -> Any:
    """The export plan of a row whose capsules say uint8 for bool (``export.bool = "uint8"``), from the model;
    the test skips where there is none to read as, or no kDLBool in the canonical header."""
    from dlbind._generated.adapters import ADAPTERS, ExportBool
    from dlbind.dtypes import BOOL
    from dlbind.sources import plan_of

    rows = [row for row in ADAPTERS.values() if row.export.bool_as == ExportBool.UINT8]
    if not rows:
        pytest.skip("no row of spec/adapters.toml says uint8 for bool")
    if BOOL.code < 0:
        pytest.skip("the canonical header has no kDLBool: uint8 stays uint8")
    return plan_of(rows[0])


class _Said:
    """An array of a bool-as-uint8 library as its dtype method names its dtype (the plan's ``bool_method``)."""

    def __init__(self, method: str, name: str) -> None:
        setattr(self, method, lambda: name)


def test_the_plan_says_what_a_uint8_import_is_read_as() -> None:
    """ExportPlan.uint8_read_as, which both builds' imports ask: kDLBool when the array's dtype method answers
    the row's bool name, -1 for any other name and for a plan without that fact."""
    from dlbind.dtypes import BOOL
    from dlbind.sources import export_plan

    plan = _bool_as_uint8_plan()
    assert plan.uint8_read_as(_Said(plan.bool_method, plan.bool_name)) == BOOL.code
    assert plan.uint8_read_as(_Said(plan.bool_method, plan.bool_name + "x")) == -1
    assert export_plan(np.ndarray).uint8_read_as(np.zeros(1, np.uint8)) == -1  # numpy's capsules say bool


def test_bool_said_as_uint8_is_read_as_bool_in_place() -> None:
    """A producer whose capsules say uint8 for bool (``export.bool = "uint8"``: onnxruntime) is read as bool by
    the import's finishing (``dlbind.tensor.from_capsule`` with its plan), in place: the struct's dtype code is
    rewritten where it lies, no second capsule."""
    from dlbind.dtypes import BOOL
    from dlbind.tensor import from_capsule

    plan = _bool_as_uint8_plan()
    a = np.array([0, 1, 1, 0], dtype=np.uint8)
    t = from_capsule(a.__dlpack__(), x=_Said(plan.bool_method, plan.bool_name), plan=plan)
    assert t.data_ptr == a.ctypes.data and t.dtype.code == BOOL.code
    assert np.from_dlpack(t).tolist() == [False, True, True, False]
    other = from_capsule(a.__dlpack__(), x=_Said(plan.bool_method, "uint8"), plan=plan)
    assert other.dtype.name == "uint8"  # a real uint8 stays uint8
    assert from_capsule(a.__dlpack__()).dtype.name == "uint8"  # no plan: nothing to finish


class _RefusesInWords:
    """A producer refusing max_version in the words of one binding of spec/adapters.toml's [[keyword_refusal]]."""

    def __init__(self, array: np.ndarray, words: str) -> None:
        self.array, self.words = array, words
        self.calls: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> object:
        self.calls.append({"stream": stream, **kwargs})
        if kwargs:
            raise TypeError(f"__dlpack__(): {self.words} (asked {sorted(kwargs)})")
        return self.array.__dlpack__(stream=stream)


def _keyword_refusals() -> tuple[str, ...]:
    from dlbind._generated.adapters import KEYWORD_REFUSALS

    return KEYWORD_REFUSALS


@pytest.mark.parametrize("words", _keyword_refusals())
def test_every_bindings_keyword_refusal_is_retried_the_older_way(words: str) -> None:
    """Issue 44: CPython's, nanobind's and pybind11's refusals of a keyword are asked again with stream only."""
    a = np.arange(4.0)
    p = _RefusesInWords(a, words)
    t = dlbind.from_dlpack(p)
    assert np.from_dlpack(t).tolist() == a.tolist()
    assert p.calls == [{"stream": None, "max_version": dlbind.DLPACK_VERSION}, {"stream": None}]
    with pytest.raises(BufferError, match="does not accept dl_device"):
        dlbind.from_dlpack(_RefusesInWords(a, words), device="cuda:0")


def test_an_unrelated_typeerror_propagates_after_one_call() -> None:
    p = _RefusesInWords(np.arange(4.0), "the array is haunted")
    with pytest.raises(TypeError, match="haunted"):
        dlbind.from_dlpack(p)
    assert len(p.calls) == 1


_EMPTY_LAYOUTS = [((0, 3), (0, 0)), ((3, 0), (7, 5)), ((2, 0, 4), (1, 1, 1)), ((0,), (9,))]


@pytest.mark.parametrize(("shape", "strides"), _EMPTY_LAYOUTS)
def test_a_tensor_without_elements_is_contiguous(shape: tuple[int, ...], strides: tuple[int, ...]) -> None:
    """A shape with a 0 in it has no element, so any strides are compact, as numpy's C-contiguous flag says (numpy
    exports ``np.zeros((0, 3))`` with strides (0, 0)): a target that views compact strides only views it (it had
    been refused under copy=False, or copied, 0 bytes); the backends' ``row_major`` says the same."""
    from dlbind._device_tensors import row_major
    from dlbind._generated.adapters import ADAPTERS, Layout
    from dlbind.bridges import needs_copy
    from dlbind.routes import make_route

    a = np.zeros(4, np.float32)
    t = dlbind.from_dlpack(dlbind.from_pointer(a.ctypes.data, shape, "float32", strides=strides, owner=a))
    assert t.strides == strides and t.is_contiguous() and row_major(shape, strides)
    assert dlbind.from_dlpack(np.zeros((0, 3), np.float32)).is_contiguous()
    compact = [row for row in ADAPTERS.values() if row.import_.layout == Layout.COMPACT and not row.import_.layout_nd]
    assert compact  # what the check below walks (jax, drjit, ... in today's table)
    route = make_route(compact[0], lambda x: x)
    assert needs_copy(route, t) is None
    transposed = dlbind.from_pointer(a.ctypes.data, (2, 2), "float32", strides=(1, 2), owner=a)  # elements: refused
    assert needs_copy(route, dlbind.from_dlpack(transposed)) == "strides that are not compact (row-major)"
