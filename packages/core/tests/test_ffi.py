"""Both cffi builds describe the same structs as the committed model of the canonical header, and the right
build loads."""

from __future__ import annotations

import json
import os
from pathlib import Path

import dlbind
from dlbind._ffi import BUILD, ffi

MODELS = Path(__file__).resolve().parents[3] / "spec" / "models"


def test_expected_build_is_loaded() -> None:
    # The test session installs the core with a compiler, then runs the suite with DLBIND_PURE=0 and =1.
    expected = "pure" if os.environ.get("DLBIND_PURE", "") not in ("", "0") else "compiled"
    assert BUILD == expected == dlbind.ffi_build()


def test_struct_sizes_and_offsets_match_the_model() -> None:
    major, minor = dlbind.spec.CANONICAL
    model = json.loads((MODELS / f"dlpack-{major}.{minor}.json").read_text(encoding="utf-8"))
    assert model["struct_info"]["DLManagedTensorVersioned"]["size"] == 80  # a fact of every 1.x header
    for struct, info in model["struct_info"].items():
        ctype = struct if info["typedef"] else f"struct {struct}"
        assert ffi.sizeof(ctype) == info["size"], struct
        assert ffi.alignof(ctype) == info["align"], struct
        for field in model["structs"][struct]:
            assert ffi.offsetof(ctype, field["name"]) == field["offset"], f"{struct}.{field['name']}"


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
