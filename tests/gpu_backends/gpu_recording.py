"""What the tests of dlbind-cuda and dlbind-rocm share: the recording runtime, its fixtures, the GPU marker, the
loading tests.

The recording runtimes (``packages/cuda/tests/recording_cudart.c``, ``packages/rocm/tests/recording_amdhip64.c``)
include ``recording_runtime.h`` from this folder; pytest puts the folder on ``sys.path`` (``pythonpath`` in the
root pyproject.toml), so each backend's conftest imports this module.
"""

from __future__ import annotations

import ctypes
import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import pytest

HERE = Path(__file__).parent

__all__ = ["GpuTestSuite", "LoadingTests", "Recording"]


class Recording:
    """One fresh copy of the recording runtime: its log, its settings, failures to inject.

    Subclasses name the backend's ``_runtime`` module (``runtime``).
    """

    runtime: ClassVar[Any]

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.recording_log.restype = ctypes.c_char_p
        self.lib.recording_set.argtypes = [ctypes.c_char_p, ctypes.c_long]
        self.lib.recording_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]
        self.lib.recording_fail_times.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        self.lib.recording_fail_after.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        self.lib.recording_live.argtypes = [ctypes.c_char, ctypes.POINTER(ctypes.c_long)]
        self.lib.recording_live.restype = ctypes.c_long

    def set(self, key: str, value: int) -> None:
        assert self.lib.recording_set(key.encode(), value) == 0, f"the recording runtime has no setting {key!r}"

    def fail(self, call: str, code: int, times: int = 1, *, after: int = 0) -> None:
        """The next call of ``call`` (the next ``times`` calls) returns ``code``; with ``after``, those after the
        next ``after`` calls of ``call`` (which succeed)."""
        self.lib.recording_fail_after(call.encode(), code, times, after)

    def live(self, kind: str) -> tuple[int, int]:
        """How many allocations of ``kind`` (``"D"``, ``"H"``, ``"M"``: the log's letters) are not freed yet,
        and their bytes."""
        nbytes = ctypes.c_long()
        count = self.lib.recording_live(kind.encode(), ctypes.byref(nbytes))
        return int(count), int(nbytes.value)

    def calls(self) -> list[str]:
        return (self.lib.recording_log() or b"").decode().splitlines()

    def clear(self) -> None:
        self.lib.recording_clear()

    def load(self) -> Any:
        """Make the backend load this library (its probe runs now), then clear the log."""
        self.runtime.reset()
        rt = self.runtime.runtime()
        assert rt.path == str(self.path), rt.probe
        self.clear()
        return rt

    @classmethod
    def event_wait(cls, producer: str, consumer: str) -> list[str]:
        """The log of the consumer's stream waiting for the producer's (named as the log names streams)."""
        p = cls.runtime.Runtime.prefix
        return [
            f"{p}GetDevice() -> 0",
            f"{p}EventCreateWithFlags(2) -> E1",
            f"{p}EventRecord(E1, {producer})",
            f"{p}StreamWaitEvent({consumer}, E1, 0)",
            f"{p}EventDestroy(E1)",
        ]

    @classmethod
    def user_stream(cls) -> int:
        """A new stream of the loaded (recording) runtime, as an int: S1, S2, ... in the log."""
        rt = cls.runtime.runtime()
        ffi = cls.runtime.ffi
        out = ffi.new(f"{rt.prefix}Stream_t *")
        assert rt.sym("StreamCreateWithFlags")(out, 1) == 0
        return int(ffi.cast("uintptr_t", out[0]))


@dataclass(frozen=True)
class GpuTestSuite:
    """One backend's test setup: its GPU marker, the recording runtime's source and fixtures.

    Most of a backend's tests run everywhere, on the recording fake of its runtime (``source``, built with gcc
    and loaded through ``DLBIND_<NAME>_LIBRARY``): they check which runtime calls the backend makes, in which
    order, with which streams and devices. The tests marked ``<backend>_gpu`` need a GPU and its driver;
    without them they are skipped with the reason the real runtime gives.
    """

    backend: str  # "cuda"
    recording: type[Recording]
    source: Path  # recording_cudart.c
    library: str  # "cudart": librecording_cudart.so, libcudart_recording.so
    runtime_text: str  # "CUDA": "building the recording CUDA runtime"
    marker_text: str  # "needs a CUDA GPU and its driver"
    defaults: str  # what ``rec`` loads: "runtime and driver 13.0"
    probe: Callable[[], Any]

    @property
    def marker(self) -> str:
        return f"{self.backend}_gpu"

    @property
    def env(self) -> str:
        return f"DLBIND_{self.backend.upper()}_LIBRARY"

    def configure(self, config: pytest.Config) -> None:
        config.addinivalue_line("markers", f"{self.marker}: {self.marker_text} (skipped naming what is missing)")

    def skip_without_gpu(self, items: list[pytest.Item]) -> None:
        """Skip the tests marked ``<backend>_gpu`` with the real runtime's reason when it has no GPU."""
        if not any(self.marker in item.keywords for item in items):
            return
        probe = self.probe()  # the real runtime, unless DLBIND_<NAME>_LIBRARY names another
        if probe.available:
            return
        skip = pytest.mark.skip(reason=f"{self.marker_text}: {probe.reason}")
        for item in items:
            if self.marker in item.keywords:
                item.add_marker(skip)

    def conftest(self) -> tuple[Any, ...]:
        """What the backend's conftest assigns: the hooks ``pytest_configure`` (the marker) and
        ``pytest_collection_modifyitems`` (:meth:`skip_without_gpu`), then the fixtures of :meth:`fixtures`."""

        def pytest_configure(config: pytest.Config) -> None:
            self.configure(config)

        def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
            self.skip_without_gpu(items)

        return (pytest_configure, pytest_collection_modifyitems, *self.fixtures())

    def fixtures(self) -> tuple[Any, Any, Any]:
        """The fixtures ``recording_library``, ``recording`` and ``rec``."""

        @pytest.fixture(scope="session")
        def recording_library(tmp_path_factory: pytest.TempPathFactory) -> Path:
            gcc = shutil.which("gcc") or shutil.which("cc")
            if gcc is None:
                needs = "needs a C compiler (apt-get install gcc)"
                pytest.skip(f"building the recording {self.runtime_text} runtime {needs}")
            out = tmp_path_factory.mktemp("recording") / f"librecording_{self.library}.so"
            cmd = [gcc, "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror", "-O1", "-I", str(HERE), "-o", str(out),
                   str(self.source), "-lpthread"]  # fmt: skip
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            return out

        @pytest.fixture
        def recording(recording_library: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Recording]:
            """A fresh recording runtime (a copy under a new name is a new library: fresh state), not loaded yet:
            configure it, then ``recording.load()``."""
            path = tmp_path / f"lib{self.library}_recording.so"
            shutil.copy(recording_library, path)
            monkeypatch.setenv(self.env, str(path))
            yield self.recording(path)
            self.recording.runtime.reset()  # the next test loads whatever its environment names

        @pytest.fixture
        def rec(recording: Recording) -> Recording:
            recording.load()
            return recording

        rec.__doc__ = f"The recording runtime with its defaults (one device, {self.defaults}), loaded."
        return recording_library, recording, rec


# -- loading: in fresh interpreters ----------------------------------------------------------------------------

MAPS = "open('/proc/self/maps').read()"


class LoadingTests:
    """Loading is lazy, and a missing runtime or a library that is not one is a reason, not an error.

    Subclasses (``Test...``) give ``backend`` (``"cuda"``), ``vendor_library`` (``"libcudart"``, as in
    ``/proc/self/maps``), ``runtime_text`` (``"CUDA"``) and ``missing`` (a path that does not exist).
    """

    backend: ClassVar[str]
    vendor_library: ClassVar[str]
    runtime_text: ClassVar[str]
    missing: ClassVar[str]

    @classmethod
    def env(cls) -> str:
        return f"DLBIND_{cls.backend.upper()}_LIBRARY"

    @classmethod
    def run(cls, code: str, **env: str) -> str:
        environ = {k: v for k, v in os.environ.items() if k != cls.env()}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env},
                              check=False)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.strip()

    def test_import_loads_no_vendor_library(self) -> None:
        b, lib = self.backend, self.vendor_library
        out = self.run(
            f"import dlbind, dlbind_{b}, dlbind_{b}._backend; a = '{lib}' in {MAPS}; "
            f"s = dlbind.backends()['{b}']; print(a, '{lib}' in {MAPS} or not s.runtime_version)"
        )
        assert out == "False True"

    def test_a_missing_runtime_is_a_reason_not_an_error(self) -> None:
        b = self.backend
        code = (
            f"import json, dlbind, dlbind_{b}, numpy as np\n"
            f"s = dlbind.backends()['{b}']\n"
            f"try:\n    dlbind_{b}.empty((2,))\nexcept BufferError as e:\n    err = str(e)\n"
            "print(json.dumps([s.available, s.reason, err, dlbind.from_dlpack(np.ones(2)).shape]))"
        )
        available, reason, err, shape = json.loads(self.run(code, **{self.env(): self.missing}))
        assert not available
        assert reason.startswith(f"runtime library not found: {self.env()}={self.missing}")
        assert err.startswith(f"dlbind-{b} is unavailable: runtime library not found")
        assert shape == [2]  # the core works on

    def test_a_library_that_is_not_the_runtime(self) -> None:
        import ctypes.util

        libm = ctypes.util.find_library("m")
        if libm is None:
            pytest.skip("no libm to load")
        out = self.run(f"import dlbind; print(dlbind.backends()['{self.backend}'].reason)", **{self.env(): libm})
        assert out.startswith(f"runtime error: {libm} is not a {self.runtime_text} runtime")

    def test_a_library_missing_later_symbols_is_not_the_runtime(self, tmp_path: Path) -> None:
        """A library with the runtime's version call and none of its other functions (a stub, a wrong build): the
        probe says it is no runtime, every call needing it raises the backend's Unavailable with that, and the
        answer is kept (the library is not loaded again on every call)."""
        b = self.backend
        prefix = importlib.import_module(f"dlbind_{b}._runtime").Runtime.prefix
        lib = self.partial_runtime(tmp_path, self.oldest())
        code = (
            f"import json, dlbind, dlbind_{b}, dlbind_{b}._runtime as r\n"
            f"s = dlbind.backends()['{b}']\n"
            f"try:\n    dlbind_{b}.empty((2,))\nexcept dlbind_{b}.Unavailable as e:\n    err = str(e)\n"
            f"print(json.dumps([s.available, s.reason, dlbind_{b}.probe().reason, err, r.runtime() is r.runtime()]))"
        )
        available, reason, probed, err, kept = json.loads(self.run(code, **{self.env(): str(lib)}))
        assert not available
        assert reason.startswith(f"runtime error: {lib} is not a {self.runtime_text} runtime ("), reason
        assert f"{prefix}DriverGetVersion" in reason and probed == reason
        assert err == f"dlbind-{b} is unavailable: {reason}"
        assert kept

    def test_a_runtime_older_than_the_binding_is_passed_over(self, tmp_path: Path) -> None:
        """A library whose version call answers older than the oldest runtime the binding serves (``oldest`` in
        spec/backends/*.toml) is not taken, and the reason names both versions (a search would go on past it)."""
        b = self.backend
        rt = importlib.import_module(f"dlbind_{b}._runtime").Runtime
        old = self.oldest() // 2
        lib = self.partial_runtime(tmp_path, old)
        reason = self.run(f"import dlbind; print(dlbind.backends()['{b}'].reason)", **{self.env(): str(lib)})
        said = f"{rt.runtime_name} runtime {rt.version(old)}, older than {rt.version(self.oldest())}"
        assert reason == f"runtime library not found: {self.env()}={lib} cannot be loaded ({said}, the oldest " \
            f"dlbind-{b} binds)", reason

    def oldest(self) -> int:
        """The oldest runtime version the binding serves, as its version call answers it."""
        oldest: int = importlib.import_module(f"dlbind_{self.backend}._generated.declarations").LIBRARY_OLDEST
        return oldest

    def partial_runtime(self, tmp_path: Path, version: int) -> Path:
        """A library of one function, the runtime's version call answering ``version`` (a stub, a wrong build)."""
        gcc = shutil.which("gcc") or shutil.which("cc")
        if gcc is None:
            pytest.skip("building a partial runtime needs a C compiler (apt-get install gcc)")
        prefix = importlib.import_module(f"dlbind_{self.backend}._runtime").Runtime.prefix
        source, lib = tmp_path / "partial.c", tmp_path / f"libpartial_{self.backend}.so"
        source.write_text(f"int {prefix}RuntimeGetVersion(int *v) {{ *v = {version}; return 0; }}\n")
        subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib), str(source)], check=True)
        return lib

    def real_runtime(self) -> tuple[bool, str, str, int, str, str]:
        """What the real runtime says here, in a fresh interpreter: (available, reason, runtime version,
        device count, the BackendStatus line, the BufferError of ``asarray``)."""
        b = self.backend
        code = (
            f"import json, dlbind, dlbind_{b}, numpy as np\n"
            f"s = dlbind.backends()['{b}']\n"
            f"try:\n    dlbind_{b}.asarray(np.ones(2)); err = ''\nexcept BufferError as e:\n    err = str(e)\n"
            "print(json.dumps([s.available, s.reason, s.runtime_version, s.device_count, str(s), err]))"
        )
        return tuple(json.loads(self.run(code)))  # type: ignore[return-value]
