"""One library's conformance run, in its own process (``python -m dlbind.testing._worker [--device cuda] LIB``).

Prints one JSON line when a check starts and one with its result, so that the parent can tell
which check killed the process if the library crashes, and start a new worker after it.

``python -m dlbind.testing._worker --pickled`` runs one check of the pytest plugin's ``isolate=True``
instead: the check's key and the callables, pickled, on stdin; one JSON line with the result on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def subject(name: str, device: str | None = None) -> tuple[Any, Any]:
    """(make_array, from_dlpack) for a library of spec/adapters.toml, on the CPU or on ``device`` ("cuda": its
    own constructor of device arrays; its importer of device memory, or None when it has none)."""
    import dlbind
    from dlbind._generated.adapters import ADAPTERS
    from dlbind._libraries import dotted, prepare_for_check
    from dlbind.bridges import importer

    adapter = ADAPTERS[name]
    prepare_for_check(adapter)  # its check.setup: jax enables its 64-bit dtypes
    if device is None:
        return (lambda a: dlbind.convert(a, name)), importer(adapter)
    from dlbind.testing._devices import DEVICE_ARRAYS, maker

    row = DEVICE_ARRAYS[device][name]
    consume = importer(adapter) if row.consumer == "row" else dotted(row.consumer) if row.consumer else None
    return maker(name, device), consume


def run_pickled() -> int:
    """One check on callables sent by reference (``conformance_tests(..., isolate=True)``)."""
    import pickle

    from dlbind.testing._checks import CONSUMER_CHECKS, PRODUCER, PRODUCER_CHECKS, run_check
    from dlbind.testing._consumer_checks import _default_to_numpy

    wanted, make, consume, to_numpy = pickle.loads(sys.stdin.buffer.read())
    check = next(c for c in [*PRODUCER_CHECKS, *CONSUMER_CHECKS] if f"{c.kind}:{c.id}" == wanted)
    args = (make,) if check.kind == PRODUCER else (consume, to_numpy or _default_to_numpy)
    result = run_check(check, *args)
    _say({"key": wanted, "status": result.status, "detail": result.detail})
    return 0


def _protocol() -> Any:
    """The worker's own stdout (its JSON lines), apart from what the libraries print: fd 1 becomes stderr, so a
    library announcing itself on stdout (warp.init's banner, from C) cannot break a line the parent reads."""
    import os

    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    return out


_OUT: list[Any] = []  # the protocol's stream, once main() has set it apart


def _say(message: dict[str, Any]) -> None:
    out = _OUT[0] if _OUT else sys.stdout
    out.write(json.dumps(message) + "\n")
    out.flush()


def main(argv: list[str]) -> int:
    _OUT.append(_protocol())
    if argv == ["--pickled"]:
        return run_pickled()
    from dlbind.testing._checks import PRODUCER, Result, checks_for, run_check
    from dlbind.testing._consumer_checks import _default_to_numpy
    from dlbind.testing._devices import DEVICE_ARRAYS, device_only, placed, unusable

    device = None
    if argv[:1] == ["--device"]:
        device, argv = argv[1], argv[2:]
    name, skip = argv[0], set(argv[1:])
    producer_checks, consumer_checks = checks_for(device)
    why = unusable(name, device) if device is not None else (device_only(name) or None)
    make, consume = subject(name, device) if why is None else (None, None)
    row = DEVICE_ARRAYS.get(device or "", {}).get(name)
    with placed(device):
        for check in [*producer_checks, *consumer_checks]:
            key = f"{check.kind}:{check.id}"
            if key in skip:
                continue
            _say({"start": key})
            if why is not None:
                result = Result(check.id, "unsupported", why)
            elif check.kind == PRODUCER:
                result = run_check(check, make)
            elif consume is None:
                result = Result(check.id, "unsupported", row.consumer_note if row else "no importer")
            else:
                result = run_check(check, consume, _default_to_numpy)
            _say({"key": key, "status": result.status, "detail": result.detail})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
