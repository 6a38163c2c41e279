"""Tests of dlbind-rocm.

Most run everywhere, on a recording fake of the HIP runtime (``recording_amdhip64.c``, built here with gcc
and loaded through ``DLBIND_ROCM_LIBRARY``): they check which runtime calls dlbind-rocm makes, in which
order, with which streams and devices. The tests marked ``rocm_gpu`` need a GPU and its driver; without
them they are skipped with the reason the real runtime gives.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import dlbind_rocm
from dlbind_rocm import _runtime
from rocm_recording import Recording

SOURCE = Path(__file__).with_name("recording_amdhip64.c")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "rocm_gpu: needs an AMD GPU and ROCm (skipped naming what is missing)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any("rocm_gpu" in item.keywords for item in items):
        return
    probe = dlbind_rocm.probe()  # the real runtime, unless DLBIND_ROCM_LIBRARY names another
    if probe.available:
        return
    skip = pytest.mark.skip(reason=f"needs an AMD GPU and ROCm: {probe.reason}")
    for item in items:
        if "rocm_gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def recording_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("building the recording HIP runtime needs a C compiler (apt-get install gcc)")
    out = tmp_path_factory.mktemp("recording") / "librecording_amdhip64.so"
    cmd = [gcc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), str(SOURCE), "-lpthread"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture
def recording(recording_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recording]:
    """A fresh recording runtime (a copy under a new name is a new library: fresh state), not loaded yet:
    configure it, then ``recording.load()``."""
    path = tmp_path / "libamdhip64_recording.so"
    shutil.copy(recording_library, path)
    monkeypatch.setenv("DLBIND_ROCM_LIBRARY", str(path))
    yield Recording(path)
    _runtime.reset()  # the next test loads whatever its environment names


@pytest.fixture
def rec(recording: Recording) -> Recording:
    """The recording runtime with its defaults (one device, runtime and driver HIP 5.2), loaded."""
    recording.load()
    return recording
