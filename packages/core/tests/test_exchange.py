"""The DLPack 1.3 C exchange API: dlbind's own table, and dlbind consuming torch's."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import _capi, capsule, exchange
from dlbind._ffi import BUILD, ffi


def _table(obj_type: type) -> Any:
    cap = obj_type.__dlpack_c_exchange_api__  # type: ignore[attr-defined]
    assert _capi.capsule_name(cap) == b"dlpack_exchange_api"
    return ffi.cast("DLPackExchangeAPI *", _capi.capsule_get_pointer(cap, b"dlpack_exchange_api"))


def test_dlbind_table_shape() -> None:
    api = _table(dlbind.Tensor)
    assert (api.header.version.major, api.header.version.minor) == dlbind.DLPACK_VERSION
    assert api.header.prev_api == ffi.NULL
    for name in ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
                 "managed_tensor_to_py_object_no_sync", "current_work_stream"):  # fmt: skip
        assert getattr(api, name) != ffi.NULL, name
    stream = ffi.new("void **", ffi.cast("void *", 1))
    assert api.current_work_stream(1, 0, stream) == 0 and stream[0] == ffi.NULL


def test_table_from_and_to_py_object() -> None:
    api = _table(dlbind.Tensor)
    t = dlbind.from_dlpack(np.arange(5, dtype=np.int32))
    out = ffi.new("DLManagedTensorVersioned **")
    assert api.managed_tensor_from_py_object_no_sync(ffi.cast("void *", id(t)), out) == 0
    m = out[0]
    assert m.dl_tensor.ndim == 1 and m.dl_tensor.shape[0] == 5 and m.version.major == 1
    back = ffi.new("void **")
    assert api.managed_tensor_to_py_object_no_sync(m, back) == 0
    obj = _capi.object_at(int(ffi.cast("uintptr_t", back[0])))
    ctypes_decref(obj)  # the table returned a new reference
    assert isinstance(obj, dlbind.Tensor) and np.asarray(obj).tolist() == [0, 1, 2, 3, 4]


class _AsksNoStream:
    """A producer recording the keywords its ``__dlpack__`` is called with."""

    def __init__(self) -> None:
        self.array, self.calls = np.arange(3.0), list[tuple[str, ...]]()

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.calls.append(tuple(sorted(kwargs)))
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def test_table_from_py_asks_any_producer_for_a_versioned_struct_on_no_stream() -> None:
    # *NoSync: the producer is asked with max_version only (stream=None would order work on a device)
    api = _table(dlbind.Tensor)
    x = _AsksNoStream()
    out = ffi.new("DLManagedTensorVersioned **")
    assert api.managed_tensor_from_py_object_no_sync(ffi.cast("void *", id(x)), out) == 0
    assert x.calls == [("max_version",)] and out[0].version.major == dlbind.DLPACK_VERSION[0]
    back = ffi.new("void **")
    assert api.managed_tensor_to_py_object_no_sync(out[0], back) == 0
    t = _capi.object_at(int(ffi.cast("uintptr_t", back[0])))
    ctypes_decref(t)
    assert isinstance(t, dlbind.Tensor) and np.asarray(t).tolist() == [0.0, 1.0, 2.0]


def ctypes_decref(obj: object) -> None:
    import ctypes

    ctypes.pythonapi.Py_DecRef(ctypes.py_object(obj))


def test_table_allocator() -> None:
    api = _table(dlbind.Tensor)
    proto = ffi.new("DLTensor *")
    shape = ffi.new("int64_t[]", [2, 3])
    proto.ndim, proto.shape = 2, shape
    proto.dtype.code, proto.dtype.bits, proto.dtype.lanes = 2, 64, 1
    proto.device.device_type = 1
    out = ffi.new("DLManagedTensorVersioned **")
    errors: list[tuple[bytes, bytes]] = []

    @ffi.callback("void(void *, const char *, const char *)")
    def set_error(_ctx: Any, kind: Any, message: Any) -> None:
        errors.append((ffi.string(kind), ffi.string(message)))

    assert api.managed_tensor_allocator(proto, out, ffi.NULL, set_error) == 0
    t = exchange.object_from_managed(int(ffi.cast("uintptr_t", out[0])))
    assert t.shape == (2, 3) and np.asarray(t).tolist() == [[0.0] * 3] * 2
    proto.device.device_type = 2  # CUDA: refused through SetError
    assert api.managed_tensor_allocator(proto, out, ffi.NULL, set_error) == -1
    assert errors and errors[0][0] == b"BufferError" and b"cpu:0 only" in errors[0][1]


def _prototype(device: tuple[int, int] = (1, 0), dtype: tuple[int, int, int] = (2, 32, 1), ndim: int = 1) -> Any:
    proto = ffi.new("DLTensor *")
    shape = ffi.new("int64_t[]", [3] * max(ndim, 1))
    proto.ndim, proto.shape = ndim, shape
    proto.dtype.code, proto.dtype.bits, proto.dtype.lanes = dtype
    proto.device.device_type, proto.device.device_id = device
    return proto, shape


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("device", (3, 0), b"not on cuda_host:0"),  # pinned memory asked: CPU memory is not it
        ("device", (13, 0), b"not on cuda_managed:0"),
        ("device", (1, 3), b"not on cpu:3"),
        ("dtype", (2, 0, 1), b"invalid dtype"),
        ("dtype", (2, 32, 0), b"lanes=0"),
        ("dtype", (15, 8, 1), b"invalid dtype"),  # a float6 of 8 bits
        ("ndim", -1, b"-1 dimensions"),
    ],
)
def test_table_allocator_refuses_what_it_cannot_make_as_asked(field: str, value: Any, said: bytes) -> None:
    """The allocator makes the prototype's dtype and shape on cpu:0 or nothing: another device (pinned or managed
    memory among them) and an invalid dtype or ndim are refused through SetError, never made as something else."""
    api = _table(dlbind.Tensor)
    proto, _shape = _prototype(**{field: value})
    out = ffi.new("DLManagedTensorVersioned **")
    errors: list[tuple[bytes, bytes]] = []

    @ffi.callback("void(void *, const char *, const char *)")
    def set_error(_ctx: Any, kind: Any, message: Any) -> None:
        errors.append((ffi.string(kind), ffi.string(message)))

    assert api.managed_tensor_allocator(proto, out, ffi.NULL, set_error) == -1
    assert out[0] == ffi.NULL
    assert len(errors) == 1 and errors[0][0] == b"BufferError" and said in errors[0][1], errors


@pytest.mark.skipif(BUILD != "compiled", reason="pure build: a cffi callback cannot leave a Python error set")
def test_table_allocator_leaves_the_error_its_consumer_set() -> None:
    """SetError "will presumably set a Python error" (dlpack.h): that error stands when the allocator returns."""
    from nativehelp import ffi as hffi
    from nativehelp import lib as hlib

    api = _table(dlbind.Tensor)
    proto, _shape = _prototype(device=(2, 0))
    out = hffi.new("void **")
    pending = hffi.new("char[]", 512)
    allocator = hffi.cast("void *", int(ffi.cast("uintptr_t", api.managed_tensor_allocator)))
    address = hffi.cast("void *", int(ffi.cast("uintptr_t", proto)))
    assert hlib.allocate_as_a_python_consumer(allocator, address, out, pending, 512) == -1
    assert hffi.string(pending).decode() == "RuntimeError: SetError(BufferError): dlbind allocates memory on cpu:0 " \
        "only, not on cuda:0"


def test_the_table_is_one_for_the_process() -> None:
    """Every capsule of dlbind's table points at the one struct dlbind.Tensor's holds, which lives as long as the
    process (the pure build made a new one at each call, freeing the one consumers held)."""
    first = _table(dlbind.Tensor)
    again = ffi.cast("DLPackExchangeAPI *", _capi.capsule_get_pointer(exchange.table(), b"dlpack_exchange_api"))
    gc.collect()
    assert again == first == _table(dlbind.Tensor)
    assert (first.header.version.major, first.header.version.minor) == dlbind.DLPACK_VERSION
    stream = ffi.new("void **", ffi.cast("void *", 1))
    assert first.current_work_stream(1, 0, stream) == 0 and stream[0] == ffi.NULL


class _Legacy:
    """A producer whose ``__dlpack__`` gives a legacy capsule whatever it is asked (its deleter counted)."""

    def __init__(self) -> None:
        from faulty import make_capsule

        self.capsule, self.counter = make_capsule(name=b"dltensor", versioned=False)

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self.capsule


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the pure build's, printed
def test_table_from_py_refuses_a_legacy_capsule_and_releases_it() -> None:
    """The table hands over versioned structs only: a producer giving a legacy capsule is refused (-1, with the
    BufferError set in the compiled build, printed in the pure one) and its struct released once (the pure build
    asserted, leaking it, or under -O read it as versioned)."""
    api = _table(dlbind.Tensor)
    producer = _Legacy()
    out = ffi.new("DLManagedTensorVersioned **")
    call = api.managed_tensor_from_py_object_no_sync
    if BUILD == "compiled":  # -1 with the error set: cffi raises a SystemError from it
        with pytest.raises(SystemError) as raised:
            call(ffi.cast("void *", id(producer)), out)
        assert "versioned structs only" in str(raised.value.__cause__ or raised.value.__context__)
    else:
        assert call(ffi.cast("void *", id(producer)), out) == -1
    assert out[0] == ffi.NULL
    assert producer.counter.calls == 1


@pytest.mark.skipif(
    BUILD != "compiled", reason="pure build: cffi releases the GIL that the table needs, so it uses __dlpack__"
)
def test_consumer_uses_a_producer_table() -> None:
    torch = pytest.importorskip("torch")
    assert hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    x = torch.arange(6.0).reshape(2, 3)[:, 1:]
    t = exchange.import_object(x)
    assert t is not None and t.strides == tuple(x.stride())
    assert np.asarray(t).tolist() == x.tolist()
    calls: list[object] = []

    class Counting:  # a producer with no table goes through __dlpack__
        def __dlpack__(self, **kw: Any) -> object:
            calls.append(kw)
            return x.__dlpack__(**kw)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    assert exchange.import_object(Counting()) is None
    dlbind.from_dlpack(Counting())
    assert len(calls) == 1


def test_dlbind_tensor_roundtrip_through_its_own_table_does_not_leak() -> None:
    gc.collect()
    before = capsule.stats()
    for _ in range(100):
        dlbind.from_dlpack(dlbind.from_dlpack(np.arange(3)))
    gc.collect()
    exports, deleted = capsule.stats()
    assert exports - before[0] == deleted - before[1] == 100


def test_a_subclass_exporting_its_own_way_is_asked_through_its_dlpack() -> None:
    """A subclass of a type with an exchange table that defines its own ``__dlpack__`` (other data, or a refusal)
    is asked through it, in both builds: its inherited table would bypass it (the compiled build imported the
    parent's export of its storage)."""
    torch = pytest.importorskip("torch")

    class Doubled(torch.Tensor):  # type: ignore[misc]
        def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
            return torch.Tensor.__dlpack__(torch.Tensor(self).mul(2), *args, **kwargs)

    class Refusing(torch.Tensor):  # type: ignore[misc]
        def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
            raise BufferError("Refusing exports nothing")

    assert np.asarray(dlbind.from_dlpack(torch.arange(3.0).as_subclass(Doubled))).tolist() == [0.0, 2.0, 4.0]
    with pytest.raises(BufferError, match="Refusing exports nothing"):
        dlbind.from_dlpack(torch.arange(3.0).as_subclass(Refusing))
    assert np.asarray(dlbind.from_dlpack(torch.arange(3.0))).tolist() == [0.0, 1.0, 2.0]  # its table: as it was


def test_a_subclass_saying_its_own_device_is_asked_through_its_dlpack() -> None:
    """A subclass that defines only ``__dlpack_device__`` is asked it, in both builds (the compiled build imported
    it through its parent's exchange table, which never reads the override): its refusal propagates, each call."""
    torch = pytest.importorskip("torch")

    class NoDevice(torch.Tensor):  # type: ignore[misc]
        def __dlpack_device__(self) -> Any:
            raise RuntimeError("NoDevice has no device now")

    for _ in range(2):  # the first import plans the type; the second runs the plan
        with pytest.raises(RuntimeError, match="NoDevice has no device now"):
            dlbind.from_dlpack(torch.arange(3.0).as_subclass(NoDevice))


FRESH_ALLOCATION = """
from dlbind import exchange
from dlbind import _capi
from dlbind._ffi import ffi

api = ffi.cast("DLPackExchangeAPI *", _capi.capsule_get_pointer(exchange.table(), b"dlpack_exchange_api"))
proto = ffi.new("DLTensor *")
shape = ffi.new("int64_t[]", [2])
proto.ndim, proto.shape, proto.device.device_type = 1, shape, 1
proto.dtype.code, proto.dtype.bits, proto.dtype.lanes = 2, 32, 1
out = ffi.new("DLManagedTensorVersioned **")
print(api.managed_tensor_allocator(proto, out, ffi.NULL, ffi.NULL), out[0] != ffi.NULL)
"""


def test_the_allocator_of_a_table_taken_first_thing_allocates() -> None:
    """A process whose first use of dlbind is its exchange table (the compiled allocator read a helper that the
    runtime's lazy load had not set yet, and refused)."""
    env = dict(os.environ, DLBIND_PURE="1" if BUILD == "pure" else "0")
    proc = subprocess.run([sys.executable, "-c", FRESH_ALLOCATION], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 0 and proc.stdout.split() == ["0", "True"], (proc.stdout, proc.stderr[-2000:])
