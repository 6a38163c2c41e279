"""One library's conformance run, in its own process (``python -m dlbind.testing._worker LIB``).

Prints one JSON line when a check starts and one with its result, so that the parent can tell
which check killed the process if the library crashes, and start a new worker after it.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any


def subject(name: str) -> tuple[Any, Any]:
    """(make_array, from_dlpack) for a library of spec/adapters.toml."""
    import dlbind
    from dlbind._generated.adapters import ADAPTERS

    adapter = ADAPTERS[name]
    importlib.import_module(adapter.import_name)
    if name == "jax":
        jax: Any = importlib.import_module("jax")  # optional: only when jax is being checked
        jax.config.update("jax_enable_x64", True)  # else int64/float64 arrays narrow to 32 bits
    from dlbind.planner import importer

    consume = importer(adapter)
    if name == "numpy":
        return (lambda a: a.copy() if a.ndim == 0 else a), consume
    return (lambda a: dlbind.convert(a, name)), consume


def main(argv: list[str]) -> int:
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
