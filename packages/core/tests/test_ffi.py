"""Both cffi builds describe the same structs as the generated layout tables, and the right build loads."""

from __future__ import annotations

import os

import dlbind
from dlbind._ffi import BUILD, ffi
from dlbind._generated import layout


def test_expected_build_is_loaded() -> None:
    # The test session installs the core with a compiler, then runs the suite with DLBIND_PURE=0 and =1.
    expected = "pure" if os.environ.get("DLBIND_PURE", "") not in ("", "0") else "compiled"
    assert BUILD == expected == dlbind.ffi_build()


def test_struct_sizes_and_offsets_match_layout_tables() -> None:
    assert layout.STRUCT_SIZES["DLManagedTensorVersioned"] == 80
    for struct, size in layout.STRUCT_SIZES.items():
        assert ffi.sizeof(struct) == size, struct
        assert ffi.alignof(struct) == layout.STRUCT_ALIGNMENTS[struct], struct
        for field, offset in layout.FIELD_OFFSETS[struct].items():
            assert ffi.offsetof(struct, field) == offset, f"{struct}.{field}"


def test_enum_constants_match_python_enums() -> None:
    for member in dlbind.DeviceType:
        assert ffi.integer_const(member.name) == member.value
    for member in dlbind.DataTypeCode:
        assert ffi.integer_const(member.name) == member.value


def test_structs_are_usable() -> None:
    t = ffi.new("DLManagedTensorVersioned *")
    t.version.major, t.version.minor = dlbind.DLPACK_VERSION
    t.flags = dlbind.Flags.READ_ONLY | dlbind.Flags.IS_COPIED
    t.dl_tensor.device.device_type = dlbind.DeviceType.kDLCPU
    t.dl_tensor.dtype.code, t.dl_tensor.dtype.bits, t.dl_tensor.dtype.lanes = dlbind.DataTypeCode.kDLFloat, 32, 1
    raw = bytes(ffi.buffer(t))
    assert len(raw) == 80
    assert raw[0:8] == (1).to_bytes(4, "little") + (3).to_bytes(4, "little")
    assert raw[24:32] == (3).to_bytes(8, "little")
    assert raw[32 + 20 : 32 + 24] == bytes([2, 32, 1, 0])
