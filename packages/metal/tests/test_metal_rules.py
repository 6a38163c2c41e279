"""What holds without Metal: registration, the probe's reason, lazy loading, the argument rules, offsets.

These run on every platform and on both core builds; off macOS the real answer is "wrong platform".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from typing import Any

import numpy as np
import pytest

import dlbind
import dlbind_metal
from dlbind._backends import Backend
from dlbind._generated.enums import DeviceType
from dlbind_metal._backend import backend
from dlbind_metal._generated import declarations

METAL = DeviceType.kDLMetal
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the real answer here is Linux's")


def run(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if k != "DLBIND_METAL_LIBRARY"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**environ, **env},
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def metal_tensor(handle: int = 0x1000, shape: tuple[int, ...] = (3, 4), **kw: Any) -> dlbind.Tensor:
    """A kDLMetal tensor describing ``handle`` as its id<MTLBuffer> (nothing is dereferenced)."""
    return dlbind.from_dlpack(dlbind.from_pointer(handle, shape, "float32", device=(METAL, 0), **kw))


# -- registration and the probe -------------------------------------------------------------------------


def test_registered_under_the_entry_point_group() -> None:
    (ep,) = [ep for ep in entry_points(group="dlbind.backends") if ep.name == "metal"]
    assert ep.value == "dlbind_metal._backend:backend"
    assert ep.dist is not None and ep.dist.metadata["Name"] == "dlbind-metal"
    assert ep.dist.version == dlbind.__version__ == dlbind_metal.__version__
    assert ep.load() is backend and isinstance(backend, Backend)
    assert backend.name == "metal" and backend.device_types == (int(METAL),)


def test_the_declarations_come_from_the_declaration_file() -> None:
    assert declarations.HEADER == "spec/backends/metal.toml"
    assert "void objc_msgSend(void);" in declarations.CDEF
    assert declarations.LIBRARY_ENV == "DLBIND_METAL_LIBRARY"
    assert declarations.LIBRARY_NAMES["linux"] == () and declarations.LIBRARY_NAMES["darwin"]


@linux_only
def test_import_loads_no_library_and_the_reason_is_one_line() -> None:
    maps = "open('/proc/self/maps').read()"
    code = (
        "import json, dlbind, dlbind_metal, dlbind_metal._backend, dlbind_metal._runtime\n"
        f"before = [n for n in ('libobjc', 'Metal', 'fake') if n in {maps}]\n"
        "s = dlbind.backends()['metal']\n"
        f"after = [n for n in ('libobjc', 'Metal', 'fake') if n in {maps}]\n"
        "print(json.dumps([before, after, s.available, s.reason, str(s), s.runtime_version, s.device_count,\n"
        "                  s.distribution, s.device_types]))"
    )
    before, after, available, reason, line, version, count, dist, types = json.loads(run(code))
    assert before == [] and after == []
    assert not available
    assert reason == "wrong platform: macOS only (Metal is Apple's; this is linux)"
    assert line == f"metal: unavailable: {reason}" and "\n" not in line
    assert version is None and count is None
    assert dist == "dlbind-metal" and types == ["metal"]


@linux_only
def test_every_call_that_needs_metal_names_the_reason(no_metal: None) -> None:
    why = "dlbind-metal is unavailable: wrong platform: macOS only"
    for call in (
        lambda: dlbind_metal.empty((2, 3)),
        lambda: dlbind_metal.asarray(np.ones(3)),
        lambda: dlbind_metal.device_of(0x1000),
        lambda: backend.empty((2,), "float32"),
        lambda: backend.asarray(np.ones(2)),
    ):
        with pytest.raises(dlbind_metal.Unavailable, match=why) as info:
            call()
        assert isinstance(info.value, BufferError)
    # the core routes a host copy of a kDLMetal tensor to the backend, which says why it cannot
    with pytest.raises(BufferError, match="needs dlbind-metal, which is installed but unavailable: wrong platform"):
        np.from_dlpack(metal_tensor(), device="cpu", copy=True)
    assert dlbind.from_dlpack(np.ones(2)).shape == (2,)  # the core works on


def test_a_missing_library_is_a_reason() -> None:
    missing = "/nonexistent/libobjc.dylib"
    out = run("import dlbind; print(dlbind.backends()['metal'].reason)", DLBIND_METAL_LIBRARY=missing)
    assert out.startswith(f"runtime library not found: DLBIND_METAL_LIBRARY={missing} cannot be loaded")


@linux_only
def test_a_library_that_is_not_the_objective_c_runtime() -> None:
    import ctypes.util

    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm to load")
    out = run("import dlbind; print(dlbind.backends()['metal'].reason)", DLBIND_METAL_LIBRARY=libm)
    assert out.startswith(f"runtime error: {libm} is not the Objective-C runtime")


# -- the rules of kDLMetal tensors, which the core applies without Metal -----------------------------------


@pytest.mark.parametrize("stream", [0, 1, 2, -1, 7])
def test_stream_must_be_none(stream: int) -> None:
    t = metal_tensor()
    with pytest.raises(BufferError):
        t.__dlpack__(stream=stream)
    t.__dlpack__(stream=None)  # the one value kDLMetal takes
    t.__dlpack__()


def test_wait_is_never_possible() -> None:
    with pytest.raises(BufferError, match="kDLMetal has no DLPack stream"):
        backend.wait(1, None, (int(METAL), 0))


def test_byte_offset_is_kept_apart_from_the_buffer() -> None:
    t = metal_tensor(0x5000, (2, 3), byte_offset=48)
    assert t.device == (METAL, 0)
    assert t.data_ptr == 0x5000 and t.byte_offset == 48  # never folded into the id<MTLBuffer>
    again = dlbind.from_dlpack(t)  # through a capsule and back
    assert again.data_ptr == 0x5000 and again.byte_offset == 48
    strided = metal_tensor(0x5000, (2, 2), strides=(-2, 1), byte_offset=16)
    back = dlbind.from_dlpack(strided)
    assert (back.data_ptr, back.byte_offset, back.strides) == (0x5000, 16, (-2, 1))


def test_no_host_view_of_metal_memory() -> None:
    t = metal_tensor()
    with pytest.raises(BufferError):
        np.asarray(t)
    with pytest.raises((BufferError, RuntimeError)):  # numpy refuses the kDLMetal capsule itself
        np.from_dlpack(t)


def test_device_id_and_storage_rules_need_no_metal(fake: Any) -> None:
    # (on the fake: the rules are checked before anything is allocated)
    for bad, error in ((True, TypeError), ("0", TypeError), (1.0, TypeError), (-1, ValueError), (1, ValueError)):
        with pytest.raises(error):
            dlbind_metal.empty((2,), device_id=bad)
        with pytest.raises(error):
            dlbind_metal.asarray(np.ones(2), device_id=bad)
    with pytest.raises(ValueError, match="no Metal device 1: this machine has 1"):
        dlbind_metal.empty((2,), device_id=1)
    with pytest.raises(ValueError, match="storage must be one of 'shared', 'private'"):
        dlbind_metal.empty((2,), storage="managed")
    with pytest.raises(ValueError, match="negative dimension"):
        dlbind_metal.empty((2, -1))
    with pytest.raises(TypeError, match="an id<MTLBuffer> is an int"):
        dlbind_metal.device_of("0x1000")  # type: ignore[arg-type]
    with pytest.raises(BufferError, match="nil MTLBuffer"):
        dlbind_metal.device_of(0)
    assert fake.calls() == []  # nothing reached Metal


def test_no_device_copy_yet() -> None:
    t = metal_tensor()
    mem = dlbind.export.Memory(t.data_ptr, t.shape, t.strides, t.dtype, t.device, 0, False, t)
    with pytest.raises(BufferError, match="dlbind-metal has no device copy yet: kDLMetal memory is copied to the "
                       "host only"):  # fmt: skip
        backend.copy_on_device(mem, 0)
