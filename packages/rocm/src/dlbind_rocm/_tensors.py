"""ROCm tensors: ``empty``, ``asarray``, ``device_of`` and the host copy the core asks for.

The tensors are ordinary :class:`dlbind.Tensor` objects made through the core's producer
(``dlbind.from_pointer``) with the allocation attached as owner, so the core's export engine, capsules
and deleters serve them unchanged. Their memory has no queued work when they are returned (copies end
with the default stream synchronised). The steps are :class:`dlbind._device_tensors.GpuTensors`'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dlbind
from dlbind._device_tensors import GpuTensors
from dlbind._generated.enums import DeviceType
from dlbind.devices import DevicePair
from dlbind_rocm._runtime import Allocation, runtime

__all__ = ["asarray", "copy_on_device", "copy_to_host", "device_of", "empty"]

DEVICE_TYPES = {"device": DeviceType.kDLROCM, "host": DeviceType.kDLROCMHost}
# what hipPointerGetAttributes says -> DLPack (managed memory is the GPU's: DLPack has no ROCm managed type)
POINTER_DEVICE_TYPES = {"device": DeviceType.kDLROCM, "managed": DeviceType.kDLROCM, "host": DeviceType.kDLROCMHost}

_TENSORS = GpuTensors("rocm", runtime, Allocation, DEVICE_TYPES, lambda rt: POINTER_DEVICE_TYPES, str)


def empty(
    shape: Sequence[int] | int, dtype: Any = "float32", *, device_id: int = 0, memory: str = "device"
) -> dlbind.Tensor:
    """A new row-major tensor on ROCm device ``device_id``, its contents undefined.

    ``memory``: ``"device"`` (``hipMalloc``, on ``kDLROCM``) or ``"host"`` (pinned, ``hipHostMalloc``,
    on ``kDLROCMHost``). ``dtype``: a
    :class:`dlbind.DType`, a DLPack name (``"float32"``) or anything ``numpy.dtype`` takes. The tensor
    owns its memory (freed when the last user lets go).
    """
    return _TENSORS.empty(shape, dtype, device_id, memory)


def asarray(host_array: Any, *, device_id: int = 0, memory: str = "device") -> dlbind.Tensor:
    """Copy an array (anything ``dlbind.from_dlpack`` imports) to a new tensor on ROCm device ``device_id``.

    The result is row-major and writable, and owns its memory (``memory`` as in :func:`empty`). Device
    tensors of any backend are first copied to the host through their backend.
    """
    return _TENSORS.asarray(host_array, device_id, memory)


def device_of(pointer: int) -> DevicePair:
    """``(device type, device id)`` of a pointer the HIP runtime knows (``hipPointerGetAttributes``).

    Device and managed memory is ``kDLROCM``, pinned host memory ``kDLROCMHost``; memory the runtime does
    not know (plain host memory) is a ``BufferError``.
    """
    return _TENSORS.device_of(pointer)


# The core's copy_to_host and copy_on_device (the backend object's: dlbind._gpu_runtime.GpuBackend).
copy_to_host = _TENSORS.copy_to_host
copy_on_device = _TENSORS.copy_on_device
