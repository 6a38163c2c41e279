"""``__dlpack__(stream=...)`` on the recording runtime: which calls synchronise which streams.

The producer's stream comes from a ``__cuda_array_interface__`` (v3) object exported through
``dlbind.asdlpack``; the consumer's is the ``stream=`` of its ``__dlpack__``. Every combination of
producer (None, 1, 2, a user stream) and consumer (None, 1, 2, -1, another user stream, the same user
stream) is checked against the rule: nothing when the producer has no stream, the consumer says -1 or
both are the same stream; otherwise an event recorded on the producer's stream that the consumer's
(None: the legacy default stream) waits for, on the memory's device.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_cuda
from cuda_recording import Recording, event_wait, user_stream
from dlbind import DeviceType

NAMES = {None: "legacy", 1: "legacy", 2: "per-thread"}


class CudaArray:
    """What a CUDA library's array shows: __cuda_array_interface__ v3 and nothing else."""

    def __init__(self, tensor: dlbind.Tensor, stream: int | None, **extra: Any) -> None:
        self.tensor = tensor
        self.__cuda_array_interface__ = {**tensor.__cuda_array_interface__, "stream": stream, **extra}


PRODUCERS = [None, 1, 2, "S1"]
CONSUMERS = [None, 1, 2, -1, "S2", "S1"]


@pytest.mark.parametrize("producer", PRODUCERS, ids=lambda p: f"producer={p}")
@pytest.mark.parametrize("consumer", CONSUMERS, ids=lambda c: f"consumer={c}")
def test_every_stream_combination(rec: Recording, producer: int | str | None, consumer: int | str | None) -> None:
    streams = {"S1": user_stream(), "S2": user_stream()}
    names = {**NAMES, streams["S1"]: "S1", streams["S2"]: "S2"}
    p = streams.get(producer, producer) if isinstance(producer, str) else producer
    c = streams.get(consumer, consumer) if isinstance(consumer, str) else consumer
    base = dlbind_cuda.empty((4,), "float32")
    exporter = dlbind.asdlpack(CudaArray(base, p))
    rec.clear()
    capsule = exporter.__dlpack__(stream=c, max_version=(1, 3))
    t = dlbind.from_dlpack(capsule)
    assert t.device == (DeviceType.kDLCUDA, 0) and t.data_ptr == base.data_ptr
    same = (1 if c is None else c) == p
    if p is None or c == -1 or same:
        assert rec.calls() == []
    else:
        assert rec.calls() == event_wait(names[p], names[c])


def test_from_dlpack_passes_the_consumer_stream(rec: Recording) -> None:
    s = user_stream()
    array = CudaArray(dlbind_cuda.empty((2, 2), "int32"), 2)
    rec.clear()
    t = dlbind.from_dlpack(array, stream=s)
    assert t.device == (DeviceType.kDLCUDA, 0)
    assert rec.calls() == ["cudaPointerGetAttributes(D0+0)", *event_wait("per-thread", "S1")]


def test_stream_zero_is_refused_on_both_sides(rec: Recording) -> None:
    base = dlbind_cuda.empty((3,), "float64")
    exporter = dlbind.asdlpack(CudaArray(base, 2))
    rec.clear()
    with pytest.raises(BufferError, match=r"stream 0 is not valid for cuda: use None, -1, 1 \(legacy default\)"):
        exporter.__dlpack__(stream=0, max_version=(1, 3))
    with pytest.raises(BufferError, match="__cuda_array_interface__ stream 0 is not valid"):
        dlbind.asdlpack(CudaArray(base, 0))
    with pytest.raises(BufferError, match="stream -3 is not valid"):
        dlbind.asdlpack(CudaArray(base, -3))
    assert rec.calls() == []


def test_a_stream_on_another_device_switches_and_restores(recording: Recording) -> None:
    recording.set("devices", 2)
    recording.load()
    base = dlbind_cuda.empty((8,), "uint8", device_id=1)
    exporter = dlbind.asdlpack(CudaArray(base, 2))
    assert exporter.__dlpack_device__() == (DeviceType.kDLCUDA, 1)  # from the pointer, not assumed 0
    recording.clear()
    exporter.__dlpack__(stream=None, max_version=(1, 3))
    assert recording.calls() == [
        "cudaGetDevice() -> 0",
        "cudaSetDevice(1)",
        "cudaEventCreateWithFlags(2) -> E1",
        "cudaEventRecord(E1, per-thread)",
        "cudaStreamWaitEvent(legacy, E1, 0)",
        "cudaEventDestroy(E1)",
        "cudaSetDevice(0)",
    ]


def test_pinned_host_memory_read_by_the_cpu_synchronises_the_producer(rec: Recording) -> None:
    s = user_stream()
    base = dlbind_cuda.empty((4,), "float32", memory="host")
    exporter = dlbind.asdlpack(CudaArray(base, s))
    assert exporter.__dlpack_device__() == (DeviceType.kDLCUDAHost, 0)
    rec.clear()
    view = np.from_dlpack(exporter)  # numpy reads kDLCUDAHost memory on the CPU, asking with stream=None
    assert view.shape == (4,)
    assert rec.calls() == ["cudaGetDevice() -> 0", "cudaStreamSynchronize(S1)"]
    with pytest.raises(BufferError, match=r"stream must be None for cuda_host tensors \(got 2\)"):
        exporter.__dlpack__(stream=2, max_version=(1, 3))


def test_managed_memory(rec: Recording) -> None:
    s = user_stream()
    base = dlbind_cuda.empty((4,), "float32", memory="managed")
    exporter = dlbind.asdlpack(CudaArray(base, s))
    assert exporter.__dlpack_device__() == (DeviceType.kDLCUDAManaged, 0)
    rec.clear()
    exporter.__dlpack__(stream=None, max_version=(1, 3))  # the CPU may read it: the producer is synchronised
    assert rec.calls() == ["cudaGetDevice() -> 0", "cudaStreamSynchronize(S1)"]
    rec.clear()
    exporter.__dlpack__(stream=2, max_version=(1, 3))  # a GPU consumer's stream waits for an event
    assert rec.calls() == event_wait("S1", "per-thread")


def test_a_failing_record_is_a_buffer_error_and_cleans_up(rec: Recording) -> None:
    base = dlbind_cuda.empty((4,), "float32")
    exporter = dlbind.asdlpack(CudaArray(base, 2))
    rec.clear()
    rec.fail("cudaEventRecord", 400)
    with pytest.raises(
        BufferError,
        match=r"synchronising cuda:0 streams failed: cudaEventRecord failed: invalid resource handle "
        r"\(cudaErrorInvalidResourceHandle\)",
    ):
        exporter.__dlpack__(stream=1, max_version=(1, 3))
    assert rec.calls()[-1] == "cudaEventDestroy(E1)"  # the event is not leaked
    assert "cudaStreamWaitEvent" not in "\n".join(rec.calls())


def test_a_failing_event_creation_is_a_buffer_error(rec: Recording) -> None:
    exporter = dlbind.asdlpack(CudaArray(dlbind_cuda.empty((1,), "int8"), 2))
    rec.clear()
    rec.fail("cudaEventCreateWithFlags", 2)
    with pytest.raises(MemoryError, match="cudaEventCreateWithFlags failed: out of memory"):
        exporter.__dlpack__(stream=1, max_version=(1, 3))
    assert rec.calls() == ["cudaGetDevice() -> 0", "cudaEventCreateWithFlags(2) -> error 2"]


def test_the_backend_refuses_a_producer_stream_that_is_no_stream(rec: Recording) -> None:
    from dlbind_cuda._backend import backend

    for bad in (0, -1, -5, 2**64):
        with pytest.raises(BufferError, match=f"the producer's stream {bad} is not a CUDA stream"):
            backend.wait(bad, None, (DeviceType.kDLCUDA, 0))
    with pytest.raises(TypeError, match="must be an int"):
        backend.wait("1", None, (DeviceType.kDLCUDA, 0))  # type: ignore[arg-type]
    assert rec.calls() == []


def test_a_stream_past_a_pointer_is_refused_before_any_wait(rec: Recording) -> None:
    s = user_stream()
    base = dlbind_cuda.empty((3,), "float32")
    t = dlbind.from_dlpack(CudaArray(base, s), stream=s)  # ready on S1
    rec.clear()
    for bad in (2**64 + 7, 2**63):  # cast to a cudaStream_t, 2**64 + 7 would be the stream 0x7
        with pytest.raises(BufferError, match=f"stream {bad} is not valid for cuda: use None, -1, 1"):
            t.__dlpack__(stream=bad, max_version=(1, 3))
        with pytest.raises(BufferError, match=f"stream {bad} is not valid for cuda"):
            dlbind.from_dlpack(CudaArray(base, s), stream=bad)
    with pytest.raises(BufferError, match=f"__cuda_array_interface__ stream {2**64 + 1} is not valid"):
        dlbind.asdlpack(CudaArray(base, 2**64 + 1))
    assert "Wait" not in "\n".join(rec.calls())
    rec.clear()
    t.__dlpack__(stream=2**63 - 1, max_version=(1, 3))  # the largest a handle can be: taken
    assert rec.calls() == event_wait("S1", hex(2**63 - 1))


def test_a_legacy_read_only_bridge_checks_the_consumer_stream_before_waiting(rec: Recording) -> None:
    """The legacy capsule an immutable consumer is served of read-only data (``bridges._LegacyReadOnly``) takes the
    consumer's stream by the rule ``Tensor.__dlpack__`` takes it by."""
    from dlbind.bridges import _LegacyReadOnly

    s = user_stream()
    bridge = _LegacyReadOnly(dlbind.from_dlpack(CudaArray(dlbind_cuda.empty((3,), "float32"), s), stream=s))
    rec.clear()
    for bad in (0, -5, 2**64):
        with pytest.raises(BufferError, match=f"stream {bad} is not valid for cuda: use None, -1, 1"):
            bridge.__dlpack__(stream=bad)
    for wrong, name in (("abc", "str"), (1.5, "float")):
        with pytest.raises(TypeError, match=f"stream must be None or an int, not {name}"):
            bridge.__dlpack__(stream=wrong)
    assert rec.calls() == []
    bridge.__dlpack__(stream=2)
    assert rec.calls() == event_wait("S1", "per-thread")


@pytest.mark.parametrize("encoding", ["uint1", "uint8"])
def test_a_bool_bridge_checks_the_consumer_stream_and_waits(rec: Recording, encoding: str) -> None:
    """The capsule of bool data an importer takes under another dtype (``bridges._BoolAs``: onnxruntime's uint8,
    mxnet's uint1, both on CUDA) orders the consumer's stream after the one the data is ready on, as
    ``Tensor.__dlpack__`` does, and refuses a stream that rule refuses."""
    from dlbind.bridges import _BoolAs

    s = user_stream()
    bridge = _BoolAs(dlbind.from_dlpack(CudaArray(dlbind_cuda.empty((3,), "bool"), s), stream=s), encoding)
    versions = {"max_version": (1, 3)} if encoding == "uint8" else {}
    rec.clear()
    with pytest.raises(BufferError, match="stream 0 is not valid for cuda"):
        bridge.__dlpack__(stream=0, **versions)
    assert rec.calls() == []
    made = dlbind.from_dlpack(bridge.__dlpack__(stream=2, **versions))
    assert rec.calls() == event_wait("S1", "per-thread")
    assert (made.dtype.name, made.data_ptr) == ({"uint1": "bool", "uint8": "uint8"}[encoding], bridge.tensor.data_ptr)
