"""The object dlbind-cuda registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a CUDA tensor) imports Python only; ``libcudart``
is opened by the first :meth:`CudaBackend.probe` or call that needs it.
"""

from __future__ import annotations

from dlbind._generated.enums import DeviceType
from dlbind._gpu_runtime import GpuBackend
from dlbind.devices import STREAM_MAX
from dlbind_cuda import _runtime, _tensors

__all__ = ["CudaBackend", "backend"]


class CudaBackend(GpuBackend):
    """kDLCUDA, kDLCUDAHost and kDLCUDAManaged through the CUDA runtime (see :class:`dlbind._backends.Backend`).

    :meth:`wait` is ``__dlpack__(stream=consumer_stream)`` of memory whose work is queued on
    ``producer_stream``: the core has checked ``consumer_stream`` by the device's rule and never calls it
    for -1. A consumer with ``stream=None`` on pinned or managed memory may read on the CPU: the producer's
    stream is synchronised. Otherwise the consumer's stream (None: the legacy default stream) waits for an
    event recorded on the producer's.
    """

    name = "cuda"
    device_types: tuple[int, ...] = (
        int(DeviceType.kDLCUDA),
        int(DeviceType.kDLCUDAHost),
        int(DeviceType.kDLCUDAManaged),
    )
    runtime = staticmethod(_runtime.runtime)
    tensors = _tensors

    def refuses(self, producer_stream: int) -> bool:
        return producer_stream in (0, -1) or not -1 <= producer_stream <= STREAM_MAX

    def refusal(self, producer_stream: int) -> str:
        return (
            f"the producer's stream {producer_stream} is not a CUDA stream: 1 (legacy default), 2 (per-thread "
            "default) or a cudaStream_t (0 is ambiguous and disallowed, as __cuda_array_interface__ v3 says)"
        )


backend = CudaBackend()
