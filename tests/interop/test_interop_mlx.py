"""mlx <-> dlbind (mlx[cpu] 0.32: mlx.core.array(obj) imports; negative strides refused)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import InteropSuite, compiled, ndarray_ptr, require, version  # noqa: F401

require("mlx.core")


class TestMlx(InteropSuite):
    system: ClassVar[str] = "mlx"
    module: ClassVar[str] = "mlx.core"
    dtypes: ClassVar[tuple[str, ...]] = (
        "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
        "complex64",
    )  # fmt: skip

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.array(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(x, copy=True)

    def ptr(self, lib: Any, x: Any) -> int | None:
        return ndarray_ptr(np.asarray(memoryview(x)))  # mlx arrays export their own memory as a buffer

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}


def test_its_cpu_device_is_read_and_made_and_its_gpu_is_refused_not_guessed() -> None:
    # mlx's Device has a type and no index; its "gpu" is Metal or CUDA by the build: refused with the way out
    import mlx.core as mx

    import dlbind

    cpu = (dlbind.DeviceType.kDLCPU, 0)
    assert dlbind.device(mx.Device(mx.cpu)) == cpu == dlbind.device(mx.cpu)
    assert dlbind.from_dlpack(np.arange(3.0), device=mx.Device(mx.cpu)).device == cpu
    for gpu in (mx.Device(mx.gpu, 1), mx.gpu):
        with pytest.raises(ValueError, match=r"mlx's device .* is its 'gpu', which names no DLPack device"):
            dlbind.device(gpu)
    made = dlbind.device("cpu", to="mlx")
    assert type(made) is mx.Device and made == mx.Device(mx.cpu, 0) and dlbind.device(made) == cpu
    with pytest.raises(ValueError, match=r"^mlx has no device objects of metal: it makes those of cpu$"):
        dlbind.device("metal:0", to="mlx")  # its gpu: not made, as it is not read
