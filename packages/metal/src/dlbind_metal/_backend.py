"""The object dlbind-metal registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a Metal tensor) imports Python only; ``libobjc``
and Metal are opened by the first :meth:`MetalBackend.probe` or call that needs them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._backends import Probe
from dlbind._generated.enums import DeviceType
from dlbind.devices import Device
from dlbind.export import Memory
from dlbind_metal import _runtime, _tensors

__all__ = ["MetalBackend", "backend"]


class MetalBackend:
    """kDLMetal through the Objective-C runtime (see :class:`dlbind._backends.Backend`)."""

    name = "metal"
    device_types: tuple[int, ...] = (int(DeviceType.kDLMetal),)

    def probe(self) -> Probe:
        return _runtime.runtime().probe

    def wait(self, producer_stream: int, consumer_stream: int | None, device: Device) -> None:
        """kDLMetal has no DLPack stream (``spec/devices.toml``: the rule "none"): nothing can be waited on.

        The core refuses any ``stream`` but None for Metal before it gets here; a call is a caller's error.
        """
        raise BufferError(
            f"kDLMetal has no DLPack stream (stream must be None), not producer {producer_stream!r} / "
            f"consumer {consumer_stream!r}: a Metal producer hands over a buffer with its GPU work completed"
        )

    def copy_to_host(self, memory: Memory) -> Memory:
        return _tensors.copy_to_host(memory)

    def copy_on_device(self, memory: Memory, stream: int) -> Memory:
        """No device copy yet: BufferError saying so (a host copy is :meth:`copy_to_host`)."""
        raise BufferError(
            "dlbind-metal has no device copy yet: kDLMetal memory is copied to the host only; copy it with the "
            "array library that made it"
        )

    def device_of(self, pointer: int) -> Device:
        return _tensors.device_of(pointer)

    def empty(self, shape: Sequence[int], dtype: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.empty(shape, dtype, device_id=device_id)

    def asarray(self, host_array: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.asarray(host_array, device_id=device_id)


backend = MetalBackend()
