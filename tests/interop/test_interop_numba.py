"""numba <-> dlbind (0.68, NUMBA_ENABLE_CUDASIM=1: simulator device arrays, host memory underneath; no DLPack
of its own)."""

from __future__ import annotations

import os
from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("numba.cuda")

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


class TestNumba(InteropSuite):
    system: ClassVar[str] = "numba"
    module: ClassVar[str] = "numba.cuda"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.to_device(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.copy_to_host(), copy=True)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        gaps: dict[str, str] = {}
        return gaps
