"""dlbind-cuda: DLPack tensors on CUDA devices through the CUDA runtime (docs/cuda.md).

``empty`` and ``asarray`` make :class:`dlbind.Tensor` objects that own CUDA memory (device, pinned host or
managed); ``device_of`` says which device holds a pointer. A ``dlbind.Tensor`` on a CUDA device exports
``__cuda_array_interface__`` (v3), and ``dlbind.asdlpack``/``dlbind.from_dlpack`` import objects carrying
one, honouring its ``stream`` and finding the device from the pointer. Importing this module loads no CUDA
library: ``libcudart`` is opened on first use, and :func:`probe` says whether CUDA is usable here.
"""

from __future__ import annotations

from dlbind import __version__  # the core's: each backend is released at its core's version (docs/releasing.md)
from dlbind._backends import Probe
from dlbind_cuda._generated.declarations import HEADER_VERSION
from dlbind_cuda._runtime import CudaError, Unavailable
from dlbind_cuda._tensors import asarray, device_of, empty

__all__ = ["HEADER_VERSION", "CudaError", "Unavailable", "__version__", "asarray", "device_of", "empty", "probe"]


def probe() -> Probe:
    """Load the CUDA runtime (once) and say whether it is usable: see :func:`dlbind.backends`."""
    from dlbind_cuda._runtime import runtime

    return runtime().probe
