"""Bridges dlbind builds where a library's own DLPack surface falls short (issue 13).

- numpy exports no ml_dtypes dtype through ``__dlpack__`` (bfloat16, float8, ...) though its buffer
  protocol and array interface carry them: ``from_dlpack``/``convert`` fall back to those.
- ``numpy.from_dlpack`` imports no ml_dtypes dtype: ``convert(..., to="numpy")`` views them with
  ``numpy.asarray`` (``lacks_dtypes``/``view_with`` in spec/adapters.toml).
- jax refuses the buffer protocol for bfloat16: ``asdlpack`` falls back to its ``__dlpack__``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind._generated.tables import DTYPE_BY_NAME
from dlbind._libraries import named
from dlbind.conversion import ExplanationKind
from dlbind.crossing import undefined

ml_dtypes = pytest.importorskip("ml_dtypes")
torch = pytest.importorskip("torch")
jnp = pytest.importorskip("jax.numpy")

NAMES = ["bfloat16", "float8_e4m3fn", "float8_e5m2"]
VALUES = [0.0, 1.0, -2.0, 0.5, 3.0, -0.25]


def _np(name: str) -> np.ndarray:
    return np.array(VALUES, dtype=np.float32).astype(getattr(ml_dtypes, name))


def _torch(name: str) -> Any:
    return torch.tensor(VALUES, dtype=getattr(torch, name))


def _jax(name: str) -> Any:
    return jnp.asarray(VALUES, dtype=getattr(jnp, name))


MAKERS = {"numpy": _np, "torch": _torch, "jax": _jax}


def _values(x: Any) -> list[float]:
    if isinstance(x, dlbind.Tensor):
        x = np.asarray(x)
    if isinstance(x, torch.Tensor):
        return [float(v) for v in x.float().tolist()]
    return [float(v) for v in np.asarray(x).astype(np.float32).tolist()]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("src", list(MAKERS))
@pytest.mark.parametrize("dst", list(MAKERS))
def test_ml_dtypes_between_numpy_torch_jax(src: str, dst: str, name: str) -> None:
    x = MAKERS[src](name)
    out = dlbind.convert(x, to=dst)
    assert _values(out) == VALUES
    assert str(out.dtype).endswith(name), (out.dtype, name)


@pytest.mark.parametrize("name", NAMES)
def test_numpy_ml_dtypes_import_zero_copy(name: str) -> None:
    x = _np(name)
    t = dlbind.from_dlpack(x)  # numpy's __dlpack__ refuses; its buffer/array interface carries it
    assert t.dtype.name == name and t.data_ptr + t.byte_offset == x.ctypes.data
    y = dlbind.convert(x, to="torch")
    assert y.data_ptr() == x.ctypes.data  # zero-copy into torch
    back = dlbind.convert(y, to="numpy")
    assert back.dtype == x.dtype and back.ctypes.data == x.ctypes.data  # and back, viewed by numpy.asarray


def test_read_only_bfloat16_stays_read_only_into_numpy() -> None:
    x = _np("bfloat16")
    x.flags.writeable = False
    t = dlbind.from_dlpack(x)
    assert t.readonly
    out = dlbind.convert(t, to="numpy")
    assert not out.flags.writeable
    copied = dlbind.convert(t, to="numpy", copy=True)
    assert copied.flags.writeable and copied.ctypes.data != x.ctypes.data


def test_asdlpack_of_jax_bfloat16_uses_its_dlpack() -> None:
    x = _jax("bfloat16")
    t = dlbind.from_dlpack(dlbind.asdlpack(x))
    assert t.dtype.name == "bfloat16" and _values(t) == VALUES


def test_a_refusal_without_a_buffer_stays_the_producers() -> None:
    t = torch.zeros(3, requires_grad=True)
    with pytest.raises(BufferError, match=r"require gradient|requires_grad"):
        dlbind.from_dlpack(t, copy=True)  # the Python route: torch's own __dlpack__ refuses, nothing to fall back to


# every dtype numpy holds through ml_dtypes that dlbind names (spec/dtypes.toml)
ML_NAMES = [name for name in DTYPE_BY_NAME if hasattr(ml_dtypes, name)]


@pytest.mark.parametrize("to", ["torch", "jax"])
@pytest.mark.parametrize("name", ML_NAMES)
def test_a_dtype_the_targets_dtype_table_lacks_its_import_lacks(to: str, name: str) -> None:
    """What ``dlbind.dtype(..., to=)`` says a system has no dtype object of (its row's [dtypes], read from the
    installed release: torch 2.13 has no float8_e3m4) its route lacks too: explain refuses by name, and convert
    raises the same words, never the importer's own error ("Unsupported code 7")."""
    x = np.zeros(4, getattr(ml_dtypes, name))
    try:
        dlbind.dtype(name, to=to)
    except ValueError:
        has = False
    else:
        has = True
    assert (name in undefined(named(to))) is not has
    said = dlbind.explain(x, to)
    if has:
        return  # what it does then, test_explain_is_convert holds it to
    assert said.kind == ExplanationKind.REFUSED and f"cannot import {name}" in str(said), said
    with pytest.raises(BufferError) as raised:
        dlbind.convert(x, to=to)
    assert str(said) == f"refused: {raised.value}"


def test_an_empty_array_needs_no_alignment() -> None:
    # jax views only 64-byte aligned data, and takes an empty array at any address (nothing to read): explain said
    # a copy, and refused it under copy=False, where jax's own import takes it as it is
    buffer = np.zeros(128, dtype=np.uint8)  # an empty view at an unaligned address (a slice [k:k] keeps the base's)
    k = 1 if (buffer.ctypes.data + 1) % 64 else 2
    e = np.ndarray((0,), dtype=np.uint8, buffer=buffer, offset=k)
    assert e.ctypes.data % 64 and e.size == 0
    said = dlbind.explain(e, to="jax", copy=False)
    assert said.kind is not ExplanationKind.REFUSED and "aligned" not in str(said), said
    assert dlbind.convert(e, to="jax", copy=False).shape == (0,)
