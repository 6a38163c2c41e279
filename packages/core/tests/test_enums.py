"""The generated enumerations carry DLPack's values (facts from the reference notes, not from the generator)."""

from __future__ import annotations

import enum
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import dlbind
from dlbind import spec

ROOT = Path(__file__).resolve().parents[3]
# The tables below are facts of this release (reference notes); members a later header adds must
# carry a later `since` in the generated per-release tables.
FACTS_OF = (1, 3)

DEVICE_TYPES = {
    "kDLCPU": 1,
    "kDLCUDA": 2,
    "kDLCUDAHost": 3,
    "kDLOpenCL": 4,
    "kDLVulkan": 7,
    "kDLMetal": 8,
    "kDLVPI": 9,
    "kDLROCM": 10,
    "kDLROCMHost": 11,
    "kDLExtDev": 12,
    "kDLCUDAManaged": 13,
    "kDLOneAPI": 14,
    "kDLWebGPU": 15,
    "kDLHexagon": 16,
    "kDLMAIA": 17,
    "kDLTrn": 18,
}
DTYPE_CODES = {
    "kDLInt": 0,
    "kDLUInt": 1,
    "kDLFloat": 2,
    "kDLOpaqueHandle": 3,
    "kDLBfloat": 4,
    "kDLComplex": 5,
    "kDLBool": 6,
    "kDLFloat8_e3m4": 7,
    "kDLFloat8_e4m3": 8,
    "kDLFloat8_e4m3b11fnuz": 9,
    "kDLFloat8_e4m3fn": 10,
    "kDLFloat8_e4m3fnuz": 11,
    "kDLFloat8_e5m2": 12,
    "kDLFloat8_e5m2fnuz": 13,
    "kDLFloat8_e8m0fnu": 14,
    "kDLFloat6_e2m3fn": 15,
    "kDLFloat6_e3m2fn": 16,
    "kDLFloat4_e2m1fn": 17,
}


def _canonical() -> tuple[int, int]:
    """The version macros of the canonical header: "1.3", and "1.3.post1" (a post-release keeps them)."""
    text = tomllib.loads((ROOT / "spec/headers.toml").read_text(encoding="utf-8"))["canonical"]
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def test_version() -> None:
    assert _canonical() == dlbind.DLPACK_VERSION  # the header spec/headers.toml names canonical
    assert (dlbind.DLPACK_MAJOR_VERSION, dlbind.DLPACK_MINOR_VERSION) == dlbind.DLPACK_VERSION
    assert dlbind.DLPACK_VERSION >= FACTS_OF


def _check_members(members: dict[str, int], facts: dict[str, int], qualifier: str) -> None:
    assert {name: members.get(name) for name in facts} == facts
    later = {name: spec.since(f"{qualifier}{name}") for name in members if name not in facts}
    assert all(since > FACTS_OF for since in later.values()), later


def test_device_types() -> None:
    _check_members({m.name: int(m) for m in dlbind.DeviceType}, DEVICE_TYPES, "DLDeviceType.")
    assert issubclass(dlbind.DeviceType, enum.IntEnum)


def test_dtype_codes() -> None:
    _check_members({m.name: int(m) for m in dlbind.DataTypeCode}, DTYPE_CODES, "DLDataTypeCode.")


@pytest.mark.parametrize(
    ("alias", "member"),
    [
        ("kDLGPU", "kDLCUDA"),
        ("kGPU", "kDLCUDA"),
        ("kDLCPUPinned", "kDLCUDAHost"),
        ("kCPU", "kDLCPU"),
        ("kOpenCL", "kDLOpenCL"),
    ],
)
def test_renamed_device_types_are_aliases(alias: str, member: str) -> None:
    assert dlbind.DeviceType[alias] is dlbind.DeviceType[member]


def test_renamed_dtype_codes_are_aliases() -> None:
    assert dlbind.DataTypeCode["kFloat"] is dlbind.DataTypeCode.kDLFloat


def test_flags() -> None:
    flags = {str(m.name): int(m) for m in dlbind.Flags}
    _check_members(flags, {"READ_ONLY": 1, "IS_COPIED": 2, "IS_SUBBYTE_TYPE_PADDED": 4}, "DLPACK_FLAG_BITMASK_")
    assert dlbind.Flags(3) == dlbind.Flags.READ_ONLY | dlbind.Flags.IS_COPIED
    assert dlbind.DLPACK_FLAG_BITMASK_READ_ONLY == 1
    assert dlbind.DLPACK_FLAG_BITMASK_IS_COPIED == 2
    assert dlbind.DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED == 4


def test_unknown_values_are_value_errors() -> None:
    with pytest.raises(ValueError, match="5 is not a valid DeviceType"):
        dlbind.DeviceType(5)
