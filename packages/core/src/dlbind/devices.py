"""Devices: parsing the forms users write, and the stream rules of each device type.

A device is ``(DeviceType, device_id)``; users may also write ``"cpu"``, ``"cuda:1"``, ``("cuda", 0)``
or ``(2, 0)``. Names, host access and stream rules are the generated tables (``spec/devices.toml``
joined with the header's ``DLDeviceType``): CUDA ``None``/1 is the legacy default stream, 2 the
per-thread default, -1 "do not synchronize", 0 is refused; ROCm ``None``/0 is the default stream and
1, 2 are refused; devices without streams accept only ``None``.
"""

from __future__ import annotations

import operator
from typing import Any

from dlbind._generated.enums import DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME, DEVICE_NAMES, DEVICE_STREAM_RULE, HOST_DEVICES, STREAM_RULES
from dlbind._names import suggestion

__all__ = [
    "HOST_ACCESSIBLE", "STREAM_FREE", "Device", "check_stream", "default_stream", "device_name", "parse_device",
    "stream_free", "streams", "unnamed_note",
]  # fmt: skip

#: Device types whose memory the CPU reads directly (spec/devices.toml: ``host = true``).
HOST_ACCESSIBLE = HOST_DEVICES

Device = tuple[DeviceType, int]

#: value -> its DeviceType member, for every type the header names: a dict lookup where ``DeviceType(value)``
#: (an Enum call) would cost a microsecond on every exchange
MEMBERS: dict[int, DeviceType] = {int(member): member for member in DeviceType}


def stream_free(device_type: int) -> bool:
    """The device type's stream rule is "None only": no stream orders its memory (CPU-like devices)."""
    return device_type in DEVICE_NAMES and STREAM_RULES[DEVICE_STREAM_RULE.get(device_type, "none")].none_only


#: the device types whose memory no stream orders (:func:`stream_free`), as a table
STREAM_FREE: frozenset[int] = frozenset(t for t in DEVICE_NAMES if stream_free(t))


def default_stream(device_type: int) -> int | None:
    """The stream a consumer's ``stream=None`` names on ``device_type`` (CUDA 1, the legacy default stream;
    ROCm 0); None for devices without streams. dlbind passes it explicitly to producers on such devices."""
    return STREAM_RULES[DEVICE_STREAM_RULE.get(device_type, "none")].default


def unnamed_note(device_type: int) -> str:
    """For messages: "" for a device type the header names; else what a user needs to know of it (dlbind carries
    tensors on device types newer than its header, and refuses what needs policy for them)."""
    if device_type in DEVICE_NAMES:
        return ""
    return ", which this dlbind's DLPack header does not name (a header bump would name it)"


def device_name(device_type: int) -> str:
    """The user-facing name of a device type (``"cuda"``); ``"device type N"`` for values no header declares."""
    name = DEVICE_NAMES.get(device_type)
    return name if name is not None else f"device type {device_type}"


def parse_device(device: Any) -> Device:
    """Normalise the forms a user may write to ``(DeviceType, id)``; ValueError/TypeError otherwise."""
    if isinstance(device, str):
        name, _, index = device.partition(":")
        value = DEVICE_BY_NAME.get(name)
        if value is None:
            raise ValueError(
                f"unknown device {device!r}{suggestion(name, DEVICE_BY_NAME)}; known: {', '.join(DEVICE_BY_NAME)}"
            )
        if index and not index.isdigit():
            raise ValueError(f"invalid device index in {device!r}: expected 'name' or 'name:N'")
        return MEMBERS[value], int(index or 0)
    if isinstance(device, tuple) and len(device) == 2:
        kind, index = device
        if isinstance(kind, str):
            return parse_device(f"{kind}:{index}")
        number, at = int(kind), int(index)
        if number < 0:
            raise BufferError(f"invalid DLPack device type {number}: device types are >= 0")
        # a type newer than this runtime's header is carried as its number (policy refuses it where needed)
        return MEMBERS.get(number, number), at  # type: ignore[arg-type]
    raise TypeError(f"a device is 'cpu', 'cuda:0', or a (device_type, device_id) tuple, not {device!r}")


def producer_device(x: Any) -> Device:
    """What ``x.__dlpack_device__()`` says, as ``(DeviceType, id)``.

    A device id of ``None`` is read as 0 (paddle 3.3.1 reports ``(kDLCPU, None)``); anything that is
    not a pair of integers is a ``BufferError`` naming the producer.
    """
    dev = x.__dlpack_device__()
    try:
        kind, index = dev
    except (TypeError, ValueError):
        raise BufferError(f"{type(x).__name__}.__dlpack_device__() returned {dev!r}, not (device_type, id)") from None
    if index is None:
        index = 0
    try:
        if isinstance(kind, bool) or isinstance(index, bool):
            raise TypeError
        kind, index = operator.index(kind), operator.index(index)
    except TypeError:
        raise BufferError(f"{type(x).__name__}.__dlpack_device__() returned {dev!r}, not two integers") from None
    return parse_device((kind, index))


def check_stream(device_type: int, stream: object) -> None:
    """Refuse a stream argument that the array API does not allow for ``device_type``."""
    if stream is None:
        return
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, not {type(stream).__name__}")
    rule = STREAM_RULES[DEVICE_STREAM_RULE.get(device_type, "none")]
    if rule.none_only:
        raise BufferError(
            f"stream must be None for {device_name(device_type)} tensors (got {stream}){unnamed_note(device_type)}"
        )
    if stream < -1 or stream in rule.refused:
        raise BufferError(f"stream {stream} is not valid for {device_name(device_type)}: use {rule.allowed}")


def streams(device_type: int, stream: int | None, refused: frozenset[tuple[int, int]]) -> tuple[int | None, int | None]:
    """(asked, wanted) for an import from ``device_type`` with the consumer's ``stream``: the stream the producer
    is asked on, and the one the data must be ready on. None on a device with streams names its default stream,
    said explicitly as torch and CuPy do; a stream the producer ``refused`` (``(device type, stream)`` pairs;
    torch: CUDA's per-thread default) is asked on the device's default, which the stream wanted then waits
    for."""
    check_stream(device_type, stream)
    wanted = stream if stream is not None else default_stream(device_type)
    if refused and (device_type, wanted) in refused:
        return default_stream(device_type), wanted
    return wanted, wanted
