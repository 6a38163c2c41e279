"""dpnp <-> dlbind (0.20: kDLOneAPI arrays on the OpenCL CPU device; spec-conformant DLPack; dpctl.tensor is
dpnp.tensor now)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("dpnp")


class TestDpnp(InteropSuite):
    system: ClassVar[str] = "dpnp"
    module: ClassVar[str] = "dpnp"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.asarray(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(lib.asnumpy(x), copy=True)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
