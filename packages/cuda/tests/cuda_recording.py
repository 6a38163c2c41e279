"""The recording fake of the CUDA runtime as the tests drive it (see recording_cudart.c)."""

from __future__ import annotations

import ctypes
from pathlib import Path

from dlbind_cuda import _runtime

__all__ = ["Recording", "user_stream"]


class Recording:
    """One fresh copy of the recording runtime: its log, its settings, failures to inject."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.recording_log.restype = ctypes.c_char_p
        self.lib.recording_set.argtypes = [ctypes.c_char_p, ctypes.c_long]
        self.lib.recording_fail.argtypes = [ctypes.c_char_p, ctypes.c_int]

    def set(self, key: str, value: int) -> None:
        assert self.lib.recording_set(key.encode(), value) == 0, f"the recording runtime has no setting {key!r}"

    def fail(self, call: str, code: int) -> None:
        """The next call of ``call`` returns ``code``."""
        self.lib.recording_fail(call.encode(), code)

    def calls(self) -> list[str]:
        return (self.lib.recording_log() or b"").decode().splitlines()

    def clear(self) -> None:
        self.lib.recording_clear()

    def load(self) -> _runtime.Runtime:
        """Make dlbind-cuda load this library (its probe runs now), then clear the log."""
        _runtime.reset()
        rt = _runtime.runtime()
        assert rt.path == str(self.path), rt.probe
        self.clear()
        return rt


def user_stream() -> int:
    """A new stream of the loaded (recording) runtime, as an int: S1, S2, ... in the log."""
    rt = _runtime.runtime()
    out = _runtime.ffi.new("cudaStream_t *")
    assert rt.lib.cudaStreamCreateWithFlags(out, 1) == 0
    return int(_runtime.ffi.cast("uintptr_t", out[0]))
