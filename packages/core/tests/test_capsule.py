"""Capsules as dlbind makes them: every field read back through cffi, in both builds; the pure
build's packed layout derived from the declarations, so that a header that moves or adds a field
still packs correctly."""

from __future__ import annotations

import functools
from typing import Any

import cffi
import pytest

import dlbind
from dlbind import capsule
from dlbind._ffi import ffi
from dlbind._generated.enums import DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION, DeviceType, Flags


def _field(cdata: Any, path: str) -> Any:
    return functools.reduce(getattr, path.split("."), cdata)


def _int(ffi_: Any, value: Any) -> int:
    return int(ffi_.cast("uintptr_t", value)) if isinstance(value, ffi_.CData) else int(value)


def test_the_pure_build_packs() -> None:
    # the packed path must really be the one the pure build takes (else its tests prove nothing)
    assert capsule._PACKED is (dlbind.ffi_build() == "pure")


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("ndim", [0, 1, 3])
def test_every_field_reads_back(versioned: bool, ndim: int) -> None:
    shape = (2, 3, 5)[:ndim]
    strides = (15, -5, 1)[:ndim]
    flags = int(Flags.READ_ONLY | Flags.IS_COPIED) if versioned else 0
    before = capsule.stats()
    for data in (0x7FEE_DDCC_BBAA_9988, 0x1000):  # the second export reuses the first one's block
        cap = capsule.export(
            data, shape, strides, (2, 16, 4), (int(DeviceType.kDLCUDAHost), 7), 24, object(),
            versioned=versioned, flags=flags,
        )  # fmt: skip
        managed, was_versioned = capsule.take(cap)
        assert was_versioned is versioned
        if versioned:
            assert (managed.version.major, managed.version.minor) == (DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION)
            assert int(managed.flags) == flags
        if capsule._PACKED:  # a field dlbind does not set is zero, even in a reused block
            assert managed.manager_ctx == ffi.NULL
        assert managed.deleter != ffi.NULL
        t = managed.dl_tensor
        assert int(ffi.cast("uintptr_t", t.data)) == data
        assert (int(t.device.device_type), int(t.device.device_id)) == (int(DeviceType.kDLCUDAHost), 7)
        assert int(t.ndim) == ndim
        assert (int(t.dtype.code), int(t.dtype.bits), int(t.dtype.lanes)) == (2, 16, 4)
        assert int(t.byte_offset) == 24
        if ndim:
            assert tuple(ffi.unpack(t.shape, ndim)) == shape
            assert tuple(ffi.unpack(t.strides, ndim)) == strides
        else:
            assert t.strides == ffi.NULL
        capsule.Owner(managed).release()  # the deleter, exactly once
    exports, deleted = capsule.stats()
    assert (exports - before[0], deleted - before[1]) == (2, 2)


def _values(layout: capsule.PackedLayout, by_path: dict[str, int]) -> tuple[int, ...]:
    values = tuple(by_path.get(path, 0) for path in capsule.FIELDS)
    return values if layout.order is None else layout.order(values)


_SAMPLE = {
    "version.major": 1,
    "version.minor": 9,
    "deleter": 0x5555_6666_7777_8888,
    "flags": 0x8000_0000_0000_0005,
    "dl_tensor.data": 0x7123_4567_89AB_CDEF,
    "dl_tensor.device.device_type": 13,
    "dl_tensor.device.device_id": 2_000_000_000,
    "dl_tensor.ndim": 3,
    "dl_tensor.dtype.code": 250,
    "dl_tensor.dtype.bits": 129,
    "dl_tensor.dtype.lanes": 65535,
    "dl_tensor.shape": 0x1111_2222_3333_4440,
    "dl_tensor.strides": 0x1111_2222_3333_4458,
    "dl_tensor.byte_offset": 0xFFFF_FFFF_FFFF_FFF0,
}


def _pack_and_read(ffi_: Any, name: str) -> tuple[Any, capsule.PackedLayout, Any]:
    layout = capsule.packed_layout(ffi_, name)
    assert layout is not None, f"{name} cannot be packed"
    assert layout.size >= ffi_.sizeof(name)
    buffer = bytearray(b"\xff" * layout.size)  # dirty: pad bytes must come out zero
    layout.struct_.pack_into(buffer, 0, *_values(layout, _SAMPLE))
    memory = ffi_.from_buffer(buffer)
    return ffi_.cast(f"{name} *", memory), layout, memory  # the caller keeps the memory alive


def _check_every_field(ffi_: Any, cdata: Any, layout: capsule.PackedLayout, ctype: Any, prefix: str = "") -> int:
    """Compare every field (nested structs included) with _SAMPLE; unset ones must be zero."""
    checked = 0
    for name, field in ctype.fields:
        path = prefix + name
        if field.type.kind == "struct":
            checked += _check_every_field(ffi_, cdata, layout, field.type, path + ".")
            continue
        value = _field(cdata, path)
        if field.type.kind == "array":
            assert all(int(v) == 0 for v in value), path
            continue
        expected = _SAMPLE[path] if path in layout.paths else 0
        assert _int(ffi_, value) == expected, path
        checked += 1
    return checked


@pytest.mark.parametrize("name", ["DLManagedTensorVersioned", "DLManagedTensor"])
def test_packed_layout_of_the_loaded_declarations(name: str) -> None:
    cdata, layout, _memory = _pack_and_read(ffi, name)
    assert _check_every_field(ffi, cdata, layout, ffi.typeof(name)) == len(layout.paths) + 1  # + manager_ctx


# A header bump, rehearsed: fields moved and added, padding in new places, a wider ndim.
_BUMPED = """
typedef struct { uint32_t major; uint32_t minor; } DLPackVersion;
typedef enum { kDLCPU = 1, kDLFuture = 13 } DLDeviceType;
typedef struct { int32_t device_id; uint8_t kind; DLDeviceType device_type; } DLDevice;
typedef struct { uint16_t lanes; uint8_t bits; uint8_t code; } DLDataType;
typedef struct {
  uint8_t tag;
  DLDevice device;
  void *data;
  int64_t ndim;
  uint8_t reserved[3];
  DLDataType dtype;
  int64_t *strides;
  int64_t *shape;
  uint64_t byte_offset;
  uint16_t tail;
} DLTensor;
typedef struct DLManagedTensorVersioned {
  uint64_t flags;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  DLTensor dl_tensor;
  uint8_t extra;
  DLPackVersion version;
  void *manager_ctx;
} DLManagedTensorVersioned;
typedef struct DLManagedTensor {
  void *manager_ctx;
  DLTensor dl_tensor;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;
"""


@pytest.mark.parametrize("name", ["DLManagedTensorVersioned", "DLManagedTensor"])
def test_packed_layout_follows_a_changed_header(name: str) -> None:
    bumped = cffi.FFI()
    bumped.cdef(_BUMPED)
    cdata, layout, _memory = _pack_and_read(bumped, name)
    # fields dlbind does not set, checked to be zero: tag, kind, tail, manager_ctx (and extra)
    extra = {"DLManagedTensorVersioned": 5, "DLManagedTensor": 4}[name]
    assert _check_every_field(bumped, cdata, layout, bumped.typeof(name)) == len(layout.paths) + extra
    assert layout.order is not None  # the fields are no longer in dlbind's order


def test_packed_layout_refuses_what_struct_cannot_pack() -> None:
    odd = cffi.FFI()
    odd.cdef(_BUMPED.replace("uint8_t bits;", "unsigned int bits : 8;"))  # a bitfield
    assert capsule.packed_layout(odd, "DLManagedTensorVersioned") is None
    renamed = cffi.FFI()
    renamed.cdef(_BUMPED.replace("int64_t ndim;", "int64_t rank;"))  # a field dlbind sets is gone
    assert capsule.packed_layout(renamed, "DLManagedTensor") is None
