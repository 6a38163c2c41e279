from __future__ import annotations

import sys

import numpy as np
import pytest

import dlbind
from dlbind import DataTypeCode, DType, dtypes
from dlbind._ffi import BUILD

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize(
    ("np_dtype", "code", "bits"),
    [
        (np.bool_, DataTypeCode.kDLBool, 8),
        (np.int8, DataTypeCode.kDLInt, 8),
        (np.uint64, DataTypeCode.kDLUInt, 64),
        (np.float16, DataTypeCode.kDLFloat, 16),
        (np.float64, DataTypeCode.kDLFloat, 64),
        (np.complex64, DataTypeCode.kDLComplex, 64),
        (np.complex128, DataTypeCode.kDLComplex, 128),
        (ml_dtypes.bfloat16, DataTypeCode.kDLBfloat, 16),
        (ml_dtypes.float8_e4m3fn, DataTypeCode.kDLFloat8_e4m3fn, 8),
        (ml_dtypes.float8_e5m2, DataTypeCode.kDLFloat8_e5m2, 8),
        (ml_dtypes.float8_e8m0fnu, DataTypeCode.kDLFloat8_e8m0fnu, 8),
        (ml_dtypes.float4_e2m1fn, DataTypeCode.kDLFloat4_e2m1fn, 4),
        (ml_dtypes.float6_e2m3fn, DataTypeCode.kDLFloat6_e2m3fn, 6),
    ],
)
def test_numpy_round_trip(np_dtype: object, code: int, bits: int) -> None:
    dt = dtypes.from_numpy(np_dtype)
    assert (dt.code, dt.bits, dt.lanes) == (code, bits, 1)
    assert dt.to_numpy() == np.dtype(np_dtype)


def test_names_and_formats() -> None:
    assert dtypes.lookup("bfloat16") == DType(DataTypeCode.kDLBfloat, 16)
    assert DType(2, 32, 4).name == "float32x4"
    assert DType(99, 8).name == "code 99:8"
    assert dtypes.from_format("<i") == DType(DataTypeCode.kDLInt, 32)
    assert dtypes.from_format("Zd") == DType(DataTypeCode.kDLComplex, 128)
    assert DType(DataTypeCode.kDLBool, 8).format == "?"
    assert DType(DataTypeCode.kDLFloat4_e2m1fn, 4).nbytes(5) == 3  # packed
    assert DType(DataTypeCode.kDLFloat4_e2m1fn, 4).nbytes(5, padded=True) == 5


@pytest.mark.parametrize(
    "np_dtype",
    [
        "bool",
        "int8",
        "uint8",
        "int16",
        "uint16",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    ],
)
def test_exported_format_is_numpys(np_dtype: str) -> None:
    # what dlbind exports is the format numpy gives the same dtype (int64: "l", not "q"), so a reader
    # that maps formats to types (mpi4py: "l" is MPI.LONG, "q" MPI.LONG_LONG) sees one type for both
    a = np.zeros(3, dtype=np_dtype)
    assert dtypes.from_numpy(a.dtype).format == memoryview(a).format
    t = dlbind.from_dlpack(a)
    # the pure build's __buffer__ (Python 3.12+, through memoryview.cast) has no complex formats
    if BUILD == "compiled" or (sys.version_info >= (3, 12) and a.dtype.kind != "c"):
        assert memoryview(t).format == memoryview(a).format  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [">i", "!d", "T{i:a:}", "x"])
def test_formats_refused(bad: str) -> None:
    with pytest.raises(BufferError):
        dtypes.from_format(bad)


def test_numpy_refusals() -> None:
    with pytest.raises(BufferError, match="not native-endian"):
        dtypes.from_numpy(np.dtype(">f4"))
    with pytest.raises(BufferError, match="no DLPack equivalent"):
        dtypes.from_numpy(np.dtype("U3"))
    with pytest.raises(ValueError, match="unknown DLPack dtype name"):
        dtypes.lookup("float128")


# -- the legacy reading of sub-byte dtypes (spec/dtypes.toml [[legacy]]) ----------------------------------


def _raw_capsule(
    data: np.ndarray, dtype: tuple[int, int, int], *, versioned: bool, flags: int = 0, count: int | None = None
) -> object:
    """A capsule over ``data``'s bytes that says ``dtype`` (as a foreign producer would make it), of
    ``count`` elements (default: one per byte)."""
    from dlbind import capsule

    shape = (data.size if count is None else count,)
    strides = (1,)
    address = data.__array_interface__["data"][0]
    return capsule.export(address, shape, strides, dtype, (1, 0), 0, data, versioned=versioned, flags=flags)


def test_a_legacy_one_bit_uint_is_one_bool_per_byte() -> None:
    import dlbind

    stored = np.array([1, 0, 0, 1, 1, 0, 1, 0, 1], dtype=np.uint8)  # MXNet's bool: a byte per element
    t = dlbind.from_dlpack(_raw_capsule(stored, (DataTypeCode.kDLUInt, 1, 1), versioned=False))
    assert t.dtype == DType(DataTypeCode.kDLBool, 8)
    assert t.nbytes == 9
    got = np.from_dlpack(t)
    assert got.dtype == np.bool_
    assert got.tolist() == stored.astype(bool).tolist()
    assert np.shares_memory(got, stored)


def test_a_versioned_one_bit_uint_follows_the_header() -> None:
    import dlbind

    packed = np.array([0b1001_1001, 0b1], dtype=np.uint8)
    t = dlbind.from_dlpack(_raw_capsule(packed, (DataTypeCode.kDLUInt, 1, 1), versioned=True, count=9))
    assert t.dtype == DType(DataTypeCode.kDLUInt, 1)
    assert t.nbytes == 2  # nine packed bits


def test_a_legacy_capsule_of_packed_one_bit_data_is_refused() -> None:
    import dlbind

    packed = np.array([0b1001_1001, 0b1], dtype=np.uint8)
    t = dlbind.from_dlpack(_raw_capsule(packed, (DataTypeCode.kDLUInt, 1, 1), versioned=True, count=9))
    with pytest.raises(BufferError, match=r"packed kDLUInt:1 data .* 'dltensor' capsule: .*one element per byte"):
        t.__dlpack__()
    again = dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3)))  # a versioned capsule says it as it is
    assert (again.dtype, again.shape, again.nbytes) == (t.dtype, (9,), 2)


def test_one_bit_data_stored_a_byte_per_element_goes_in_a_legacy_capsule_as_bool() -> None:
    import dlbind
    from dlbind import Flags

    stored = np.array([0, 1, 1], dtype=np.uint8)
    padded = int(Flags.IS_SUBBYTE_TYPE_PADDED)
    t = dlbind.from_dlpack(_raw_capsule(stored, (DataTypeCode.kDLUInt, 1, 1), versioned=True, flags=padded))
    assert t.dtype == DType(DataTypeCode.kDLUInt, 1) and t.nbytes == 3
    back = dlbind.from_dlpack(t.__dlpack__())  # legacy: read one bool per byte
    assert back.dtype == DType(DataTypeCode.kDLBool, 8)
    assert np.from_dlpack(back).tolist() == [False, True, True]


def test_other_subbyte_data_stored_a_byte_per_element_stays_out_of_legacy_capsules() -> None:
    import dlbind

    t = dlbind.from_dlpack(dlbind.asdlpack(np.array([1, -2, 3], dtype=ml_dtypes.float4_e2m1fn)))
    assert t.dtype.bits == 4 and t.nbytes == 3
    with pytest.raises(BufferError, match=r"float4_e2m1fn data stored one element per byte cannot .* legacy"):
        t.__dlpack__()
    again = dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    assert again.flags & dlbind.Flags.IS_SUBBYTE_TYPE_PADDED and again.nbytes == 3


@pytest.mark.parametrize("padded", [False, True])
@pytest.mark.parametrize(("bits", "lanes"), [(1, 1), (2, 1), (4, 1), (4, 2), (6, 1), (8, 1), (16, 2), (32, 4), (64, 1)])
def test_the_validator_counts_bytes_as_a_dtype_does(bits: int, lanes: int, padded: bool) -> None:
    """The validator's byte count (``dlbind.validate.element_bytes``, which the int64 checks use) and
    ``DType.nbytes`` (what users read) are one rule: packed below a byte unless padded."""
    from dlbind import validate

    dtype = DType(DataTypeCode.kDLUInt, bits, lanes)
    for count in (0, 1, 3, 7, 8, 9, 15, 16, 17, 1000):
        assert validate.element_bytes(count, bits * lanes, padded) == dtype.nbytes(count, padded=padded)


class _Described:
    """Memory said only by an ``__array_interface__`` (kept beside what owns it)."""

    def __init__(self, interface: dict[str, object], owner: object) -> None:
        self.__array_interface__ = interface
        self.owner = owner


@pytest.mark.parametrize("code_bits", sorted(dtypes.DTYPE_FORMATS), ids=lambda cb: DType(*cb).name)
def test_tensor_array_interface_typestr_is_v3(code_bits: tuple[int, int]) -> None:
    """A Tensor's ``__array_interface__`` says its dtype as the protocol's v3 typestr (byte order, kind, size in
    bytes), for every dtype the header's model gives a buffer format: dlbind's own validator takes it (``asdlpack``
    of a Tensor of a pure build before Python 3.12 goes that way), and numpy reads the same elements through it."""
    dt = DType(*code_bits)
    a = (np.arange(12) % 2).astype(dt.to_numpy()).reshape(3, 4)[:, ::2]  # strided: no contiguous shortcut
    t = dlbind.from_dlpack(a)
    typestr = t.__array_interface__["typestr"]
    assert typestr == dt.typestr and typestr[0] in "<>|" and int(typestr[2:]) == dt.itemsize, typestr
    assert np.dtype(typestr) == a.dtype
    again = dlbind.from_dlpack(_Described(t.__array_interface__, t))
    assert again.dtype == dt and np.array_equal(np.asarray(again), a)
    assert np.array_equal(np.from_dlpack(dlbind.asdlpack(t)), a)


def test_typestr_refused_where_no_buffer_format_names_the_dtype() -> None:
    for dt, name in ((DType(DataTypeCode.kDLBfloat, 16), "bfloat16"), (DType(DataTypeCode.kDLFloat, 32, 4), "x4")):
        with pytest.raises(ValueError, match=name):
            assert dt.typestr is None


def test_a_dtype_set_holds_the_dtypes_its_patterns_name_with_their_lanes() -> None:
    """``DTypeSet`` (what a Route keeps of the dtypes its importer lacks) answers as the name patterns do, for
    every dtype the model names, scalar and vector, asked by a DType or a bare ``(code, bits, lanes)``; with
    ``only``, every dtype outside those names too."""
    from fnmatch import fnmatchcase

    patterns = ("float8_*", "int[124]", "complex*")  # spec/adapters.toml's spellings: a prefix, a class, a family
    lacked = dtypes.DTypeSet(patterns)
    first, *_ = names = list(dtypes.DTYPE_BY_NAME)
    outside = dtypes.DTypeSet((), only=names[1:])
    held = 0
    for code, bits in dtypes.DTYPE_BY_NAME.values():
        for lanes in (1, 2, 4):
            d = DType(code, bits, lanes)
            named = any(fnmatchcase(d.name, p) for p in patterns)
            assert lacked[d] is lacked[tuple(d)] is dtypes.named_in(d, patterns), d  # asked twice: kept
            assert named <= lacked[d], d  # a matching name is always held (an unnamed width may be too)
            assert outside[d] is (d.name == first or lanes != 1), d
            held += lacked[d]
    assert held, "no dtype of the model matched: the patterns above no longer name any"
    exact = dtypes.DTypeSet([first])  # an exact name holds its scalar only
    scalar = DType(*dtypes.DTYPE_BY_NAME[first])
    assert exact[scalar] and not exact[scalar.code, scalar.bits, 2]
    assert not dtypes.DTypeSet()[scalar]
