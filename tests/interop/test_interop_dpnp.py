"""dpnp <-> dlbind (0.20: kDLOneAPI arrays on the OpenCL CPU device; spec-conformant DLPack; dpctl.tensor is
dpnp.tensor now)."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest
from _suite import DEVICES, InteropSuite, compiled, require, values, version  # noqa: F401

import dlbind

require("dpnp")


class TestDpnp(InteropSuite):
    system: ClassVar[str] = "dpnp"
    module: ClassVar[str] = "dpnp"

    def make(self, lib: Any, a: np.ndarray) -> Any:
        return lib.asarray(np.array(a, copy=True))

    def to_numpy(self, lib: Any, x: Any) -> np.ndarray:
        return np.array(lib.asnumpy(x), copy=True)

    @pytest.mark.parametrize(
        "make",
        [lambda a: a, lambda a: a[::-1, ::-2], lambda a: a.T, lambda a: a[1, 2, ...], lambda a: a[:0]],
        ids=["contiguous", "negative strides", "transposed", "0-d", "empty"],
    )
    @pytest.mark.parametrize("readonly", [False, True])
    def test_host_data_becomes_a_dpnp_array(self, lib: Any, make: Any, readonly: bool) -> None:
        """issue 21: dpnp.from_dlpack of host data answers numpy arrays, and its device= fallback fails on
        read-only, strided, 0-d and empty arrays; dlbind copies host data in with dpnp.asarray."""
        a = make(np.arange(12.0).reshape(3, 4))
        a.flags.writeable = not readonly
        y = dlbind.convert(a, to="dpnp")
        assert isinstance(y, lib.ndarray), type(y)
        np.testing.assert_array_equal(lib.asnumpy(y), a)

    def test_byte_offset_reaches_the_right_values(self, lib: Any) -> None:
        """dpnp's import of host data ignores byte_offset (wrong values); dlbind copies host data in itself."""
        base = np.arange(12.0).reshape(3, 4)
        p = dlbind.from_pointer(base.ctypes.data, (2, 4), "float64", byte_offset=32, owner=base)
        y = dlbind.convert(p, to="dpnp")
        assert isinstance(y, lib.ndarray)
        np.testing.assert_array_equal(lib.asnumpy(y), base[1:])

    @pytest.mark.parametrize("device", list(DEVICES))
    def test_from_numpy_device(self, lib: Any, device: str) -> None:
        """The suite's rule, for a system with no host arrays: dpnp holds SYCL (kDLOneAPI) memory only, so host
        data asked for on the host (kDLCPU, in every form of device=) cannot become a dpnp array: BufferError
        naming the device (issue 21). dpnp.from_dlpack(x, device=(kDLCPU, 0)) answers a numpy.ndarray; its
        device="cpu" is a SYCL filter selector (the OpenCL CPU device, kDLOneAPI), not kDLCPU."""
        with pytest.raises(BufferError, match="no device cpu:0"):
            dlbind.convert(values("float32"), to="dpnp", device=DEVICES[device])

    def test_host_data_copy_false_and_cpu_are_refused(self, lib: Any) -> None:
        a = np.arange(4.0)
        with pytest.raises(BufferError, match="copy=False"):
            dlbind.convert(a, to="dpnp", copy=False)
        with pytest.raises(BufferError):
            dlbind.convert(a, to="dpnp", device="cpu")

    @classmethod
    def own_gaps(cls) -> dict[str, str]:
        return {}
