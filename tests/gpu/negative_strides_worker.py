"""CuPy's reversed arrays through dlbind, in a child process of test_gpu_matrix.py (issue 21, finding 3).

``python negative_strides_worker.py ROUTE:CONSUMER:DTYPE ...``: for each case, one JSON line when it starts
and one with its result: ``values`` (the right values arrived), ``refused`` (a BufferError: allowed),
``wrong`` (other values), ``error`` (another exception) or ``skip`` (the consumer cannot take what dlbind
correctly gives it). A case that kills the process leaves its start line last: the parent reports a crash
and starts a new process for the cases after it.
"""

from __future__ import annotations

import json
import sys

import gpulibs
import pytest

import dlbind


def run(route: str, consumer: str, dtype: str) -> tuple[str, str]:
    cupy = gpulibs.library("cupy")
    if consumer not in ("dlbind", "cupy"):
        gpulibs.library(consumer)
    host = gpulibs.host_values(dtype)
    x = cupy.asarray(host)[::-1]
    want = host[::-1]
    try:
        if route == "convert":
            y = dlbind.convert(x, to=consumer)
            wrong = gpulibs.is_cuda_array(consumer, y)
            if wrong is not None:
                return "wrong", f"dlbind.convert(..., to={consumer!r}) gave {wrong}"
            got = gpulibs.read(consumer, y, want.dtype)
        else:
            t = dlbind.from_dlpack(x)
            if consumer == "dlbind":
                got = gpulibs.host_copy(t)
            elif consumer == "torch" and any(s < 0 for s in t.strides):
                return "skip", "torch.from_dlpack aborts on negative strides (pytorch#188023); dlbind's import is right"
            else:
                y = gpulibs.importer(consumer)(t)
                got = gpulibs.read(consumer, y, want.dtype)
        gpulibs.same(got, want, f"{route} cupy[::-1] -> {consumer}")
    except BufferError as exc:
        return "refused", f"BufferError: {exc}"
    except pytest.skip.Exception as exc:
        return "skip", str(exc.msg)
    except AssertionError as exc:
        return "wrong", str(exc)
    except Exception as exc:
        return "error", f"{type(exc).__name__}: {gpulibs._first(exc)}"
    return "values", ""


def main(keys: list[str]) -> int:
    for key in keys:
        print(json.dumps({"start": key}), flush=True)
        route, consumer, dtype = key.split(":")
        status, detail = run(route, consumer, dtype)
        print(json.dumps({"key": key, "status": status, "detail": detail}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
