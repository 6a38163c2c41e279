"""Timer signals in the DLPack 1.3 exchange table's windows: ``python exchange_signals_worker.py MODE N``.

A one-shot SIGALRM timer, set to fire somewhere within one call, has a handler that raises an exception derived
from BaseException (as KeyboardInterrupt is), N times. MODE ``table``: ``dlbind.exchange.import_object`` of a
producer whose type holds a foreign exchange table (``nativehelp.lib.exchange_table``): every struct the table
handed over must have its deleter run (``table_alive``). MODE ``alloc``: dlbind's own table's allocator called by
a C consumer that releases what it gets at once (``nativehelp.lib.allocate_and_release``): every export it made must
be released (``dlbind.capsule.stats``). Prints one JSON line: the interrupts and what is still alive.
"""

from __future__ import annotations

import gc
import json
import random
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

import nativehelp

import dlbind
from dlbind import _capi, exchange
from dlbind._ffi import ffi


class Interrupt(BaseException):
    """What the timer's handler raises (a BaseException, as KeyboardInterrupt)."""


armed = False


def _handler(signum: int, frame: Any) -> None:
    global armed
    if armed:
        armed = False
        raise Interrupt


class _Producer:
    __dlpack_c_exchange_api__ = nativehelp.table_capsule()

    def __dlpack__(self, **kwargs: Any) -> Any:
        raise AssertionError("asked through its exchange table only")

    def __dlpack_device__(self) -> tuple[int, int]:
        return (1, 0)


def _calls(mode: str) -> tuple[Callable[[], object], Callable[[], int]]:
    """The call to interrupt, and the count of what it left alive."""
    if mode == "table":
        producer = _Producer()
        return (lambda: exchange.import_object(producer)), lambda: int(nativehelp.lib.table_alive())
    api = ffi.cast("DLPackExchangeAPI *", _capi.capsule_get_pointer(exchange.table(), b"dlpack_exchange_api"))
    proto, shape = ffi.new("DLTensor *"), ffi.new("int64_t[]", [2, 3])
    proto.ndim, proto.shape, proto.device.device_type = 2, shape, 1
    proto.dtype.code, proto.dtype.bits, proto.dtype.lanes = 2, 32, 1
    allocator = nativehelp.ffi.cast("void *", int(ffi.cast("uintptr_t", api.managed_tensor_allocator)))
    prototype = nativehelp.ffi.cast("void *", int(ffi.cast("uintptr_t", proto)))
    keep = (api, proto, shape)

    def alive() -> int:
        made, released = dlbind.capsule.stats()
        return made - released + 0 * len(keep)

    return (lambda: nativehelp.lib.allocate_and_release(allocator, prototype)), alive


def main(mode: str, count: int) -> dict[str, Any]:
    global armed
    call, alive = _calls(mode)
    start = time.perf_counter()
    for _ in range(50):
        call()
    per = (time.perf_counter() - start) / 50
    gc.collect()
    before, pick, interrupts = alive(), random.Random(1), 0
    signal.signal(signal.SIGALRM, _handler)
    for _ in range(count):
        try:
            armed = True
            signal.setitimer(signal.ITIMER_REAL, pick.uniform(1e-6, per * 1.2))
            call()
        except Interrupt:
            interrupts += 1
        finally:
            armed = False
            signal.setitimer(signal.ITIMER_REAL, 0)
    gc.collect()
    return {"build": dlbind.ffi_build(), "interrupts": interrupts, "alive_before": before, "alive_after": alive()}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]))))
