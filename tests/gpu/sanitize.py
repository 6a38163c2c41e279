"""A short exchange script for ``compute-sanitizer --tool memcheck --error-exitcode 1`` (run by ``.ci/gpu``).

    compute-sanitizer --tool memcheck --error-exitcode 1 python3 tests/gpu/sanitize.py

torch <-> CuPy <-> dlbind-cuda conversions (zero-copy and bridged: transposed, offset and reversed
views), host copies of device memory, a device copy, pinned and managed memory, each checked for
its values; every object is let go at the end and the device synchronised, so that memcheck sees the whole
lifetime of each allocation. Prints ``sanitize: ok`` and exits 0, or exits 1 on the first wrong value. A
library that is missing is skipped, saying so; without a GPU the script says why and exits 0. ``--quick``:
fewer rounds (the test suite runs it so).
"""

from __future__ import annotations

import gc
import os
import sys
from typing import Any

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np

import dlbind

ROUNDS = 2 if "--quick" in sys.argv else 5


def check(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    if got.shape != want.shape or not np.array_equal(got, want):
        print(f"sanitize: WRONG VALUES: {what}: {got.tolist()!r} vs {want.tolist()!r}", flush=True)
        sys.exit(1)


def host(t: Any) -> np.ndarray:
    return np.asarray(dlbind.from_dlpack(t, device="cpu", copy=True))


def main() -> int:
    try:
        import dlbind_cuda
    except ImportError:
        print("sanitize: skipped: dlbind-cuda is not installed")
        return 0
    probe = dlbind_cuda.probe()
    if not probe.available:
        print(f"sanitize: skipped: no CUDA GPU: {probe.reason}")
        return 0
    torch = _torch()
    cupy = _cupy()
    print(f"sanitize: dlbind {dlbind.__version__} ({dlbind.ffi_build()}), torch {getattr(torch, '__version__', '-')}, "
          f"cupy {getattr(cupy, '__version__', '-')}", flush=True)  # fmt: skip
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    for _ in range(ROUNDS):
        # dlbind-cuda's own memory: device, pinned, managed
        for memory in ("device", "host", "managed"):
            _own_memory(dlbind_cuda, memory, a, torch, cupy)
        if torch is not None:
            _from_torch(torch, cupy, a)
        gc.collect()
    if torch is not None:
        torch.cuda.synchronize()
    if cupy is not None:
        cupy.cuda.Device().synchronize()
    gc.collect()
    print("sanitize: ok", flush=True)
    return 0


def _torch() -> Any:
    """torch, where it is installed and sees a CUDA GPU; else None."""
    try:
        import torch

        return torch if torch.cuda.is_available() else None
    except ImportError:
        return None


def _cupy() -> Any:
    """CuPy, where it is installed; else None."""
    try:
        import cupy
    except ImportError:
        return None
    return cupy


def _own_memory(dlbind_cuda: Any, memory: str, a: np.ndarray, torch: Any, cupy: Any) -> None:
    """``a`` in dlbind-cuda's ``memory`` (device, host: pinned, or managed): to numpy, transposed and reversed views
    copied to the host, and to CuPy and torch where they are."""
    t = dlbind_cuda.asarray(a, memory=memory)
    check(np.from_dlpack(t, device="cpu", copy=True), a, f"np.from_dlpack({memory} tensor)")
    view = dlbind.from_dlpack(
        dlbind.from_pointer(t.data_ptr, (6, 4), "float32", strides=(1, 6), device=t.device, owner=t)
    )
    check(host(view), a.T, f"transposed {memory} view, host copy")
    rev = dlbind.from_dlpack(
        dlbind.from_pointer(t.data_ptr, (4, 6), "float32", strides=(-6, 1), byte_offset=18 * 4,
                            device=t.device, owner=t)
    )  # fmt: skip
    check(host(rev), a[::-1], f"reversed {memory} view, host copy")
    if cupy is not None:
        c = dlbind.convert(t, to="cupy")
        check(cupy.asnumpy(c), a, f"{memory} tensor -> cupy")
    if torch is not None:
        y = dlbind.convert(t, to="torch")
        check(y.cpu().numpy(), a, f"{memory} tensor -> torch")
        y2 = dlbind.convert(rev, to="torch")  # negative strides: bridged
        check(y2.cpu().numpy(), a[::-1], f"reversed {memory} view -> torch")


def _from_torch(torch: Any, cupy: Any, a: np.ndarray) -> None:
    """``a`` on torch's GPU: host copies of it and of transposed and offset views, a device copy, the way back to
    torch, and CuPy both ways where it is."""
    x = torch.from_numpy(a).to("cuda")
    check(host(x), a, "torch -> host copy")
    check(host(x.T), a.T, "transposed torch -> host copy")
    check(host(x[1:, 2:]), a[1:, 2:], "offset torch -> host copy")
    d = dlbind.from_dlpack(x, copy=True)  # a device copy
    check(host(d), a, "torch -> device copy")
    back = torch.from_dlpack(dlbind.from_dlpack(x))
    check(back.cpu().numpy(), a, "torch -> dlbind.Tensor -> torch")
    if cupy is not None:
        c = dlbind.convert(x, to="cupy")
        check(cupy.asnumpy(c), a, "torch -> cupy")
        c_t = dlbind.convert(x.T, to="cupy")
        check(cupy.asnumpy(c_t), a.T, "transposed torch -> cupy")
        tt = dlbind.convert(c, to="torch")
        check(tt.cpu().numpy(), a, "cupy -> torch")
        check(host(c[1:, 2:]), a[1:, 2:], "offset cupy -> host copy")


if __name__ == "__main__":
    sys.exit(main())
