"""The arguments of every ``__dlpack__`` dlbind answers, checked as the array API says, in both builds: ``max_version``
is None or a ``(major, minor)`` tuple of two ints, and a ``stream`` belongs to the device exported to (an export to
the CPU, or a consumer asking for one, takes None only)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind import DeviceType

EXPORTERS: dict[str, Callable[[], Any]] = {
    "Tensor": lambda: dlbind.from_dlpack(np.arange(4.0)),
    "asdlpack(bytearray)": lambda: dlbind.asdlpack(bytearray(8)),
    "asdlpack(strided ndarray)": lambda: dlbind.asdlpack(np.arange(8.0)[::2]),
    "compat(ndarray)": lambda: dlbind.compat(np.arange(4.0)),
}

WRONG_TYPES = [1, "1", (1,), (1, 0, 0), [1, 0], (1.0, 0), (True, 0), (1, "0"), (1, None)]
WRONG_VALUES = [(-1, 0), (1, -1)]


@pytest.mark.parametrize("make", EXPORTERS.values(), ids=EXPORTERS.keys())
@pytest.mark.parametrize("version", WRONG_TYPES, ids=repr)
def test_a_max_version_of_another_type_is_a_type_error(make: Callable[[], Any], version: object) -> None:
    with pytest.raises(TypeError, match=r"max_version must be None or a \(major, minor\) tuple of two ints"):
        make().__dlpack__(max_version=version)


@pytest.mark.parametrize("make", EXPORTERS.values(), ids=EXPORTERS.keys())
@pytest.mark.parametrize("version", WRONG_VALUES, ids=repr)
def test_a_negative_max_version_is_a_value_error(make: Callable[[], Any], version: object) -> None:
    with pytest.raises(ValueError, match=r"max_version must be a \(major, minor\) version"):
        make().__dlpack__(max_version=version)


@pytest.mark.parametrize("make", EXPORTERS.values(), ids=EXPORTERS.keys())
def test_versions_that_are_right_give_the_capsule_they_ask(make: Callable[[], Any]) -> None:
    """The checks refuse nothing the spec allows: major 0 asks for a legacy capsule, 1 and later (a newer major
    than the producer's too) a versioned one."""
    versioned = "dltensor_versioned" if dlbind.DLPACK_VERSION[0] >= 1 else "dltensor"
    for version, name in (((0, 8), "dltensor"), ((1, 0), versioned), ((2, 5), versioned), (None, "dltensor")):
        capsule = make().__dlpack__(max_version=version)
        assert f'"{name}"' in repr(capsule), (version, capsule)
        dlbind.from_dlpack(capsule)  # consumed: released


class _OnADevice:
    """A producer of host data that says it is on CUDA (as a GPU library's array does) and keeps what each
    ``__dlpack__`` call asked; it exports to the CPU when asked (its own copy)."""

    def __init__(self) -> None:
        self.data = np.arange(3.0)
        self.calls: list[dict[str, Any]] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DeviceType.kDLCUDA, 0)

    def __dlpack__(self, **kwargs: Any) -> object:
        self.calls.append(kwargs)
        if kwargs.get("dl_device") is None or tuple(kwargs["dl_device"]) != (DeviceType.kDLCPU, 0):
            raise BufferError("this producer only exports to the CPU here")
        return dlbind.asdlpack(self.data.copy()).__dlpack__(max_version=kwargs.get("max_version"))


def test_a_consumer_asking_for_host_data_asks_on_no_stream() -> None:
    """from_dlpack(device="cpu") of data on a device with streams, where no dlbind backend copies it (none is
    installed, or copy=False): the producer is asked for the CPU with stream=None, as the spec says of an export to
    the CPU (the producer then synchronises its own work), never with the device's default stream."""
    for copy in (None, True):
        x = _OnADevice()
        t = dlbind.from_dlpack(x, device="cpu", copy=copy)
        assert t.device == (DeviceType.kDLCPU, 0) and np.array_equal(np.asarray(t), x.data)
        assert x.calls and all(call["stream"] is None for call in x.calls), x.calls
        assert x.calls[-1]["dl_device"] == (DeviceType.kDLCPU, 0), x.calls


@pytest.mark.parametrize("device", [(1.5, 0), (1, 0.0), (True, 0), (1, None), (1, "0")], ids=repr)
def test_a_device_tuple_of_other_than_ints_is_a_type_error(device: object) -> None:
    """``int()`` would truncate 1.5 to the CPU: the type and the index must be ints, wherever a device is taken."""
    x = np.arange(3.0)
    with pytest.raises(TypeError, match=r"a device tuple is \(device_type, device_id\), two ints"):
        dlbind.from_dlpack(x, device=device)
    with pytest.raises(TypeError, match=r"a device tuple is \(device_type, device_id\), two ints"):
        dlbind.from_dlpack(x).__dlpack__(max_version=(1, 0), dl_device=device)


def test_a_negative_device_id_is_refused_as_a_negative_device_type_is() -> None:
    with pytest.raises(BufferError, match=r"invalid device id -1 in \(1, -1\): device ids are >= 0"):
        dlbind.from_dlpack(np.arange(3.0), device=(1, -1))
    assert dlbind.from_dlpack(np.arange(3.0), device=(np.int64(1), np.int32(0))).device == (DeviceType.kDLCPU, 0)


class _RefusingOnADevice:
    """A producer on CUDA whose ``__dlpack__`` refuses every export (a BufferError), counting its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __dlpack_device__(self) -> tuple[int, int]:
        return (DeviceType.kDLCUDA, 0)

    def __dlpack__(self, **kwargs: Any) -> object:
        self.calls += 1
        raise BufferError("this producer refuses")


def test_a_refusal_on_a_device_with_streams_is_asked_once() -> None:
    """from_dlpack asks the producer once: its refusal is the answer (no host buffer carries the data), in both
    builds and on every call (the compiled build's plain import asked again in Python)."""
    for _ in range(3):  # the first call plans the type, the later ones take the compiled build's plain import
        x = _RefusingOnADevice()
        with pytest.raises(BufferError, match="this producer refuses"):
            dlbind.from_dlpack(x)
        assert x.calls == 1
