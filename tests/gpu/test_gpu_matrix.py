"""Every pair of torch, CuPy, JAX, numba-cuda and dlbind-cuda, both ways, through dlbind on one GPU.

Cases: every dtype of ``gpulibs.DTYPES`` in a contiguous 4x6 array, and float32 and int16 arrays seen
transposed, from an offset (a view starting inside its buffer) and reversed (a negative stride). Each
producer makes its array with its own constructor and indexing; the expected values are the same view of
the host values in numpy.

Two routes per pair:

- ``dlbind.convert(x, to=consumer)`` (``test_convert``): a CUDA array of the consumer with ``x``'s values,
  whatever the layout (dlbind bridges what the consumer cannot view), zero-copy between mutable libraries
  where the consumer can view the layout, and never an alias of JAX's immutable memory. A dtype the
  consumer cannot hold at all (its own constructor refuses it) is refused with ``BufferError`` (or
  ``TypeError``), never imported wrong.
- ``dlbind.from_dlpack(x)`` then the consumer's own importer (``test_from_dlpack``): a zero-copy
  ``dlbind.Tensor`` on ``(kDLCUDA, 0)`` with ``x``'s shape, dtype and values (read-only for JAX), which the
  consumer's ``from_dlpack`` (numba: ``as_cuda_array``) imports with the same values wherever it imports
  its own arrays of that dtype and layout.

CuPy's reversed arrays run in a child process (``negative_strides_worker.py``): CuPy 14 exports negative
strides wrong (issue 21, finding 3) and torch aborts the process on what it exports. dlbind gives the right
values or refuses with ``BufferError``; the process lives.

dlbind-cuda's pinned (``memory="host"``) and managed tensors reach every consumer (``test_pinned_and_managed``).
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import gpulibs
import numpy as np
import pytest
from gpulibs import CONSUMERS, DTYPES, LAYOUTS, PRODUCERS

import dlbind

pytestmark = pytest.mark.gpu

TARGETS = tuple(c for c in CONSUMERS if c != "dlbind")  # names dlbind.convert takes
CASES = [(d, "contiguous") for d in DTYPES] + [
    (d, layout) for d in ("float32", "int16") for layout in ("transposed", "offset", "reversed")
]
MUTABLE = ("torch", "cupy", "numba", "dlbind_cuda")
VIEWS = {"torch": ("contiguous", "transposed", "offset"), "cupy": tuple(LAYOUTS)}  # what each target views


def _case_id(case: tuple[str, str]) -> str:
    return f"{case[0]}-{case[1]}"


def produce(producer: str, dtype: str, layout: str, memory: str = "device") -> tuple[Any, np.ndarray]:
    """(the producer's CUDA array, the numpy values it must hold)."""
    host = gpulibs.host_values(dtype)
    x = gpulibs.view(producer, gpulibs.make(producer, host, memory), layout, host)
    return x, LAYOUTS[layout](host)


@functools.cache
def cannot_hold(consumer: str, dtype: str) -> str | None:
    """Why ``consumer`` cannot hold ``dtype`` on the GPU at all (its own constructor refuses it), or None."""
    maker = "dlbind_cuda" if consumer == "dlbind" else consumer
    try:
        gpulibs.make(maker, gpulibs.host_values(dtype))
    except pytest.skip.Exception as exc:
        return str(exc.msg)
    return None


@functools.cache
def native_refusal(consumer: str, dtype: str) -> str | None:
    """Why the consumer's own importer does not round-trip its own contiguous arrays of ``dtype``, or None.
    (Contiguous only: CuPy's own reversed arrays are what finding 3 is about.)"""
    try:
        x, want = produce(consumer, dtype, "contiguous")
        y = gpulibs.importer(consumer)(x)
        gpulibs.same(gpulibs.read(consumer, y, want.dtype), want, "native")
    except pytest.skip.Exception as exc:
        return str(exc.msg)
    except Exception as exc:
        return f"{consumer}'s importer on its own {dtype} arrays: {type(exc).__name__}: {gpulibs._first(exc)}"
    return None


# -- dlbind.convert ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("consumer", TARGETS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_convert(producer: str, consumer: str, case: tuple[str, str], negative_strides: dict[str, Any]) -> None:
    dtype, layout = case
    gpulibs.library(consumer)
    if producer == "cupy" and layout == "reversed":
        _check_child(negative_strides, f"convert:{consumer}:{dtype}")
        return
    x, want = produce(producer, dtype, layout)
    reason = cannot_hold(consumer, dtype)
    if reason is not None:
        with pytest.raises((BufferError, TypeError)):
            dlbind.convert(x, to=consumer)
        return
    y = dlbind.convert(x, to=consumer)
    wrong = gpulibs.is_cuda_array(consumer, y)
    assert wrong is None, f"dlbind.convert(..., to={consumer!r}) gave {wrong}"
    gpulibs.same(gpulibs.read(consumer, y, want.dtype), want, f"{producer} -> {consumer}")
    if producer == "jax" and consumer != "jax":
        assert gpulibs.data_pointer(consumer, y) != gpulibs.data_pointer("jax", x), "a writable alias of jax memory"
    elif producer in MUTABLE and layout in VIEWS.get(consumer, ()) and producer != consumer:
        assert gpulibs.data_pointer(consumer, y) == gpulibs.data_pointer(producer, x), "copied, not shared"


# -- dlbind.from_dlpack, then the consumer's own importer ------------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_case_id)
@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("producer", PRODUCERS)
def test_from_dlpack(producer: str, consumer: str, case: tuple[str, str], negative_strides: dict[str, Any]) -> None:
    dtype, layout = case
    if consumer != "dlbind":
        gpulibs.library(consumer)
    if producer == "cupy" and layout == "reversed":
        _check_child(negative_strides, f"from_dlpack:{consumer}:{dtype}")
        return
    x, want = produce(producer, dtype, layout)
    t = dlbind.from_dlpack(x)
    assert (int(t.device[0]), int(t.device[1])) == (int(dlbind.DeviceType.kDLCUDA), 0)
    assert t.shape == want.shape
    assert t.dtype.to_numpy() == want.dtype
    assert gpulibs.data_pointer("dlbind", t) == gpulibs.data_pointer(producer, x), "dlbind.from_dlpack copied"
    if producer == "jax":
        assert t.readonly, "jax memory is immutable: its import must be read-only"
    if consumer == "dlbind":
        gpulibs.same(gpulibs.host_copy(t), want, f"{producer} -> dlbind.Tensor")
        return
    if consumer == "torch" and layout == "reversed":
        pytest.skip("torch.from_dlpack aborts the process on negative strides (pytorch#188023): convert bridges it")
    if consumer == "numba" and dtype in gpulibs.ML_DTYPES:
        pytest.skip(f"the CUDA Array Interface (numba's import) has no typestr for {dtype}")
    for reason in (cannot_hold(consumer, dtype), native_refusal(consumer, dtype)):
        if reason is not None:
            pytest.skip(reason)
    try:
        y = gpulibs.importer(consumer)(t)
    except Exception as exc:
        if t.readonly and isinstance(exc, BufferError):  # the spec's refusal of read-only data (jax's memory)
            pytest.skip(f"{consumer}'s importer refuses read-only tensors: {gpulibs._first(exc)}")
        if layout == "contiguous":
            raise
        pytest.skip(f"{consumer}'s importer refuses a {layout} tensor: {type(exc).__name__}: {gpulibs._first(exc)}")
    wrong = gpulibs.is_cuda_array(consumer, y)
    assert wrong is None, f"{consumer}'s importer gave {wrong}"
    gpulibs.same(gpulibs.read(consumer, y, want.dtype), want, f"{producer} -> dlbind.Tensor -> {consumer}")


# -- pinned and managed memory ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "int16", "complex64", "bool"])
@pytest.mark.parametrize("consumer", CONSUMERS)
@pytest.mark.parametrize("memory", ["host", "managed"])
def test_pinned_and_managed(memory: str, consumer: str, dtype: str) -> None:
    """dlbind-cuda's pinned and managed tensors reach every consumer, by convert and by from_dlpack."""
    if consumer != "dlbind":
        gpulibs.library(consumer)
    x, want = produce("dlbind_cuda", dtype, "contiguous", memory)
    kind = {"host": dlbind.DeviceType.kDLCUDAHost, "managed": dlbind.DeviceType.kDLCUDAManaged}[memory]
    assert int(x.device[0]) == int(kind)
    t = dlbind.from_dlpack(x)
    assert int(t.device[0]) == int(kind) and t.data_ptr == x.data_ptr
    gpulibs.same(gpulibs.host_copy(t), want, f"{memory} -> dlbind.Tensor")
    if consumer == "dlbind":
        return
    reason = cannot_hold(consumer, dtype)
    if reason is not None:
        pytest.skip(reason)
    y = dlbind.convert(x, to=consumer)
    wrong = gpulibs.is_cuda_array(consumer, y, host_ok=True)
    assert wrong is None, f"dlbind.convert(<{memory} tensor>, to={consumer!r}) gave {wrong}"
    gpulibs.same(gpulibs.read(consumer, y, want.dtype), want, f"{memory} -> {consumer} (convert)")


# -- CuPy's negative strides, in child processes --------------------------------------------------------------------

WORKER = Path(__file__).with_name("negative_strides_worker.py")


@pytest.fixture(scope="module")
def negative_strides() -> dict[str, Any]:
    """The result of every CuPy reversed-array case (convert and from_dlpack into each consumer, float32 and
    int16), run by ``negative_strides_worker.py`` in child processes; a case that kills its process is a
    ``crash`` result and the next process goes on after it."""
    if gpulibs._load("cupy")[1] is not None or gpulibs._load("cupy")[0] is None:
        return {}
    keys = [
        f"{route}:{consumer}:{dtype}"
        for dtype in ("float32", "int16")
        for route, consumers in (("convert", TARGETS), ("from_dlpack", CONSUMERS))
        for consumer in consumers
    ]
    results: dict[str, Any] = {}
    while len(results) < len(keys):
        todo = [k for k in keys if k not in results]
        argv = [str(WORKER), *todo]
        code = f"import runpy, sys; sys.argv = {argv!r}; runpy.run_path({str(WORKER)!r}, run_name='__main__')"
        try:
            proc = gpulibs.run_child(code, timeout=gpulibs.TIMEOUT + 30)
        except Exception as exc:  # a hung child: the rest cannot be told
            for k in todo:
                results.setdefault(k, {"status": "crash", "detail": f"the worker did not finish: {exc}"})
            break
        running = None
        for line in proc.stdout.splitlines():
            msg = json.loads(line) if line.startswith("{") else {}
            if "start" in msg:
                running = msg["start"]
            elif "key" in msg:
                results[msg["key"]] = msg
                running = None
        if running is not None:
            results[running] = {"status": "crash", "detail": gpulibs.describe_exit(proc)}
        elif len(results) < len(keys):  # died between cases, or never started
            for k in todo:
                results.setdefault(k, {"status": "crash", "detail": gpulibs.describe_exit(proc)})
    return results


def _check_child(results: dict[str, Any], key: str) -> None:
    gpulibs.library("cupy")
    found = results.get(key)
    assert found is not None, f"the negative-strides worker did not run {key}"
    status, detail = found["status"], found.get("detail", "")
    if status == "skip":
        pytest.skip(detail)
    assert status in ("values", "refused"), f"{key}: {status}: {detail}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
