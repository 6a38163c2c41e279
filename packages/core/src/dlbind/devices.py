"""Devices: parsing the forms users write, and the stream rules of each device type.

A device is ``(DeviceType, device_id)``; users may also write ``"cpu"``, ``"cuda:1"``, ``("cuda", 0)``
or ``(2, 0)``. Stream rules follow the array API's ``__dlpack__``: CUDA ``None``/1 is the legacy
default stream, 2 the per-thread default, -1 "do not synchronize", 0 is refused; ROCm ``None``/0 is
the default stream and 1, 2 are refused; CPU-like devices accept only ``None``.
"""

from __future__ import annotations

from typing import Any

from dlbind._generated.enums import DeviceType

__all__ = ["Device", "check_stream", "parse_device"]

Device = tuple[DeviceType, int]

_NAMES: dict[str, DeviceType] = {
    "cpu": DeviceType.kDLCPU,
    "cuda": DeviceType.kDLCUDA,
    "cuda_host": DeviceType.kDLCUDAHost,
    "cuda_managed": DeviceType.kDLCUDAManaged,
    "rocm": DeviceType.kDLROCM,
    "rocm_host": DeviceType.kDLROCMHost,
    "opencl": DeviceType.kDLOpenCL,
    "vulkan": DeviceType.kDLVulkan,
    "metal": DeviceType.kDLMetal,
    "oneapi": DeviceType.kDLOneAPI,
    "webgpu": DeviceType.kDLWebGPU,
    "hexagon": DeviceType.kDLHexagon,
    "maia": DeviceType.kDLMAIA,
    "trn": DeviceType.kDLTrn,
}
# Device types whose memory the CPU reads directly.
HOST_ACCESSIBLE = frozenset(
    {DeviceType.kDLCPU, DeviceType.kDLCUDAHost, DeviceType.kDLCUDAManaged, DeviceType.kDLROCMHost}
)

# device type -> (streams refused, streams with a fixed meaning). Any int > 2 is a stream handle.
_STREAM_RULES: dict[DeviceType, tuple[frozenset[int], frozenset[int]]] = {
    DeviceType.kDLCUDA: (frozenset({0}), frozenset({-1, 1, 2})),
    DeviceType.kDLCUDAManaged: (frozenset({0}), frozenset({-1, 1, 2})),
    DeviceType.kDLROCM: (frozenset({1, 2}), frozenset({-1, 0})),
}


def stream_free(device_type: int) -> bool:
    """The device type's stream rule is "None only": no stream orders its memory (CPU-like devices)."""
    return device_type in DeviceType._value2member_map_ and DeviceType(device_type) not in _STREAM_RULES


def device_name(device_type: int) -> str:
    for name, member in _NAMES.items():
        if member == device_type:
            return name
    return f"device type {device_type}"


def parse_device(device: Any) -> Device:
    """Normalise the forms a user may write to ``(DeviceType, id)``; ValueError/TypeError otherwise."""
    if isinstance(device, str):
        name, _, index = device.partition(":")
        if name not in _NAMES:
            raise ValueError(f"unknown device {device!r}; known: {', '.join(_NAMES)}")
        return _NAMES[name], int(index or 0)
    if isinstance(device, tuple) and len(device) == 2:
        kind, index = device
        if isinstance(kind, str):
            return parse_device(f"{kind}:{index}")
        try:
            return DeviceType(int(kind)), int(index)
        except ValueError:
            raise BufferError(f"unknown DLPack device type {kind}") from None
    raise TypeError(f"a device is 'cpu', 'cuda:0', or a (device_type, device_id) tuple, not {device!r}")


def check_stream(device_type: int, stream: object) -> None:
    """Refuse a stream argument that the array API does not allow for ``device_type``."""
    if stream is None:
        return
    if isinstance(stream, bool) or not isinstance(stream, int):
        raise TypeError(f"stream must be None or an int, not {type(stream).__name__}")
    rules = _STREAM_RULES.get(DeviceType(device_type)) if device_type in DeviceType._value2member_map_ else None
    if rules is None:
        raise BufferError(f"stream must be None for {device_name(device_type)} tensors (got {stream})")
    refused, _ = rules
    if stream < -1 or stream in refused:
        allowed = (
            "None, -1, 1 (legacy default), 2 (per-thread default) or a stream handle"
            if 0 in refused
            else ("None, -1, 0 (default) or a stream handle")
        )
        raise BufferError(f"stream {stream} is not valid for {device_name(device_type)}: use {allowed}")
