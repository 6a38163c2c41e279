"""``__dlpack__(stream=...)`` on ROCm memory, on the recording HIP runtime: which calls synchronise which
streams.

The producer's stream is what a producer keeps in its :class:`dlbind.export.Memory` (the core asks the
backend to wait on it); the consumer's is the ``stream=`` of ``__dlpack__``. Every combination of
producer (none, the default stream 0, a user stream) and consumer (None, 0, -1, another user stream,
the same one) is checked against ROCm's rule; 1 and 2 are refused.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlbind
import dlbind_rocm
from dlbind import DeviceType
from dlbind.export import Memory
from dlbind.producer import Exporter
from dlbind_rocm._backend import backend
from rocm_recording import Recording, event_wait, user_stream

ROCM = (DeviceType.kDLROCM, 0)


def exporter(tensor: dlbind.Tensor, stream: int | None) -> Exporter:
    """``tensor``'s memory, as a producer whose work is queued on ``stream``."""
    memory = Memory(tensor.data_ptr, tensor.shape, tensor.strides, tensor.dtype, tensor.device, 0, False, tensor,
                    0, stream)  # fmt: skip
    return Exporter(memory)


@pytest.mark.parametrize("producer", [None, 0, "S1"], ids=lambda p: f"producer={p}")
@pytest.mark.parametrize("consumer", [None, 0, -1, "S2", "S1"], ids=lambda c: f"consumer={c}")
def test_every_stream_combination(rec: Recording, producer: int | str | None, consumer: int | str | None) -> None:
    streams = {"S1": user_stream(), "S2": user_stream()}
    names = {None: "default", 0: "default", streams["S1"]: "S1", streams["S2"]: "S2"}
    p = streams[producer] if isinstance(producer, str) else producer
    c = streams[consumer] if isinstance(consumer, str) else consumer
    base = dlbind_rocm.empty((4,), "float32")
    e = exporter(base, p)
    rec.clear()
    t = dlbind.from_dlpack(e.__dlpack__(stream=c, max_version=(1, 3)))
    assert t.device == ROCM and t.data_ptr == base.data_ptr
    if p is None or c == -1 or (0 if c is None else c) == p:
        assert rec.calls() == []
    else:
        assert rec.calls() == event_wait(names[p], names[c])


@pytest.mark.parametrize("stream", [1, 2])
def test_cuda_default_streams_are_refused(rec: Recording, stream: int) -> None:
    e = exporter(dlbind_rocm.empty((2,), "int8"), user_stream())
    rec.clear()
    with pytest.raises(BufferError, match=f"stream {stream} is not valid for rocm: use None, -1, 0 \\(default\\)"):
        e.__dlpack__(stream=stream, max_version=(1, 3))
    assert rec.calls() == []


def test_pinned_memory_read_by_the_cpu_synchronises_the_producer(rec: Recording) -> None:
    s = user_stream()
    base = dlbind_rocm.asarray(np.arange(4, dtype=np.int32), memory="host")
    e = exporter(base, s)
    assert e.__dlpack_device__() == (DeviceType.kDLROCMHost, 0)
    rec.clear()
    assert np.array_equal(np.from_dlpack(e), np.arange(4))
    assert rec.calls() == ["hipGetDevice() -> 0", "hipStreamSynchronize(S1)"]


def test_another_device_is_made_current_then_restored(recording: Recording) -> None:
    recording.set("devices", 2)
    recording.load()
    s = user_stream()
    base = dlbind_rocm.empty((4,), "float32", device_id=1)
    e = exporter(base, s)
    recording.clear()
    e.__dlpack__(stream=0, max_version=(1, 3))
    assert recording.calls() == [
        "hipGetDevice() -> 0",
        "hipSetDevice(1)",
        "hipEventCreateWithFlags(2) -> E1",
        "hipEventRecord(E1, S1)",
        "hipStreamWaitEvent(default, E1, 0)",
        "hipEventDestroy(E1)",
        "hipSetDevice(0)",
    ]


def test_a_failing_wait_is_a_buffer_error_and_cleans_up(rec: Recording) -> None:
    e = exporter(dlbind_rocm.empty((4,), "float32"), user_stream())
    rec.clear()
    rec.fail("hipStreamWaitEvent", 400)
    with pytest.raises(BufferError, match="synchronising rocm:0 streams failed: hipStreamWaitEvent failed"):
        e.__dlpack__(stream=None, max_version=(1, 3))
    assert rec.calls()[-1] == "hipEventDestroy(E1)"


def test_the_backend_refuses_a_producer_stream_that_is_no_rocm_stream(rec: Recording) -> None:
    for bad in (1, 2, -1, 2**64):
        with pytest.raises(BufferError, match=f"the producer's stream {bad} is not a ROCm stream"):
            backend.wait(bad, None, ROCM)
    assert rec.calls() == []


def test_a_stream_past_a_pointer_is_refused_before_any_wait(rec: Recording) -> None:
    e = exporter(dlbind_rocm.empty((2,), "int8"), user_stream())
    rec.clear()
    for bad in (2**64, 2**63):  # cast to a hipStream_t, 2**64 would be the default stream 0
        with pytest.raises(BufferError, match=f"stream {bad} is not valid for rocm: use None, -1, 0"):
            e.__dlpack__(stream=bad, max_version=(1, 3))
    assert rec.calls() == []
    e.__dlpack__(stream=2**63 - 1, max_version=(1, 3))  # the largest a handle can be: taken
    assert rec.calls() == event_wait("S1", hex(2**63 - 1))
