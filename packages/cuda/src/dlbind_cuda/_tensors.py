"""CUDA tensors: ``empty``, ``asarray``, ``device_of`` and the host copy the core asks for.

The tensors are ordinary :class:`dlbind.Tensor` objects made through the core's producer
(``dlbind.from_pointer``) with the allocation attached as owner, so the core's export engine, capsules
and deleters serve them unchanged. Their memory has no queued work when they are returned (copies end
with the legacy default stream synchronised). The steps are :class:`dlbind._device_tensors.GpuTensors`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import dlbind
from dlbind._device_tensors import GpuTensors
from dlbind._generated.enums import DeviceType
from dlbind._gpu_runtime import GpuRuntime
from dlbind_cuda._runtime import Allocation, runtime

__all__ = ["asarray", "copy_on_device", "copy_to_host", "device_of", "empty"]

DEVICE_TYPES = {
    "device": DeviceType.kDLCUDA,
    "host": DeviceType.kDLCUDAHost,
    "managed": DeviceType.kDLCUDAManaged,
}


def _pointer_device_types(rt: GpuRuntime) -> Mapping[Any, DeviceType]:
    """What ``cudaPointerGetAttributes`` says (a ``cudaMemoryType``) -> DLPack."""
    lib = rt.lib
    return {
        lib.cudaMemoryTypeDevice: DeviceType.kDLCUDA,
        lib.cudaMemoryTypeHost: DeviceType.kDLCUDAHost,
        lib.cudaMemoryTypeManaged: DeviceType.kDLCUDAManaged,
    }


_TENSORS = GpuTensors("cuda", runtime, Allocation, DEVICE_TYPES, _pointer_device_types, lambda kind: f"{kind=}")


def empty(
    shape: Sequence[int] | int, dtype: Any = "float32", *, device_id: int = 0, memory: str = "device"
) -> dlbind.Tensor:
    """A new row-major tensor on CUDA device ``device_id``, its contents undefined.

    ``memory``: ``"device"`` (``cudaMalloc``, on ``kDLCUDA``), ``"host"`` (pinned, ``cudaMallocHost``,
    on ``kDLCUDAHost``) or ``"managed"`` (``cudaMallocManaged``, on ``kDLCUDAManaged``); pinned and managed memory
    is made by ``device_id`` but says device id 0, as dlpack.h says of them. ``dtype``: a
    :class:`dlbind.DType`, a DLPack name (``"float32"``) or anything ``numpy.dtype`` takes. The tensor
    owns its memory (freed when the last user lets go).
    """
    return _TENSORS.empty(shape, dtype, device_id, memory)


# The shared steps over this backend's runtime and memory kinds (dlbind._device_tensors.GpuTensors'); the core
# asks for copy_to_host and copy_on_device (through its backend object: dlbind._gpu_runtime.GpuBackend).
asarray, device_of = _TENSORS.asarray, _TENSORS.device_of
copy_to_host, copy_on_device = _TENSORS.copy_to_host, _TENSORS.copy_on_device
