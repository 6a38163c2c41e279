"""mindspore <-> dlbind (2.10 with numpy 1.26.4: no __dlpack__, mindspore.utils.dlpack functions, legacy
capsules, crashes on NULL strides, refuses byte_offset)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("mindspore")


class TestMindspore(InteropSuite):
    system: ClassVar[str] = "mindspore"
    module: ClassVar[str] = "mindspore"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.Tensor(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.asnumpy(), copy=True)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
