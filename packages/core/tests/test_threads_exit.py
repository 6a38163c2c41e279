"""Threads and interpreter exit: shared sources exchanged from 8 threads, deleters on threads Python
never saw, and capsules, tensors and cycles alive at exit under ``python -X dev`` (both builds).

``DLBIND_THREAD_SECONDS`` sets how long the threads run (default 2; ``nox -s leaks`` uses 10).
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from typing import Any

import nativehelp
import numpy as np
import pytest

import dlbind

SECONDS = float(os.environ.get("DLBIND_THREAD_SECONDS", "2"))
PURE = dlbind.ffi_build() == "pure"
HELPER_DIR = os.path.dirname(nativehelp.__file__)


def _alive() -> int | None:
    gc.collect()
    try:
        from dlbind import capsule
    except ImportError:  # pragma: no cover
        return None
    stats = getattr(capsule, "stats", None)
    if stats is None:  # pragma: no cover
        return None
    exports, deleted = stats()
    return int(exports) - int(deleted)


MIN_ROUNDS = 20


def test_eight_threads_exchange_and_release_shared_sources() -> None:
    torch: Any
    try:
        import torch
    except ImportError:  # pragma: no cover
        torch = None
    alive0 = _alive()
    lock = threading.Lock()
    shared: list[Any] = []
    refs: list[weakref.ref[Any]] = []

    def fresh() -> list[Any]:
        a = np.arange(64, dtype=np.float32)
        with lock:
            refs.append(weakref.ref(a))
        t = dlbind.from_dlpack(dlbind.asdlpack(a))
        return [a, dlbind.asdlpack(a), t, dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3)))]

    shared.extend(fresh())
    errors: list[BaseException] = []
    counts = [0] * 8
    stop = time.monotonic() + SECONDS

    def work(k: int) -> None:
        try:
            # every thread does some rounds however the scheduler shares the GIL, then runs until `stop`
            while counts[k] < MIN_ROUNDS or time.monotonic() < stop:
                a, exporter, t, t2 = shared[0], shared[1], shared[2], shared[3]
                assert np.from_dlpack(exporter)[3] == 3
                assert np.from_dlpack(t)[5] == 5
                assert dlbind.from_dlpack(t2.__dlpack__(max_version=(1, 3))).shape == (64,)
                assert np.asarray(t2)[7] == 7
                t2.__dlpack__()  # dropped unconsumed
                if torch is not None and k % 2:
                    assert float(dlbind.convert(t, to="torch")[9]) == 9.0
                    assert dlbind.convert(torch.arange(4.0), to="numpy")[2] == 2.0
                if k == 0 and counts[0] % 50 == 0:  # release the shared sources while others use them
                    shared[:] = fresh()
                del a, exporter, t, t2
                counts[k] += 1
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]
    assert min(counts) >= MIN_ROUNDS
    shared.clear()
    gc.collect()
    assert all(r() is None for r in refs), "a shared source outlived every exchange"
    assert _alive() == alive0


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "legacy"])
@pytest.mark.parametrize("source", ["asdlpack", "Tensor re-export"])
def test_deleter_on_a_thread_python_never_saw(versioned: bool, source: str) -> None:
    alive0 = _alive()
    refs = []
    for _ in range(200):
        a = np.arange(8.0)
        refs.append(weakref.ref(a))
        producer: Any = dlbind.asdlpack(a) if source == "asdlpack" else dlbind.from_dlpack(a)
        capsule = producer.__dlpack__(max_version=(1, 3)) if versioned else producer.__dlpack__()
        del a, producer
        address = nativehelp.consume(capsule, versioned)
        del capsule  # renamed: its destructor must not call the deleter
        assert nativehelp.lib.call_deleter_on_new_thread(nativehelp.ffi.cast("void *", address), int(versioned)) == 0
    gc.collect()
    kept = sum(r() is not None for r in refs)
    assert kept == 0, f"{kept} of 200 sources kept after their deleters ran on a C thread"
    assert _alive() == alive0


def _foreign() -> tuple[Any, Any, Any, object]:
    """(arena, counter, name block, capsule): a foreign producer's versioned float32 vector of 4 items, whose
    deleter adds one to ``counter[0]``; the arena and block must outlive the capsule's tensor."""
    import struct

    ffi = nativehelp.ffi
    arena = ffi.new("char[]", 512)
    counter = ffi.new("int64_t[1]")
    base = int(ffi.cast("uintptr_t", arena))
    buf = ffi.buffer(arena)
    struct.pack_into("<q", buf, 256, 4)
    struct.pack_into("<IIQQQ", buf, 0, 1, 3, int(ffi.cast("uintptr_t", counter)), nativehelp.DELETER_V, 0)
    struct.pack_into("<QiiiBBHQQQ", buf, 32, base + 384, 1, 0, 1, 2, 32, 1, base + 256, 0, 0)
    block = nativehelp.name_block(b"dltensor_versioned", True)
    return arena, counter, block, nativehelp.new_capsule(base, block)


def test_a_foreign_deleter_runs_holding_the_gil() -> None:
    # Both builds call a producer's deleter as C code calls it, with the GIL held: the pure build's cffi call
    # would release it, and a Python-callback deleter would then take it again (a daemon thread doing so at
    # interpreter exit crashed CPython 3.11 in take_gil: the "daemon threads exchanging" case below).
    without = nativehelp.calls_without_gil()
    arena, counter, block, made = _foreign()
    tensor = dlbind.from_dlpack(made)
    del made, tensor
    gc.collect()
    assert int(counter[0]) == 1
    assert nativehelp.calls_without_gil() == without
    del arena, block


def test_foreign_deleter_on_a_python_thread_while_others_exchange() -> None:
    # Tensors of a foreign producer released from threads: its deleter runs once each.
    items = []
    for _ in range(400):
        arena, counter, block, made = _foreign()
        items.append((arena, counter, block, dlbind.from_dlpack(made)))
    tensors = [it[3] for it in items]
    items = [it[:3] for it in items]

    def drop(part: list[Any]) -> None:
        while part:
            np.from_dlpack(part.pop())

    parts = [tensors[k::8] for k in range(8)]
    del tensors
    threads = [threading.Thread(target=drop, args=(p,)) for p in parts]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    del parts, threads
    gc.collect()
    assert [int(c[0]) for _, c, _ in items] == [1] * 400


# -- interpreter exit ----------------------------------------------------------------------------------

EXIT_CASES = {
    "unconsumed capsules": """
        import numpy as np, dlbind
        A = np.arange(8.0)
        C = [dlbind.asdlpack(A).__dlpack__(max_version=(1, 3)), dlbind.asdlpack(A).__dlpack__()]
        """,
    "tensors and views": """
        import numpy as np, dlbind
        T = dlbind.from_dlpack(np.arange(8.0))
        V = [np.asarray(T), np.from_dlpack(T), dlbind.from_dlpack(T.__dlpack__(max_version=(1, 3)))]
        """,
    "cycle through a Tensor": """
        import numpy as np, dlbind
        class Node: pass
        n = Node(); n.n = n
        n.t = dlbind.from_dlpack(dlbind.asdlpack(np.arange(8.0)))
        n.c = n.t.__dlpack__(max_version=(1, 3))
        n.v = np.asarray(n.t)
        del n
        """,
    "exporter cycle": """
        import dlbind
        class B(bytearray): pass
        b = B(64); b.e = dlbind.asdlpack(b); b.c = b.e.__dlpack__(max_version=(1, 3))
        del b
        """,
    "foreign capsules": """
        import sys, struct
        sys.path.insert(0, sys.argv[1])
        import nativehelp, dlbind
        ffi = nativehelp.ffi
        KEEP = []
        for consume in (True, False):
            arena = nativehelp.raw_alloc(512); counter = ffi.cast("int64_t *", nativehelp.raw_alloc(8))
            base = int(ffi.cast("uintptr_t", arena)); buf = ffi.buffer(arena, 512)
            struct.pack_into("<q", buf, 256, 4)
            struct.pack_into("<IIQQQ", buf, 0, 1, 3, int(ffi.cast("uintptr_t", counter)), nativehelp.DELETER_V, 0)
            struct.pack_into("<QiiiBBHQQQ", buf, 32, base + 384, 1, 0, 1, 2, 32, 1, base + 256, 0, 0)
            block = nativehelp.name_block(b"dltensor_versioned", True)
            c = nativehelp.new_capsule(base, block)
            KEEP.append((arena, counter, block, dlbind.from_dlpack(c) if consume else c))
        """,
    "torch tensors": """
        import dlbind, numpy as np
        try:
            import torch
        except ImportError:
            raise SystemExit(0)
        X = torch.arange(8.0)
        K = [dlbind.from_dlpack(X), dlbind.convert(np.arange(4.0), to="torch"), torch.utils.dlpack.to_dlpack(X)]
        K.append(dlbind.from_dlpack(K[0].__dlpack__(max_version=(1, 3))))
        """,
    "daemon threads exchanging": """
        import threading, numpy as np, dlbind
        A = np.arange(64.0)
        def loop():
            while True:
                t = dlbind.from_dlpack(dlbind.asdlpack(A))
                np.from_dlpack(t); t.__dlpack__(max_version=(1, 3))
        for _ in range(4):
            threading.Thread(target=loop, daemon=True).start()
        import time; time.sleep(0.3)
        """,
}


# Where defect 2 reproduces today (pure build): the cffi callbacks are freed before the capsules.
@pytest.mark.parametrize("case", list(EXIT_CASES))
def test_objects_alive_at_exit(case: str) -> None:
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-X", "dev", "-c", textwrap.dedent(EXIT_CASES[case]), HELPER_DIR],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        bad = [w for w in ("Fatal", "Segmentation", "Traceback", "SystemError") if w in proc.stderr]
        assert proc.returncode == 0 and not bad, f"exit {proc.returncode}:\n{proc.stderr[-3000:]}"
