"""Names and numbers that no DLPack header gives, provably: for tests that need a device or dtype dlbind
cannot know.

A plausible future name (``"tpu"``) is not one: upstream declares such names (``kDLTPU`` after v1.3), and a
test that used it as its bogus device turns red on the header bump that declares it. Each value here is
checked against every release dlbind's per-release tables describe (``dlbind.spec``), the canonical
header's policy tables and the policy entries waiting for a newer header.
"""

from __future__ import annotations

from dlbind import spec
from dlbind._generated import tables


def spec_members(enum: str) -> set[str]:
    """Every member name of ``enum`` (``"DLDeviceType"``) in any release, earlier names of renamed ones included."""
    qualified = {q for v in spec.RELEASES for q in spec.names_in(v) if q.startswith(enum + ".")}
    members = {q.split(".", 1)[1] for q in qualified}
    return members | {old for q in qualified for old, _ in spec.renamed_from(q)}


def device_name() -> str:
    """A device name that no DLDeviceType member of any release has (as its policy or derived name), and no
    entry of spec/devices.toml, declared or waiting for the header."""
    name = "no_such_device"
    known = {m.removeprefix("kDL").removeprefix("k").lower() for m in spec_members("DLDeviceType")}
    known |= set(tables.DEVICE_BY_NAME) | {p.name for p in tables.PENDING_DEVICE_TYPES.values()}
    assert name not in known, f"{name!r} names a device now: pick another"
    return name


def device_type() -> int:
    """A DLDeviceType value above every value the canonical header declares and every pending entry names."""
    return max([*tables.KNOWN_DEVICE_TYPES, *tables.PENDING_DEVICE_TYPES]) + 1


def dtype_code() -> int:
    """A DLDataTypeCode value above every code the canonical header declares and every pending entry names."""
    code = max([*tables.KNOWN_DTYPE_CODES, *tables.PENDING_DTYPE_CODES]) + 1
    assert code <= 255, "DLDataType.code is a uint8_t: no unnamed code is left above the named ones"
    return code
