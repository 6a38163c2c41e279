"""Deliberately faulty DLPack producers, built from dlbind's own cffi declarations.

Each capsule's deleter counts its calls, so tests can prove that even a refused tensor is freed
exactly once. (The callbacks run Python: call the deleters with no exception pending.)
"""

from __future__ import annotations

import ctypes
import sys
from dataclasses import dataclass, field
from typing import Any

from dlbind import _capi
from dlbind._ffi import BUILD, ffi
from dlbind._generated.enums import DLPACK_VERSION

KEEP: dict[int, Any] = {}

#: The pure build on Python 3.10: CPython 3.10 turns any Python function run while an exception is set into a
#: SystemError (checked when its frame returns), and the pure build's deleters and capsule destructor are
#: Python functions (cffi callbacks). A consumer that releases a dlbind export on its error path (numpy
#: refusing a dtype) then gets a SystemError instead of its own exception, and cffi prints "Exception ignored".
#: Python 3.11 and newer, and the compiled build on every Python, are free of it (docs/guide/builds.md).
PY310_PURE = BUILD == "pure" and sys.version_info < (3, 11)
PY310_PURE_REASON = "pure build on Python 3.10: its Python deleters cannot run while a consumer's exception is set"


@dataclass
class Counter:
    calls: int = 0
    keep: list[Any] = field(default_factory=list)


def make_capsule(
    *,
    name: bytes | None = b"dltensor_versioned",
    versioned: bool = True,
    major: int = DLPACK_VERSION[0],
    minor: int = DLPACK_VERSION[1],
    code: int = 2,
    bits: int = 32,
    lanes: int = 1,
    ndim: int = 1,
    shape: tuple[int, ...] = (4,),
    strides: tuple[int, ...] | None = (1,),
    device_type: int = 1,
    null_shape: bool = False,
    data: int | None = None,
    byte_offset: int = 0,
    flags: int = 0,
) -> tuple[object, Counter]:
    counter = Counter()
    buf = ffi.new("char[]", 64)
    shape_arr = ffi.new("int64_t[]", list(shape) or [0])
    strides_arr = ffi.new("int64_t[]", list(strides or ()) or [0])
    if versioned:
        m = ffi.new("DLManagedTensorVersioned *")
        m.version.major, m.version.minor, m.flags = major, minor, flags

        @ffi.callback("void(DLManagedTensorVersioned *)")
        def deleter(_: Any) -> None:
            counter.calls += 1
    else:
        m = ffi.new("DLManagedTensor *")

        @ffi.callback("void(DLManagedTensor *)")
        def deleter(_: Any) -> None:
            counter.calls += 1

    m.deleter = deleter
    t = m.dl_tensor
    t.data = buf if data is None else ffi.cast("void *", data)
    t.ndim = ndim
    t.device.device_type, t.device.device_id = device_type, 0
    t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
    t.shape = ffi.NULL if null_shape else shape_arr
    t.strides = ffi.NULL if strides is None else strides_arr
    t.byte_offset = byte_offset
    counter.keep += [buf, shape_arr, strides_arr, m, deleter]
    address = int(ffi.cast("uintptr_t", m))
    capsule = _capi.capsule_new(address, name, _capi.CapsuleDestructor())
    return capsule, counter


def float_values(address: int, count: int) -> list[float]:
    return list((ctypes.c_float * count).from_address(address))
