"""One library's conformance run, in its own process (``python -m dlbind.testing._worker LIB``).

Prints one JSON line when a check starts and one with its result, so that the parent can tell
which check killed the process if the library crashes, and start a new worker after it.

``python -m dlbind.testing._worker --pickled`` runs one check of the pytest plugin's ``isolate=True``
instead: the check's key and the callables, pickled, on stdin; one JSON line with the result on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def subject(name: str) -> tuple[Any, Any]:
    """(make_array, from_dlpack) for a library of spec/adapters.toml."""
    import dlbind
    from dlbind._generated.adapters import ADAPTERS
    from dlbind._libraries import prepare_for_check
    from dlbind.bridges import importer

    adapter = ADAPTERS[name]
    prepare_for_check(adapter)  # its check.setup: jax enables its 64-bit dtypes
    return (lambda a: dlbind.convert(a, name)), importer(adapter)


def run_pickled() -> int:
    """One check on callables sent by reference (``conformance_tests(..., isolate=True)``)."""
    import pickle

    from dlbind.testing._checks import CONSUMER_CHECKS, PRODUCER_CHECKS, run_check
    from dlbind.testing._consumer_checks import _default_to_numpy

    wanted, make, consume, to_numpy = pickle.loads(sys.stdin.buffer.read())
    check = next(c for c in [*PRODUCER_CHECKS, *CONSUMER_CHECKS] if f"{c.kind}:{c.id}" == wanted)
    args = (make,) if check.kind == "producer" else (consume, to_numpy or _default_to_numpy)
    result = run_check(check, *args)
    print(json.dumps({"key": wanted, "status": result.status, "detail": result.detail}), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv == ["--pickled"]:
        return run_pickled()
    from dlbind.testing._checks import CONSUMER_CHECKS, PRODUCER_CHECKS, run_check

    name, skip = argv[0], set(argv[1:])
    make, consume = subject(name)
    from dlbind.testing._consumer_checks import _default_to_numpy

    for check in [*PRODUCER_CHECKS, *CONSUMER_CHECKS]:
        key = f"{check.kind}:{check.id}"
        if key in skip:
            continue
        print(json.dumps({"start": key}), flush=True)
        args = (make,) if check.kind == "producer" else (consume, _default_to_numpy)
        result = run_check(check, *args)
        print(json.dumps({"key": key, "status": result.status, "detail": result.detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
