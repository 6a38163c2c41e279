"""The object dlbind-metal registers under the ``dlbind.backends`` entry-point group.

Loading it (``dlbind.backends()``, or the core routing a Metal tensor) imports Python only; ``libobjc``
and Metal are opened by the first :meth:`MetalBackend.probe` or call that needs them.
"""

from __future__ import annotations

from dlbind._backends import StreamFreeBackend
from dlbind._generated.enums import DeviceType
from dlbind_metal import _runtime, _tensors

__all__ = ["MetalBackend", "backend"]


class MetalBackend(StreamFreeBackend):
    """kDLMetal through the Objective-C runtime (see :class:`dlbind._backends.Backend`): no DLPack stream, no
    device copy yet (:class:`dlbind._backends.StreamFreeBackend`)."""

    name = "metal"
    device_types: tuple[int, ...] = (int(DeviceType.kDLMetal),)
    runtime = staticmethod(_runtime.runtime)
    tensors = _tensors


backend = MetalBackend()
