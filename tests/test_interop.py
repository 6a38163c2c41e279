"""Interop with real libraries, both directions: numpy, torch, jax, array-api-strict, tvm-ffi.

Each case builds a numpy reference array, hands it to the peer, and checks values, shape, dtype and
zero-copy-ness (where the peer shares memory) on the way through dlbind in both directions.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind

ml_dtypes = pytest.importorskip("ml_dtypes")


def _cases() -> dict[str, Callable[[], np.ndarray]]:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    return {
        "contiguous": lambda: base.copy(),
        "transposed": lambda: base.copy().T,
        "negative-stride": lambda: base.copy()[::-1, ::2],
        "zero-size": lambda: np.zeros((0, 3), dtype=np.float32),
        "0-d": lambda: np.array(3.5, dtype=np.float32),
        "size-1-dims": lambda: base.copy().reshape(4, 1, 6)[:, :, ::3],
        "offset-view": lambda: base.copy()[1:, 2:],
    }


CASES = _cases()
DTYPES = [
    "bool",
    "int8",
    "uint8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
    "bfloat16",
]


def _array(dtype: str) -> np.ndarray:
    np_dtype = np.dtype(getattr(ml_dtypes, dtype)) if dtype == "bfloat16" else np.dtype(dtype)
    return (np.arange(12) % 3).astype(np_dtype).reshape(3, 4)


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype
    assert a.tobytes() == b.tobytes() if a.dtype.kind == "V" else np.array_equal(a, b)


# -- numpy -----------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(CASES))
def test_numpy_both_ways(case: str) -> None:
    a = CASES[case]()
    b = np.from_dlpack(dlbind.asdlpack(a))
    _same(a, b)
    t = dlbind.from_dlpack(a)
    # a zero-size array's strides are free (numpy before 2.3 exports others than .strides says)
    assert t.shape == a.shape and (t.byte_strides == a.strides or a.size == 0)
    _same(np.from_dlpack(t), a)
    if a.size:
        assert np.shares_memory(np.from_dlpack(t), a)


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_dtypes(dtype: str) -> None:
    a = _array(dtype)
    t = dlbind.from_dlpack(dlbind.asdlpack(a))
    assert t.dtype == dlbind.dtypes.from_numpy(a.dtype)
    _same(np.asarray(t), a)
    if dtype != "bfloat16":  # numpy's own from_dlpack does not know bfloat16
        _same(np.from_dlpack(t), a)


def test_numpy_readonly_both_ways() -> None:
    a = np.arange(4.0)
    a.flags.writeable = False
    t = dlbind.from_dlpack(a)
    assert t.readonly
    assert not np.from_dlpack(t).flags.writeable
    assert not np.from_dlpack(dlbind.asdlpack(a)).flags.writeable


def test_numpy_legacy_capsule() -> None:
    a = np.arange(4.0)
    t = dlbind.from_dlpack(a.__dlpack__())
    assert t.version is None
    _same(np.from_dlpack(t), a)


# -- torch -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch() -> Any:
    return pytest.importorskip("torch")


@pytest.mark.parametrize("case", [c for c in CASES if c != "negative-stride"])
def test_torch_both_ways(torch: Any, case: str) -> None:
    a = CASES[case]()
    x = torch.from_dlpack(dlbind.asdlpack(a))
    _same(x.numpy(), a)
    if a.size:
        assert x.data_ptr() == a.__array_interface__["data"][0]
    t = dlbind.from_dlpack(x)
    assert t.shape == tuple(x.shape) and t.strides == tuple(x.stride())
    _same(np.from_dlpack(t), a)
    y = torch.from_dlpack(t)
    assert torch.equal(x, y)


@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_dtypes(torch: Any, dtype: str) -> None:
    a = _array(dtype)
    x = torch.from_dlpack(dlbind.asdlpack(a))
    t = dlbind.from_dlpack(x)
    assert t.dtype == dlbind.dtypes.from_numpy(a.dtype)
    _same(np.asarray(t), a)


def test_torch_byte_offset_tensor(torch: Any) -> None:
    x = torch.arange(10, dtype=torch.float64)[3:7]
    t = dlbind.from_dlpack(x)
    assert np.asarray(t).tolist() == [3.0, 4.0, 5.0, 6.0]


def test_readonly_reaches_torch_with_the_flag_set(torch: Any) -> None:
    # torch has no read-only tensors; the spec lets a consumer ignore the flag, and torch does.
    e = dlbind.asdlpack(b"abcd")
    capsule = e.__dlpack__(max_version=dlbind.DLPACK_VERSION)
    assert dlbind.from_dlpack(capsule).readonly
    assert torch.from_dlpack(e).tolist() == [97, 98, 99, 100]


# -- jax -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jnp() -> Any:
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)  # else jax narrows int64/float64 to 32 bits on import
    return pytest.importorskip("jax.numpy")


@pytest.mark.parametrize("case", [c for c in CASES if c not in ("negative-stride",)])
def test_jax_both_ways(jnp: Any, case: str) -> None:
    a = np.ascontiguousarray(CASES[case]())  # jax imports row-major only
    j = jnp.from_dlpack(dlbind.asdlpack(a))
    _same(np.asarray(j), a)
    t = dlbind.from_dlpack(j)
    assert t.shape == a.shape
    _same(np.from_dlpack(t), a)


@pytest.mark.parametrize("dtype", [d for d in DTYPES if d not in ("complex128",)])
def test_jax_dtypes(jnp: Any, dtype: str) -> None:
    a = _array(dtype)
    j = jnp.from_dlpack(dlbind.asdlpack(a))
    t = dlbind.from_dlpack(j)
    _same(np.asarray(t), np.asarray(j))
    _same(np.asarray(t), a)


# -- array-api-strict -------------------------------------------------------------------------


def test_array_api_strict_both_ways() -> None:
    xp = pytest.importorskip("array_api_strict")
    a = np.arange(6.0).reshape(2, 3)
    x = xp.from_dlpack(dlbind.asdlpack(a))
    t = dlbind.from_dlpack(x)
    _same(np.from_dlpack(t), a)
    y = xp.from_dlpack(t)
    assert xp.all(x == y)


# -- tvm-ffi ---------------------------------------------------------------------------------


@pytest.mark.parametrize("case", [c for c in CASES])
def test_tvm_ffi_both_ways(case: str) -> None:
    tvm_ffi = pytest.importorskip("tvm_ffi")
    a = CASES[case]()
    tv = tvm_ffi.from_dlpack(dlbind.asdlpack(a))
    t = dlbind.from_dlpack(tv)
    assert t.shape == a.shape
    _same(np.from_dlpack(t), a)
    _same(np.from_dlpack(tvm_ffi.from_dlpack(t)), a)


def test_no_leaks_across_libraries() -> None:
    from dlbind import capsule

    gc.collect()
    before = capsule.stats()
    a = np.arange(8.0)
    for _ in range(50):
        np.from_dlpack(dlbind.asdlpack(a))
        dlbind.from_dlpack(dlbind.asdlpack(a))
    gc.collect()
    exports, deleted = capsule.stats()
    assert exports - before[0] == 100 and deleted - before[1] == 100


# -- legacy capsules from every peer -----------------------------------------------------------


def test_legacy_capsules_from_peers(torch: Any, jnp: Any) -> None:
    tvm_ffi = pytest.importorskip("tvm_ffi")
    sources = {
        "numpy": np.arange(4.0),
        "torch": torch.arange(4.0, dtype=torch.float64),
        "jax": jnp.arange(4.0),
        "tvm_ffi": tvm_ffi.from_dlpack(np.arange(4.0)),
    }
    for name, x in sources.items():
        t = dlbind.from_dlpack(x.__dlpack__())  # no max_version: a legacy "dltensor" capsule
        assert t.version is None, name
        assert np.asarray(t).tolist() == [0.0, 1.0, 2.0, 3.0], name


def test_legacy_consumers_of_dlbind(torch: Any) -> None:
    # A consumer that only knows legacy capsules (no max_version) still gets writable data.
    e = dlbind.asdlpack(bytearray(b"\x01\x02\x03"))
    t = dlbind.from_dlpack(e.__dlpack__())
    assert t.version is None and not t.readonly
    assert torch.utils.dlpack.from_dlpack(e.__dlpack__()).tolist() == [1, 2, 3]


# -- byte_offset and dtype coverage for every consumer --------------------------------------------


def _torch_to_numpy(torch: Any, x: Any) -> np.ndarray:
    if x.dtype == torch.bfloat16:  # Tensor.numpy() has no bfloat16: reinterpret the bits
        return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return x.numpy()


def _consumers() -> dict[str, Callable[[object], np.ndarray]]:
    out: dict[str, Callable[[object], np.ndarray]] = {"numpy": lambda e: np.asarray(np.from_dlpack(e))}
    try:
        import torch

        out["torch"] = lambda e: _torch_to_numpy(torch, torch.from_dlpack(e))
    except ImportError:
        pass
    try:
        import jax

        jax.config.update("jax_enable_x64", True)
        out["jax"] = lambda e: np.asarray(jax.numpy.from_dlpack(e))
    except ImportError:
        pass
    try:
        import tvm_ffi

        out["tvm_ffi"] = lambda e: np.from_dlpack(tvm_ffi.from_dlpack(e))
    except ImportError:
        pass
    try:
        import array_api_strict as xp

        out["array_api_strict"] = lambda e: np.asarray(xp.from_dlpack(e)._array)
    except ImportError:
        pass
    return out


CONSUMERS = _consumers()


@pytest.mark.parametrize("consumer", list(CONSUMERS))
def test_byte_offset_export_to(consumer: str) -> None:
    src = np.arange(8, dtype=np.float32)
    e = dlbind.from_pointer(src.ctypes.data, (3,), "float32", byte_offset=8, owner=src)
    assert CONSUMERS[consumer](e).tolist() == [2.0, 3.0, 4.0]


# dtypes each consumer imports from DLPack (checked against the libraries, not assumed)
CONSUMER_DTYPES = {
    "numpy": [d for d in DTYPES if d != "bfloat16"],
    "torch": DTYPES,
    "jax": DTYPES,
    "tvm_ffi": [d for d in DTYPES if d != "bfloat16"],
    "array_api_strict": [d for d in DTYPES if d not in ("bfloat16", "float16")],  # not in the standard
}


@pytest.mark.parametrize(("consumer", "dtype"), [(c, d) for c in CONSUMERS for d in CONSUMER_DTYPES[c]])
def test_dtype_export_to(consumer: str, dtype: str) -> None:
    a = _array(dtype)
    _same(CONSUMERS[consumer](dlbind.asdlpack(a)), a)


def test_torch_vector_dtype_comes_back_unchanged(torch: Any) -> None:
    """torch's float4_e2m1fn_x2 is a vector dtype (lanes 2): dlbind carries it back to torch unchanged (issue 22,
    as torch's own test_dlpack.py expects), and a target without vector dtypes refuses it by name."""
    if not hasattr(torch, "float4_e2m1fn_x2"):
        pytest.skip(f"torch {torch.__version__} has no float4_e2m1fn_x2")
    x = torch.arange(4, dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    t = dlbind.from_dlpack(x)
    assert (t._bits, t._lanes) == (4, 2)
    for back in (torch.from_dlpack(t), torch.from_dlpack(dlbind.asdlpack(x)), dlbind.convert(t, to="torch")):
        assert back.dtype == torch.float4_e2m1fn_x2 and back.view(torch.uint8).tolist() == [0, 1, 2, 3]
    with pytest.raises(BufferError, match="numpy takes no vector dtypes"):
        dlbind.convert(t, to="numpy")


@pytest.mark.parametrize("lanes", [2, 4])
def test_torch_refuses_vector_dtypes_but_its_own_as_explain_says(torch: Any, lanes: int) -> None:
    """torch's importer takes one vector dtype (its row's ``lanes``: float4_e2m1fn_x2); any other (float32x4) is
    refused by name, by explain as by convert (explain said zero-copy, and torch then raised "ATen does not
    support lanes != 1"), negative strides (a copy first) too."""
    from dlbind.conversion import ExplanationKind

    a = np.zeros(16, np.float32)
    vector = dlbind.DType(int(dlbind.DataTypeCode.kDLFloat), 32, lanes)
    t = dlbind.from_pointer(a.ctypes.data, (16 // lanes,), vector, owner=a)
    flipped = dlbind.from_pointer(
        a.ctypes.data + (16 // lanes - 1) * 4 * lanes, (16 // lanes,), vector, strides=(-1,), owner=a
    )
    for x in (t, flipped):
        said = dlbind.explain(x, "torch")
        assert said.kind == ExplanationKind.REFUSED and f"float32x{lanes}" in said.text, said
        with pytest.raises(BufferError) as refused:
            dlbind.convert(x, to="torch")
        assert str(refused.value) == said.text.removeprefix("refused: ")
        assert refused.value.__cause__ is None  # torch was not asked
