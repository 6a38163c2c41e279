"""The object dlbind-rocm registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a ROCm tensor) imports Python only; ``libamdhip64``
is opened by the first :meth:`RocmBackend.probe` or call that needs it.
"""

from __future__ import annotations

from dlbind._generated.enums import DeviceType
from dlbind._gpu_runtime import GpuBackend
from dlbind.devices import STREAM_MAX
from dlbind_rocm import _runtime, _tensors

__all__ = ["RocmBackend", "backend"]


class RocmBackend(GpuBackend):
    """kDLROCM and kDLROCMHost through the HIP runtime (see :class:`dlbind._backends.Backend`).

    :meth:`wait` is ``__dlpack__(stream=consumer_stream)`` of memory whose work is queued on
    ``producer_stream``: the core has checked ``consumer_stream`` by ROCm's rule (None or 0 the default
    stream, 1 and 2 refused) and never calls it for -1. A consumer with ``stream=None`` on pinned memory
    may read on the CPU: the producer's stream is synchronised. Otherwise the consumer's stream waits for
    an event recorded on the producer's.
    """

    name = "rocm"
    device_types: tuple[int, ...] = (int(DeviceType.kDLROCM), int(DeviceType.kDLROCMHost))
    runtime = staticmethod(_runtime.runtime)
    tensors = _tensors

    def refuses(self, producer_stream: int) -> bool:
        return producer_stream in (1, 2) or not 0 <= producer_stream <= STREAM_MAX

    def refusal(self, producer_stream: int) -> str:
        return (
            f"the producer's stream {producer_stream} is not a ROCm stream: 0 (the default stream) or a "
            "hipStream_t (1 and 2 are refused on ROCm)"
        )


backend = RocmBackend()
