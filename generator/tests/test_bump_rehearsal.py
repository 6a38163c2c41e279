"""The header bump, end to end, on a made-up next version of whatever header is canonical.

``python -m dlbind_generator rehearsal-header`` derives header N+1 from the canonical header N
(three device types, a dtype code, a flag bit and a struct after the last ones); ``bump`` records it
in a temporary copy of the repository and regenerates. The new names must then appear in every
target, ``generate --check`` must be clean, and the core built from that copy into a fresh venv
must know them at run time (pure build, and compiled when a compiler is there).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib
from test_errors import _generate, _snapshot, _tree

from dlbind_generator.parse import parse_header
from dlbind_generator.rehearsal import NextHeader, derive_next
from dlbind_generator.sources import format_version, load_sources


@pytest.fixture(scope="module")
def canonical(root: Path) -> tuple[int, int]:
    return load_sources(root / "spec/headers.toml").canonical


@pytest.fixture(scope="module")
def nxt(headers: dict, canonical: tuple[int, int]) -> NextHeader:
    header = headers[canonical]
    return derive_next(header.read_text(), parse_header(header))


def _repo_copy(tmp: Path, root: Path, headers: dict) -> Path:
    """The whole working tree (less VCS, venvs, caches, build products), with the fetched headers."""
    tree = tmp / "repo"
    skip = shutil.ignore_patterns(
        ".git", ".nox", ".cache", ".venv", "__pycache__", "*.so", "*.egg-info", "_build", "dist", ".*_cache"
    )
    shutil.copytree(root, tree, ignore=skip)
    shutil.rmtree(tree / "packages/core/build", ignore_errors=True)
    (tree / ".cache/headers").mkdir(parents=True)
    for p in headers.values():
        shutil.copy(p, tree / ".cache/headers" / p.name)
    return tree


def _bump(tree: Path, source: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "bump", "--root", str(tree), source],
        capture_output=True,
        text=True,
    )


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory, root: Path, headers: dict, nxt: NextHeader) -> Path:
    tmp = tmp_path_factory.mktemp("bump")
    tree = _repo_copy(tmp, root, headers)
    header = tmp / f"dlpack-{format_version(nxt.version)}.h"
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "rehearsal-header", "--root", str(tree), str(header)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert header.read_text() == nxt.text  # the CLI writes what derive_next makes
    proc = _bump(tree, str(header))
    assert proc.returncode == 0, proc.stderr
    (tmp / "bump.out").write_text(proc.stdout)
    return tree


def test_derived_header_adds_after_the_last_names(headers: dict, canonical: tuple[int, int], nxt: NextHeader) -> None:
    old = parse_header(headers[canonical])
    assert nxt.version == (canonical[0], canonical[1] + 1)
    devices = [v for _, v in old.enum("DLDeviceType").members]
    codes = [v for _, v in old.enum("DLDataTypeCode").members]
    flags = [v for n, v in old.macros if n.startswith("DLPACK_FLAG_BITMASK_")]
    assert [v for _, v in nxt.devices] == [max(devices) + 1, max(devices) + 2, max(devices) + 3]
    assert nxt.dtype[1] == max(codes) + 1 and nxt.flag[1] == max(flags) * 2
    assert not {n for n, _ in nxt.devices} & {n for n, _ in old.enum("DLDeviceType").members}


def test_headers_toml_records_the_local_file(
    bumped: Path, root: Path, canonical: tuple[int, int], nxt: NextHeader
) -> None:
    text = (bumped / "spec/headers.toml").read_text()
    new = tomllib.loads(text)["header"][-1]
    assert tomllib.loads(text)["canonical"] == format_version(nxt.version)
    assert new["version"] == format_version(nxt.version) and Path(new["local"]).is_absolute()
    assert new["sha256"] == hashlib.sha256(Path(new["local"]).read_bytes()).hexdigest()
    # appended in the file's own layout; comments, order and the other entries kept as they were
    before = (root / "spec/headers.toml").read_text()
    old_line = f'canonical = "{format_version(canonical)}"\n'
    assert before.count(old_line) == 1
    expected = before.replace(old_line, f'canonical = "{format_version(nxt.version)}"\n').rstrip("\n")
    expected += f'\n\n[[header]]\nversion = "{new["version"]}"\nlocal = "{new["local"]}"\nsha256 = "{new["sha256"]}"\n'
    assert text == expected


def test_new_names_in_every_target(bumped: Path, nxt: NextHeader) -> None:
    gen = bumped / "packages/core/src/dlbind/_generated"
    enums, build, c_types = [(gen / n).read_text() for n in ("enums.py", "build_api.py", "dlpack_types.h")]
    v = nxt.version
    flag = nxt.flag[0].removeprefix("DLPACK_FLAG_BITMASK_")
    for name, value in (*nxt.devices, nxt.dtype):  # enums.py is typed in place (no separate stub)
        assert f"    {name} = {value}\n" in enums
    assert f"    {flag} = {nxt.flag[1]}\n" in enums
    assert f"DLPACK_VERSION: tuple[int, int] = {v}" in enums
    assert f"(since DLPack {format_version(v)})" in enums
    for text in (build, c_types):  # the cffi cdef and the C header of the same declarations
        for name, value in (*nxt.devices, nxt.dtype):
            assert f"  {name} = {value}," in text
        assert f"}} {nxt.struct};" in text
    tables = (gen / "spec_tables.py").read_text()
    assert f'"{nxt.struct}": {v},' in tables
    for name, _ in nxt.devices:
        assert f'"DLDeviceType.{name}": {v},' in tables
    assert f'"DLDataTypeCode.{nxt.dtype[0]}": {v},' in tables
    assert f'"{nxt.flag[0]}": {v},' in tables
    policy, policy_h = (gen / "tables.py").read_text(), (gen / "tables.h").read_text()
    for name, value in nxt.devices:  # no policy entry: the derived name
        assert f'    {value}: "{name.removeprefix("kDL").lower()}",  # {name} (derived' in policy
        assert f'  [{value}] = "{name.removeprefix("kDL").lower()}", /* {name}' in policy_h
    code, value = nxt.dtype
    assert f'    {value}: "{code.removeprefix("kDL").lower()}{{bits}}",  # {code} (derived' in policy
    model = json.loads((bumped / f"spec/models/dlpack-{format_version(v)}.json").read_text())
    assert model["version"] == list(v)
    assert model["enums"]["DLDeviceType"][nxt.devices[0][0]] == nxt.devices[0][1]
    assert f'"{format_version(v)}" = "' in (bumped / "spec/models/ledger.toml").read_text()
    report = (bumped / "generator/REPORT.md").read_text()
    new = sorted(
        [nxt.struct, f"DLDataTypeCode.{nxt.dtype[0]}", nxt.flag[0], *(f"DLDeviceType.{n}" for n, _ in nxt.devices)]
    )
    assert f"| {format_version(v)} | {', '.join(new)} |" in report


def test_bump_prints_the_summary(bumped: Path, nxt: NextHeader) -> None:
    out = (bumped.parent / "bump.out").read_text()
    report = (bumped / "generator/REPORT.md").read_text()
    summary = re.search(r"^## Summary\n\n(.*?)\n\n## ", report, re.MULTILINE | re.DOTALL)
    assert summary is not None and summary.group(1) in out
    assert f"- canonical: DLPack {format_version(nxt.version)} (local file)" in out
    for name, value in nxt.devices:
        assert f"  - DLDeviceType.{name} ({value}) has no entry in devices.toml" in out
    assert f"  - DLDataTypeCode.{nxt.dtype[0]} ({nxt.dtype[1]}) has no entry in dtypes.toml" in out
    assert f"  - {nxt.flag[0]}: a new flag bit" in out


def test_check_is_clean_after_bump(bumped: Path) -> None:
    proc = _generate(bumped, "--check")
    assert proc.returncode == 0, proc.stdout


def test_same_header_again_records_nothing(bumped: Path, nxt: NextHeader) -> None:
    header = tomllib.loads((bumped / "spec/headers.toml").read_text())["header"][-1]["local"]
    before = _snapshot(bumped)
    proc = _bump(bumped, header)
    assert proc.returncode == 0, proc.stderr
    assert f"DLPack {format_version(nxt.version)} is listed already with this sha256" in proc.stderr
    assert _snapshot(bumped) == before


def test_same_version_other_digest_is_refused(bumped: Path, nxt: NextHeader, tmp_path: Path) -> None:
    listed = tomllib.loads((bumped / "spec/headers.toml").read_text())["header"][-1]
    other = tmp_path / "other.h"
    other.write_text(nxt.text + "\n/* one byte more is another header */\n")
    before = _snapshot(bumped)
    proc = _bump(bumped, str(other))
    assert proc.returncode == 1
    assert f"DLPack {format_version(nxt.version)} is listed already with sha256 {listed['sha256']}" in proc.stderr
    assert f"the new header has sha256 {hashlib.sha256(other.read_bytes()).hexdigest()}" in proc.stderr
    assert _snapshot(bumped) == before


def test_bad_source_is_refused(bumped: Path, tmp_path: Path) -> None:
    proc = _bump(bumped, str(tmp_path / "absent.h"))
    assert proc.returncode == 1
    assert "absent.h': no such file (and not of the form PACKAGE==VERSION:PATH)" in proc.stderr


# -- run time: the core built from the bumped copy --------------------------------------------

PROBE = """
import json, sys
import dlbind
from dlbind._ffi import ffi, BUILD

assert BUILD == sys.argv[1], BUILD
if BUILD == "compiled":
    import dlbind._fastpath  # the C extension, built against the regenerated dlpack_types.h and tables.h
new = json.loads(sys.argv[2])
version = tuple(new["version"])
assert dlbind.DLPACK_VERSION == version == dlbind.spec.CANONICAL, dlbind.DLPACK_VERSION
for name, value in new["devices"]:
    assert dlbind.DeviceType[name] == value, name
    assert dlbind.spec.since("DLDeviceType." + name) == version
code_name, code = new["dtype"]
assert dlbind.DataTypeCode[code_name] == code
flag = new["flag"][0].removeprefix("DLPACK_FLAG_BITMASK_")
assert dlbind.Flags[flag] == new["flag"][1]
assert dlbind.spec.since(new["flag"][0]) == version
assert dlbind.spec.since(new["struct"]) == version
assert ffi.sizeof(new["struct"]) == new["struct_size"]
assert ffi.offsetof(new["struct"], "dtype") == new["dtype_offset"]

# names at run time: a device type or dtype code without a policy entry gets the derived name
dev_name, dev_value = new["devices"][0]
derived_dev = dev_name.removeprefix("kDL").lower()
buf = bytearray(8)
p = ffi.cast("uintptr_t", ffi.from_buffer(buf))
t = dlbind.from_dlpack(dlbind.from_pointer(int(p), (2,), "float32", device=(dev_value, 0)))
assert f"device={derived_dev}:0" in repr(t), repr(t)
derived_dtype = code_name.removeprefix("kDL").lower() + "32"
assert str(dlbind.DType(code, 32, 1)) == derived_dtype, str(dlbind.DType(code, 32, 1))
print("ok")
"""


@pytest.fixture(scope="module")
def venv(bumped: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the core built from the bumped copy (compiled when the compiler works)."""
    env_dir = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, capture_output=True)
    py = env_dir / "bin" / "python"
    core = bumped / "packages/core"
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", str(core)], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return py


def _probe(
    py: Path, build: str, nxt: NextHeader, struct_size: int, dtype_offset: int, cwd: Path
) -> subprocess.CompletedProcess[str]:
    new = {
        "version": nxt.version,
        "devices": nxt.devices,
        "dtype": nxt.dtype,
        "flag": nxt.flag,
        "struct": nxt.struct,
        "struct_size": struct_size,
        "dtype_offset": dtype_offset,
    }
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DLBIND_PURE")}
    env["DLBIND_PURE"] = "1" if build == "pure" else "0"
    return subprocess.run(
        [str(py), "-c", textwrap.dedent(PROBE), build, json.dumps(new)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize("build", ["pure", "compiled"])
def test_new_names_at_run_time(venv: Path, bumped: Path, nxt: NextHeader, build: str, tmp_path: Path) -> None:
    model = json.loads((bumped / f"spec/models/dlpack-{format_version(nxt.version)}.json").read_text())
    size = model["struct_info"][nxt.struct]["size"]
    assert size == 24  # DLDevice, uint64_t, DLDataType + 4 bytes of tail padding (x86-64)
    offset = next(f["offset"] for f in model["structs"][nxt.struct] if f["name"] == "dtype")
    assert offset == 16
    out = _probe(venv, build, nxt, size, offset, tmp_path)
    assert out.stdout.strip() == "ok", out.stderr


@pytest.mark.network
def test_registry_source_of_a_listed_header(tmp_path: Path, root: Path, headers: dict) -> None:
    """PACKAGE==VERSION:PATH goes through the registry: the newest listed archive is found, the header's
    version read from its macros, its sha256 matched to the listed one, and nothing is recorded."""
    entry = max((h for h in load_sources(root / "spec/headers.toml").headers if not h.local), key=lambda h: h.version)
    tree = _tree(tmp_path, root, headers)
    before = _snapshot(tree)
    proc = _bump(tree, f"{entry.package}=={entry.package_version}:{entry.path}")
    assert proc.returncode == 0, proc.stderr
    assert f"DLPack {format_version(entry.version)} is listed already with this sha256" in proc.stderr
    assert _snapshot(tree) == before
