"""tensorflow <-> dlbind (tensorflow-cpu 2.21: __dlpack__ ignores max_version; its importer takes only a
legacy capsule of compact data). EagerTensors are immutable."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, require, version  # noqa: F401

import dlbind

require("tensorflow")


class TestTensorflow(InteropSuite):
    system: ClassVar[str] = "tensorflow"
    module: ClassVar[str] = "tensorflow"
    immutable: ClassVar[bool] = True

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.constant(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x.numpy(), copy=True)

    def write(self, lib: Any, x: Any, value: Any) -> bool:
        """TF's tensors refuse item assignment, but their own export is an unmarked legacy capsule: writable to
        every consumer (what issue 21 found writing through a read-only ndarray's alias)."""
        t = dlbind.from_dlpack(x.__dlpack__())
        if t.readonly:
            return False
        np.from_dlpack(t).reshape(-1)[0] = value
        return True

    def test_readonly_ndarray_is_copied(self, lib: Any) -> None:
        a = np.arange(6.0)
        a.flags.writeable = False
        y = dlbind.convert(a, to="tensorflow")
        assert not np.shares_memory(np.asarray(y), a) and y.numpy().tolist() == a.tolist()
        with pytest.raises(BufferError, match="unmarked legacy capsules"):
            dlbind.convert(a, to="tensorflow", copy=False)

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
