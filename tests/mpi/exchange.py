"""Two ranks exchange dlbind exports through mpi4py: ``mpiexec -n 2 python tests/mpi/exchange.py``.

Rank 0 sends a ``dlbind.asdlpack`` export and a ``dlbind.Tensor``; rank 1 receives into buffers wrapped by
dlbind; both ranks ``Allreduce`` over dlbind-wrapped buffers. Every check prints one line; each rank ends
with a summary and exits 1 if any check failed (an exception aborts the job, so the other rank never
hangs). ``tests/mpi/test_mpi.py`` runs this under pytest; ``nox -s mpi`` on both builds of the core.

mpi4py 4 takes a message buffer through the buffer protocol first and ``__dlpack__`` second. dlbind's
exports have no buffer protocol (the compiled build's Tensor has), so they go through ``__dlpack__``: mpi4py asks
``__dlpack__(max_version=(1, 0), copy=False)`` (a producer that would have to copy must refuse), keeps the
capsule unconsumed for the duration of the call and lets the capsule's destructor run the deleter.
"""

from __future__ import annotations

import gc
import sys
import traceback

import mpi4py
import numpy as np
from mpi4py import MPI

import dlbind
from dlbind import capsule

N = 1000
comm = MPI.COMM_WORLD
rank = comm.Get_rank()
failures: list[str] = []
passed = 0


def check(name: str, ok: bool, detail: str = "") -> None:
    global passed
    print(f"rank {rank}: {'ok  ' if ok else 'FAIL'} {name}{f' ({detail})' if detail else ''}", flush=True)
    if ok:
        passed += 1
    else:
        failures.append(name)


def has_buffer_protocol(obj: object) -> bool:
    try:
        memoryview(obj)  # type: ignore[arg-type]
    except TypeError:
        return False
    return True


def address(obj: object) -> int:
    """The address mpi4py sends from or receives into (what it read from ``obj``'s DLPack capsule)."""
    return int(MPI.buffer(obj).address)


def sender() -> None:
    a = np.arange(N, dtype=np.float64)
    export = dlbind.asdlpack(a)
    check("an asdlpack export has no buffer protocol: mpi4py takes it by __dlpack__", not has_buffer_protocol(export))
    check("mpi4py sends an asdlpack export from numpy's memory (no copy)", address(export) == a.ctypes.data)
    comm.Send(export, dest=1, tag=1)

    b = np.arange(N, dtype=np.int32) * 3
    tensor = dlbind.from_dlpack(b)
    # The compiled build's Tensor (and, on Python 3.12+, the pure one's: __buffer__) has the buffer protocol,
    # which mpi4py tries first; the pure build's on 3.10/3.11 goes through __dlpack__. Same memory either way.
    route = "the buffer protocol" if has_buffer_protocol(tensor) else "__dlpack__"
    print(f"rank 0: info a Tensor ({dlbind.ffi_build()} build) reaches mpi4py through {route}", flush=True)
    check("mpi4py sends a Tensor from numpy's memory (no copy)", address(tensor) == b.ctypes.data)
    comm.Send(tensor, dest=1, tag=2)

    # Read-only memory is a fine send buffer; rank 1 tries to receive this message into a read-only export first.
    frozen = np.linspace(0.0, 1.0, N)
    frozen.flags.writeable = False
    ro = dlbind.asdlpack(frozen)
    check("a read-only export is sent from its own memory", address(ro) == frozen.ctypes.data)
    comm.Send(ro, dest=1, tag=3)

    # mpi4py wants one contiguous block: a strided export is refused before any MPI call.
    try:
        comm.Send(dlbind.asdlpack(a[::2]), dest=1, tag=99)
    except BufferError as exc:
        check("a strided export is refused by mpi4py", "not contiguous" in str(exc), str(exc))
    else:
        check("a strided export is refused by mpi4py", False, "it was sent")


def receiver() -> None:
    r1 = np.zeros(N, dtype=np.float64)
    into = dlbind.asdlpack(r1)
    check("mpi4py receives into numpy's memory through an asdlpack export", address(into) == r1.ctypes.data)
    comm.Recv(into, source=0, tag=1)
    check("the asdlpack export arrived", np.array_equal(r1, np.arange(N, dtype=np.float64)))

    r2 = dlbind.from_dlpack(np.zeros(N, dtype=np.int32))
    comm.Recv(r2, source=0, tag=2)
    check("the Tensor arrived in a Tensor", np.array_equal(np.from_dlpack(r2), np.arange(N, dtype=np.int32) * 3))

    frozen = np.zeros(N)
    frozen.flags.writeable = False
    try:
        comm.Recv(dlbind.asdlpack(frozen), source=0, tag=3)
    except BufferError as exc:
        check("a read-only export is refused as a receive buffer", "not writable" in str(exc), str(exc))
    else:
        check("a read-only export is refused as a receive buffer", False, "mpi4py wrote into it")
    raw = bytearray(N * 8)  # plain bytes, wrapped by dlbind: the datatype comes from the sender's count
    comm.Recv([dlbind.asdlpack(raw), MPI.DOUBLE], source=0, tag=3)
    check("the read-only send arrived in a bytearray", np.array_equal(np.frombuffer(raw), np.linspace(0.0, 1.0, N)))


def allreduce() -> None:
    mine = np.full(N, rank + 1.0)
    total = np.zeros(N)
    comm.Allreduce(dlbind.asdlpack(mine), dlbind.from_dlpack(total), op=MPI.SUM)
    check("Allreduce(export -> Tensor) sums the ranks", bool(np.all(total == 3.0)), f"total[0] = {total[0]}")

    # mpi4py derives the datatype from the buffer's format: int64 is "l" (MPI.LONG) through __dlpack__ and
    # through the Tensor's buffer protocol alike, so a collective over one of each needs no datatype named.
    counts = dlbind.from_dlpack(np.arange(N, dtype=np.int64) * (rank + 1))
    maxima = np.zeros(N, dtype=np.int64)
    comm.Allreduce(counts, dlbind.asdlpack(maxima), op=MPI.MAX)
    check("Allreduce(Tensor -> export) takes the maximum", np.array_equal(maxima, np.arange(N) * 2))

    inplace = np.full(4, 10 * (rank + 1), dtype=np.int32)
    comm.Allreduce(MPI.IN_PLACE, dlbind.asdlpack(inplace), op=MPI.SUM)
    check("Allreduce(IN_PLACE) into an export", inplace.tolist() == [30] * 4)


def main() -> int:
    if comm.Get_size() != 2:
        print(f"rank {rank}: run with two ranks (mpiexec -n 2), not {comm.Get_size()}", flush=True)
        return 2
    if rank == 0:
        library = MPI.Get_library_version().splitlines()[0].strip()
        print(f"mpi4py {mpi4py.__version__}, MPI {MPI.Get_version()}: {library}", flush=True)
        print(f"dlbind {dlbind.__version__} ({dlbind.ffi_build()} build), numpy {np.__version__}", flush=True)
    gc.collect()
    before = capsule.stats()
    sender() if rank == 0 else receiver()
    allreduce()
    gc.collect()
    exported, deleted = (after - was for after, was in zip(capsule.stats(), before, strict=True))
    check("every capsule mpi4py took was deleted", exported > 0 and exported == deleted, f"{exported} exported")
    comm.Barrier()
    if failures:
        print(f"rank {rank}: FAILED {len(failures)} of {passed + len(failures)}: {', '.join(failures)}", flush=True)
        return 1
    print(f"rank {rank}: all {passed} checks passed", flush=True)
    return 0


if __name__ == "__main__":
    try:
        status = main()
    except BaseException:
        traceback.print_exc()
        sys.stdout.flush()
        sys.stderr.flush()
        comm.Abort(1)
    sys.exit(status)
