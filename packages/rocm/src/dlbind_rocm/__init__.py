"""dlbind-rocm: DLPack tensors on AMD GPUs through the HIP runtime (docs/rocm.md).

``empty`` and ``asarray`` make :class:`dlbind.Tensor` objects that own ROCm memory (device or pinned
host); ``device_of`` says which device holds a pointer. Importing this module loads no ROCm library:
``libamdhip64`` is opened on first use, and :func:`probe` says whether ROCm is usable here.
"""

from __future__ import annotations

from dlbind import __version__  # the core's: each backend is released at its core's version (docs/releasing.md)
from dlbind._backends import Probe
from dlbind_rocm._generated.declarations import HEADER_VERSION
from dlbind_rocm._runtime import HipError, Unavailable
from dlbind_rocm._tensors import asarray, device_of, empty

__all__ = ["HEADER_VERSION", "HipError", "Unavailable", "__version__", "asarray", "device_of", "empty", "probe"]


def probe() -> Probe:
    """Load the HIP runtime (once) and say whether it is usable: see :func:`dlbind.backends`."""
    from dlbind_rocm._runtime import runtime

    return runtime().probe
