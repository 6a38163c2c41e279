"""dlbind-cuda's device copy (``copy_on_device``) and host copy through pinned memory (``copy_to_host``), on
the recording CUDA runtime: the shared tests of ``tests/gpu_backends/gpu_copies.py`` with CUDA's names, and
what only CUDA has (managed memory, the per-thread default stream)."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import dlbind
import dlbind_cuda
from cuda_recording import Recording, user_stream
from dlbind import DeviceType, Flags
from dlbind._device_tensors import host_source
from dlbind_cuda._backend import backend
from gpu_copies import CopyTests, read


class TestCudaCopies(CopyTests):
    module = dlbind_cuda
    backend = backend
    recording = Recording
    name = "cuda"
    prefix = "cuda"
    device = (DeviceType.kDLCUDA, 0)
    default_stream = 1
    stream_names = {1: "legacy", 2: "per-thread"}  # noqa: RUF012
    refused_streams = (0, -1, -5)
    pinned = "cudaHostAlloc"
    pinned_free = "cudaFreeHost"
    host_memory = ("host", DeviceType.kDLCUDAHost, "cudaMallocHost(48) -> H1 on device 0")

    def test_device_copy_of_managed_memory_stays_managed(self, rec: Recording) -> None:
        values = np.arange(12, dtype=np.float32)
        base = dlbind_cuda.asarray(values, memory="managed")
        rec.clear()
        out = backend.copy_on_device(self.view(base, values.dtype, ((4, 3), (1, 4), 0)), 2)
        assert out.device == (DeviceType.kDLCUDAManaged, 0) and out.stream == 2
        assert self.calls(rec)[0] == "cudaMallocManaged(48) -> M1 on device 0"
        assert self.calls(rec)[1] == "cudaMemcpy2DAsync(M1+0, 12, M0+0, 4, 4, 4, Default, per-thread)"
        assert np.array_equal(read(out.data, 48).view(np.float32), values.reshape(3, 4).T.reshape(-1))

    def test_a_copy_of_managed_memory_is_made_on_the_device_on_the_consumer_stream(self, rec: Recording) -> None:
        """``__dlpack__(copy=True)`` of managed memory ready on a stream: a stream orders it, so the copy is made on
        the device, after the data's stream, on the consumer's (for ``stream=None``, a CPU reader's, the default
        stream, then synchronised), and stays managed: not read by the CPU before the data is ready, nor moved to
        cpu:0 unasked."""
        values = np.arange(4, dtype=np.float32)
        s1, s2 = user_stream(), user_stream()
        t = dlbind.from_dlpack(dlbind_cuda.asarray(values, memory="managed"), stream=s1)  # ready on S1
        waits = ["cudaEventCreateWithFlags(2) -> E", "cudaEventRecord(E, S1)", "cudaStreamWaitEvent({}, E, 0)",
                 "cudaEventDestroy(E)"]  # fmt: skip
        expected = {
            s2: [*waits, "cudaMallocManaged(16) -> M1 on device 0", "cudaMemcpyAsync(M1+0, M0+0, 16, Default, S2)"],
            2: [*waits, "cudaMallocManaged(16) -> M2 on device 0",
                "cudaMemcpyAsync(M2+0, M0+0, 16, Default, per-thread)"],
            -1: ["cudaMallocManaged(16) -> M3 on device 0", "cudaMemcpyAsync(M3+0, M0+0, 16, Default, S1)"],
            None: ["cudaStreamSynchronize(S1)", "cudaMallocManaged(16) -> M4 on device 0",
                   "cudaMemcpyAsync(M4+0, M0+0, 16, Default, legacy)", "cudaStreamSynchronize(legacy)"],
        }  # fmt: skip
        names = {s2: "S2", 2: "per-thread"}
        for stream, calls in expected.items():
            rec.clear()
            out = dlbind.from_dlpack(t.__dlpack__(stream=stream, copy=True, max_version=(1, 3)))
            made = [re.sub(r"\bE\d+\b", "E", c) for c in self.calls(rec) if not c.startswith("cudaFree(")]
            assert made == [c.format(names.get(stream)) for c in calls]
            assert out.device == (DeviceType.kDLCUDAManaged, 0) and out.flags == Flags.IS_COPIED
            assert np.array_equal(np.from_dlpack(out), values)

    def test_a_refused_copy_of_managed_memory_is_not_read_by_the_cpu(self, rec: Recording) -> None:
        """``from_dlpack(managed, copy=True)`` whose device copy fails: the refusal stands (a BufferError), never a
        CPU read of the managed memory, unsynchronised with the stream it is ready on, labelled cpu:0. Nor does the
        plain import of a producer of managed memory that refuses fall back to its array interface."""
        values = np.arange(12, dtype=np.float32)
        t = dlbind.from_dlpack(dlbind_cuda.asarray(values, memory="managed"), stream=user_stream())  # ready on S1
        rec.fail("cudaMemcpyAsync", 1)
        with pytest.raises(BufferError, match="copying cuda:0 memory on the device failed"):
            dlbind.from_dlpack(t, copy=True)

        class Refusing:  # managed memory, its __dlpack__ refusing, its array interface a host view of it
            __array_interface__ = np.asarray(values).__array_interface__ | {"data": (t.data_ptr, False)}

            def __dlpack__(self, **kwargs: object) -> object:
                raise BufferError("not today")

            def __dlpack_device__(self) -> tuple[int, int]:
                return (DeviceType.kDLCUDAManaged, 0)

        for _ in range(2):  # planned by Python, then the compiled build's plain import
            with pytest.raises(BufferError, match="not today"):
                dlbind.from_dlpack(Refusing())

    def test_host_views_of_managed_memory_wait_for_its_stream(self, rec: Recording) -> None:
        """numpy's array interface, ``__array__``, the buffer protocol and a backend's upload (``host_source``) of
        managed memory ready on a stream synchronise that stream before the CPU reads, as ``__dlpack__`` to a host
        reader does."""
        values = np.arange(6, dtype=np.float32)
        t = dlbind.from_dlpack(dlbind_cuda.asarray(values, memory="managed"), stream=user_stream())  # ready on S1
        readers = {"asarray": np.asarray, "__array__": lambda t: t.__array__(), "host_source": host_source}
        if dlbind.ffi_build() == "compiled" or sys.version_info >= (3, 12):  # PEP 688's __buffer__ in the pure build
            readers["memoryview"] = lambda t: np.asarray(memoryview(t))
        for name, read_it in readers.items():
            rec.clear()
            got = read_it(t)
            assert "cudaStreamSynchronize(S1)" in rec.calls() or "cudaStreamSynchronize(legacy)" in rec.calls(), name
            synced = rec.calls().index(next(c for c in rec.calls() if c.startswith("cudaStreamSynchronize")))
            assert all("S1" not in c for c in rec.calls()[synced + 1 :]), name  # nothing queued on S1 after
            assert np.array_equal(np.from_dlpack(got) if name == "host_source" else got, values), name
