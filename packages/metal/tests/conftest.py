"""Tests of dlbind-metal.

Most run everywhere: the argument rules, offsets, registration and the probe's reason need no Metal, and
the code paths that talk to Metal run on a fake of the Objective-C runtime and Metal
(``fake_objc_metal.c``, built here with gcc and loaded through ``DLBIND_METAL_LIBRARY``; it is no Metal,
it answers the same messages from host memory). The tests marked ``metal_gpu`` need a real Metal device
(macOS); elsewhere they are skipped with the probe's reason ("wrong platform: macOS only ...").
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import dlbind_metal
from dlbind_metal import _runtime
from metal_fake import Fake

SOURCE = Path(__file__).with_name("fake_objc_metal.c")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "metal_gpu: needs a Metal device (macOS; skipped naming the probe's reason)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not any(item.get_closest_marker("metal_gpu") for item in items):
        return
    if os.environ.get("DLBIND_METAL_LIBRARY"):
        reason = "DLBIND_METAL_LIBRARY is set: the tests of a real Metal device need the system's"
    else:
        probe = dlbind_metal.probe()
        _runtime.reset()
        if probe.available:
            return
        reason = f"needs a Metal device: {probe.reason}"
    for item in items:
        if item.get_closest_marker("metal_gpu"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def fake_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        pytest.skip("building the fake Objective-C runtime and Metal needs a C compiler (apt-get install gcc)")
    out = tmp_path_factory.mktemp("fake") / "libfake_objc_metal.so"
    cmd = [gcc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-O1", "-o", str(out), str(SOURCE)]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return out


@pytest.fixture
def fake_unloaded(fake_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Fake]:
    """A fresh fake, named by DLBIND_METAL_LIBRARY, not loaded yet: configure it, then ``fake.load()``."""
    path = tmp_path / "libobjc_fake.so"
    shutil.copy(fake_library, path)
    monkeypatch.setenv("DLBIND_METAL_LIBRARY", str(path))
    yield Fake(path)
    _runtime.reset()


@pytest.fixture
def fake(fake_unloaded: Fake) -> Fake:
    """The fake with one device, loaded."""
    fake_unloaded.load()
    return fake_unloaded


@pytest.fixture
def no_metal(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """dlbind-metal as this machine has it (no DLBIND_METAL_LIBRARY), freshly loaded."""
    monkeypatch.delenv("DLBIND_METAL_LIBRARY", raising=False)
    _runtime.reset()
    yield
    _runtime.reset()
