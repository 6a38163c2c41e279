"""Dtypes cross systems too (issue 43): ``dlbind.dtype(d, to=system)`` makes each installed system's own dtype
object of every dtype of spec/dtypes.toml it has, and reads it back, in each interop cell for the systems it
installs (and in the core's tests for those installed there), in both builds.

What is held, per system its row's ``[dtypes]`` makes objects for:

- a round trip: ``dlbind.dtype(made)`` is the dtype it was made of, and making it again gives the same object;
- one type per system (or classes of one base: numpy's dtype classes, mindspore's ``Float``, ``Int`` ...);
- across systems: a dtype read from one system's object and made for another is that system's own object;
- the object is the system's own: an array of that dtype, converted to the system, reports it as its dtype;
- a dtype the system lacks is a ``ValueError`` naming it and what the system has.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _suite import ALL_DTYPES

import dlbind
from dlbind._generated.adapters import ADAPTERS, DtypeForm
from dlbind._generated.tables import DTYPE_BY_NAME
from dlbind._libraries import installed

# the installed systems whose row says how their dtype objects are made
SYSTEMS = sorted(
    name for name, row in ADAPTERS.items() if row.dtype_form != DtypeForm.NONE and installed(row.import_name)
)
NAMES = sorted(DTYPE_BY_NAME)

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


def _made(system: str) -> dict[str, Any]:
    """dlbind's dtype name -> the system's object, for every dtype the system has."""
    made = {}
    for name in NAMES:
        try:
            made[name] = dlbind.dtype(name, to=system)
        except ValueError as exc:
            if f"{system} has no dtype {name}" not in str(exc):
                raise
    return made


def _of(system: str) -> str | None:
    """``of=`` for reading a system's dtype object: its name where its dtypes are strings (onnxruntime's
    ``"tensor(float)"``: a bare string is one of dlbind's names), else None."""
    return system if ADAPTERS[system].dtype_form == DtypeForm.SPELLING else None


def test_every_system_with_dtype_objects_is_tried() -> None:
    # the core's tests have numpy at least; a cell has its own system
    assert "numpy" in SYSTEMS


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_dtype_made_for_a_system_reads_back_as_itself(system: str) -> None:
    made = _made(system)
    assert "float32" in made and "int64" in made, f"{system} makes {sorted(made)}"
    for name, obj in made.items():
        assert dlbind.dtype(obj, of=_of(system)) == dlbind.dtypes.lookup(name), (system, name, obj)
        assert dlbind.dtype(dlbind.dtype(obj, of=_of(system)), to=system) is obj, (system, name)
        assert dlbind.dtype(dlbind.dtype(name), to=system) is obj, (system, name)


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_system_gets_one_type_of_dtype_object(system: str) -> None:
    # one class, or classes of one base of the system's (numpy's dtype classes, mindspore's Float, Int, ...)
    made = _made(system)
    shared = set.intersection(*(set(type(obj).__mro__) for obj in made.values())) - {object}
    assert shared, {n: type(o) for n, o in made.items()}


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_dtype_crosses_from_every_other_system(system: str) -> None:
    made = _made(system)
    for other in SYSTEMS:
        for name, theirs in _made(other).items():
            if name in made:
                assert dlbind.dtype(theirs, to=system, of=_of(other)) is made[name], (other, system, name)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("name", ALL_DTYPES)
def test_the_made_dtype_is_the_one_the_systems_arrays_have(system: str, name: str) -> None:
    made = _made(system)
    if name not in made:
        pytest.skip(f"{system} has no {name}")
    a = np.zeros(3, dtype=name)
    try:
        converted = dlbind.convert(a, to=system)
    except (BufferError, ValueError, TypeError) as exc:  # an importer that lacks this dtype (its row says which)
        pytest.skip(f"{system} refuses {name} from numpy: {exc}")
    theirs = getattr(converted, "dtype", None)
    if theirs is None or callable(theirs):
        pytest.skip(f"{type(converted).__name__} has no dtype attribute: it names its dtype otherwise")
    if dlbind.dtype(theirs) != dlbind.dtypes.lookup(name):  # jax without jax_enable_x64: int64 becomes int32
        pytest.skip(
            f"{system} has no {name} arrays in this configuration: it imports them as {dlbind.dtype(theirs).name}"
        )
    assert theirs == made[name], (system, name, theirs, made[name])
    assert dlbind.dtype(theirs) == dlbind.dtypes.lookup(name)


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_dtype_the_system_lacks_names_what_it_has(system: str) -> None:
    lacking = [n for n in NAMES if n not in _made(system)]
    if not lacking:
        pytest.skip(f"{system} has no dtype to lack: it has every one of spec/dtypes.toml")
    with pytest.raises(ValueError, match=f"{system} has no dtype {lacking[0]}.*it has .*float32"):
        dlbind.dtype(lacking[0], to=system)


@pytest.mark.parametrize("bad", [np.dtype(object), np.dtype("datetime64[s]"), np.dtype(">f4"), np.dtype("U3")])
def test_a_numpy_dtype_without_a_dlpack_code_is_a_value_error(bad: np.dtype) -> None:
    with pytest.raises(ValueError, match="no DLPack dtype"):
        dlbind.dtype(bad)


@pytest.mark.parametrize("bad", [3, 2.5, None, [1], object(), float, int, bool])
def test_what_is_no_dtype_is_a_type_error(bad: object) -> None:
    with pytest.raises(TypeError, match="not a dtype dlbind can read"):
        dlbind.dtype(bad)


def test_a_systems_own_spelling_needs_the_system_named() -> None:
    with pytest.raises(ValueError, match=r"unknown DLPack dtype name 'float'.*did you mean"):
        dlbind.dtype("float")
    assert dlbind.dtype("float", of="numpy").name == "float64"
    with pytest.raises(ValueError, match="numpy has no dtype named 'flaot'"):
        dlbind.dtype("flaot", of="numpy")


def test_the_dlpack_data_type_protocol_is_read_and_given() -> None:
    class Theirs:  # any dtype object of a library that follows dmlc/dlpack#172
        def __dlpack_data_type__(self) -> tuple[int, int, int]:
            return (2, 16, 1)

    assert dlbind.dtype(Theirs()).name == "float16"
    d = dlbind.dtype("bfloat16")
    assert d.__dlpack_data_type__() == (int(d.code), 16, 1)
    assert all(type(v) is int for v in d.__dlpack_data_type__())


@pytest.mark.parametrize("system", SYSTEMS)
def test_a_system_dtype_that_says_its_dlpack_data_type_is_read_so(system: str) -> None:
    # Paddle's dtypes carry __dlpack_data_type__ (dmlc/dlpack#172); what they say is what dlbind reads
    said = {n: o for n, o in _made(system).items() if hasattr(o, "__dlpack_data_type__") and not isinstance(o, type)}
    if not said:
        pytest.skip(f"{system} has no dtype with __dlpack_data_type__")
    for name, obj in said.items():
        assert dlbind.dtype(obj) == dlbind.DType(*obj.__dlpack_data_type__()) == dlbind.dtypes.lookup(name)


@pytest.mark.skipif("tvm_ffi" not in SYSTEMS, reason="tvm_ffi is not installed in this session")
def test_tvm_ffi_takes_a_dlbind_dtype() -> None:
    import tvm_ffi

    for name, theirs in _made("tvm_ffi").items():
        d = dlbind.dtype(name)
        assert tvm_ffi.dtype(d) == theirs
        assert tvm_ffi.dtype.from_dlpack_data_type(d.__dlpack_data_type__()) == theirs
