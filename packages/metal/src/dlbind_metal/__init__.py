"""dlbind-metal: DLPack tensors on Apple GPUs (kDLMetal) through the Objective-C runtime (docs/metal.md).

kDLMetal's ``data`` is an ``id<MTLBuffer>`` and offsets live only in ``byte_offset``. ``empty`` and
``asarray`` make :class:`dlbind.Tensor` objects that own a new ``MTLBuffer``; ``device_of`` says which
device holds a buffer. Tensors of torch (MPS) and MLX are imported by ``dlbind.from_dlpack`` as they are;
this backend gives them host copies. Importing this module loads no library: ``libobjc`` and Metal are
opened on first use, and :func:`probe` says whether Metal is usable here (off macOS: "wrong platform").
"""

from __future__ import annotations

from dlbind import __version__  # the core's: each backend is released at its core's version (docs/releasing.md)
from dlbind._backends import Probe
from dlbind_metal._generated.declarations import HEADER_VERSION
from dlbind_metal._runtime import MetalError, Unavailable
from dlbind_metal._tensors import asarray, device_of, empty

__all__ = ["HEADER_VERSION", "MetalError", "Unavailable", "__version__", "asarray", "device_of", "empty", "probe"]


def probe() -> Probe:
    """Load the Objective-C runtime and Metal (once) and say whether Metal is usable: see :func:`dlbind.backends`."""
    from dlbind_metal._runtime import runtime

    return runtime().probe
