"""The object dlbind-cuda registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a CUDA tensor) imports Python only; ``libcudart``
is opened by the first :meth:`CudaBackend.probe` or call that needs it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._backends import Probe
from dlbind._generated.enums import DeviceType
from dlbind.devices import HOST_ACCESSIBLE, Device, device_name
from dlbind.export import Memory
from dlbind_cuda import _runtime, _tensors

__all__ = ["CudaBackend", "backend"]


class CudaBackend:
    """kDLCUDA, kDLCUDAHost and kDLCUDAManaged through the CUDA runtime (see :class:`dlbind._backends.Backend`)."""

    name = "cuda"
    device_types: tuple[int, ...] = (
        int(DeviceType.kDLCUDA),
        int(DeviceType.kDLCUDAHost),
        int(DeviceType.kDLCUDAManaged),
    )

    def probe(self) -> Probe:
        return _runtime.runtime().probe

    def wait(self, producer_stream: int, consumer_stream: int | None, device: Device) -> None:
        """``__dlpack__(stream=consumer_stream)`` of memory whose work is queued on ``producer_stream``.

        The core has checked ``consumer_stream`` by the device's rule and never calls this for -1. A
        consumer with ``stream=None`` on pinned or managed memory may read on the CPU: the producer's
        stream is synchronised. Otherwise the consumer's stream (None: the legacy default stream) waits
        for an event recorded on the producer's.
        """
        rt = _runtime.runtime()
        rt.require()
        if isinstance(producer_stream, bool) or not isinstance(producer_stream, int):
            raise TypeError(f"the producer's stream must be an int, not {type(producer_stream).__name__}")
        if producer_stream in (0, -1) or producer_stream < -1:
            raise BufferError(
                f"the producer's stream {producer_stream} is not a CUDA stream: 1 (legacy default), 2 (per-thread "
                "default) or a cudaStream_t (0 is ambiguous and disallowed, as __cuda_array_interface__ v3 says)"
            )
        host = consumer_stream is None and device[0] in HOST_ACCESSIBLE
        try:
            rt.wait(producer_stream, consumer_stream, device[1], host=host)
        except _runtime.CudaError as exc:
            where = f"{device_name(device[0])}:{device[1]}"
            raise BufferError(f"synchronising {where} streams failed: {exc}") from exc

    def copy_to_host(self, memory: Memory) -> Memory:
        return _tensors.copy_to_host(memory)

    def device_of(self, pointer: int) -> Device:
        return _tensors.device_of(pointer)

    def empty(self, shape: Sequence[int], dtype: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.empty(shape, dtype, device_id=device_id)

    def asarray(self, host_array: Any, *, device_id: int = 0) -> dlbind.Tensor:
        return _tensors.asarray(host_array, device_id=device_id)


backend = CudaBackend()
