"""The device copy and the pinned host copy of dlbind-cuda and dlbind-rocm on a real GPU.

:class:`HardwareCopyTests` is subclassed in ``test_cuda_gpu.py`` and ``test_rocm_gpu.py``, whose marker
(``cuda_gpu``, ``rocm_gpu``) skips them without a GPU, naming why. They check values against numpy after a
host copy (transposed, reversed, offset, gapped, broadcast layouts), that a copy queued on a non-blocking
stream is ordered after a busy producer's stream, as is a consumer's copy after an import with its stream
(``HardwareCopyTests.imported``), and that host copies of 256 MiB reuse the pinned pool and
stage or fall back to pageable copies with equal bytes. About 1.5 GiB of device memory and a few seconds.
The bandwidth of the second 256 MiB host copy is recorded (``record_property``, and printed: ``-s``), never
asserted. This module imports no hypothesis (a GPU machine may lack it).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np
import pytest

import dlbind
from dlbind import Flags
from dlbind._gpu_runtime import PinnedBlock
from dlbind.dtypes import from_numpy
from dlbind.export import Memory
from dlbind.producer import Exporter
from gpu_copies import LAYOUTS, Layout, reach, same

__all__ = ["HardwareCopyTests", "non_blocking_streams"]

MiB = 1 << 20
ON_GPU = ["transposed", "reversed", "reversed-rows", "reversed-both", "offset", "gapped", "column", "broadcast-row",
          "broadcast-column", "broadcast-scalar", "3-d-permuted", "unit-dims", "0-d", "empty"]  # fmt: skip


def non_blocking_streams(rt: Any) -> Iterator[tuple[int, int]]:
    """For a fixture: two non-blocking streams of the loaded runtime ``rt`` (as DLPack stream integers),
    synchronised and destroyed when the fixture ends."""
    made = []
    for _ in range(2):
        out = rt.ffi.new(f"{rt.prefix}Stream_t *")
        rt.check(rt.sym("StreamCreateWithFlags")(out, rt.sym("StreamNonBlocking")), "StreamCreateWithFlags")
        made.append(out[0])
    yield int(rt.ffi.cast("uintptr_t", made[0])), int(rt.ffi.cast("uintptr_t", made[1]))
    for s in made:
        rt.sym("StreamSynchronize")(s)
        rt.sym("StreamDestroy")(s)


class HardwareCopyTests:
    """Subclasses give the backend's names."""

    module: ClassVar[Any]  # dlbind_cuda
    backend: ClassVar[Any]  # dlbind_cuda._backend.backend
    runtime: ClassVar[Callable[[], Any]]  # the backend's loader: runtime of dlbind_cuda._runtime
    default_stream: ClassVar[int]  # 1 (CUDA's legacy default stream), 0 (ROCm's)
    memories: ClassVar[tuple[str, ...]]  # the kinds of host-accessible memory besides "device"

    @pytest.fixture
    def copy_streams(self) -> Iterator[tuple[int, int]]:
        """Two non-blocking streams (as DLPack stream integers), synchronised and destroyed after the test."""
        yield from non_blocking_streams(self.runtime())

    def device_memory(self, values: np.ndarray, layout: Layout, *, stream: int | None = None) -> Memory:
        """``layout`` over a device copy of ``values`` (the copy is the Memory's owner)."""
        shape, strides, offset = layout
        base = self.module.asarray(values)
        return Memory(base.data_ptr, shape, strides, from_numpy(values.dtype), base.device,
                      offset * values.dtype.itemsize, False, base, 0, stream)  # fmt: skip

    def memset_on(self, stream: int, data: Any, value: int, nbytes: int, *, busy: int = 0) -> Any:
        """Queue on ``stream`` ``busy`` memsets of 256 MiB of scratch memory (work that keeps it busy), then one
        setting ``nbytes`` of ``data`` to ``value``; returns the scratch memory, which the caller keeps alive
        until its copies are queued (freeing it would synchronise), or None without busy work."""
        rt = self.runtime()
        memset = rt.sym("MemsetAsync")
        s = rt.ffi.cast(f"{rt.prefix}Stream_t", stream)
        scratch = self.module.empty((256 * MiB,), "uint8") if busy else None
        for i in range(busy):
            rt.check(memset(rt.ffi.cast("void *", scratch.data_ptr), i, 256 * MiB, s), "MemsetAsync")
        rt.check(memset(rt.ffi.cast("void *", data.data_ptr), value, nbytes, s), "MemsetAsync")
        return scratch

    def to_numpy(self, mem: Memory, stream: int | None = None) -> np.ndarray:
        """A host copy of device ``mem`` (queued on ``stream``), as numpy."""
        return np.from_dlpack(Exporter(self.backend.copy_to_host(mem, stream)))

    @staticmethod
    def expected(values: np.ndarray, layout: Layout) -> np.ndarray:
        shape, strides, offset = layout
        item = values.dtype.itemsize
        view = np.ndarray(shape, values.dtype, buffer=values, offset=offset * item, strides=[s * item for s in strides])
        return np.array(view, order="C", copy=True)

    # -- the device copy -------------------------------------------------------------------------------------
    @pytest.mark.parametrize("name", ON_GPU)
    def test_device_copy_values(self, name: str) -> None:
        layout = LAYOUTS[name]
        values = np.random.default_rng(7).standard_normal(reach(*layout, 4)).astype(np.float32)
        mem = self.device_memory(values, layout)
        out = self.backend.copy_on_device(mem, self.default_stream)
        assert out.device == mem.device and out.stream == self.default_stream and out.byte_offset == 0
        assert same(self.to_numpy(out, self.default_stream), self.expected(values, layout))

    def test_device_copy_of_a_large_transposed_matrix(self, copy_streams: tuple[int, int]) -> None:
        values = np.random.default_rng(8).standard_normal((2048, 1536)).astype(np.float32)  # 12 MiB
        layout = ((1536, 2048), (1, 1536), 0)  # values.T
        out = self.backend.copy_on_device(self.device_memory(values.reshape(-1), layout), copy_streams[0])
        assert same(self.to_numpy(out, copy_streams[0]), np.ascontiguousarray(values.T))

    def test_device_copy_is_ordered_after_a_busy_producer(self, copy_streams: tuple[int, int]) -> None:
        """The producer keeps its non-blocking stream busy (16 memsets of 256 MiB), then sets the data to 7;
        the copy is queued on another non-blocking stream. It must wait for the producer (the backend records
        an event on the producer's stream), or it would copy the zeros that were there first."""
        producer, consumer = copy_streams
        n = 4 * MiB
        data = self.module.asarray(np.zeros(n, dtype=np.uint8))
        scratch = self.memset_on(producer, data, 7, n, busy=16)  # noqa: F841 (freed only after the copy)
        rows = n // 64
        reversed_rows = Memory(data.data_ptr, (64, rows), (-rows, 1), from_numpy(np.dtype(np.uint8)), data.device,
                               n - rows, False, data, 0, producer)  # fmt: skip
        out = self.backend.copy_on_device(reversed_rows, consumer)
        assert out.stream == consumer
        got = self.to_numpy(out, consumer)  # queued on the consumer's stream, after the copy
        assert got.shape == (64, rows) and (got == 7).all()

    @pytest.mark.parametrize("memory", ["host", "managed"])
    def test_device_copy_of_host_accessible_memory(self, memory: str) -> None:
        if memory not in self.memories:
            pytest.skip(f"{self.module.__name__} has no {memory} memory")
        values = np.arange(24, dtype=np.int32)
        base = self.module.asarray(values, memory=memory)
        mem = Memory(base.data_ptr, (4, 6), (1, 4), from_numpy(values.dtype), base.device, 0, False, base)
        out = self.backend.copy_on_device(mem, self.default_stream)
        assert out.device == base.device
        got = np.from_dlpack(Exporter(out))  # host-accessible: the default stream is synchronised first
        assert np.array_equal(got, values.reshape(6, 4).T)

    # -- the host copy -----------------------------------------------------------------------------------------
    def test_host_copy_of_strided_device_memory(self) -> None:
        a = np.arange(24, dtype=np.float64)
        base = self.module.asarray(a)
        view = dlbind.from_dlpack(
            dlbind.from_pointer(base.data_ptr, (6, 4), "float64", strides=(-1, 6), byte_offset=5 * 8,
                                device=base.device, owner=base)
        )  # fmt: skip
        c = dlbind.from_dlpack(view, device="cpu", copy=True)
        assert c.flags & Flags.IS_COPIED
        assert np.array_equal(np.asarray(c), a.reshape(4, 6).T[::-1])

    def test_host_copies_of_256_mib_reuse_the_pinned_pool(
        self, monkeypatch: pytest.MonkeyPatch, record_property: Callable[[str, object], None]
    ) -> None:
        n = 256 * MiB
        values = np.arange(n // 8, dtype=np.uint64)
        mem = self.device_memory(values, (values.shape, (1,), 0))
        pool = self.runtime().pinned_pool()
        monkeypatch.setattr(pool, "bound", max(pool.bound, 2 * n))
        first = self.backend.copy_to_host(mem)
        assert isinstance(first.owner, PinnedBlock) and first.owner.size == n and first.data == first.owner.address
        address = first.owner.address
        assert np.array_equal(np.from_dlpack(Exporter(first)), values)
        del first
        gc.collect()
        assert pool.idle >= n  # the block went back to the pool
        start = time.perf_counter()
        second = self.backend.copy_to_host(mem)
        seconds = time.perf_counter() - start
        assert isinstance(second.owner, PinnedBlock) and second.owner.address == address  # no new pinning
        assert np.array_equal(np.from_dlpack(Exporter(second)), values)
        rate = n / seconds / 1e9
        record_property("host_copy_256MiB_GBps", round(rate, 2))
        print(f"\n{self.module.__name__}: copy_to_host of 256 MiB from the pinned pool: {rate:.1f} GB/s")

    def test_host_copy_staged_then_pageable(self, monkeypatch: pytest.MonkeyPatch) -> None:
        n = 64 * MiB
        values = np.random.default_rng(9).integers(0, 2**32, n // 4, dtype=np.uint32)
        mem = self.device_memory(values, (values.shape, (1,), 0))
        pool = self.runtime().pinned_pool()
        monkeypatch.setattr(pool, "bound", 0)  # no block for the whole copy: staged through 8 MiB chunks
        pool.trim()
        staged = self.backend.copy_to_host(mem)
        assert not isinstance(staged.owner, PinnedBlock)
        assert np.array_equal(np.from_dlpack(Exporter(staged)), values)

        def cannot_pin(nbytes: int) -> tuple[int, Any]:
            raise MemoryError(f"cannot pin {nbytes} bytes (the test says)")

        monkeypatch.setattr(pool, "allocate", cannot_pin)  # not even the chunks: one pageable copy
        pageable = self.backend.copy_to_host(mem)
        assert np.array_equal(np.from_dlpack(Exporter(pageable)), values)
        strided = self.backend.copy_to_host(mem._replace(shape=(n // 8,), strides=(2,)))  # every other element
        assert np.array_equal(np.from_dlpack(Exporter(strided)), values[::2])

    @pytest.mark.parametrize("name", ["transposed", "reversed", "gapped", "column", "broadcast-row", "0-d"])
    def test_host_copy_of_strided_layouts(self, name: str) -> None:
        layout = LAYOUTS[name]
        values = np.random.default_rng(10).standard_normal(reach(*layout, 8))
        assert same(self.to_numpy(self.device_memory(values, layout)), self.expected(values, layout))

    def test_host_copy_on_a_producer_stream(self, copy_streams: tuple[int, int]) -> None:
        """Data written on a busy non-blocking stream is copied to the host after the write, when the host
        copy is asked on that stream and when the data names it as its stream."""
        producer, _ = copy_streams
        n = 8 * MiB
        data = self.module.asarray(np.zeros(n, dtype=np.uint8))
        scratch = self.memset_on(producer, data, 5, n, busy=16)  # noqa: F841 (freed only after the copies)
        mem = Memory(data.data_ptr, (n,), (1,), from_numpy(np.dtype(np.uint8)), data.device, 0, False, data)
        assert (self.to_numpy(mem, producer) == 5).all()
        self.memset_on(producer, data, 6, n)
        assert (self.to_numpy(mem._replace(stream=producer)) == 6).all()  # the default stream waits for it

    # -- stream ordering across an exchange --------------------------------------------------------------------
    def imported(self, tensor: Any, producer: int, consumer: int) -> Any:
        """``tensor`` handed over by a producer whose work is queued on ``producer``, imported with
        ``stream=consumer`` (here through ``__dlpack__``; dlbind-cuda's tests go through
        ``__cuda_array_interface__``)."""
        memory = Memory(tensor.data_ptr, tensor.shape, tensor.strides, tensor.dtype, tensor.device, 0, False, tensor,
                        0, producer)  # fmt: skip
        return dlbind.from_dlpack(Exporter(memory), stream=consumer)

    def test_the_consumer_stream_waits_for_the_producer_stream(self, copy_streams: tuple[int, int]) -> None:
        """A slow producer on one stream, a copy on another: the copy sees the producer's last write.

        The producer queues 16 memsets of a 256 MiB scratch buffer (to keep its stream busy), then sets the
        shared buffer to 7; the consumer's copy to pinned host memory runs on its own non-blocking stream
        after the import with ``stream=consumer`` (:meth:`imported`). Without the event wait the copy would run
        at once and read the buffer's first contents (zeros).
        """
        rt = self.runtime()
        producer, consumer = copy_streams
        n = 1 * MiB
        shared = self.module.asarray(np.zeros(n, dtype=np.uint8))
        out = self.module.empty((n,), "uint8", memory="host")
        scratch = self.memset_on(producer, shared, 7, n, busy=16)  # noqa: F841 (freed only after the copy)
        imported = self.imported(shared, producer, consumer)
        rt.memcpy_async(out.data_ptr, imported.data_ptr, n, rt.sym("MemcpyDeviceToHost"), consumer)
        rt.synchronize(consumer)
        assert (np.from_dlpack(out) == 7).all()
