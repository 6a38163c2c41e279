"""``import dlbind`` imports no array library and no device backend (checked in a fresh interpreter)."""

from __future__ import annotations

import json
import subprocess
import sys

ARRAY_LIBRARIES = (
    "numpy",
    "torch",
    "jax",
    "cupy",
    "tensorflow",
    "array_api_strict",
    "tvm_ffi",
    "ml_dtypes",
    "mlx",
    "paddle",
)


def test_import_loads_no_array_library_and_no_backend() -> None:
    code = "import sys, json, dlbind; print(json.dumps(sorted(sys.modules)))"
    modules = set(
        json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    )
    assert "dlbind" in modules
    loaded = [m for m in modules if m.split(".")[0] in ARRAY_LIBRARIES or m.startswith("dlbind_")]
    assert loaded == []
    assert not [m for m in modules if m.startswith("dlbind.backends")]  # backends load on first use only
