"""Deleters run exactly once, from any thread, at interpreter exit, and memory stays flat."""

from __future__ import annotations

import ctypes
import gc
import resource
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import dlbind
from dlbind import capsule
from dlbind._ffi import BUILD, ffi
from dlbind._generated.enums import DataTypeCode
from faulty import PY310_PURE, PY310_PURE_REASON, make_capsule


def _alive() -> int:
    gc.collect()
    exports, deleted = capsule.stats()
    return exports - deleted


def test_100k_exchanges_each_deleter_once_and_flat_rss() -> None:
    a = np.arange(16, dtype=np.float32)
    start = _alive()
    exports0, deleted0 = capsule.stats()
    for _ in range(2_000):  # warm-up: allocator pools settle before RSS is read
        np.from_dlpack(dlbind.asdlpack(a))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(100_000):
        np.from_dlpack(dlbind.asdlpack(a))
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    exports, deleted = capsule.stats()
    assert exports - exports0 == deleted - deleted0 == 102_000  # counted in C on the compiled build
    assert _alive() == start
    assert rss1 - rss0 < 4 * 1024  # KiB: flat (one leaked 80-byte struct per exchange would be 8 MB)


def test_unconsumed_capsule_is_freed_by_its_destructor() -> None:
    start = _alive()
    c = dlbind.asdlpack(bytearray(8)).__dlpack__(max_version=dlbind.DLPACK_VERSION)
    legacy = dlbind.asdlpack(bytearray(8)).__dlpack__()
    assert _alive() == start + 2
    del c, legacy
    assert _alive() == start


def test_deleter_from_another_thread() -> None:
    start = _alive()
    arrays = [np.from_dlpack(dlbind.asdlpack(bytearray(64))) for _ in range(100)]
    tensors = [dlbind.from_dlpack(dlbind.asdlpack(bytearray(64))) for _ in range(100)]

    def drop() -> None:
        arrays.clear()
        tensors.clear()

    thread = threading.Thread(target=drop)
    thread.start()
    thread.join()
    assert _alive() == start


@pytest.mark.skipif(
    BUILD != "compiled", reason="pure build: Python-callback deleters cannot run with an exception pending"
)
def test_exception_pending_while_freed_is_kept() -> None:
    with pytest.raises(ValueError, match="assignment destination is read-only"):
        np.from_dlpack(dlbind.asdlpack(b"xyz"))[0] = 1  # the temporary array is freed while unwinding


def test_deleters_at_interpreter_exit() -> None:
    code = textwrap.dedent(
        """
        import numpy as np, dlbind, threading
        keep = [np.from_dlpack(dlbind.asdlpack(bytearray(32))) for _ in range(10)]
        tensors = [dlbind.from_dlpack(dlbind.asdlpack(bytearray(32))) for _ in range(10)]
        unconsumed = [dlbind.asdlpack(bytearray(8)).__dlpack__(max_version=dlbind.DLPACK_VERSION) for _ in range(10)]
        threading.Thread(target=lambda: keep.append(np.from_dlpack(dlbind.asdlpack(b"x" * 8, readonly=True)))).start()
        print("done")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert "Error" not in proc.stderr and "Exception" not in proc.stderr


def test_tensor_reexport_keeps_producer_alive() -> None:
    start = _alive()
    t = dlbind.from_dlpack(dlbind.asdlpack(bytearray(b"\x01\x02\x03\x04")))
    out = np.from_dlpack(t)
    del t
    gc.collect()
    assert out.tolist() == [1, 2, 3, 4] and _alive() > start
    del out
    assert _alive() == start


_CTYPES_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Forged:
    """A producer of pinned host memory (kDLCUDAHost) whose capsules are foreign structs with a ctypes deleter
    (Python, run as a plain C callback: nothing sets a pending exception aside for it) that records its calls;
    dlbind refuses them, or a CPU-only torch does after it took the struct."""

    def __init__(self, **fields: int) -> None:
        self.fields = fields
        self.made: list[int] = []
        self.deleted: list[int] = []
        self.callback = _CTYPES_DELETER(self.deleted.append)
        self.keep: list[object] = []

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.fields.get("device_type", 1), 0)

    def __dlpack__(self, **kwargs: object) -> object:
        capsule, counter = make_capsule(**self.fields)
        managed = counter.keep[3]
        address = ctypes.cast(self.callback, ctypes.c_void_p).value
        managed.deleter = ffi.cast("void (*)(DLManagedTensorVersioned *)", address)
        self.made.append(int(ffi.cast("uintptr_t", managed)))
        self.keep.append(counter)
        return capsule


@pytest.mark.skipif(PY310_PURE, reason=PY310_PURE_REASON)
@pytest.mark.parametrize(
    "fields", [{"code": int(DataTypeCode.kDLFloat8_e3m4), "bits": 8}, {"code": 200, "bits": 8}],
    ids=["float8_e3m4", "code 200"],
)  # fmt: skip
def test_a_foreign_deleter_runs_its_python_while_a_refusal_is_handed_on(fields: dict[str, int]) -> None:
    """convert refuses these (dlbind, or torch after it took the struct: a dtype it lacks) with a BufferError; the
    producer's deleter runs before that exception reaches the caller, with it set aside: its Python body runs (once
    per struct), nothing is reported as ignored, and the refusal reaches the caller unchanged."""
    torch = pytest.importorskip("torch")
    if hasattr(torch, "float8_e3m4"):
        pytest.skip("this torch has float8_e3m4: it imports the struct")
    unraisable: list[object] = []
    old = sys.unraisablehook
    sys.unraisablehook = unraisable.append
    try:
        x = _Forged(**fields)
        for _ in range(3):
            with pytest.raises(BufferError):
                dlbind.convert(x, "torch")
        gc.collect()
    finally:
        sys.unraisablehook = old
    assert unraisable == []
    assert x.made and sorted(x.deleted) == sorted(x.made), (x.made, x.deleted)
