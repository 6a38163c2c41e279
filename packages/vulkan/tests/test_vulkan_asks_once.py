"""One exchange asks its producer once (issue 27): every route of `convert` and `from_dlpack` that starts from
device memory (kDLVulkan on a real device) calls the producer's `__dlpack__` once per exchange, in both builds.

Before, `convert(vulkan_tensor, to="numpy")` asked it three times in the compiled build (the C route asked
and gave up on device data, then Python imported it, then asked again for the host copy) and twice in the
pure build; each extra ask is an extra synchronisation on a device with streams.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_vulkan

pytestmark = pytest.mark.vulkan


class Counting:
    """A producer that counts the times it is asked (a dlbind-vulkan tensor inside)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.asked = inner, 0

    def __dlpack__(self, **kwargs: Any) -> Any:
        self.asked += 1
        return self.inner.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self.inner.__dlpack_device__()


def _values(out: Any) -> np.ndarray:
    if isinstance(out, np.ndarray):
        return out
    if type(out).__module__.startswith("torch"):
        return out.numpy()
    return np.from_dlpack(out, device="cpu", copy=True)


ROUTES: dict[str, Callable[[Any], Any]] = {
    "convert to numpy (a host copy)": lambda p: dlbind.convert(p, to="numpy"),
    "convert to numpy, device='cpu'": lambda p: dlbind.convert(p, to="numpy", device="cpu"),
    "convert to numpy, copy=True": lambda p: dlbind.convert(p, to="numpy", copy=True),
    "convert to torch (a host copy)": lambda p: dlbind.convert(p, to="torch"),
    "from_dlpack": lambda p: dlbind.from_dlpack(p),
    "from_dlpack, device='cpu', copy=True": lambda p: dlbind.from_dlpack(p, device="cpu", copy=True),
    "from_dlpack, device='cpu'": lambda p: dlbind.from_dlpack(p, device="cpu"),
}


@pytest.mark.parametrize("route", list(ROUTES))
def test_the_producer_is_asked_once(route: str) -> None:
    if route.startswith("convert to torch"):
        pytest.importorskip("torch")
    values = np.arange(6.0).reshape(2, 3)
    for n in range(3):  # the type's first exchange, and the ones after it (plans and C routes cached)
        producer = Counting(dlbind_vulkan.asarray(values))
        out = ROUTES[route](producer)
        assert producer.asked == 1, f"exchange {n + 1}: asked {producer.asked} times"
        np.testing.assert_array_equal(_values(out), values)


def test_copy_false_is_refused_before_the_producer_is_asked() -> None:
    producer = Counting(dlbind_vulkan.asarray(np.arange(3.0)))
    with pytest.raises(BufferError, match="copy=False"):
        dlbind.convert(producer, to="numpy", copy=False)
    assert producer.asked == 0  # decided from its device: refused before it is asked
