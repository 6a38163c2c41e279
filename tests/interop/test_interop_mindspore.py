"""mindspore <-> dlbind (2.10 with numpy 1.26.4: no __dlpack__, mindspore.utils.dlpack functions, legacy
capsules, crashes on NULL strides, refuses byte_offset). Not known to dlbind today."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from _suite import InteropSuite, compiled, require, version  # noqa: F401

require("mindspore")


class TestMindspore(InteropSuite):
    system: ClassVar[str] = "mindspore"
    module: ClassVar[str] = "mindspore"
    known: ClassVar[bool] = False

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.Tensor(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.asnumpy(), copy=True)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        unknown = "MindSpore has no __dlpack__ (mindspore.utils.dlpack.to_dlpack); dlbind does not know it (TypeError)"
        return dict.fromkeys(["test_from_dlpack_*", "test_to_numpy_*", "test_to_torch"], unknown)
