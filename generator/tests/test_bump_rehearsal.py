"""The header-bump rehearsal of generator/README.md, run for real in a temporary tree.

A v1.4 header is derived here from the fetched v1.3 one with one new device type, one new dtype
code, one new flag and one new struct. ``generate`` turns it into a core in which the new names
appear in the enums, the stubs, the cdef and the per-release tables, and everything imports: the
pure build, and the compiled build made from the generated cffi builder.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_errors import _generate, _tree


def _derive_v14(v13: str) -> str:
    edits = [
        ("#define DLPACK_MINOR_VERSION 3", "#define DLPACK_MINOR_VERSION 4"),
        ("kDLTrn = 18,", "kDLTrn = 18,\n  /*! \\brief A device of the future */\n  kDLFutureDev = 42,"),
        (
            "kDLFloat4_e2m1fn = 17U,",
            "kDLFloat4_e2m1fn = 17U,\n  /*! \\brief A dtype of the future */\n  kDLFutureType = 99U,",
        ),
        (
            "#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)",
            "#define DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED (1UL << 2UL)\n\n"
            "/*! \\brief bit mask of the future. */\n#define DLPACK_FLAG_BITMASK_IS_FUTURE (1UL << 3UL)",
        ),
        (
            "typedef struct DLPackExchangeAPI {",
            "/*! \\brief A struct of the future. */\ntypedef struct {\n  DLDevice device;\n  uint64_t cookie;\n"
            "  DLDataType dtype;\n} DLFutureInfo;\n\ntypedef struct DLPackExchangeAPI {",
        ),
    ]
    for old, new in edits:
        assert v13.count(old) == 1, old
        v13 = v13.replace(old, new)
    return v13


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory, root: Path, headers: dict) -> Path:
    tmp = tmp_path_factory.mktemp("bump")
    tree = _tree(tmp, root, headers)
    header = tmp / "dlpack-1.4.h"
    header.write_text(_derive_v14(headers[(1, 3)].read_text()))
    digest = hashlib.sha256(header.read_bytes()).hexdigest()
    toml = (tree / "spec/headers.toml").read_text().replace('canonical = "1.3"', 'canonical = "1.4"')
    toml += f'\n[[header]]\nversion = "1.4"\nlocal = "{header}"\nsha256 = "{digest}"\n'
    (tree / "spec/headers.toml").write_text(toml)
    proc = _generate(tree)
    assert proc.returncode == 0, proc.stderr
    return tree


def test_new_names_in_every_target(bumped: Path) -> None:
    gen = bumped / "packages/core/src/dlbind/_generated"
    enums, build = [(gen / n).read_text() for n in ("enums.py", "build_api.py")]
    assert "kDLFutureDev = 42" in enums and "kDLFutureType = 99" in enums and "IS_FUTURE = 8" in enums
    assert "DLPACK_VERSION: tuple[int, int] = (1, 4)" in enums
    assert "#: A device of the future (since DLPack 1.4)" in enums
    assert "kDLFutureDev = 42," in build and "} DLFutureInfo;" in build
    tables = (gen / "spec_tables.py").read_text()
    assert '"DLFutureInfo": (1, 4),' in tables and '"DLDeviceType.kDLFutureDev": (1, 4),' in tables
    model = json.loads((bumped / "spec/models/dlpack-1.4.json").read_text())
    assert model["struct_info"]["DLFutureInfo"]["size"] == 24
    assert model["version"] == [1, 4] and model["enums"]["DLDeviceType"]["kDLFutureDev"] == 42
    assert '"1.4" = "' in (bumped / "spec/models/ledger.toml").read_text()
    assert (
        "| 1.4 | DLDataTypeCode.kDLFutureType, DLDeviceType.kDLFutureDev, DLFutureInfo, DLPACK_FLAG_BITMASK_IS_FUTURE |"
        in (bumped / "generator/REPORT.md").read_text()
    )


def test_check_is_clean_after_generate(bumped: Path) -> None:
    proc = _generate(bumped, "--check")
    assert proc.returncode == 0, proc.stdout


PROBE = """
import dlbind
from dlbind._ffi import ffi, BUILD
assert BUILD == {build!r}, BUILD
assert dlbind.DLPACK_VERSION == (1, 4)
assert dlbind.DeviceType.kDLFutureDev == 42 and dlbind.DataTypeCode.kDLFutureType == 99
assert dlbind.Flags.IS_FUTURE == 8
assert dlbind.spec.since("DLFutureInfo") == (1, 4)
assert ffi.sizeof("DLFutureInfo") == 24
assert ffi.offsetof("DLFutureInfo", "dtype") == 16
assert str(dlbind.DType(99, 32, 1)) == "futuretype32"
assert "futuredev:0" in repr(dlbind.from_dlpack(dlbind.from_pointer(0, (0,), "float32", device=(42, 0))))
print("ok")
"""


def test_pure_build_imports(bumped: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(bumped / "packages/core/src"), "DLBIND_PURE": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE.format(build="pure")], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr


def test_compiled_build_imports(bumped: Path, root: Path) -> None:
    # the core's own build declarations: the cffi module from the generated builder, and the C
    # extension dlbind._fastpath, which reads the regenerated dlpack_types.h and tables.h
    core = bumped / "packages/core"
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(root / "packages/core" / name, core / name)
    build = subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=core, capture_output=True, text=True
    )
    assert build.returncode == 0, build.stderr
    src = core / "src"
    assert list((src / "dlbind").glob("_api*.so")), "the generated builder made no extension"
    assert list((src / "dlbind").glob("_fastpath*.so")), "setup.py built no dlbind._fastpath"
    shutil.rmtree(src / "dlbind.egg-info", ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": str(src), "DLBIND_PURE": "0"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(build="compiled")], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "ok", out.stderr
