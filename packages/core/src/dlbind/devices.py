"""Devices: parsing the forms users write, and the stream rules of each device type.

A device is ``(DeviceType, device_id)``; users may also write ``"cpu"``, ``"cuda:1"``, ``("cuda", 0)``
or ``(2, 0)``. Names, host access and stream rules are the generated tables (``spec/devices.toml``
joined with the header's ``DLDeviceType``): CUDA ``None``/1 is the legacy default stream, 2 the
per-thread default, -1 "do not synchronize", 0 is refused; ROCm ``None``/0 is the default stream and
1, 2 are refused; devices without streams accept only ``None``.
"""

from __future__ import annotations

import ctypes
import operator
from typing import Any, NamedTuple

from dlbind._generated.adapters import ADAPTERS, Adapter
from dlbind._generated.enums import DeviceType
from dlbind._generated.tables import DEVICE_BY_NAME, DEVICE_NAMES, DEVICE_STREAM_RULE, HOST_DEVICES, STREAM_RULES
from dlbind._names import suggestion

__all__ = [
    "DEFAULT_STREAMS", "HOST_ACCESSIBLE", "STREAM_FREE", "STREAM_MAX", "Device", "DevicePair", "check_stream",
    "default_stream", "device_name", "parse_device", "stream_free", "streams", "unnamed_note",
]  # fmt: skip

#: Device types whose memory the CPU reads directly (spec/devices.toml: ``host = true``).
HOST_ACCESSIBLE = HOST_DEVICES


#: value -> its DeviceType member, for every type the header names: a dict lookup where ``DeviceType(value)``
#: (an Enum call) would cost a microsecond on every exchange
MEMBERS: dict[int, DeviceType] = {int(member): member for member in DeviceType}


def stream_free(device_type: int) -> bool:
    """The device type's stream rule is "None only": no stream orders its memory (CPU-like devices)."""
    return device_type in DEVICE_NAMES and STREAM_RULES[DEVICE_STREAM_RULE.get(device_type, "none")].none_only


#: the device types whose memory no stream orders (:func:`stream_free`), as a table
STREAM_FREE: frozenset[int] = frozenset(t for t in DEVICE_NAMES if stream_free(t))

#: The largest stream integer: a stream handle is a pointer, which the compiled build holds in a C ``long long``
#: (fastpath.h's DLBIND_STREAM_MAX, the same bound); a larger int names no stream (cast to a handle, 2**64 + 7
#: would be 0x7), and is refused as any other stream the rule does not take.
STREAM_MAX = min(2**63 - 1, 2 ** (8 * ctypes.sizeof(ctypes.c_void_p)) - 1)


#: device type -> the stream a consumer's ``stream=None`` names there, for the devices with streams (a dict lookup,
#: no call: what ``Tensor.copy`` reads)
DEFAULT_STREAMS: dict[int, int] = {
    kind: default for kind, rule in DEVICE_STREAM_RULE.items() if (default := STREAM_RULES[rule].default) is not None
}


def default_stream(device_type: int) -> int | None:
    """The stream a consumer's ``stream=None`` names on ``device_type`` (CUDA 1, the legacy default stream;
    ROCm 0); None for devices without streams. dlbind passes it explicitly to producers on such devices."""
    return DEFAULT_STREAMS.get(device_type)


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


_PACKAGE = __name__.rpartition(".")[0]  # dlbind, or a vendored copy's package

#: A device as a plain pair ``(DeviceType, device_id)``: what memory descriptions and backends carry (a
#: :class:`Device` is one).
DevicePair = tuple[DeviceType, int]


class Device(NamedTuple):
    """A device: ``(device_type, device_id)``, DLDevice's fields, as a tuple (``kind, index = device``; equal to
    ``(DeviceType.kDLCUDA, 1)`` and ``(2, 1)``) that says its name (``str(device)``: ``"cuda:1"``) and gives
    ``__dlpack_device__()``, the DLPack device protocol: what :attr:`dlbind.Tensor.device` and
    :func:`dlbind.device` return. ``device_type`` is a :class:`dlbind.DeviceType`, or the plain number of a type
    newer than this runtime's header."""

    device_type: DeviceType
    device_id: int

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(device type, device id)`` as plain integers."""
        return int(self.device_type), self.device_id

    @property
    def name(self) -> str:
        """The device type's name (``"cuda"``)."""
        return device_name(self.device_type)

    def __str__(self) -> str:
        return f"{device_name(self.device_type)}:{self.device_id}"

    def __repr__(self) -> str:
        return f"{_PACKAGE}.Device({self})"


_made = tuple.__new__  # a Device of a checked pair, without NamedTuple's Python-level __new__


def parse_device(device: Any) -> Device:
    """Normalise the forms a user may write to a :class:`Device`: ``"cuda:1"``, ``("cuda", 1)``, ``(2, 1)``, a
    Device, or a system's own device object (:func:`dlbind.device` reads it); ValueError/TypeError otherwise."""
    if type(device) is Device:
        return device
    if isinstance(device, str):
        name, _, index = device.partition(":")
        value = DEVICE_BY_NAME.get(name)
        if value is None:  # a system's own spelling
            name, _, index = _own_spelling(device).partition(":")
            value = DEVICE_BY_NAME.get(name)
        if value is None:
            raise ValueError(
                f"unknown device {device!r}{suggestion(name, DEVICE_BY_NAME)}; known: {', '.join(DEVICE_BY_NAME)}"
            )
        if index and not index.isdigit():
            raise ValueError(f"invalid device index in {device!r}: expected 'name' or 'name:N'")
        return _made(Device, (MEMBERS[value], int(index or 0)))
    if isinstance(device, tuple) and len(device) == 2:
        kind, index = device
        if isinstance(kind, str):
            return parse_device(f"{kind}:{index}")
        number, at = _whole(kind, device), _whole(index, device)
        if number < 0:
            raise BufferError(f"invalid DLPack device type {number}: device types are >= 0")
        if at < 0:
            raise BufferError(f"invalid device id {at} in {device!r}: device ids are >= 0")
        # a type newer than this runtime's header is carried as its number (policy refuses it where needed)
        return _made(Device, (MEMBERS.get(number, number), at))
    return _device_object(device)


def _whole(value: Any, device: Any) -> int:
    """A device tuple's type or index as an int (an int, or what ``operator.index`` takes: numpy's integers);
    TypeError for anything else (a float, a bool), which ``int()`` would have truncated."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)
        except TypeError:
            pass
    raise TypeError(f"a device tuple is (device_type, device_id), two ints, not {device!r}")


def _own_spelling(text: str) -> str:
    """A device string in dlbind's spelling: dlbind's names in any case (tinygrad's ``"CUDA:1"``, MindSpore's
    ``"CPU"``), and TensorFlow's device paths (``"/job:localhost/replica:0/task:0/device:GPU:1"``) by its row's
    ``[devices]`` names. A bare ``"gpu"`` stays unknown: CUDA or ROCm, only the system that says it knows."""
    if text.startswith("/"):
        name, sep, index = text.rpartition("device:")[2].partition(":")
        return _theirs("tensorflow", name) + sep + index
    name, sep, index = text.partition(":")
    return name.lower() + sep + index


def _theirs(system: str, name: str) -> str:
    """dlbind's device name for what system ``system``'s row calls ``name`` (case ignored; unknown: lower-cased)."""
    row = ADAPTERS.get(system)
    said = {} if row is None else {theirs.lower(): ours for ours, theirs in row.device_kind_names}
    return said.get(name.lower(), name.lower())


def _device_object(obj: Any) -> Device:
    """A system's device object as a Device: what its ``__dlpack_device__()`` says, else as its row's ``[devices]``
    reads it (``torch.device``, jax's, tvm-ffi's, CuPy's, MXNet's, Arrow's); TypeError for anything else."""
    if not isinstance(obj, type) and callable(getattr(obj, "__dlpack_device__", None)):
        try:
            return producer_device(obj)
        except BufferError as exc:  # paddle's CUDA Device on a CPU build raises
            raise ValueError(str(exc)) from None
    row = _device_row(type(obj))
    if row is None:
        raise TypeError(
            f"a device is 'cpu', 'cuda:0', a (device_type, device_id) tuple, an object with __dlpack_device__ or a "
            f"device object of a system {_PACKAGE} knows, not {obj!r}"
        )
    if row.device_kind:
        kind: Any = row.device_kind
    else:
        kind = _attribute(obj, row.device_type_of)
    index = _attribute(obj, row.device_index_of) if row.device_index_of else None
    if isinstance(kind, str):
        name, sep, suffix = kind.partition(":")
        try:
            named = parse_device(_theirs(row.name, name) + sep + suffix)
        except ValueError:  # a name of its own that names no one DLPack device (MLX's "gpu": Metal or CUDA)
            raise ValueError(
                f"{row.name}'s device {obj!r} is its {kind!r}, which names no DLPack device {_PACKAGE} can tell: give "
                f"the device as {_PACKAGE} names it ('cuda:1', 'metal:0')"
            ) from None
        at = named.device_id if index is None else index
        return _made(Device, (named.device_type, 0 if at is None or at < 0 else int(at)))
    return parse_device((int(getattr(kind, "value", kind)), 0 if index is None or index < 0 else int(index)))


def _attribute(obj: Any, spec: str) -> Any:
    """What ``obj`` gives at ``spec``: a dotted path of attributes and ``method()`` calls (``sycl_device.
    get_device_id()``); ``a or b``: the first of the paths whose names ``obj`` has (dpctl's SyclDevice has
    ``get_device_id()``, its queues and dpnp's devices a ``sycl_device``)."""
    paths = spec.split(" or ")
    for path in paths:
        value, steps = obj, path.split(".")
        for i, step in enumerate(steps):
            name = step.removesuffix("()")
            if (i < len(steps) - 1 or len(paths) > 1) and not hasattr(value, name):
                break
            value = getattr(value, name)() if step.endswith("()") else getattr(value, name)
        else:
            return value
    raise TypeError(f"{type(obj).__name__} has none of {spec!r} (its row's devices.type or devices.index)")


def _device_row(kind: type) -> Adapter | None:
    """The row whose ``[devices]`` classes ``kind`` is one of (along its MRO), or None."""
    for klass in kind.__mro__:
        name = f"{klass.__module__}.{klass.__qualname__}"
        for row in ADAPTERS.values():
            if name in row.device_classes:
                return row
    return None


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
    if stream < -1 or stream > STREAM_MAX or stream in rule.refused:
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
