"""Producer-side rules on every route, in both builds (issue 13).

1. torch refuses to export conjugate/negative-bit views, ``requires_grad`` tensors, sparse and quantized
   tensors with ``BufferError``; its C exchange table does not check. Every dlbind route gives torch's
   own ``BufferError`` (``export.guards`` in spec/adapters.toml; a table that raises falls back).
2. Arrays of an immutable library (jax) import read-only on every route, however the capsule came.
3. A producer whose ``__dlpack__`` refuses ``max_version`` is called once per import after the first
   (the accepted call is cached per type, weakly).
"""

from __future__ import annotations

import gc
import inspect
import re
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind

torch = pytest.importorskip("torch")


# -- 1. torch's export checks ------------------------------------------------------------------


def _conj() -> Any:
    return torch.tensor([1 + 1j, 2 - 3j]).conj()


def _neg_view() -> Any:
    x = torch._neg_view(torch.arange(3.0))
    assert x.is_neg()
    return x


def _grad() -> Any:
    return torch.zeros(3, requires_grad=True)


def _coo() -> Any:
    return torch.eye(3).to_sparse()


def _csr() -> Any:
    return torch.eye(3).to_sparse_csr()


def _quantized() -> Any:
    return torch.quantize_per_tensor(torch.ones(3), 0.1, 0, torch.quint8)


REFUSED = {
    "conj": _conj,
    "neg_view": _neg_view,
    "requires_grad": _grad,
    "sparse_coo": _coo,
    "sparse_csr": _csr,
    "quantized": _quantized,
}

ROUTES: dict[str, Callable[[Any], object]] = {
    "from_dlpack": lambda x: dlbind.from_dlpack(x),
    "from_dlpack(stream=None, allow_vector=False)": lambda x: dlbind.from_dlpack(x, stream=None, allow_vector=False),
    "asdlpack().__dlpack__()": lambda x: dlbind.asdlpack(x).__dlpack__(),
    "asdlpack().__dlpack__(max_version)": lambda x: dlbind.asdlpack(x).__dlpack__(max_version=(1, 3)),
    "compat().__dlpack__(max_version)": lambda x: dlbind.compat(x).__dlpack__(max_version=(1, 3)),
    "np.from_dlpack(asdlpack())": lambda x: np.from_dlpack(dlbind.asdlpack(x)),
    "convert(to=numpy)": lambda x: dlbind.convert(x, to="numpy"),
    "convert(to=numpy, copy=True)": lambda x: dlbind.convert(x, to="numpy", copy=True),
    "convert(to=numpy module)": lambda x: dlbind.convert(x, to=np),
    "convert(to=jax)": lambda x: dlbind.convert(x, to="jax"),
}


def _expected_message(x: Any) -> str:
    """torch's own message where its __dlpack__ refuses; dlbind's naming the guard where torch forgets
    (torch 2.13 exports negative-bit views with the bit dropped: the wrong values)."""
    try:
        x.__dlpack__()
    except BufferError as own:
        return re.escape(str(own))
    assert x.is_neg(), "torch exported what dlbind's guards refuse"
    return r"Tensor\.is_neg\(\) is true: its DLPack export would drop that \(wrong values\)"


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("case", sorted(REFUSED))
def test_torch_export_checks_hold_on_every_route(case: str, route: str) -> None:
    if route == "convert(to=jax)":
        pytest.importorskip("jax")
    with warnings.catch_warnings():  # torch warns that quantized and sparse CSR tensors are deprecated/beta
        warnings.simplefilter("ignore", UserWarning)
        x = REFUSED[case]()
    message = _expected_message(x)
    with pytest.raises(BufferError, match=message):
        ROUTES[route](x)


@pytest.mark.parametrize("target", ["numpy", "jax"])
def test_a_conjugate_view_never_converts_to_a_wrong_value(target: str) -> None:
    if target == "jax":
        pytest.importorskip("jax")
    x = _conj()
    with pytest.raises(BufferError, match="conjugate"):
        dlbind.convert(x, to=target)
    # resolved first, the right values come through
    assert np.asarray(dlbind.convert(x.resolve_conj(), to=target)).tolist() == [1 - 1j, 2 + 3j]


def test_guarded_tensors_pass_once_resolved() -> None:
    """The guards refuse only what torch refuses: the fixed-up tensors import, with their values."""
    assert np.asarray(dlbind.from_dlpack(_conj().resolve_conj())).tolist() == [1 - 1j, 2 + 3j]
    assert np.asarray(dlbind.from_dlpack(_neg_view().resolve_neg())).tolist() == [-0.0, -1.0, -2.0]
    assert np.asarray(dlbind.from_dlpack(_grad().detach())).tolist() == [0.0, 0.0, 0.0]
    assert np.asarray(dlbind.from_dlpack(_coo().to_dense())).tolist() == np.eye(3).tolist()
    plain = torch.arange(4.0)
    assert np.asarray(dlbind.convert(plain, to="numpy")).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_subclass_guard_in_python_is_read_and_a_change_to_the_class_is_seen() -> None:
    """A guard the subclass overrides in Python is read by name, not through torch's C method, and a
    change to the class after its first exchange (a new version tag) is read on the next one."""

    class Flagged(torch.Tensor):
        flagged = False

        def is_neg(self) -> bool:
            return type(self).flagged

    x = torch.arange(3.0).as_subclass(Flagged)
    assert np.asarray(dlbind.from_dlpack(x)).tolist() == [0.0, 1.0, 2.0]
    Flagged.flagged = True
    with pytest.raises(BufferError, match=r"is_neg\(\) is true"):
        dlbind.from_dlpack(x)
    with pytest.raises(BufferError, match=r"is_neg\(\) is true"):
        dlbind.convert(x, to="numpy")
    Flagged.is_neg = lambda self: False  # type: ignore[method-assign]
    assert np.asarray(dlbind.from_dlpack(x)).tolist() == [0.0, 1.0, 2.0]
    Flagged.requires_grad = property(lambda self: True)  # type: ignore[assignment]
    with pytest.raises(BufferError, match="require gradient"):  # torch's own refusal, as its __dlpack__ says
        dlbind.from_dlpack(x)


# -- 2. immutable producers ---------------------------------------------------------------------


def _jax_array() -> Any:
    jnp = pytest.importorskip("jax.numpy")
    return jnp.arange(4.0, dtype=jnp.float32)


def test_an_immutable_library_imports_read_only() -> None:
    a = _jax_array()
    assert dlbind.from_dlpack(a).readonly
    assert dlbind.from_dlpack(a, stream=None).readonly
    assert dlbind.from_dlpack(dlbind.compat(a)).readonly
    assert not np.asarray(dlbind.from_dlpack(a)).flags.writeable


def test_an_immutable_library_converts_to_numpy_read_only() -> None:
    a = _jax_array()
    out = dlbind.convert(a, to="numpy")
    assert not out.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        out[0] = 42.0
    assert np.asarray(a).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_immutable_library_converts_to_torch_as_a_copy() -> None:
    a = _jax_array()
    out = dlbind.convert(a, to="torch")
    assert out.tolist() == [0.0, 1.0, 2.0, 3.0]
    out[0] = 42.0  # torch has no read-only tensors: the bridge copied
    assert np.asarray(a).tolist() == [0.0, 1.0, 2.0, 3.0]


def test_an_immutable_library_exports_read_only_through_dlbind() -> None:
    a = _jax_array()
    for producer in (dlbind.asdlpack(a), dlbind.compat(a)):
        got = np.from_dlpack(producer)
        assert not got.flags.writeable
        assert got.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_a_copy_of_an_immutable_array_is_writable() -> None:
    a = _jax_array()
    out = dlbind.convert(a, to="numpy", copy=True)
    assert out.flags.writeable
    out[0] = 42.0
    assert np.asarray(a).tolist() == [0.0, 1.0, 2.0, 3.0]
    assert not dlbind.from_dlpack(a, copy=True).readonly


# -- 3. legacy producers: one call per import ----------------------------------------------------


def _legacy_class(calls: list[int], *, with_stream: bool) -> type:
    """A producer of an older spec: ``__dlpack__(stream=None)`` (or no keywords at all), legacy capsules.

    Every call counts, refused ones too (a keyword it does not know raises TypeError as Python would). Its
    ``__signature__`` says the signature it emulates, which dlbind reads to learn the type's convention (issue
    39: never from a method that takes ``**kwargs``, a wrapper's).
    """
    accepted = {"stream"} if with_stream else set()

    class Legacy:
        def __init__(self) -> None:
            self.a = np.arange(3.0)

        def __dlpack__(self, **kwargs: Any) -> object:
            calls[0] += 1  # never on the class: that would change its version tag
            for key in kwargs:
                if key not in accepted:
                    raise TypeError(f"__dlpack__() got an unexpected keyword argument '{key}'")
            return self.a.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    parameters += [inspect.Parameter(k, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None) for k in accepted]
    Legacy.__dlpack__.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    return Legacy


IMPORTS: dict[str, Callable[[Any], object]] = {
    "from_dlpack": lambda x: dlbind.from_dlpack(x),
    "from_dlpack(stream=None)": lambda x: dlbind.from_dlpack(x, stream=None),
    "asdlpack().__dlpack__(max_version)": lambda x: dlbind.from_dlpack(
        dlbind.asdlpack(x).__dlpack__(max_version=(1, 3))
    ),
    "compat().__dlpack__()": lambda x: dlbind.from_dlpack(dlbind.compat(x).__dlpack__()),
    "convert(to=numpy)": lambda x: dlbind.convert(x, to="numpy"),
}


@pytest.mark.parametrize("with_stream", [True, False], ids=["stream", "bare"])
@pytest.mark.parametrize("route", sorted(IMPORTS))
def test_a_legacy_producer_is_called_once_per_import(route: str, with_stream: bool) -> None:
    calls = [0]
    kind = _legacy_class(calls, with_stream=with_stream)
    first = IMPORTS[route](kind())
    assert np.asarray(first).tolist() == [0.0, 1.0, 2.0]
    assert calls[0] >= 1
    for n in range(1, 6):
        calls[0] = 0
        got = IMPORTS[route](kind())
        assert np.asarray(got).tolist() == [0.0, 1.0, 2.0]
        assert calls[0] == 1, f"import {n} called __dlpack__ {calls[0]} times"


def test_a_legacy_producer_learned_by_one_route_is_called_once_by_the_others() -> None:
    calls = [0]
    kind = _legacy_class(calls, with_stream=True)
    dlbind.from_dlpack(kind())
    for route in IMPORTS.values():
        calls[0] = 0
        route(kind())
        assert calls[0] == 1


def test_a_legacy_producer_still_refuses_what_it_cannot_honour() -> None:
    calls = [0]
    kind = _legacy_class(calls, with_stream=True)
    dlbind.from_dlpack(kind())
    with pytest.raises(BufferError, match="does not accept dl_device"):
        dlbind.from_dlpack(kind(), device="cuda:0")
    assert dlbind.from_dlpack(kind(), copy=True).flags & dlbind.Flags.IS_COPIED  # dlbind copies


def test_the_call_cache_keeps_no_class_alive() -> None:
    refs = []
    for _ in range(2000):
        kind = _legacy_class([0], with_stream=True)
        dlbind.from_dlpack(kind())
        dlbind.from_dlpack(kind())
        refs.append(weakref.ref(kind))
    del kind
    gc.collect()
    alive = sum(ref() is not None for ref in refs)
    assert alive == 0, f"{alive} of 2000 legacy producer classes are still alive"
