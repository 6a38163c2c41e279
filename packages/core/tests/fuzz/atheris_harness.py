"""libFuzzer (atheris) harness over the same struct generator as ``dlfuzz.py``.

Each fuzz input is a byte string; ``atheris.FuzzedDataProvider`` turns it into the integers the
generator draws, so libFuzzer's coverage feedback steers the struct fields. A property violation
(an exception outside BufferError/TypeError/ValueError, a wrong deleter count) raises, which
libFuzzer reports as a finding with the input saved as ``crash-*``; a crash is a crash.

``python atheris_harness.py -runs=100000`` (any libFuzzer flag); ``DLBIND_PURE`` picks the build.
The C fast path is not instrumented for coverage (it is built by setuptools); the Python side is.
"""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))

with atheris.instrument_imports():
    import dlbind
    import dlbind.conversion
    import dlbind.tensor

import dlfuzz
import nativehelp

# Conversions to foreign libraries are slow and their refusals are known defects (see docs/reliability.md):
# this harness fuzzes dlbind's own consumer and Tensor; fuzz/drive.py covers conversions.
dlfuzz.LIBS.clear()


def one_input(data: bytes) -> None:
    item = dlfuzz.build(dlfuzz.AtherisSource(atheris.FuzzedDataProvider(data)))
    item.convert = False
    record: list[tuple[object, ...]] = []
    problems = dlfuzz.run_one(item, record)
    if item.calls() != 1:
        gc.collect()
    dlfuzz.settle(item, record, problems)
    if problems:
        raise AssertionError(f"{item.describe()}: {problems}")


def _report() -> None:
    built = nativehelp.total_calls()
    print(f"atheris: {built} structs built and released on the {dlbind.ffi_build()} build", flush=True)


def main() -> None:
    import atexit

    atexit.register(_report)
    print(f"atheris on the {dlbind.ffi_build()} build; helper deleters so far {nativehelp.total_calls()}", flush=True)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
