"""Descriptions of memory that lie (issue 38): every case the hostile-input review found, by name.

An object whose ``__array_interface__`` lies crashed the process on the copy paths (which copied before
the import's checks ran), a buffer shorter than its description was accepted, ``asdlpack`` exported what
``from_dlpack`` refuses, malformed dicts escaped as ``KeyError``/``IndexError``/``struct.error``, the pure
build's Tensor could be changed after it was made, a capsule raced between threads was consumed twice, and a
failed huge copy printed "Exception ignored". Each case here runs in a child process of the build under test
(a crash fails the one case, naming it) and must end in a clean exception of the spec's type. The same cases
run through both builds side by side in test_parity.py (the same type and message), and at random in
``fuzz/producers.py``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from typing import Any, ClassVar

import numpy as np
import pytest

import dlbind
from dlbind.conversion import ExplanationKind

LYING = textwrap.dedent(
    """
    import ctypes, json, sys
    import numpy as np
    import dlbind

    class Lying:
        def __init__(self, **iface):
            self.__array_interface__ = {"version": 3, "typestr": "<f8", **iface}

    store = (ctypes.c_char * 64)()
    ADDRESS = ctypes.addressof(store)
    x = eval(sys.argv[1])
    entries = {
        "from_dlpack": lambda: dlbind.from_dlpack(x),
        "from_dlpack(copy=True)": lambda: dlbind.from_dlpack(x, copy=True),
        "np.from_dlpack(asdlpack(x), copy=True)": lambda: np.from_dlpack(dlbind.asdlpack(x), copy=True),
        "convert(to=numpy, copy=True)": lambda: dlbind.convert(x, to="numpy", copy=True),
        "explain": lambda: dlbind.explain(x, to="numpy"),
        "asdlpack": lambda: dlbind.asdlpack(x),
    }
    out = {}
    for name, call in entries.items():
        try:
            call()
            out[name] = "ok"
        except Exception as exc:
            out[name] = type(exc).__name__ + ": " + str(exc)
    print(json.dumps(out))
    """
)

# the cases of the issue: the object, and the words every entry point's refusal must say
CASES = {
    "negative dimension": ("Lying(shape=(-5,), data=(ADDRESS, False))", "negative dimension"),
    "NULL pointer with elements": ("Lying(shape=(10,), data=(0, False))", "NULL data pointer with 10 elements"),
    "pointer -4096": ("Lying(shape=(10,), data=(-4096, False))", "outside the address space"),
    "pointer 2**65": ("Lying(shape=(10,), data=(2**65, False))", "outside the address space"),
    "pointer 2**64-8 wraps": ("Lying(shape=(10,), data=(2**64 - 8, False))", "past the ends of the address space"),
    "buffer shorter than described": ("Lying(shape=(100000,), data=bytearray(24))", "of a 24-byte buffer"),
    "2**62 elements": ("Lying(shape=(2**62,), data=(ADDRESS, False))", "do not fit in int64"),
    "too few strides": ("Lying(shape=(3, 2), strides=(8,), data=(ADDRESS, False))", "1 strides (1,)"),
    "offset past the buffer": ("Lying(shape=(3,), data=bytearray(24), offset=8)", "of a 24-byte buffer"),
    "strides past the buffer": ("Lying(shape=(3,), strides=(16,), data=bytearray(24))", "of a 24-byte buffer"),
    # numpy applies offset to a buffer only (it reads [0, 1] here): added to the pointer, it read [3, 4]
    "offset beside a pointer": ("Lying(shape=(2,), typestr='|u1', data=(ADDRESS, False), offset=3)",
                                "offset 3 with a pointer in data"),
    # NULL plus an offset passed the NULL check, and the copy read address 0x1000 (a crash)
    "offset beside a NULL pointer": ("Lying(shape=(2,), typestr='|u1', data=(0, False), offset=4096)",
                                     "offset 4096 with a pointer in data"),
    # read as 1-byte bool: [True, False] from the 4-byte [1, 1]; numpy refuses '|b4'
    "a bool of 4 bytes": ("Lying(shape=(2,), typestr='|b4', data=(ADDRESS, False))", "'|b4' has no DLPack dtype"),
    "no such byte order": ("Lying(shape=(2,), typestr='xf8', data=(ADDRESS, False))", "'xf8' is not one"),
    "a size of zero": ("Lying(shape=(2,), typestr='|u0', data=(ADDRESS, False))", "'|u0' is not one"),
    "a size in other digits": ("Lying(shape=(2,), typestr='|f\u00b2', data=(ADDRESS, False))", "is not one"),
    # a byte stride past int64 on a dimension of extent 1 or 0 (numpy refuses both): its element stride fitted, and
    # numpy's import of dlbind's export wrapped it
    "a byte stride past int64, extent 1": ("Lying(shape=(1, 2), strides=(2**64, 8), data=(ADDRESS, False))",
                                           "does not fit in int64 bytes"),
    "a byte stride past int64, extent 0": ("Lying(shape=(0, 2), strides=(2**63, 8), data=(ADDRESS, False))",
                                           "does not fit in int64 bytes"),
}


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DLBIND_PURE="1" if dlbind.ffi_build() == "pure" else "0")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env)


@pytest.mark.parametrize("case", list(CASES))
def test_a_lying_array_interface_is_refused_before_anything_reads_it(case: str) -> None:
    made, words = CASES[case]
    proc = _run(LYING, made)
    assert proc.returncode == 0, f"{case}: the process died ({proc.returncode}):\n{proc.stderr[-2000:]}"
    outcomes: dict[str, str] = json.loads(proc.stdout)
    for entry, outcome in outcomes.items():
        assert outcome.startswith("BufferError: ") and words in outcome, f"{case}, {entry}: {outcome}"
    assert "Exception ignored" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("stream", [5, 1.5, "x", [1]])
def test_a_host_array_interface_has_no_stream_to_read(stream: object) -> None:
    """``__array_interface__`` has no ``stream`` (numpy reads none): a ``"stream"`` key there is not read as the CUDA
    interface's (it made every export of the CPU memory wait for a "cpu stream", or raised int()'s words)."""
    values = np.arange(4.0)

    class WithStream:
        def __init__(self) -> None:
            self.__array_interface__ = {**values.__array_interface__, "stream": stream}

    x = WithStream()
    want = np.asarray(x)
    imports = (np.from_dlpack(dlbind.from_dlpack(x)), dlbind.convert(x, to="numpy"), np.from_dlpack(dlbind.asdlpack(x)))
    for got in imports:
        assert got.tobytes() == want.tobytes() and got.ctypes.data == values.ctypes.data
    assert dlbind.explain(x, to="numpy").kind == ExplanationKind.ZERO_COPY


class _Dtyped:
    """An object whose array interface says ``typestr`` of ``values``' bytes, beside a ``dtype`` attribute."""

    def __init__(self, values: np.ndarray, typestr: str, dtype: Any) -> None:
        self.values, self.dtype = values, np.dtype(dtype)
        self.__array_interface__ = {
            "version": 3, "shape": (values.nbytes // int(typestr[2:]),), "typestr": typestr,
            "data": (values.ctypes.data, False),
        }  # fmt: skip


@pytest.mark.parametrize(
    ("typestr", "dtype"),
    [("<u2", "float16"), ("|u1", "float64"), ("<f4", "int32")],
    ids=["float16 over uint16", "float64 over uint8 (64 bytes of 8)", "int32 over float32"],
)
def test_the_typestr_says_the_dtype_whatever_a_dtype_attribute_says(typestr: str, dtype: str) -> None:
    """The array interface's typestr says the elements, as numpy reads it: a ``dtype`` attribute that contradicts it
    is not read (it was, where it was a numpy dtype: other values, or a wider one that read past the data); only
    a dtype whose own typestr is the interface's (ml_dtypes' kinds, all ``'<V2'``) tells more."""
    x = _Dtyped(np.arange(1.0, 5.0, dtype=np.float64), typestr, dtype)
    want = np.asarray(x)
    assert want.dtype.str == typestr
    imports = (np.from_dlpack(dlbind.from_dlpack(x)), dlbind.convert(x, to="numpy"), np.from_dlpack(dlbind.asdlpack(x)))
    for got in imports:
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_an_ml_dtypes_array_is_read_as_its_dtype() -> None:
    """numpy's typestr of an ml_dtypes dtype is ``'<V2'``: the array's dtype says which (bfloat16 here)."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.arange(4).astype(ml_dtypes.bfloat16)
    assert a.__array_interface__["typestr"] == "<V2"
    for copy in (None, False):  # zero-copy both: copy=False was refused after numpy's own export refused it
        t = dlbind.from_dlpack(a, copy=copy)
        assert t.dtype.name == "bfloat16" and t.data_ptr == a.ctypes.data, copy


@pytest.mark.parametrize(
    ("iface", "kind"),
    [
        ({"version": 3, "typestr": "<f8", "data": (8, False)}, BufferError),  # no shape
        ({"version": 3, "shape": (2,), "data": (8, False)}, BufferError),  # no typestr
        ({"version": 3, "shape": (2,), "typestr": "f", "data": (8, False)}, BufferError),  # IndexError before
        ({"version": 3, "shape": (2,), "typestr": 8, "data": (8, False)}, TypeError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "data": (8,)}, BufferError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "data": ("x", False)}, TypeError),
        ({"version": 3, "shape": "ab", "typestr": "<f8", "data": (8, False)}, TypeError),
        ({"version": 3, "shape": (2.5,), "typestr": "<f8", "data": (8, False)}, TypeError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "strides": "x", "data": (8, False)}, TypeError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "data": (8, False), "offset": "8"}, TypeError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "data": 3.5}, TypeError),
        ({"version": 3, "shape": (2,), "typestr": "<f8", "data": (8, np.array([1, 2]))}, TypeError),  # no truth
    ],
)
def test_a_malformed_interface_raises_the_specs_types(iface: dict[str, Any], kind: type[Exception]) -> None:
    """Never a raw KeyError, IndexError or struct.error: a BufferError or TypeError that names the field."""

    class Malformed:
        __array_interface__ = iface

    for call in (dlbind.from_dlpack, dlbind.asdlpack, lambda x: dlbind.convert(x, to="numpy", copy=True)):
        with pytest.raises(kind) as info:
            call(Malformed())
        assert type(info.value) is kind, info.value
        assert "__array_interface__" in str(info.value) or "typestr" in str(info.value), info.value


@pytest.mark.parametrize("typestr", [">u1", ">i1", ">b1", "<u1", "=b1"])
def test_a_one_byte_typestr_has_no_byte_order(typestr: str) -> None:
    """numpy reads '>u1' as '|u1': one byte has no order to refuse."""
    a = np.arange(4, dtype=np.uint8)
    iface = {**a.__array_interface__, "typestr": typestr}
    held = type("Held", (), {"__array_interface__": iface, "base": a})()
    assert dlbind.from_dlpack(held).dtype == dlbind.from_dlpack(np.asarray(held)).dtype


def test_a_buffer_of_items_of_no_bytes_is_refused_by_name() -> None:
    """A ctypes array of an empty Structure (format 'T{}', item size 0): a BufferError naming it from every entry
    point, never ZeroDivisionError (nor a target blamed for it)."""

    class Empty(ctypes.Structure):
        _fields_: ClassVar[list[tuple[str, Any]]] = []

    x = (Empty * 3)()
    calls = [dlbind.asdlpack, dlbind.from_dlpack, lambda x: dlbind.convert(x, to="numpy", copy=True)]
    calls.append(lambda x: dlbind.explain(x, to="numpy"))
    for call in calls:
        with pytest.raises(BufferError, match="items of 0 bytes"):
            call(x)


def test_a_buffer_that_holds_its_description_is_read_from_it() -> None:
    buf = bytearray(np.arange(3.0).tobytes())

    class Fits:
        __array_interface__: ClassVar[dict[str, Any]] = {"version": 3, "shape": (3,), "typestr": "<f8", "data": buf}

    assert np.asarray(dlbind.from_dlpack(Fits())).tolist() == [0.0, 1.0, 2.0]
    assert np.from_dlpack(dlbind.asdlpack(Fits()), copy=True).tolist() == [0.0, 1.0, 2.0]
    assert dlbind.convert(Fits(), to="numpy", copy=True).tolist() == [0.0, 1.0, 2.0]


@pytest.mark.parametrize(
    ("args", "kind", "words"),
    [
        (("-4096", "(10,)"), BufferError, "outside the address space"),
        (("2**65", "(10,)"), BufferError, "outside the address space"),
        (("2**64 - 8", "(10,)"), BufferError, "past the ends of the address space"),
        (("ADDRESS", "(2**62,)"), BufferError, "do not fit in int64"),
        (("0", "(10,)"), ValueError, "NULL pointer"),
        (("ADDRESS", "(3, 2)", "strides=(1,)"), ValueError, "do not match shape"),
    ],
)
def test_from_pointer_refuses_what_the_import_would(args: tuple[str, ...], kind: type[Exception], words: str) -> None:
    """from_pointer's description passes the same validator (its own argument errors stay ValueError)."""
    import ctypes

    store = (ctypes.c_char * 64)()
    ptr, shape, *rest = (a.replace("ADDRESS", str(ctypes.addressof(store))) for a in args)
    call = f"dlbind.from_pointer({ptr}, {shape}, 'float64'{', ' + rest[0] if rest else ''})"
    with pytest.raises(kind, match=words):
        eval(call, {"dlbind": dlbind})


@pytest.mark.parametrize(
    ("dtype", "device", "words"),
    [
        ("dlbind.DType(1, 0)", "'cpu'", "kDLUInt:0 (code=1, bits=0) is not defined by DLPack"),
        ("dlbind.DType(6, 1)", "'cpu'", "this code takes bits 8"),
        ("dlbind.DType(2, 32, 0)", "'cpu'", "lanes=0"),
        ("dlbind.DType(300, 8)", "'cpu'", "DLDataType holds a code and bits of 0 to 255"),
        ("dlbind.DType(2, 32, 70000)", "'cpu'", "lanes of 0 to 65535"),
        ("'float32'", "(2, -1)", "invalid device id -1"),
        ("'float32'", "(1, 2**31)", "invalid device id 2147483648"),
        ("'float32'", "(2**31, 0)", "invalid device type 2147483648"),
    ],
)
def test_from_pointer_refuses_a_dtype_or_device_dlpack_has_not(dtype: str, device: str, words: str) -> None:
    """What the import refuses is never exported: no capsule for numpy or torch to take, and no OverflowError or
    struct.error when a field outgrows its C type."""
    import ctypes

    store = (ctypes.c_char * 64)()
    with pytest.raises(BufferError, match=re.escape(words)):
        eval(f"dlbind.from_pointer({ctypes.addressof(store)}, (4,), {dtype}, device={device})", {"dlbind": dlbind})


@pytest.mark.parametrize("kind", ["ndarray", "memoryview"])
@pytest.mark.parametrize("stride", [2**62, -(2**62)])
def test_a_strided_buffer_is_checked_before_it_is_exported(kind: str, stride: int) -> None:
    """The compiled build reads a buffer (and an exact ndarray) itself: the validator's extent rule holds there
    too, so both builds refuse what reaches past int64 or either end of the address space, in the same words."""
    base = np.zeros(4, np.uint8)
    strided = np.lib.stride_tricks.as_strided(base, shape=(3,), strides=(stride,))
    x = strided if kind == "ndarray" else memoryview(strided)
    with pytest.raises(BufferError, match=r"the elements of shape \(3,\) with strides"):
        np.from_dlpack(dlbind.asdlpack(x))
    with pytest.raises(BufferError, match=r"the elements of shape \(3,\) with strides"):
        dlbind.from_dlpack(x)


def test_a_buffer_of_more_dimensions_than_dlpack_allows_is_not_exported() -> None:
    testbuffer = pytest.importorskip("_testbuffer", reason="CPython's _testbuffer (its test package) is not here")
    many = testbuffer.ndarray([0], shape=[1] * 70, format="B")  # memoryview() refuses over 64 dimensions
    with pytest.raises(TypeError, match="cannot export ndarray as DLPack"):
        dlbind.asdlpack(many)


def test_a_cuda_array_interface_passes_the_same_validator() -> None:
    class Lying:
        __cuda_array_interface__: ClassVar[dict[str, Any]] = {
            "version": 3, "shape": (10,), "typestr": "<f8", "data": (2**64 - 8, False)
        }

    with pytest.raises(BufferError, match=r"__cuda_array_interface__ of Lying: .* past the ends of the address space"):
        dlbind.asdlpack(Lying(), device_id=0)


@pytest.mark.parametrize("name", ["shape", "strides", "_flags", "data_ptr", "_stream", "byte_offset", "version"])
def test_a_tensor_is_immutable(name: str) -> None:
    t = dlbind.from_dlpack(np.arange(3.0))
    before = getattr(t, name)
    with pytest.raises(AttributeError, match=f"dlbind.Tensor is immutable: '{name}' cannot be set"):
        setattr(t, name, (1 << 28,) if name in ("shape", "strides") else 5)
    with pytest.raises(AttributeError, match="cannot be deleted"):
        delattr(t, name)
    assert getattr(t, name) == before
    assert np.asarray(t).sum() == 3.0


@pytest.mark.parametrize("name", ["shape", "strides", "data_ptr", "byte_offset", "version"])
def test_what_a_tensor_says_of_its_memory_is_read_only_even_to_object_setattr(name: str) -> None:
    """``object.__setattr__`` passes ``Tensor.__setattr__`` by: the pure build's attributes refuse it as the
    compiled build's C members do (``AttributeError``), so no Python code can make a Tensor describe other memory."""
    t = dlbind.from_dlpack(np.arange(3.0))
    before = getattr(t, name)
    with pytest.raises(AttributeError, match=name):
        object.__setattr__(t, name, (1 << 28,) if name in ("shape", "strides") else 5)
    with pytest.raises(AttributeError, match=name):
        object.__delattr__(t, name)
    assert getattr(t, name) == before
    assert np.asarray(t).sum() == 3.0


@pytest.mark.parametrize("shape", [(0,), (0, 3), (2, 0)])
def test_numpy_views_an_empty_tensor_of_a_null_pointer_as_it_is(shape: tuple[int, ...]) -> None:
    """A tensor of no element may point at NULL (a copy of an empty tensor, an empty Arrow array): numpy's view of
    it keeps its read-only flag and its strides in both builds (given NULL, numpy made a writable array of its own:
    the compiled build's buffer now points at an aligned address nothing reads, as the pure build's interface)."""

    class Described:
        def __init__(self) -> None:
            self.__array_interface__ = {"shape": shape, "typestr": "<f4", "data": (0, True), "version": 3}

    t = dlbind.from_dlpack(dlbind.asdlpack(Described()))
    assert t.data_ptr == 0 and t.readonly
    a = np.asarray(t)
    assert a.shape == shape and not a.flags.writeable
    assert a.strides == tuple(s * 4 for s in t.strides), (a.strides, t.strides)


RACE = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    import dlbind
    sys.setswitchinterval(1e-6)
    wins = errors = 0
    other = []
    for _ in range(300):
        cap = np.arange(1000.0).__dlpack__(max_version=(1, 0))
        results = []
        def take():
            try:
                results.append(dlbind.from_dlpack(cap))
            except BufferError:
                results.append("refused")
            except Exception as exc:
                results.append(exc)
        threads = [threading.Thread(target=take) for _ in range(3)]
        for t in threads: t.start()
        for t in threads: t.join()
        wins += sum(isinstance(r, dlbind.Tensor) for r in results)
        other += [repr(r) for r in results if not isinstance(r, (dlbind.Tensor, str))]
        assert all(np.asarray(r).sum() == 499500.0 for r in results if isinstance(r, dlbind.Tensor))
    print(wins, other)
    """
)


def test_a_capsule_is_consumed_exactly_once_however_many_threads_race_on_it() -> None:
    """Three threads take one capsule, with a switch interval of a microsecond, 300 times: one wins each time,
    the others are refused (BufferError), no other exception escapes and no deleter runs twice (a double run
    frees numpy's memory twice: the process would die)."""
    proc = _run(RACE)
    assert proc.returncode == 0, f"the process died ({proc.returncode}):\n{proc.stderr[-2000:]}"
    wins, _, other = proc.stdout.strip().partition(" ")
    assert int(wins) == 300 and other == "[]", proc.stdout


HUGE = textwrap.dedent(
    """
    import numpy as np
    import dlbind
    import importlib.util
    huge = np.broadcast_to(np.float64(1), (2**20, 2**20))
    copies = [lambda: dlbind.from_dlpack(huge, copy=True)]
    if importlib.util.find_spec("torch") is not None:  # read-only data for torch: dlbind's own copy
        copies.append(lambda: dlbind.convert(huge, to="torch"))
    for copied in copies:
        try:
            copied()
        except MemoryError as exc:
            print("MemoryError", exc)
    """
)


def test_a_failed_huge_copy_raises_memory_error_and_nothing_else() -> None:
    """8 TiB asked for a copy: a MemoryError saying what failed (the compiled convert's said nothing), and no
    "Exception ignored" from dlbind's own objects after it."""
    proc = _run(HUGE)
    assert proc.returncode == 0 and proc.stdout.startswith("MemoryError"), (proc.stdout, proc.stderr[-2000:])
    said = proc.stdout.splitlines()
    assert said[0].startswith("MemoryError ") and len(said[0]) > len("MemoryError "), said
    if importlib.util.find_spec("torch") is not None:
        assert said[1:] == ["MemoryError cannot allocate 8796093022208 bytes for a copy"], said  # dlbind's, for torch
    assert "Exception ignored" not in proc.stderr, proc.stderr
