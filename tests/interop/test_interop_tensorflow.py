"""tensorflow <-> dlbind (tensorflow-cpu 2.21: __dlpack__ ignores max_version; its importer takes only a
legacy capsule of compact data). EagerTensors are immutable."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("tensorflow")


class TestTensorflow(InteropSuite):
    system: ClassVar[str] = "tensorflow"
    module: ClassVar[str] = "tensorflow"
    immutable: ClassVar[bool] = True

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.constant(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
