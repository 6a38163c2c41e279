"""The DLPack 1.3 C exchange API: dlbind's own table, and dlbind consuming torch's."""

from __future__ import annotations

import gc
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
    assert errors and errors[0][0] == b"BufferError" and b"host memory only" in errors[0][1]


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
