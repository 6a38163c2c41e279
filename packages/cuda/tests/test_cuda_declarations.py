"""One binding serves CUDA 12 and 13: the selection of spec/backends/cuda.toml is read from the 12.x header
(NVIDIA's nvidia-cuda-runtime-cu12 wheel, downloaded once with pip into .cache/) and compared with the
13.x one the committed output was generated from. The only difference allowed is the one cuda.toml
names and justifies: CUDA 13's ``long reserved[8]`` at the end of struct cudaPointerAttributes.

The 12.x wheel ships no crt/host_defines.h (the compiler's macro plumbing: CUDARTAPI, __host__); the
13.x toolkit's is used for both.
"""

from __future__ import annotations

import dataclasses
import difflib
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
WHEEL = "nvidia-cuda-runtime-cu12==12.9.79"
HEADER_12_SHA256 = "e88147ea668332c16fba1614f159c105973cec9993870e09a4217dd7c17c8f02"
ALLOWED = ["+    long reserved[8];"]  # 13 minus 12, reviewed (spec/backends/cuda.toml)

pytestmark = pytest.mark.network


def _cuda12_include() -> Path:
    cache = ROOT / ".cache" / "backends" / WHEEL.replace("==", "-")
    include = cache / "nvidia" / "cuda_runtime" / "include"
    if not (include / "cuda_runtime_api.h").is_file():
        cache.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--platform",
             "manylinux2014_x86_64", "-d", str(cache), WHEEL],
            capture_output=True, text=True, check=False,
            env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )  # fmt: skip
        if proc.returncode != 0:
            pytest.skip(f"cannot download {WHEEL}: {(proc.stdout + proc.stderr).strip().splitlines()[-1:]}")
        (wheel,) = cache.glob("*.whl")
        with zipfile.ZipFile(wheel) as z:
            z.extractall(cache, [n for n in z.namelist() if n.startswith("nvidia/cuda_runtime/include/")])
    return include


def test_the_selection_is_the_same_in_cuda_12_and_13(tmp_path: Path) -> None:
    backends = pytest.importorskip("dlbind_generator.backends", reason="needs dlbind-generator (pip install generator)")
    spec = backends.load_backend_spec(ROOT / "spec" / "backends" / "cuda.toml")
    try:
        selected_13 = backends.select(spec)
    except backends.HeaderUnavailable as exc:
        pytest.skip(f"the pinned CUDA 13 header is not here: {exc}")
    include_12 = _cuda12_include()
    assert hashlib.sha256((include_12 / "cuda_runtime_api.h").read_bytes()).hexdigest() == HEADER_12_SHA256
    overlay = tmp_path / "include"
    overlay.mkdir()
    for entry in include_12.iterdir():
        (overlay / entry.name).symlink_to(entry)
    (overlay / "crt").symlink_to(Path(selected_13.header_path).parent / "crt")
    spec_12 = dataclasses.replace(spec, roots=(str(overlay),), sha256=HEADER_12_SHA256)
    selected_12 = backends.select(spec_12)
    assert selected_12.header_version.startswith("12.") and selected_13.header_version.startswith("13.")
    diff = [
        line
        for line in difflib.unified_diff(selected_12.cdef.splitlines(), selected_13.cdef.splitlines(), lineterm="", n=0)
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    ]
    assert diff == ALLOWED
    different = {k for k in spec.macros if selected_12.macros[k] != selected_13.macros[k]}
    assert different == {"CUDART_VERSION"}
