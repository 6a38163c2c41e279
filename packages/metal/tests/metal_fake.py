"""The fake of the Objective-C runtime and Metal as the tests drive it (see fake_objc_metal.c)."""

from __future__ import annotations

import ctypes
from pathlib import Path

from dlbind_metal import _runtime

__all__ = ["Fake"]


class Fake:
    """One fresh copy of the fake (a new file is a new library: fresh state), loaded by dlbind-metal."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lib = ctypes.CDLL(str(path))
        self.lib.fake_log.restype = ctypes.c_char_p
        self.lib.fake_set.argtypes = [ctypes.c_char_p, ctypes.c_long]
        self.lib.fake_live_buffers.restype = ctypes.c_long

    def set(self, key: str, value: int) -> None:
        assert self.lib.fake_set(key.encode(), value) == 0, f"the fake has no setting {key!r}"

    def calls(self) -> list[str]:
        return (self.lib.fake_log() or b"").decode().splitlines()

    def clear(self) -> None:
        self.lib.fake_clear()

    def live_buffers(self) -> int:
        return int(self.lib.fake_live_buffers())

    def load(self) -> _runtime.Runtime:
        _runtime.reset()
        rt = _runtime.runtime()
        assert rt.path == str(self.path), rt.probe
        self.clear()
        return rt
