"""``import dlbind`` imports no array library and no device backend, and defers its own runtime to first use;
a module of the package imported on its own still gets the runtime wired (checked in fresh interpreters, both
builds)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import dlbind

PACKAGE = Path(dlbind.__file__).parent
BUILDS = ["0", "1"] if dlbind.ffi_build() == "compiled" else ["1"]
each_build = pytest.mark.parametrize("pure", BUILDS, ids=lambda p: "pure" if p == "1" else "compiled")


def run(code: str, pure: str = "0") -> str:
    env = {**os.environ, "DLBIND_PURE": pure}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout

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


@pytest.mark.parametrize("first_use", [False, True], ids=["import", "first use"])
def test_import_loads_no_array_library_and_no_backend(first_use: bool) -> None:
    use = "dlbind.from_dlpack(memoryview(b'ab')); " if first_use else ""
    modules = set(json.loads(run(f"import sys, json, dlbind; {use}print(json.dumps(sorted(sys.modules)))")))
    assert "dlbind" in modules
    assert ("dlbind.consumer" in modules) is first_use  # the runtime loads on first use
    loaded = [m for m in modules if m.split(".")[0] in ARRAY_LIBRARIES or m.startswith("dlbind_")]
    assert loaded == []
    assert not [m for m in modules if m.startswith("dlbind.backends")]  # backends load on first use only


def test_import_dlbind_loads_none_of_its_runtime() -> None:
    modules = json.loads(run("import sys, json, dlbind; print(json.dumps(sorted(sys.modules)))"))
    assert sorted(m for m in modules if m.startswith("dlbind")) == ["dlbind", "dlbind._load"]
    # probes by tools (pytest, copy, inspect) of a missing dunder load nothing either
    code = "import sys, dlbind; hasattr(dlbind, '__wrapped__'); print('dlbind.tensor' in sys.modules)"
    assert run(code).split() == ["False"]


def test_the_package_lists_its_modules() -> None:
    """``from dlbind import <module>`` must import the module without loading the runtime: the package tells its
    modules from its public names by its list of them."""
    found = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    found |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    found |= {"_api", "_fastpath"}  # built at install (extensions: _fastpath's sources are a folder too)
    assert set(dlbind._MODULES) == found


@each_build
def test_public_names_load_on_first_use(pure: str) -> None:
    code = (
        "import dlbind, numpy as np; t = dlbind.from_dlpack(np.arange(3.0)); "
        "from dlbind import *; "
        "print(ffi_build(), DeviceType.kDLCPU == 1, DLPACK_VERSION == dlbind.DLPACK_VERSION, "
        "all(hasattr(dlbind, n) for n in __import__('dlbind').__all__), 'from_dlpack' in dir(dlbind), "
        "np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0], dlbind.spec.kind('DLDeviceType.kDLCPU') != '')"
    )
    out = run(code, pure).split()
    assert out == ["pure" if pure == "1" else "compiled"] + ["True"] * 6


@each_build
def test_a_module_imported_on_its_own_gets_the_runtime(pure: str) -> None:
    """``import dlbind.consumer`` without touching the package's names: a buffer is exported through the
    memory it describes (:mod:`dlbind.described`, below the consumer: nothing is wired in from above), and the
    Tensor type carries the exchange table."""
    code = (
        "import dlbind.consumer as c; t = c.from_dlpack(memoryview(b'abcd')); "
        "print(t.shape, type(c.to_ask(memoryview(b'ab'), None).producer).__name__ == 'Exporter', "
        "hasattr(type(t), '__dlpack_c_exchange_api__') == c.exchange.AVAILABLE)"
    )
    assert run(code, pure).split() == ["(4,)", "True", "True"]


@pytest.mark.skipif("0" not in BUILDS, reason="the compiled build is not installed")
def test_the_fast_path_called_first_loads_the_runtime() -> None:
    """The C fast path called before anything of the package's names: it asks the package to load and wire it."""
    code = (
        "import dlbind._ffi as f, numpy as np; t = f.native.from_dlpack(np.arange(2)); "
        "print(type(t).__name__, np.from_dlpack(t).tolist())"
    )
    assert run(code).split() == ["Tensor", "[0,", "1]"]


@each_build
def test_threads_touching_the_package_first_at_once(pure: str) -> None:
    code = (
        "import threading, dlbind\n"
        "out = []\n"
        "def use():\n"
        "    out.append(dlbind.from_dlpack(memoryview(b'xy')).shape)\n"
        "ts = [threading.Thread(target=use) for _ in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(len(out), set(out))\n"
    )
    assert run(code, pure).split() == ["8", "{(2,)}"]
