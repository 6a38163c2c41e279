"""Two MPI ranks exchange dlbind exports (tests/mpi/exchange.py under ``mpiexec -n 2``).

Skipped, saying what is missing, without ``mpiexec`` or mpi4py: ``nox -s mpi`` installs both (Debian's MPICH,
mpi4py built against it) and runs this on both builds of the core.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PROGRAM = Path(__file__).with_name("exchange.py")


def _mpiexec() -> str:
    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("mpiexec is not on PATH (Debian: apt-get install mpich libmpich-dev; or run nox -s mpi)")
    if importlib.util.find_spec("mpi4py") is None:
        pytest.skip(f"mpi4py is not installed in {sys.prefix} (nox -s mpi installs it)")
    return mpiexec


def test_two_ranks_exchange_dlbind_exports() -> None:
    mpiexec = _mpiexec()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    try:
        done = subprocess.run(
            [mpiexec, "-n", "2", sys.executable, str(PROGRAM)],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"mpiexec -n 2 {PROGRAM.name} did not finish in {exc.timeout} s:\n{exc.stdout}\n{exc.stderr}")
    output = done.stdout + done.stderr
    print(output)
    assert done.returncode == 0, f"mpiexec exited {done.returncode}:\n{output}"
    for rank in (0, 1):
        assert f"rank {rank}: all " in done.stdout, f"rank {rank} printed no summary:\n{output}"
    assert "FAIL" not in done.stdout, output
    # Each rank went through the sends/receives, the Allreduces and the deleter accounting.
    assert "mpi4py sends an asdlpack export from numpy's memory (no copy)" in done.stdout
    assert "a read-only export is refused as a receive buffer" in done.stdout
    assert done.stdout.count("every capsule mpi4py took was deleted") == 2
