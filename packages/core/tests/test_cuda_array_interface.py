"""``__cuda_array_interface__`` (v3) in the core: exported by Tensors in CUDA memory, checked on import.

No CUDA runtime is needed: the pointers are never dereferenced (dlbind-cuda's tests cover the device
look-up and the stream waits on a recording runtime, and real GPUs where there are some).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import DeviceType

NEWEST = dlbind.DLPACK_VERSION  # the canonical header's version: what a consumer of this dlbind asks for
E = "<" if sys.byteorder == "little" else ">"


def tensor(dtype: str, device: str = "cuda:0", **kw: Any) -> dlbind.Tensor:
    return dlbind.from_dlpack(dlbind.from_pointer(0x10000, kw.pop("shape", (2, 3)), dtype, device=device, **kw))


@pytest.mark.parametrize(
    ("dtype", "typestr"),
    [("float32", f"{E}f4"), ("float16", f"{E}f2"), ("float64", f"{E}f8"), ("int8", "|i1"), ("uint8", "|u1"),
     ("int64", f"{E}i8"), ("uint16", f"{E}u2"), ("bool", "|b1"), ("complex64", f"{E}c8"), ("complex128", f"{E}c16")],
)  # fmt: skip
def test_typestr(dtype: str, typestr: str) -> None:
    assert tensor(dtype).__cuda_array_interface__["typestr"] == typestr


@pytest.mark.parametrize("device", ["cuda:1", "cuda_managed:0", "cuda_host:0"])
def test_export(device: str) -> None:
    cai = tensor("float32", device, byte_offset=8, readonly=True).__cuda_array_interface__
    assert cai == {
        "version": 3,
        "shape": (2, 3),
        "typestr": f"{E}f4",
        "data": (0x10008, True),
        "strides": None,
        "stream": 1,
    }


def test_strided_and_empty() -> None:
    assert tensor("int16", strides=(1, 2)).__cuda_array_interface__["strides"] == (2, 4)
    assert tensor("int16", shape=(0, 3)).__cuda_array_interface__["data"] == (0, False)


@pytest.mark.parametrize(("dtype", "device"), [("float32", "cpu"), ("float32", "vulkan:0"), ("float32", "rocm:0"),
                                               ("bfloat16", "cuda:0"), ("float8_e4m3fn", "cuda:0")])  # fmt: skip
def test_absent_where_it_cannot_describe_the_tensor(dtype: str, device: str) -> None:
    assert not hasattr(tensor(dtype, device), "__cuda_array_interface__")


class Cai:
    def __init__(self, **interface: Any) -> None:
        self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (4096, False), "version": 3,
                                         **interface}  # fmt: skip


@pytest.mark.parametrize("stream", [0, -1, -2, True, 1.0, "1"])
def test_invalid_streams_are_refused(stream: object) -> None:
    with pytest.raises(BufferError, match=f"__cuda_array_interface__ stream {stream!r} is not valid"):
        dlbind.asdlpack(Cai(stream=stream), device_id=0)


def test_data_must_be_a_pair() -> None:
    """What is not a tuple is the wrong type (TypeError, as for __array_interface__'s data); a tuple of another
    length the wrong value."""
    with pytest.raises(TypeError, match=r"data must be \(pointer, read_only\), not int"):
        dlbind.asdlpack(Cai(data=4096), device_id=0)
    with pytest.raises(BufferError, match=r"data must be \(pointer, read_only\), not a 1-tuple"):
        dlbind.asdlpack(Cai(data=(4096,)), device_id=0)


@pytest.mark.parametrize(
    ("interface", "said"),
    [
        ({"mask": object()}, "with a mask"),
        ({"typestr": ">f4"}, "not native-endian"),
        ({"typestr": "|V4"}, "has no DLPack dtype"),
        ({"offset": 8}, "gives offset 8 with a pointer"),
        ({"strides": (2,)}, "not multiples of the item size"),
    ],
    ids=["mask", "big-endian", "void", "offset", "strides"],
)
def test_what_is_wrong_is_said_before_the_gpu_holding_it_is_asked(interface: dict[str, Any], said: str) -> None:
    """Without device_id the CUDA backend is asked which GPU holds the pointer: only once the description is found
    valid, so that an invalid one is refused for what is wrong with it (not for a backend it would not need)."""
    with pytest.raises(BufferError, match=said):
        dlbind.asdlpack(Cai(**interface))


def test_device_id_names_the_gpu_and_an_offset_is_refused() -> None:
    e = dlbind.asdlpack(Cai(stream=None), device_id=2)
    t = dlbind.from_dlpack(e.__dlpack__(max_version=NEWEST))
    assert t.device == (DeviceType.kDLCUDA, 2) and t.data_ptr == 4096
    # v3 has no offset, and numpy drops one beside a pointer: never added to the pointer, which it may take to NULL
    for offset, pointer in ((8, 4096), (4096, 0)):
        with pytest.raises(BufferError, match=f"gives offset {offset} with a pointer in data"):
            dlbind.asdlpack(Cai(stream=None, offset=offset, data=(pointer, False)), device_id=2)
    with pytest.raises(BufferError, match="invalid device id -1"):
        dlbind.asdlpack(Cai(stream=None), device_id=-1)


def test_zero_size_needs_no_device_look_up() -> None:
    t = dlbind.from_dlpack(dlbind.asdlpack(Cai(shape=(0,), data=(0, False))).__dlpack__(max_version=NEWEST))
    assert t.device == (DeviceType.kDLCUDA, 0) and t.shape == (0,)


def test_host_views_of_memory_a_stream_orders_need_its_backend() -> None:
    """Managed memory ready on a stream: numpy's array interface, ``__array__`` and the buffer protocol wait for that
    stream as ``__dlpack__`` to the CPU does, so without a usable backend they refuse as it does (a BufferError), never
    read unsynchronised."""
    a = np.arange(4.0)
    t = dlbind.from_dlpack(dlbind.from_pointer(a.ctypes.data, (4,), "float64", device="cuda_managed", owner=a))
    assert t.stream == 1
    readers = [np.from_dlpack, np.asarray, lambda t: t.__array__()]
    if dlbind.ffi_build() == "compiled" or sys.version_info >= (3, 12):
        readers.append(memoryview)
    refused = r"synchronising cuda_managed streams needs (dlbind-cuda|a dlbind backend)"
    for read in readers:
        with pytest.raises(BufferError, match=refused):
            read(t)
    plain = dlbind.from_dlpack(dlbind.from_pointer(a.ctypes.data, (4,), "float64", device="cuda_managed", owner=a),
                               stream=-1)  # fmt: skip
    assert plain.stream is None and np.asarray(plain).tolist() == a.tolist()  # no stream orders it: read as it is
