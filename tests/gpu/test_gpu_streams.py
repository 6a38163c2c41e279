"""Stream ordering with a producer kept busy (issue 21, finding 1).

A torch or CuPy producer writes its array on a side stream after a kernel that spins for about 0.1 s
(``SPIN_CYCLES`` GPU clock cycles), and the exchange happens while that stream is its library's current
stream (the DLPack contract: the producer orders the consumer's stream after its current stream's work).
The consumer then enqueues a read of the exchanged array on its stream (a device copy), and the test
checks on the host that the read saw the WRITTEN values (7.0), not the old ones (0.0), on:

- the legacy default stream, the per-thread default stream, and a non-blocking stream, for torch and CuPy
  as consumers (their current stream, set with their own context managers), numba-cuda and dlbind (their
  stream passed as ``stream=``: they have no current stream);
- JAX's own stream (JAX exposes none to choose).

Both routes: ``dlbind.convert(x, to=consumer)`` and ``dlbind.from_dlpack(x)`` handed to the consumer's own
importer (the ``dlbind.Tensor`` carries what it was ordered against). Each assertion message says whether the
producer was still busy when the consumer's read was enqueued (if not, the case could not tell a missing
wait, only a wrong value).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

import gpulibs
import numpy as np
import pytest

import dlbind

pytestmark = pytest.mark.gpu

N = 1 << 20  # float32 elements (4 MiB)
VALUE = 7.0
SPIN_CYCLES = int(os.environ.get("DLBIND_GPU_SPIN_CYCLES", str(2 * 10**8)))  # ~0.1 s at 2 GHz
STREAMS = ("legacy", "per-thread", "non-blocking")
_SPIN_SOURCE = r"""
extern "C" __global__ void dlbind_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


# -- busy producers -------------------------------------------------------------------------------------------------


class Busy:
    """A producer's array, written with VALUE on a side stream after a spin; ``current()`` makes that stream
    the library's current stream; ``busy()`` says whether it still runs."""

    def __init__(self, array: Any, current: Callable[[], Any], busy: Callable[[], bool], sync: Callable[[], None]):
        self.array, self.current, self.busy, self.sync = array, current, busy, sync


def busy_torch() -> Busy:
    torch = gpulibs.library("torch")
    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip(f"torch {torch.__version__} has no torch.cuda._sleep to keep a stream busy")
    x = torch.zeros(N, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(VALUE)
    return Busy(x, lambda: torch.cuda.stream(s), lambda: not s.query(), s.synchronize)


_CUPY_SPIN: list[Any] = []


def busy_cupy() -> Busy:
    cupy = gpulibs.library("cupy")
    if not _CUPY_SPIN:
        try:
            _CUPY_SPIN.append(cupy.RawKernel(_SPIN_SOURCE, "dlbind_spin"))
        except Exception as exc:
            pytest.skip(f"CuPy cannot compile a spin kernel here (NVRTC): {type(exc).__name__}: {exc}")
    x = cupy.zeros(N, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        _CUPY_SPIN[0]((1,), (1,), (np.int64(SPIN_CYCLES),))
        x.fill(VALUE)
    return Busy(x, lambda: s, lambda: not s.done, s.synchronize)


PRODUCERS: dict[str, Callable[[], Busy]] = {"torch": busy_torch, "cupy": busy_cupy}


# -- consumers: their streams, and a read enqueued on them -----------------------------------------------------------


def _consumer_stream(consumer: str, kind: str) -> tuple[Any, int, Callable[[], Any]]:
    """(the consumer's stream object, its handle, a context manager making it current, or a null one)."""
    if consumer == "torch":
        torch = gpulibs.library("torch")
        if kind == "legacy":
            s = torch.cuda.default_stream()
        elif kind == "per-thread":
            try:
                s = torch.cuda.ExternalStream(2)  # cudaStreamPerThread
            except Exception as exc:
                pytest.skip(f"torch cannot name the per-thread default stream: {type(exc).__name__}: {exc}")
        else:
            s = torch.cuda.Stream()
        handle = int(s.cuda_stream)
        return s, handle, lambda: torch.cuda.stream(s)
    if consumer == "cupy":
        cupy = gpulibs.library("cupy")
        s = {"legacy": cupy.cuda.Stream.null, "per-thread": cupy.cuda.Stream.ptds}.get(kind)
        if s is None:
            s = cupy.cuda.Stream(non_blocking=True)
        return s, int(s.ptr), lambda: s
    if consumer == "numba":
        cuda = gpulibs.library("numba")
        s = {"legacy": cuda.legacy_default_stream, "per-thread": cuda.per_thread_default_stream}.get(
            kind, cuda.stream
        )()
        return s, int(s), contextlib.nullcontext
    if consumer == "dlbind":
        gpulibs.library("dlbind_cuda")
        from dlbind_cuda._runtime import ffi, runtime

        rt = runtime()
        if kind == "legacy":
            return None, 1, contextlib.nullcontext
        if kind == "per-thread":
            return None, 2, contextlib.nullcontext
        out = ffi.new("cudaStream_t *")
        rt.check(rt.lib.cudaStreamCreateWithFlags(out, rt.lib.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")
        _MADE.append(out[0])
        return None, int(ffi.cast("uintptr_t", out[0])), contextlib.nullcontext
    raise ValueError(consumer)


_MADE: list[Any] = []  # dlbind-cuda streams made by the tests, destroyed after each


@pytest.fixture(autouse=True)
def _destroy_streams() -> Iterator[None]:
    yield
    if _MADE:
        from dlbind_cuda._runtime import runtime

        rt = runtime()
        for s in _MADE:
            rt.lib.cudaStreamSynchronize(s)
            rt.lib.cudaStreamDestroy(s)
        _MADE.clear()


def _enqueue_read(consumer: str, y: Any, stream: Any, handle: int) -> Callable[[], np.ndarray]:
    """Enqueue a device copy of ``y`` on the consumer's stream (now current); return what reads it on the host
    after synchronising that stream."""
    if consumer == "torch":
        z = y.clone()
        return lambda: (stream.synchronize(), z.cpu().numpy())[1]
    if consumer == "cupy":
        cupy = gpulibs.library("cupy")
        z = y.copy()
        return lambda: (stream.synchronize(), cupy.asnumpy(z))[1]
    if consumer == "jax":
        z = y + 0  # dispatched asynchronously on jax's stream
        return lambda: np.asarray(z)
    if consumer == "numba":
        cuda = gpulibs.library("numba")
        z = cuda.device_array(y.shape, dtype=y.dtype, stream=stream)
        z.copy_to_device(y, stream=stream)
        return lambda: (stream.synchronize(), z.copy_to_host())[1]
    if consumer == "dlbind":
        import dlbind_cuda
        from dlbind_cuda._runtime import ffi, runtime

        rt = runtime()
        out = dlbind_cuda.empty((N,), "float32")
        src = ffi.cast("void *", y.data_ptr + y.byte_offset)
        s = ffi.cast("cudaStream_t", handle)
        rt.check(
            rt.lib.cudaMemcpyAsync(ffi.cast("void *", out.data_ptr), src, N * 4, rt.lib.cudaMemcpyDeviceToDevice, s),
            "cudaMemcpyAsync",
        )
        return lambda: (rt.check(rt.lib.cudaStreamSynchronize(s), "cudaStreamSynchronize"), gpulibs.host_copy(out))[1]
    raise ValueError(consumer)


def exchange(route: str, consumer: str, x: Any, handle: int) -> Any:
    """The exchange under test, on the consumer's stream: torch and CuPy name theirs by being current, numba
    and dlbind are given theirs as ``stream=``."""
    explicit = {"stream": handle} if consumer in ("numba", "dlbind") else {}
    if route == "convert":
        if consumer == "dlbind":
            return dlbind.from_dlpack(x, **explicit)
        return dlbind.convert(x, to=consumer, **explicit)
    t = dlbind.from_dlpack(x)  # ordered against the legacy default stream, which the Tensor must carry
    if consumer == "dlbind":
        return dlbind.from_dlpack(t, **explicit)
    return gpulibs.importer(consumer)(t)


CASES = [
    (producer, consumer, kind)
    for producer in PRODUCERS
    for consumer in ("torch", "cupy", "numba", "dlbind", "jax")
    if consumer != producer
    for kind in (("own",) if consumer == "jax" else STREAMS)
]


@pytest.mark.parametrize("route", ["convert", "from_dlpack"])
@pytest.mark.parametrize(("producer", "consumer", "kind"), CASES, ids=["-".join(c) for c in CASES])
def test_busy_producer(producer: str, consumer: str, kind: str, route: str) -> None:
    if route == "from_dlpack" and consumer == "dlbind":
        pytest.skip("dlbind is the consumer of both routes: the convert case covers it")
    if consumer != "dlbind":
        gpulibs.library(consumer)
    if consumer == "jax":
        stream, handle, current = None, 0, contextlib.nullcontext
    else:
        stream, handle, current = _consumer_stream(consumer, kind)
    _warm(consumer)
    p = PRODUCERS[producer]()
    with p.current(), current():
        y = exchange(route, consumer, p.array, handle)
        reader = _enqueue_read(consumer, y, stream, handle)
        busy = p.busy()
    got = reader()
    p.sync()
    stale = int((got != VALUE).sum())
    assert stale == 0, (
        f"{consumer} on the {kind} stream read {stale} of {N} elements before {producer} wrote them "
        f"({'the producer was still busy when the read was enqueued' if busy else 'the producer had finished'}): "
        f"first values {got[:4].tolist()}"
    )


_WARMED: set[str] = set()


def _warm(consumer: str) -> None:
    """Run the consumer's read once on a small array: first-call compilation must not outlast the spin."""
    if consumer in _WARMED or consumer == "dlbind":
        return
    x = gpulibs.make(consumer, np.ones(16, dtype=np.float32))
    stream, handle, current = (
        (None, 0, contextlib.nullcontext) if consumer == "jax" else _consumer_stream(consumer, "legacy")
    )
    with current():
        reader = _enqueue_read(consumer, x, stream, handle)
    reader()
    _WARMED.add(consumer)


# -- finding 1, as the issue tells it -------------------------------------------------------------------------------


def test_finding1_torch_side_stream_to_cupy_nonblocking_sum() -> None:
    """``with torch.cuda.stream(s)``, then ``with cupy.cuda.Stream(non_blocking=True)``:
    ``dlbind.convert(x, to="cupy").sum()`` is the sum of the written values (7·n), not of the old ones."""
    cupy = gpulibs.library("cupy")
    p = busy_torch()
    cs = cupy.cuda.Stream(non_blocking=True)
    with p.current(), cs:
        y = dlbind.convert(p.array, to="cupy")
        total = y.sum()
        cs.synchronize()
        value = float(total.get(stream=cs))
    p.sync()
    assert value == VALUE * N


def test_finding1_torch_side_stream_to_jax() -> None:
    """The same with JAX as the consumer: ``jnp.sum(dlbind.convert(x, to="jax"))`` is 7·n."""
    gpulibs.library("jax")
    import jax.numpy as jnp

    p = busy_torch()
    with p.current():
        y = dlbind.convert(p.array, to="jax")
        total = jnp.sum(y)
    value = float(total)
    p.sync()
    assert value == VALUE * N


def test_finding1_cupy_side_stream_to_torch_nonblocking_sum() -> None:
    """Mirrored: CuPy writes on its non-blocking stream, torch consumes on a torch side stream."""
    torch = gpulibs.library("torch")
    p = busy_cupy()
    ts = torch.cuda.Stream()
    with p.current(), torch.cuda.stream(ts):
        y = dlbind.convert(p.array, to="torch")
        total = y.sum()
        ts.synchronize()
        value = float(total.item())
    p.sync()
    assert value == VALUE * N
