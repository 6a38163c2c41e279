"""The device copy (``copy_on_device``) and the host copy through pinned memory (``copy_to_host``) of dlbind-cuda
and dlbind-rocm, on the recording runtimes: the calls, their streams, and the bytes.

The recording runtime's "device" memory is host memory and its copies (``MemcpyAsync``, ``Memcpy2DAsync``)
really copy, checked as the runtime checks them (bounds, directions, pitches), so every test reads the copy
back and compares it with numpy's compact copy of the same strided view, for named layouts and for
hypothesis's. Each backend's tests subclass :class:`CopyTests` with its names (``test_cuda_copies.py``).
"""

from __future__ import annotations

import ctypes
import gc
import re
import threading
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
import pytest

import dlbind
from dlbind import Flags
from dlbind._device_tensors import MAX_COPIES, DeviceCopy, GpuTensors
from dlbind._gpu_runtime import POOL_ENV, PinnedBlock
from dlbind.dtypes import from_numpy
from dlbind.export import CPU, Memory, byte_span
from dlbind.producer import Exporter
from gpu_recording import Recording

__all__ = ["LAYOUTS", "CopyTests", "Layout"]

MiB = 1 << 20

# a strided view of a buffer: (shape, element strides, element offset) over float32 elements
Layout = tuple[tuple[int, ...], tuple[int, ...], int]

LAYOUTS: dict[str, Layout] = {
    "row-major": ((3, 4), (4, 1), 0),
    "offset": ((2, 5), (5, 1), 7),
    "transposed": ((4, 3), (1, 4), 0),
    "reversed": ((12,), (-1,), 11),
    "reversed-rows": ((3, 4), (-4, 1), 8),
    "reversed-both": ((3, 4), (-4, -1), 11),
    "gapped": ((2, 3), (12, 2), 1),
    "column": ((5,), (8,), 3),
    "broadcast-row": ((3, 4), (0, 1), 2),
    "broadcast-column": ((4, 3), (1, 0), 0),
    "broadcast-scalar": ((2, 3, 4), (0, 0, 0), 5),
    "overlapping": ((4, 3), (1, 1), 0),
    "3-d-permuted": ((3, 2, 4), (1, 12, 3), 0),
    "unit-dims": ((1, 4, 1), (1000, 2, -7), 1),
    "0-d": ((), (), 6),
    "empty": ((0, 3), (3, 1), 0),
}


def reach(shape: tuple[int, ...], strides: tuple[int, ...], offset: int, item: int) -> int:
    """Elements a buffer needs for the view (``offset``: the first element's)."""
    if not all(shape):
        return max(offset, 1)
    low, high = byte_span(shape, tuple(s * item for s in strides), item)
    assert offset * item + low >= 0, "the layout reaches before the buffer"
    return offset + high // item + 1


def as_bytes(a: np.ndarray) -> np.ndarray:
    return np.frombuffer(a.tobytes(), np.uint8)


def same(got: np.ndarray, expected: np.ndarray) -> bool:
    """The same shape, dtype and bytes (random bytes make NaNs, which ``array_equal`` calls different)."""
    return got.shape == expected.shape and got.dtype == expected.dtype and got.tobytes() == expected.tobytes()


def read(address: int, nbytes: int) -> np.ndarray:
    """``nbytes`` at ``address`` (the recording runtime's device memory is host memory)."""
    return np.frombuffer(ctypes.string_at(address, nbytes), np.uint8) if nbytes else np.zeros(0, np.uint8)


def property_test(**arguments: Callable[[Any], Any]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``@given`` of hypothesis: each keyword names an argument and the strategy that draws it from
    ``hypothesis.strategies``. The checks it passes by design: the fixtures are the recording runtime, which
    every example may share (each reads back only its own copy), and the CUDA and ROCm subclasses run the
    same method (any example is one for both). Where hypothesis is not installed (a GPU machine may lack
    it) the test is skipped, saying so."""

    def wrap(test: Callable[..., None]) -> Callable[..., None]:
        try:
            from hypothesis import HealthCheck, given, settings
            from hypothesis import strategies as st
        except ImportError:

            def skipped(self: object) -> None:
                pytest.skip("needs hypothesis (the project's test dependency group)")

            skipped.__name__ = skipped.__qualname__ = test.__name__
            return skipped
        health = [HealthCheck.function_scoped_fixture, HealthCheck.differing_executors]
        strategies = {name: make(st) for name, make in arguments.items()}
        return settings(max_examples=120, deadline=None, suppress_health_check=health)(given(**strategies)(test))  # type: ignore[no-any-return]

    return wrap


def layouts(st: Any) -> Any:
    """A dtype and a strided view (any strides: zero, negative, gapped, overlapping, transposed)."""

    @st.composite  # type: ignore[untyped-decorator]
    def draw_layout(draw: Any) -> tuple[np.dtype[Any], Layout]:
        dtype = np.dtype(draw(st.sampled_from(["u1", "i2", "f4", "f8", "c16"])))
        ndim = draw(st.integers(0, 4))
        shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
        strides = tuple(draw(st.integers(-12, 12)) for _ in shape)
        low = sum(s * (d - 1) for d, s in zip(shape, strides, strict=True) if s < 0 and d)
        offset = -low + draw(st.integers(0, 3))
        return dtype, (shape, strides, offset)

    return draw_layout()


def seeds(st: Any) -> Any:
    return st.integers(0, 2**32 - 1)


class CopyTests:
    """Subclasses (``Test...``) name the backend; the fixtures ``rec`` and ``recording`` are its conftest's."""

    module: ClassVar[Any]  # dlbind_cuda
    backend: ClassVar[Any]  # dlbind_cuda._backend.backend
    recording: ClassVar[type[Recording]]
    name: ClassVar[str]  # "cuda"
    prefix: ClassVar[str]  # "cuda": the calls' prefix
    device: ClassVar[Any]  # (kDLCUDA, 0)
    default_stream: ClassVar[int]  # 1
    stream_names: ClassVar[dict[int, str]]  # {1: "legacy", 2: "per-thread"}: streams the rule accepts
    refused_streams: ClassVar[tuple[int, ...]]  # (0, -1)
    pinned: ClassVar[str]  # "cudaHostAlloc": the pool's allocation (with the portable flag, 1)
    pinned_free: ClassVar[str]  # "cudaFreeHost"
    host_memory: ClassVar[tuple[str, Any, str]]  # ("host", kDLCUDAHost, "cudaMallocHost(48)")

    # -- helpers ----------------------------------------------------------------------------------------------
    def upload(self, values: np.ndarray) -> dlbind.Tensor:
        return self.module.asarray(values)  # type: ignore[no-any-return]

    def view(
        self, base: dlbind.Tensor, dtype: np.dtype[Any], layout: Layout, *, stream: int | None = None,
        readonly: bool = False,
    ) -> Memory:  # fmt: skip
        """``layout`` over the device buffer ``base`` (of ``dtype`` elements), as the core hands it over."""
        shape, strides, offset = layout
        return Memory(base.data_ptr, shape, strides, from_numpy(dtype), base.device, offset * dtype.itemsize,
                      readonly, base, 0, stream)  # fmt: skip

    @staticmethod
    def expected(values: np.ndarray, layout: Layout) -> np.ndarray:
        shape, strides, offset = layout
        item = values.dtype.itemsize
        view = np.ndarray(shape, values.dtype, buffer=values, offset=offset * item, strides=[s * item for s in strides])
        return np.array(view, order="C", copy=True)  # 0-d stays 0-d

    def source(self, layout: Layout, dtype: Any = np.float32, seed: int = 0) -> tuple[np.ndarray, dlbind.Tensor]:
        """Random values covering ``layout``, and their device copy."""
        dtype = np.dtype(dtype)
        n = reach(*layout, dtype.itemsize)
        raw = np.random.default_rng(seed).integers(0, 256, n * dtype.itemsize, dtype=np.uint8)
        values = raw.view(dtype)
        return values, self.upload(values)

    def calls(self, rec: Recording, *, after: Callable[[str], bool] | None = None) -> list[str]:
        """The log without the current-device look-ups."""
        return [c for c in rec.calls() if not c.startswith(f"{self.prefix}GetDevice(")]

    def name_of(self, stream: int, streams: dict[int, str]) -> str:
        return {**self.stream_names, **streams}[stream]

    # -- asarray and empty ----------------------------------------------------------------------------------------
    def test_padded_sub_byte_data_is_uploaded_padded(self, rec: Recording) -> None:
        stored = np.arange(64, dtype=np.uint8) % 16  # fp4 values, one per byte (IS_SUBBYTE_TYPE_PADDED)
        fp4, padded = dlbind.dtypes.lookup("float4_e2m1fn"), Flags.IS_SUBBYTE_TYPE_PADDED
        src = Exporter(Memory(stored.ctypes.data, (64,), (1,), fp4, CPU, 0, False, stored, int(padded)))
        rec.clear()
        t = self.upload(src)  # type: ignore[arg-type]
        assert t.flags & padded and t.nbytes == 64
        assert [c for c in self.calls(rec) if "Malloc(" in c] == [f"{self.prefix}Malloc(64) -> D0 on device 0"]
        assert np.array_equal(read(t.data_ptr, 64), stored)
        back = dlbind.from_dlpack(t, device="cpu", copy=True)
        assert back.flags & padded and np.array_equal(read(back.data_ptr + back.byte_offset, 64), stored)

    def test_empty_beyond_int64_is_refused_before_allocating(self, rec: Recording) -> None:
        rec.clear()
        with pytest.raises(BufferError, match=r"shape \(1099511627776, 1099511627776\) has \d+ elements: more than"):
            self.module.empty((2**40, 2**40), "float32")
        with pytest.raises(BufferError, match="4611686018427387904 elements of float64 do not fit in int64 bytes"):
            self.module.empty(2**62, "float64")
        assert not any("Malloc" in c for c in self.calls(rec))

    # -- copy_on_device: values -------------------------------------------------------------------------------
    @pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))
    def test_device_copy_values(self, rec: Recording, layout: Layout) -> None:
        values, base = self.source(layout)
        s = self.recording.user_stream()
        mem = self.view(base, values.dtype, layout)
        rec.clear()
        out = self.backend.copy_on_device(mem, s)
        expected = self.expected(values, layout)
        assert out.shape == expected.shape and out.dtype == mem.dtype and out.device == self.device
        assert out.strides == dlbind.validate.contiguous_strides(out.shape, saturate=not expected.size)
        assert out.byte_offset == 0 and not out.readonly and out.stream == s
        assert out.flags == Flags.IS_COPIED
        assert np.array_equal(read(out.data, expected.nbytes), as_bytes(expected))
        # nothing waits on the host, and every copy is queued on the copy's stream
        copies = [c for c in rec.calls() if "Memcpy" in c]
        assert not any("Synchronize" in c for c in rec.calls())
        assert all(c.endswith(", S1)") for c in copies)
        assert len(copies) <= max(expected.size, 1)

    @property_test(case=layouts, seed=seeds)
    def test_device_copy_of_any_layout(self, rec: Recording, case: tuple[np.dtype[Any], Layout], seed: int) -> None:
        dtype, layout = case
        values, base = self.source(layout, dtype, seed)
        out = self.backend.copy_on_device(self.view(base, dtype, layout), self.default_stream)
        expected = self.expected(values, layout)
        assert out.shape == expected.shape
        assert np.array_equal(read(out.data, expected.nbytes), as_bytes(expected))

    # -- copy_on_device: calls, streams, ownership ------------------------------------------------------------
    def test_device_copy_calls(self, rec: Recording) -> None:
        layout = LAYOUTS["transposed"]  # float32 (4, 3) with element strides (1, 4): 3 copies of 4 rows
        values, base = self.source(layout)
        row_values, row_base = self.source(LAYOUTS["offset"])
        s = self.recording.user_stream()
        rec.clear()
        out = self.backend.copy_on_device(self.view(base, values.dtype, layout), s)
        p = self.prefix
        assert self.calls(rec) == [
            f"{p}Malloc(48) -> D2 on device 0",
            f"{p}Memcpy2DAsync(D2+0, 12, D0+0, 4, 4, 4, DeviceToDevice, S1)",
            f"{p}Memcpy2DAsync(D2+4, 12, D0+16, 4, 4, 4, DeviceToDevice, S1)",
            f"{p}Memcpy2DAsync(D2+8, 12, D0+32, 4, 4, 4, DeviceToDevice, S1)",
        ]
        rec.clear()
        row_major = self.backend.copy_on_device(self.view(row_base, row_values.dtype, LAYOUTS["offset"]), s)
        assert self.calls(rec) == [
            f"{p}Malloc(40) -> D3 on device 0",
            f"{p}MemcpyAsync(D3+0, D1+28, 40, DeviceToDevice, S1)",
        ]
        del out, row_major

    def test_device_copy_on_every_stream_of_the_rule(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["row-major"])
        for stream, name in self.stream_names.items():
            rec.clear()
            out = self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["row-major"]), stream)
            assert out.stream == stream
            assert self.calls(rec)[1].endswith(f"DeviceToDevice, {name})")
        for stream in self.refused_streams:
            with pytest.raises(BufferError, match=f"the copy's stream {stream} is not a"):
                self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["row-major"]), stream)
        for stream in (None, True, 1.0):
            with pytest.raises(TypeError, match="the copy's stream must be an int"):
                self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["row-major"]), stream)

    def test_device_copy_waits_for_the_producer_stream(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["row-major"])
        producer, consumer = self.recording.user_stream(), self.recording.user_stream()
        rec.clear()
        out = self.backend.copy_on_device(
            self.view(base, values.dtype, LAYOUTS["row-major"], stream=producer), consumer
        )
        p = self.prefix
        assert self.calls(rec) == [
            f"{p}Malloc(48) -> D1 on device 0",
            f"{p}EventCreateWithFlags(2) -> E1",
            f"{p}EventRecord(E1, S1)",
            f"{p}StreamWaitEvent(S2, E1, 0)",
            f"{p}EventDestroy(E1)",
            f"{p}MemcpyAsync(D1+0, D0+0, 48, DeviceToDevice, S2)",
        ]
        assert out.stream == consumer
        rec.clear()
        self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["row-major"], stream=consumer), consumer)
        assert not any("Event" in c for c in rec.calls())  # the same stream: ordered already

    def test_a_consumer_on_another_stream_waits_for_the_copy(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["transposed"])
        copier, consumer = self.recording.user_stream(), self.recording.user_stream()
        out = self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["transposed"]), copier)
        rec.clear()
        t = dlbind.from_dlpack(Exporter(out).__dlpack__(stream=consumer, max_version=(1, 3)))
        assert any(c == f"{self.prefix}EventRecord(E1, S1)" for c in rec.calls())
        assert any(c == f"{self.prefix}StreamWaitEvent(S2, E1, 0)" for c in rec.calls())
        assert t.data_ptr == out.data and t.flags & Flags.IS_COPIED and not t.readonly

    def test_a_tensor_copy_says_the_stream_it_was_queued_on(self, rec: Recording) -> None:
        """``Tensor.copy()`` of device memory no stream orders (imported with ``stream=-1``) is queued on the device's
        default stream without host synchronisation, and says so (``stream``), as ``from_dlpack(t, copy=True)``
        does: a consumer on another stream waits for it."""
        values, base = self.source(LAYOUTS["transposed"])
        t = dlbind.from_dlpack(Exporter(self.view(base, values.dtype, LAYOUTS["transposed"])), stream=-1)
        assert t.stream is None
        default = self.name_of(self.default_stream, {})
        for copy in (t.copy, lambda: dlbind.from_dlpack(t, copy=True)):
            rec.clear()
            c = copy()
            made = [m for m in self.calls(rec) if "Free(" not in m]  # the last round's copy freed
            assert all(m.endswith(f", {default})") for m in made[1:]) and not any("Synchronize" in m for m in made)
            assert c.stream == self.default_stream and c.device == self.device
            consumer = self.recording.user_stream()
            rec.clear()
            dlbind.from_dlpack(c, stream=consumer)
            waits = [re.sub(r"\bE\d+\b", "E", m) for m in self.calls(rec)]
            assert f"{self.prefix}EventRecord(E, {default})" in waits
            assert any(m.startswith(f"{self.prefix}StreamWaitEvent(S") for m in waits)

    def test_device_copy_owns_its_memory_and_keeps_the_source(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["gapped"])
        mem = self.view(base, values.dtype, LAYOUTS["gapped"], readonly=True)
        del base
        out = self.backend.copy_on_device(mem, self.default_stream)
        assert isinstance(out.owner, DeviceCopy) and not out.readonly
        del mem
        gc.collect()
        assert not any("Free" in c for c in rec.calls())  # the source lives as long as the copy
        t = dlbind.from_dlpack(Exporter(out))
        del out
        gc.collect()
        assert not any("Free" in c for c in rec.calls())  # the tensor holds the copy
        del t
        gc.collect()
        frees = [c for c in rec.calls() if "Free" in c]
        assert frees == [f"{self.prefix}Free(D1)", f"{self.prefix}Free(D0)"]  # the copy, then the source

    def test_device_copy_of_pinned_memory_stays_pinned(self, rec: Recording) -> None:
        memory, device_type, call = self.host_memory
        values = np.arange(12, dtype=np.float32)
        base = self.module.asarray(values, memory=memory)
        rec.clear()
        out = self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["transposed"]), self.default_stream)
        assert out.device == (device_type, 0)
        assert self.calls(rec)[0] == call and all(", Default, " in c for c in self.calls(rec)[1:])
        assert np.array_equal(read(out.data, 48).view(np.float32), values.reshape(3, 4).T.reshape(-1))

    def test_copy_true_of_pinned_memory_stays_on_its_device(self, rec: Recording) -> None:
        """``copy=True`` without a device (the array API: the same device), with that device named, ``Tensor.copy()``
        and ``__dlpack__(copy=True)`` of pinned memory: new pinned memory of the same device, copied by the backend on
        the default stream, which is synchronised (pinned memory has no stream: the copy is ready when returned);
        ``device="cpu"`` still copies to the CPU."""
        memory, device_type, call = self.host_memory
        values = np.arange(12, dtype=np.float32)
        p = self.module.asarray(values, memory=memory)
        default = self.name_of(self.default_stream, {})
        copies = {
            "copy=True": lambda: dlbind.from_dlpack(p, copy=True),
            "device=": lambda: dlbind.from_dlpack(p, copy=True, device=(device_type, 0)),
            "Tensor.copy": p.copy,
            "__dlpack__": lambda: dlbind.from_dlpack(p.__dlpack__(copy=True, max_version=(1, 3))),
        }
        for name, copy in copies.items():
            rec.clear()
            out = copy()
            made = [m for m in self.calls(rec) if "Free" not in m]
            assert out.device == (device_type, 0) and out.stream is None, name
            assert out.flags & Flags.IS_COPIED and out.data_ptr != p.data_ptr, name
            assert made[0].split(" -> ")[0] == call.split(" -> ")[0], (name, made)
            assert made[-1] == f"{self.prefix}StreamSynchronize({default})", (name, made)
            assert all(f", Default, {default})" in m for m in made[1:-1]), (name, made)
            assert np.array_equal(np.asarray(out), values), name
        rec.clear()
        host = dlbind.from_dlpack(p, device="cpu", copy=True)
        assert host.device == CPU and host.flags & Flags.IS_COPIED and np.array_equal(np.asarray(host), values)

    def test_device_copy_of_sub_byte_types(self, rec: Recording) -> None:
        raw = np.arange(16, dtype=np.uint8)
        base = self.upload(raw)
        fp4 = dlbind.dtypes.lookup("float4_e2m1fn")
        packed = Memory(base.data_ptr, (6, 4), (4, 1), fp4, base.device, 2, False, base)  # 24 nibbles, 12 bytes
        out = self.backend.copy_on_device(packed, self.default_stream)
        assert out.flags == Flags.IS_COPIED and np.array_equal(read(out.data, 12), raw[2:14])
        with pytest.raises(BufferError, match=r"a strided float4_e2m1fn tensor \(packed below a byte.*share bytes"):
            self.backend.copy_on_device(packed._replace(shape=(4, 6), strides=(1, 4)), self.default_stream)
        padded_flag = int(Flags.IS_SUBBYTE_TYPE_PADDED)
        padded = Memory(base.data_ptr, (4, 3), (1, 4), fp4, base.device, 0, False, base, padded_flag)
        out = self.backend.copy_on_device(padded, self.default_stream)  # one byte each: any strides
        assert out.flags == Flags.IS_COPIED | Flags.IS_SUBBYTE_TYPE_PADDED
        assert np.array_equal(read(out.data, 12), raw[:12].reshape(3, 4).T.reshape(-1))

    def test_device_copy_of_nothing(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["empty"])
        rec.clear()
        out = self.backend.copy_on_device(self.view(base, values.dtype, LAYOUTS["empty"]), self.default_stream)
        assert out.shape == (0, 3) and out.data == 0 and out.flags == Flags.IS_COPIED
        assert self.calls(rec) == []

    def test_device_copy_failures(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["transposed"])
        mem = self.view(base, values.dtype, LAYOUTS["transposed"])
        rec.fail(f"{self.prefix}Memcpy2DAsync", 1)
        with pytest.raises(BufferError, match=rf"copying {self.name}:0 memory on the device failed: "
                           rf"{self.prefix}Memcpy2DAsync failed"):  # fmt: skip
            self.backend.copy_on_device(mem, self.default_stream)
        gc.collect()
        assert f"{self.prefix}Free(D1)" in rec.calls()  # the new allocation does not outlive the failure
        rec.fail(f"{self.prefix}Malloc", 2)
        with pytest.raises(MemoryError, match=f"{self.prefix}Malloc failed: out of memory"):
            self.backend.copy_on_device(mem, self.default_stream)
        rec.clear()
        backwards = Memory(base.data_ptr, (MAX_COPIES + 1,), (-1,), mem.dtype, mem.device, 0, False, base)
        with pytest.raises(BufferError, match=rf"shape \({MAX_COPIES + 1},\) with byte strides \(-4,\) .* more "
                           rf"than {MAX_COPIES}: its elements run backwards in memory"):  # fmt: skip
            self.backend.copy_on_device(backwards, self.default_stream)
        assert self.calls(rec) == []  # refused before anything is allocated

    # -- copy_to_host: the pinned pool ------------------------------------------------------------------------
    def test_host_copy_through_the_pool(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["offset"])
        mem = self.view(base, values.dtype, LAYOUTS["offset"])
        rec.clear()
        small = self.backend.copy_to_host(mem)
        d = self.name_of(self.default_stream, {})
        p = self.prefix
        assert self.calls(rec) == [
            f"{self.pinned}(1048576, 1) -> H0 on device 0",
            f"{p}MemcpyAsync(H0+0, D0+28, 40, DeviceToHost, {d})",
            f"{p}StreamSynchronize({d})",
        ]
        assert small.device == dlbind.export.CPU and small.flags == Flags.IS_COPIED and not small.readonly
        assert not isinstance(small.owner, PinnedBlock)  # small copies land in pageable memory
        assert same(np.from_dlpack(Exporter(small)), self.expected(values, LAYOUTS["offset"]))
        s = self.recording.user_stream()
        rec.clear()
        again = self.backend.copy_to_host(mem, s)  # the block is reused, on the given stream
        assert self.calls(rec) == [f"{p}MemcpyAsync(H0+0, D0+28, 40, DeviceToHost, S1)", f"{p}StreamSynchronize(S1)"]
        assert same(np.from_dlpack(Exporter(again)), self.expected(values, LAYOUTS["offset"]))

    def test_large_host_copies_are_the_pinned_block(self, rec: Recording) -> None:
        values = np.random.default_rng(1).random((512, 520))  # 2 080 KiB
        base = self.upload(values)
        mem = self.view(base, values.dtype, (values.shape, (520, 1), 0))
        rec.clear()
        first = self.backend.copy_to_host(mem)
        size = GpuTensors.HOLD_MIN * 5 // 4 * 2  # its size class: 2.5 MiB
        assert self.calls(rec)[0] == f"{self.pinned}({size}, 1) -> H0 on device 0"
        assert isinstance(first.owner, PinnedBlock) and first.data == first.owner.address
        t = np.from_dlpack(Exporter(first))
        assert np.array_equal(t, values)
        rec.clear()
        second = self.backend.copy_to_host(mem)  # the first is alive: a second block
        assert self.calls(rec)[0] == f"{self.pinned}({size}, 1) -> H1 on device 0"
        del first, t, second
        gc.collect()
        rec.clear()
        third = self.backend.copy_to_host(mem)  # back in the pool: reused, not freed
        assert not any(self.pinned in c or self.pinned_free in c for c in rec.calls())
        assert np.array_equal(np.from_dlpack(Exporter(third)), values)
        assert self.recording.runtime.runtime().pinned_pool().leased == size

    @pytest.mark.parametrize(
        ("layout", "how"),
        [
            (((256, 128), (256, 1), 0), "Memcpy2DAsync(H0+0, 512, D0+0, 1024, 512, 256, DeviceToHost"),  # wide rows
            (((300,), (1000,), 5), "Memcpy2DAsync(H0+0, 4, D0+20, 4000, 4, 300, DeviceToHost"),  # a column
            (((64, 32), (1, 64), 0), "MemcpyAsync(H0+0, D0+0, 8192, DeviceToHost"),  # transposed: the span
            (((2048,), (-1,), 2047), "MemcpyAsync(H0+0, D0+0, 8192, DeviceToHost"),  # reversed: the span
            (((64, 64), (0, 1), 0), "MemcpyAsync(H0+0, D0+0, 256, DeviceToHost"),  # broadcast: the span
        ],
        ids=["wide-rows", "column", "transposed", "reversed", "broadcast"],
    )
    def test_strided_host_copies(self, rec: Recording, layout: Layout, how: str) -> None:
        values, base = self.source(layout)
        rec.clear()
        out = self.backend.copy_to_host(self.view(base, values.dtype, layout))
        assert [c for c in self.calls(rec) if "Memcpy" in c] == [
            f"{self.prefix}{how}, {self.name_of(self.default_stream, {})})"
        ]
        assert same(np.from_dlpack(Exporter(out)), self.expected(values, layout))

    @pytest.mark.parametrize("layout", list(LAYOUTS.values()), ids=list(LAYOUTS))
    def test_host_copy_values(self, rec: Recording, layout: Layout) -> None:
        values, base = self.source(layout, np.int16)
        mem = self.view(base, values.dtype, layout, readonly=True)
        out = self.backend.copy_to_host(mem)
        expected = self.expected(values, layout)
        assert out.flags == Flags.IS_COPIED and not out.readonly and out.byte_offset == 0
        got = np.from_dlpack(Exporter(out))
        assert same(got, expected)

    @property_test(case=layouts, seed=seeds, staged=lambda st: st.booleans())
    def test_host_copy_of_any_layout(
        self, rec: Recording, monkeypatch: pytest.MonkeyPatch, case: tuple[np.dtype[Any], Layout], seed: int,
        staged: bool,
    ) -> None:  # fmt: skip
        dtype, layout = case
        values, base = self.source(layout, dtype, seed)
        monkeypatch.setattr(GpuTensors, "STAGE_CHUNK", 8)  # staging in chunks of 8 bytes
        pool = self.recording.runtime.runtime().pinned_pool()
        bound = pool.bound
        if staged:  # no room in the pool: the double-buffered staging
            pool.bound = 0
            pool.trim()
        try:
            out = self.backend.copy_to_host(self.view(base, dtype, layout))
        finally:
            pool.bound = bound
        assert same(np.from_dlpack(Exporter(out)), self.expected(values, layout))

    def test_host_copy_waits_for_the_producer_stream(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["row-major"])
        producer = self.recording.user_stream()
        rec.clear()
        self.backend.copy_to_host(self.view(base, values.dtype, LAYOUTS["row-major"], stream=producer))
        d = self.name_of(self.default_stream, {})
        calls = self.calls(rec)
        assert calls[:3] == [f"{self.prefix}EventCreateWithFlags(2) -> E1", f"{self.prefix}EventRecord(E1, S1)",
                              f"{self.prefix}StreamWaitEvent({d}, E1, 0)"]  # fmt: skip
        assert calls[-1] == f"{self.prefix}StreamSynchronize({d})"

    def test_host_copy_streams_are_checked(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["row-major"])
        for stream in self.refused_streams:
            with pytest.raises(BufferError, match=f"the host copy's stream {stream} is not a"):
                self.backend.copy_to_host(self.view(base, values.dtype, LAYOUTS["row-major"]), stream)

    # -- copy_to_host: the bound, the fallbacks ----------------------------------------------------------------
    def test_the_pool_is_bounded(self, recording: Recording, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setenv(POOL_ENV, "3M")
        monkeypatch.setattr(GpuTensors, "STAGE_CHUNK", MiB)
        recording.load()
        values = np.arange(MiB // 2, dtype=np.float32)  # 2 MiB: held in its pinned block
        base = self.upload(values)
        mem = self.view(base, values.dtype, (values.shape, (1,), 0))
        held = [self.backend.copy_to_host(mem)]
        assert isinstance(held[0].owner, PinnedBlock) and recording.live("H") == (1, 2 * MiB)
        recording.clear()
        held.append(self.backend.copy_to_host(mem))  # 2 + 2 MiB > 3 MiB: staged through 1 MiB chunks
        assert not isinstance(held[1].owner, PinnedBlock)
        assert [c for c in recording.calls() if self.pinned in c] == [
            f"{self.pinned}(1048576, 1) -> H1 on device 0",
            f"{self.pinned}(1048576, 1) -> H2 on device 0",
        ]
        assert sum(self.pinned_free in c for c in recording.calls()) == 1  # one chunk past the bound is freed
        assert recording.live("H") == (2, 3 * MiB)
        for h in held:
            assert np.array_equal(np.from_dlpack(Exporter(h)), values)
        del held
        gc.collect()
        pool = self.recording.runtime.runtime().pinned_pool()
        assert pool.leased == 0 and pool.idle == 3 * MiB == recording.live("H")[1]
        recording.clear()
        small = np.arange(1000, dtype=np.float64)
        self.backend.copy_to_host(self.view(self.upload(small), small.dtype, (small.shape, (1,), 0)))
        assert not any(self.pinned in c for c in recording.calls())  # the idle 1 MiB block serves it

    def test_another_size_frees_idle_blocks_past_the_bound(
        self, recording: Recording, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(POOL_ENV, str(3 * MiB))
        recording.load()
        two = np.zeros(MiB // 2, dtype=np.float32)
        mem = self.view(self.upload(two), two.dtype, (two.shape, (1,), 0))
        self.backend.copy_to_host(mem)  # leased, then idle
        gc.collect()
        assert recording.live("H") == (1, 2 * MiB)
        three = np.ones(3 * MiB // 4, dtype=np.float32)
        recording.clear()
        out = self.backend.copy_to_host(self.view(self.upload(three), three.dtype, (three.shape, (1,), 0)))
        assert [c for c in recording.calls() if "Host" in c and "Memcpy" not in c] == [
            f"{self.pinned_free}(H0)", f"{self.pinned}({3 * MiB}, 1) -> H1 on device 0",
        ]  # fmt: skip
        assert np.array_equal(np.from_dlpack(Exporter(out)), three) and recording.live("H") == (1, 3 * MiB)

    def test_staging_when_no_block_can_be_pinned(self, rec: Recording, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(GpuTensors, "STAGE_CHUNK", 1024)
        values, base = self.source(((5 * 256 - 10,), (1,), 10))  # 5 chunks of 1 KiB, from byte 40
        s = self.recording.user_stream()
        rec.clear()
        rec.fail(self.pinned, 2)  # the whole copy's block cannot be pinned
        out = self.backend.copy_to_host(self.view(base, values.dtype, ((5 * 256 - 10,), (1,), 10)), s)
        p = self.prefix

        def chunk(i: int, block: str, event: str) -> list[str]:
            size = min(1024, 5 * 1024 - 40 - i * 1024)
            return [f"{p}MemcpyAsync({block}+0, D0+{40 + i * 1024}, {size}, DeviceToHost, S1)",
                    f"{p}EventRecord({event}, S1)"]  # fmt: skip

        assert self.calls(rec) == [
            f"{self.pinned}(1048576, 1) -> error 2",
            f"{self.pinned}(1048576, 1) -> H0 on device 0",
            f"{self.pinned}(1048576, 1) -> H1 on device 0",
            f"{p}EventCreateWithFlags(2) -> E1",
            f"{p}EventCreateWithFlags(2) -> E2",
            *chunk(0, "H0", "E1"), *chunk(1, "H1", "E2"),
            f"{p}EventSynchronize(E1)", *chunk(2, "H0", "E1"),  # chunk 1's DMA runs while the CPU copies chunk 0
            f"{p}EventSynchronize(E2)", *chunk(3, "H1", "E2"),
            f"{p}EventSynchronize(E1)", *chunk(4, "H0", "E1"),
            f"{p}EventSynchronize(E2)",
            f"{p}EventSynchronize(E1)",
            f"{p}EventDestroy(E1)",
            f"{p}EventDestroy(E2)",
        ]  # fmt: skip
        assert out.flags == Flags.IS_COPIED and not isinstance(out.owner, PinnedBlock)
        assert same(np.from_dlpack(Exporter(out)), values[10:1280])
        assert self.recording.runtime.runtime().pinned_pool().leased == 0  # the chunks went back

    def test_staging_destroys_its_events_when_one_cannot_be_made(
        self, recording: Recording, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(POOL_ENV, "0")  # no block for the whole copy: staged
        monkeypatch.setattr(GpuTensors, "STAGE_CHUNK", 1024)
        recording.load()
        layout = ((512,), (1,), 0)  # two chunks of 1 KiB: two events
        values, base = self.source(layout)
        recording.clear()
        p = self.prefix
        recording.fail(f"{p}EventCreateWithFlags", 1, after=1)  # the second event cannot be made
        with pytest.raises(BufferError, match=f"copying {self.name}:0 memory to the host failed: "
                           f"{p}EventCreateWithFlags failed"):  # fmt: skip
            self.backend.copy_to_host(self.view(base, values.dtype, layout))
        assert [c for c in recording.calls() if "Event" in c] == [
            f"{p}EventCreateWithFlags(2) -> E1",
            f"{p}EventCreateWithFlags(2) -> error 1",
            f"{p}EventDestroy(E1)",  # the one made is not leaked
        ]
        assert self.recording.runtime.runtime().pinned_pool().leased == 0

    def test_pageable_copy_when_nothing_can_be_pinned(self, rec: Recording) -> None:
        layout = LAYOUTS["transposed"]
        values, base = self.source(layout)
        s = self.recording.user_stream()
        rec.clear()
        rec.fail(self.pinned, 2, times=2)
        out = self.backend.copy_to_host(self.view(base, values.dtype, layout), s)
        p, d = self.prefix, self.name_of(self.default_stream, {})
        assert self.calls(rec) == [
            f"{self.pinned}(1048576, 1) -> error 2",
            f"{self.pinned}(1048576, 1) -> error 2",
            f"{p}StreamSynchronize(S1)",  # the data is ready on S1; the pageable copy runs on the default stream
            f"{p}Memcpy(host, D0+0, 48, DeviceToHost)",
            f"{p}StreamSynchronize({d})",
        ]
        assert same(np.from_dlpack(Exporter(out)), self.expected(values, layout))

    def test_a_failed_host_copy_gives_its_block_back(self, rec: Recording) -> None:
        values, base = self.source(LAYOUTS["row-major"])
        rec.fail(f"{self.prefix}StreamSynchronize", 1)
        with pytest.raises(BufferError, match=f"copying {self.name}:0 memory to the host failed: "
                           f"{self.prefix}StreamSynchronize failed"):  # fmt: skip
            self.backend.copy_to_host(self.view(base, values.dtype, LAYOUTS["row-major"]))
        pool = self.recording.runtime.runtime().pinned_pool()
        assert pool.leased == 0 and pool.idle == MiB

    def test_host_copies_from_threads(self, rec: Recording) -> None:
        values = np.random.default_rng(2).random((64, 1024))  # 512 KiB
        base = self.upload(values)
        errors: list[BaseException] = []

        def work(k: int) -> None:
            try:
                for i in range(10):
                    rows = (k + i) % 64
                    layout = ((64 - rows, 1024), (1024, 1), rows * 1024)
                    out = self.backend.copy_to_host(self.view(base, values.dtype, layout))
                    assert np.array_equal(np.from_dlpack(Exporter(out)), values[rows:])
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        gc.collect()
        pool = self.recording.runtime.runtime().pinned_pool()
        assert pool.leased == 0 and pool.idle == rec.live("H")[1] <= 6 * MiB

    # -- through the core -----------------------------------------------------------------------------------------
    def test_the_core_host_copy_goes_through_the_pool(self, rec: Recording) -> None:
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        t = self.upload(a)
        rec.clear()
        assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), a)
        assert np.array_equal(np.from_dlpack(t, device="cpu", copy=True), a)
        assert sum(self.pinned in c for c in rec.calls()) == 1

    def test_an_export_to_the_host_waits_for_the_data_once(self, rec: Recording) -> None:
        """``__dlpack__(dl_device=cpu)`` of a tensor ready on a stream: the default stream waits for it once (the
        export's wait), then the host copy is queued there and synchronised."""
        a = np.arange(6, dtype=np.float32)
        s = self.recording.user_stream()
        t = dlbind.from_dlpack(self.upload(a), stream=s)  # ready on S1
        rec.clear()
        out = dlbind.from_dlpack(t.__dlpack__(dl_device=(dlbind.DeviceType.kDLCPU, 0), max_version=(1, 3)))
        assert np.array_equal(np.from_dlpack(out), a)
        d = self.name_of(self.default_stream, {})
        calls = self.calls(rec)
        records = [c for c in calls if "EventRecord" in c]  # one event, recorded on S1, waited for by the default
        assert len(records) == 1 and records[0].endswith(", S1)"), calls
        event = records[0][records[0].index("(") + 1 : records[0].index(",")]
        assert [c for c in calls if "StreamWaitEvent" in c] == [f"{self.prefix}StreamWaitEvent({d}, {event}, 0)"]
        assert calls[-1] == f"{self.prefix}StreamSynchronize({d})"
