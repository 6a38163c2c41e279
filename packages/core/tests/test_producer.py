"""dlbind.asdlpack and dlbind.from_pointer: every source kind, and the __dlpack__ keyword rules."""

from __future__ import annotations

import array
import ctypes
import gc
import io
import mmap
import os
import re
import sys
import typing

import numpy as np
import pytest
import unnamed

import dlbind
from dlbind import DeviceType, Flags

NEWEST = dlbind.DLPACK_VERSION  # the version of the canonical header


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (b"abc", [97, 98, 99]),
        (bytearray(b"\x01\x02"), [1, 2]),
        (memoryview(bytes(range(10)))[::3], [0, 3, 6, 9]),
        (array.array("d", [1.5, 2.5]), [1.5, 2.5]),
        ((ctypes.c_int32 * 3)(7, 8, 9), [7, 8, 9]),
        (np.arange(6, dtype=np.int16).reshape(2, 3)[:, ::-1], [[2, 1, 0], [5, 4, 3]]),
    ],
)
def test_buffer_sources(source: object, expected: list[object]) -> None:
    assert np.from_dlpack(dlbind.asdlpack(source)).tolist() == expected


@pytest.mark.parametrize("value", [[1, 2], (1.5, 2.5), 3, 2.5, 1j, True, range(3)], ids=repr)
def test_a_list_or_a_scalar_is_pointed_at_asarray(value: object) -> None:
    """Python values hold no array memory: the way out is the target library's asarray, not raw memory."""
    with pytest.raises(TypeError) as raised:
        dlbind.asdlpack(value)
    text = str(raised.value)
    assert f"cannot export {type(value).__name__} as DLPack" in text
    assert "asarray" in text and "numpy.asarray(obj)" in text and "from_pointer" not in text, text


def test_an_object_without_memory_is_pointed_at_from_pointer() -> None:
    with pytest.raises(TypeError, match=r"use dlbind\.from_pointer for raw memory\)$"):
        dlbind.asdlpack(object())


def test_mmap_source() -> None:
    with mmap.mmap(-1, 16) as m:
        m[:4] = b"\x05\x06\x07\x08"
        out = np.from_dlpack(dlbind.asdlpack(m))
        assert out[:4].tolist() == [5, 6, 7, 8]
        del out


def test_readonly_rules() -> None:
    e = dlbind.asdlpack(b"xyz")
    t = dlbind.from_dlpack(e)
    assert t.readonly
    with pytest.raises(BufferError, match="legacy 'dltensor' capsule"):
        e.__dlpack__()  # legacy capsules cannot carry the read-only flag
    with pytest.raises(BufferError, match="readonly=False asked for"):
        dlbind.asdlpack(b"xyz", readonly=False)
    forced = dlbind.from_dlpack(dlbind.asdlpack(bytearray(3), readonly=True))
    assert forced.readonly


def test_versioned_and_legacy_capsules() -> None:
    e = dlbind.asdlpack(bytearray(4))
    assert repr(e.__dlpack__()).startswith('<capsule object "dltensor" ')
    assert repr(e.__dlpack__(max_version=(0, 8))).startswith('<capsule object "dltensor" ')
    assert repr(e.__dlpack__(max_version=(1, 0))).startswith('<capsule object "dltensor_versioned" ')
    assert repr(e.__dlpack__(max_version=(2, 0))).startswith('<capsule object "dltensor_versioned" ')


def test_strides_always_emitted_and_size1_kept() -> None:
    a = np.ones((3, 1, 2), dtype=np.float32)[:, :, ::2]
    t = dlbind.from_dlpack(dlbind.asdlpack(a))
    assert t.strides == tuple(s // 4 for s in a.strides)


def test_stream_and_device_keywords() -> None:
    e = dlbind.asdlpack(bytearray(4))
    assert e.__dlpack_device__() == (DeviceType.kDLCPU, 0)
    with pytest.raises(BufferError, match="stream must be None for cpu"):
        e.__dlpack__(stream=1)
    assert dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST, dl_device=(1, 0))).device == (DeviceType.kDLCPU, 0)
    with pytest.raises(BufferError, match="exports host data only to the CPU"):
        e.__dlpack__(max_version=NEWEST, dl_device=(2, 0))
    copied = dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST, copy=True))
    assert copied.flags & Flags.IS_COPIED


@pytest.mark.parametrize(
    ("device", "stream", "ok"),
    [
        ("cuda:0", None, True), ("cuda:0", 1, True), ("cuda:0", 2, True), ("cuda:0", -1, True),
        ("cuda:0", 0, False), ("cuda:0", -2, False), ("cuda:0", 12345, True),
        ("rocm:0", 0, True), ("rocm:0", 1, False), ("rocm:0", 2, False), ("rocm:0", None, True),
        ("cpu", 0, False),
    ],
)  # fmt: skip
def test_stream_argument_rules(device: str, stream: int | None, ok: bool) -> None:
    e = dlbind.from_pointer(0, (0,), "float32", device=device)
    if ok:
        dlbind.from_dlpack(e.__dlpack__(stream=stream, max_version=NEWEST))
    else:
        with pytest.raises(BufferError, match=f"stream {stream} is not valid|stream must be None"):
            e.__dlpack__(stream=stream, max_version=NEWEST)


def test_from_pointer_and_owner_lifetime() -> None:
    buf = (ctypes.c_float * 6)(*range(6))

    class Owner:
        freed = False

        def __del__(self) -> None:
            Owner.freed = True

    e = dlbind.from_pointer(ctypes.addressof(buf), (2, 3), "float32", strides=(1, 2), owner=Owner())
    out = np.from_dlpack(e)
    assert out.tolist() == [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
    del e
    gc.collect()
    assert not Owner.freed  # the numpy array still uses the memory
    del out
    gc.collect()
    assert Owner.freed


def test_array_interface_source() -> None:
    class Iface:
        def __init__(self, a: np.ndarray) -> None:
            self.a = a
            self.__array_interface__ = dict(a.__array_interface__)

    a = np.arange(12, dtype=np.uint16).reshape(3, 4)[1:, ::2]
    assert np.from_dlpack(dlbind.asdlpack(Iface(a))).tolist() == a.tolist()
    masked = Iface(a)
    masked.__array_interface__["mask"] = object()
    with pytest.raises(BufferError, match="with a mask"):
        dlbind.asdlpack(masked)


def test_cuda_array_interface_metadata() -> None:
    class Cai:
        __cuda_array_interface__: typing.ClassVar[dict[str, object]] = {
            "shape": (2, 3),
            "typestr": "<f4",
            "data": (4096, False),
            "strides": None,
            "version": 3,
        }

    with pytest.raises(BufferError, match="pass device_id="):
        dlbind.asdlpack(Cai())
    e = dlbind.asdlpack(Cai(), device_id=1)
    assert e.__dlpack_device__() == (DeviceType.kDLCUDA, 1)
    t = dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST, stream=-1))
    assert (t.shape, t.strides, t.data_ptr, t.device) == ((2, 3), (3, 1), 4096, (DeviceType.kDLCUDA, 1))
    with pytest.raises(BufferError, match=r"copying cuda memory to the host needs a dlbind backend: pip install"):
        e.__dlpack__(max_version=NEWEST, dl_device=(1, 0))


def test_dlpack_source_is_renegotiated() -> None:
    class LegacyOnly:
        def __init__(self) -> None:
            self.a = np.arange(4.0)

        def __dlpack__(self, stream: int | None = None) -> object:
            return self.a.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    e = dlbind.asdlpack(LegacyOnly())
    capsule = e.__dlpack__(max_version=NEWEST)  # a versioned consumer served by a legacy producer
    assert repr(capsule).startswith('<capsule object "dltensor_versioned"')
    assert np.from_dlpack(e).tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize(
    ("obj", "error", "message"),
    [
        (object(), TypeError, "cannot export object as DLPack"),
        (memoryview(b"abcd").cast("B", (2, 2)).obj, None, None),
        # a wide-character array ('u' is deprecated from Python 3.13, which adds 'w')
        (array.array("w" if sys.version_info >= (3, 13) else "u", "ab"), BufferError, "has no DLPack dtype"),
        (np.zeros(2, dtype=">f4"), BufferError, "not native-endian"),
    ],
)
def test_unexportable(obj: object, error: type[Exception] | None, message: str | None) -> None:
    if error is None:
        dlbind.asdlpack(obj)
        return
    with pytest.raises(error, match=message):
        dlbind.asdlpack(obj)


def test_from_pointer_validation() -> None:
    with pytest.raises(ValueError, match="negative dimension"):
        dlbind.from_pointer(1, (-1,), "uint8")
    with pytest.raises(ValueError, match="do not match shape"):
        dlbind.from_pointer(1, (2, 2), "uint8", strides=(1,))
    with pytest.raises(ValueError, match="NULL pointer can only describe an empty tensor"):
        dlbind.from_pointer(0, (2,), "uint8")
    with pytest.raises(ValueError, match="unknown device"):
        dlbind.from_pointer(1, (2,), "uint8", device=unnamed.device_name())  # no header's name (not "tpu")


def test_buffer_protocol_of_tensor() -> None:
    from dlbind._ffi import BUILD

    t = dlbind.from_dlpack(np.arange(6, dtype=np.int32).reshape(2, 3)[:, ::2])
    if BUILD != "compiled" and sys.version_info < (3, 12):
        with pytest.raises(TypeError, match="a bytes-like object is required"):  # CPython's words: before 3.12
            memoryview(t)  # a Python class cannot export buffers
        assert np.asarray(t).tolist() == [[0, 2], [3, 5]]  # the way out the docs name (numpy reads it all the same)
        return
    if BUILD != "compiled":  # the pure build's __buffer__ (3.12+) gives contiguous and 1-D tensors only
        with pytest.raises(BufferError, match="row-major contiguous or 1-D tensors only"):
            memoryview(t)
    else:
        m = memoryview(t)
        assert (m.format, m.shape, m.strides, m.readonly) == ("i", (2, 2), (12, 8), False)
        assert m.tolist() == [[0, 2], [3, 5]]
    ro = memoryview(dlbind.from_dlpack(dlbind.asdlpack(b"abc")))
    assert ro.readonly and ro.tobytes() == b"abc"
    # readinto asks for a writable buffer: refused (the C build's TypeError, the pure __buffer__'s BufferError)
    with pytest.raises((TypeError, BufferError), match=r"read-write|read-only"):
        io.BytesIO(b"x").readinto(dlbind.from_dlpack(dlbind.asdlpack(b"abc")))  # type: ignore[arg-type]
    target = dlbind.from_dlpack(dlbind.asdlpack(bytearray(3)))
    assert io.BytesIO(b"xyz").readinto(target) == 3  # type: ignore[arg-type]
    assert bytes(memoryview(target)) == b"xyz"


def test_unusual_keywords_reach_the_full_rules() -> None:
    # the compiled exporter answers the plain call in C and hands the rest to the Python rules
    e = dlbind.asdlpack(bytearray(8))
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        e.__dlpack__(bogus=1)
    with pytest.raises(TypeError, match="copy must be None, True or False"):
        e.__dlpack__(max_version=NEWEST, copy="yes")
    t = dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST, dl_device=("cpu", 0), copy=False))
    assert t.device == (DeviceType.kDLCPU, 0) and not t.flags & Flags.IS_COPIED


def test_cuda_array_interface_stream_needs_the_backend() -> None:
    class Cai:
        __cuda_array_interface__: typing.ClassVar[dict[str, object]] = {
            "shape": (4,), "typestr": "<f4", "data": (4096, False), "strides": None, "version": 3, "stream": 7,
        }  # fmt: skip

    e = dlbind.asdlpack(Cai(), device_id=0)
    from dlbind._backends import install_hint

    with pytest.raises(BufferError, match=re.escape(f"needs a dlbind backend: {install_hint('cuda')}")):
        e.__dlpack__(max_version=NEWEST, stream=1)  # the consumer's stream must wait for stream 7
    t = dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST, stream=-1))  # -1: the consumer asks for no sync
    assert t.device == (DeviceType.kDLCUDA, 0)


def test_backends_listing() -> None:
    from importlib.metadata import entry_points

    listing = dlbind.backends()
    installed = {ep.name for ep in entry_points(group="dlbind.backends")}
    assert set(listing) == installed  # every installed backend, available or not (packages/core/tests/test_backends.py)
    for name, status in listing.items():
        assert status.name == name and status.distribution == f"dlbind-{name}"
        assert status.available or status.reason


@pytest.mark.parametrize("name", ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn"])
def test_subbyte_numpy_arrays_are_exported_padded(name: str) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.array([0.5, 1.0, -2.0, 3.0], dtype=getattr(ml_dtypes, name))
    t = dlbind.from_dlpack(dlbind.asdlpack(a))
    assert t.dtype.bits == (4 if "float4" in name else 6)
    assert t.flags & Flags.IS_SUBBYTE_TYPE_PADDED and t.nbytes == 4
    back = np.asarray(t)
    assert back.dtype == a.dtype and back.tolist() == a.tolist()


def test_packed_subbyte_tensor_is_not_viewed_as_bytes() -> None:
    from faulty import make_capsule

    capsule, _ = make_capsule(code=dlbind.DataTypeCode.kDLFloat4_e2m1fn, bits=4, shape=(5,))
    t = dlbind.from_dlpack(capsule)
    assert t.nbytes == 3  # packed: two per byte, little bit-endian
    with pytest.raises(BufferError, match="packed below a byte"):
        np.asarray(t)


@pytest.mark.parametrize("make", [lambda: np.arange(3.0), lambda: bytearray(b"abc"), lambda: dlbind.asdlpack(b"ab")])
def test_device_id_is_never_ignored(make: typing.Any) -> None:
    """device_id= names a CUDA-interface GPU; elsewhere it must match the memory's device (it moves nothing)."""
    obj = make()
    assert dlbind.asdlpack(obj, device_id=0).__dlpack_device__() == (DeviceType.kDLCPU, 0)
    with pytest.raises(ValueError, match=r"asdlpack\(device_id=1\): this \w+ is on cpu:0; device_id names the GPU"):
        dlbind.asdlpack(obj, device_id=1)


# The pure build's exchange of a buffer, np.from_dlpack(asdlpack(x)), in Python frames: asdlpack (the buffer's
# export arguments made at once), Exporter.__dlpack__, the check of its max_version (export.versioned_asked),
# capsule.export_args, and the four that the capsule's destructor and the deleter cost (their callbacks, and the
# __del__ of the entries they drop: see capsule.py). It was 14 (Memory, _from_buffer, from_format, ... on every
# call); the compiled build runs none.
FRAMES_PER_EXCHANGE = 8


@pytest.mark.skipif(dlbind.ffi_build() != "pure", reason="the compiled build exchanges buffers in C")
def test_buffer_exchange_frames() -> None:
    """The Python frames of one pure exchange of a buffer, counted per exchange: the typical (median) one of
    ten. A finalizer that the interpreter runs inside one exchange (another test's objects, or dlbind's own
    capsule destructor of an earlier exchange: seen on 3.13, 71 frames for 10 exchanges) is not that
    exchange's, and cannot move the median; a change that lengthens every exchange does."""
    small = np.ones(1, dtype=np.float32)
    for _ in range(10):  # the caches of formats and strides filled
        np.from_dlpack(dlbind.asdlpack(small))
    package = os.path.dirname(dlbind.__file__) + os.sep
    per_exchange: list[list[str]] = []

    def profile(frame: typing.Any, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(package):  # dlbind's own frames only
            per_exchange[-1].append(f"{frame.f_code.co_filename.rpartition('/')[2]}:{frame.f_code.co_name}")

    gc.collect()
    gc.disable()
    try:
        for _ in range(10):
            per_exchange.append([])
            sys.setprofile(profile)
            np.from_dlpack(dlbind.asdlpack(small))
            sys.setprofile(None)
    finally:
        sys.setprofile(None)
        gc.enable()
    counts = sorted(len(calls) for calls in per_exchange)
    typical = min(per_exchange, key=len)
    assert counts[len(counts) // 2] <= FRAMES_PER_EXCHANGE, (counts, typical)


def _reading(make: typing.Callable[[], typing.Any]) -> tuple[typing.Any, ...]:
    """What dlbind reads of an exporter: its tensor's layout and address, or the refusal's type."""
    try:
        t = dlbind.from_dlpack(make())
    except (BufferError, TypeError, ValueError) as e:
        return ("refused", type(e).__name__)
    return (t.shape, t.strides, str(t.dtype), t.data_ptr + t.byte_offset, t.readonly, t.ndim)


def _readonly(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


NDARRAYS: dict[str, typing.Callable[[], np.ndarray]] = {
    **{
        f"{dt}": (lambda dt=dt: np.arange(12).astype(dt).reshape(3, 4))
        for dt in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "longlong",
                   "float16", "float32", "float64", "complex64", "complex128", "longdouble", "clongdouble")
    },
    "0-d": lambda: np.array(2.5),
    "empty": lambda: np.zeros((0, 3), dtype=np.int32),
    "empty, last": lambda: np.zeros((3, 0)),
    "a row": lambda: np.arange(3.0)[None, :],
    "a column, transposed": lambda: np.arange(3.0).reshape(1, 3).T,
    "fortran": lambda: np.ones((2, 3)).T,
    "fortran, odd unit stride": lambda: np.lib.stride_tricks.as_strided(
        np.ones((2, 1, 3), order="F"), strides=(8, 999 * 8, 16)),
    "c, odd unit stride": lambda: np.lib.stride_tricks.as_strided(np.ones((2, 3)), shape=(2, 1, 3),
                                                                   strides=(24, 777, 8)),
    "sliced": lambda: np.arange(24.0).reshape(4, 6)[1:, ::2],
    "reversed": lambda: np.arange(6, dtype=np.int16)[::-1],
    "transposed": lambda: np.arange(12.0).reshape(3, 4).T,
    "read-only": lambda: _readonly(np.arange(4.0)),
    "broadcast": lambda: np.broadcast_to(np.arange(3.0), (2, 3)),
    "big-endian": lambda: np.arange(4, dtype=">f4"),
    "5-d": lambda: np.zeros((1, 2, 1, 2, 3)),
    "unaligned stride": lambda: np.zeros(8, dtype=np.uint8).view(np.float32)[:1],
    "structured": lambda: np.zeros(2, dtype=[("a", "i4"), ("b", "f4")]),
    "object": lambda: np.array([None, 1], dtype=object),
    "datetime": lambda: np.zeros(2, dtype="datetime64[s]"),
}  # fmt: skip


@pytest.mark.parametrize("name", NDARRAYS)
def test_an_ndarray_reads_as_its_buffer_says(name: str) -> None:
    """The compiled asdlpack reads an exact numpy.ndarray from its struct (after a probe that compared the
    two readings); that reading must be the buffer protocol's, case by case (a memoryview always goes
    through the buffer protocol). The pure build answers through the buffer protocol in both cases."""
    probe = np.arange(3.0)
    assert np.from_dlpack(dlbind.asdlpack(probe)).tolist() == [0.0, 1.0, 2.0]
    if dlbind.ffi_build() == "compiled":
        from dlbind import _fastpath

        assert _fastpath.ndarray_struct() is True, "the probe of this numpy's array struct disagreed"
    a = NDARRAYS[name]()
    try:
        view = memoryview(a)
    except ValueError:  # numpy gives no buffer for this dtype (datetime64): neither does the struct reading
        assert _reading(lambda: dlbind.asdlpack(a))[0] == "refused"
        return
    assert _reading(lambda: dlbind.asdlpack(a)) == _reading(lambda: dlbind.asdlpack(view))
    assert _reading(lambda: dlbind.asdlpack(a, readonly=True)) == _reading(
        lambda: dlbind.asdlpack(view, readonly=True)
    )


def test_a_memoryview_given_can_be_released_while_its_memory_is_exported() -> None:
    """asdlpack holds a memoryview through a view of its own, in both builds (the compiled build had held the one
    given, whose release() then raised): the memory stays exported (its bytearray cannot be resized) until the
    exporter and its tensors are gone."""
    data = bytearray(range(8))
    given = memoryview(data)
    exporter = dlbind.asdlpack(given)
    given.release()  # raises BufferError where the exporter holds the view given
    with pytest.raises(BufferError):
        data.append(0)  # still exported
    t = dlbind.from_dlpack(exporter)
    del exporter
    gc.collect()
    assert np.asarray(t).tobytes() == bytes(range(8))
    with pytest.raises(BufferError):
        data.append(0)
    del t
    gc.collect()
    data.append(0)  # nothing holds it now
    assert len(data) == 9
