"""``python -m dlbind_generator vendor``: re-rooting, the files of a copy, header versions, the re-vendoring guard.

Running the copies (exchanges, negotiation, coexistence) is tested in ``tests/test_vendored.py``; the
built and installed copies in ``tests/vendoring`` (``nox -s vendor``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib
from listed_headers import CANONICAL, LISTED, ROOT

from dlbind_generator.__main__ import main
from dlbind_generator.emit import SEAL_MARK, seal_ok
from dlbind_generator.errors import GeneratorError
from dlbind_generator.sources import format_version, parse_release
from dlbind_generator.vendor import EXCLUDED, RECORD, check_package, sha256
from dlbind_generator.vendor_reroot import imports_of, reroot

CORE_GENERATED = ROOT / "packages/core/src/dlbind/_generated"
IMPORT_LINE = re.compile(r"^\s*(from\s+dlbind[\s.]|import\s+dlbind\b)", re.M)


def vendor(into: Path, package: str, *args: str) -> int:
    return main(["vendor", "--into", str(into), "--package", package, "--offline", "--root", str(ROOT), *args])


@pytest.fixture(scope="module")
def fetched(headers: dict[tuple[int, int], Path]) -> None:
    """Vendoring runs offline in these tests: the headers are fetched once first."""


# -- re-rooting -----------------------------------------------------------------------------------


def test_reroot_rewrites_every_import_and_no_string() -> None:
    src = '''"""Uses dlbind: from dlbind import x stays in this docstring."""
from dlbind import a, b  # from dlbind import c
from dlbind._generated.enums import (
    X,
    Y,
)
import dlbind
import os, dlbind.sub as sub
from dlbind_cuda import other

MESSAGE = "from dlbind import q"


def f():
    from dlbind.consumer import from_dlpack

    class C:
        import dlbind.tensor as t
    return from_dlpack, C
'''
    out = reroot(src, "host._dlpack", "t.py")
    assert imports_of(out, "dlbind", "t.py") == []
    assert "from host._dlpack import a, b  # from dlbind import c" in out
    assert "from host._dlpack._generated.enums import (" in out
    assert "import host._dlpack as dlbind" in out
    assert "import os, host._dlpack.sub as sub" in out
    assert "from dlbind_cuda import other" in out  # another distribution: not dlbind's
    assert '"""Uses dlbind: from dlbind import x stays in this docstring."""' in out
    assert 'MESSAGE = "from dlbind import q"' in out
    assert "    from host._dlpack.consumer import from_dlpack" in out
    assert "        import host._dlpack.tensor as t" in out
    compile(out, "t.py", "exec")


def test_reroot_refuses_what_it_cannot_rewrite() -> None:
    with pytest.raises(GeneratorError, match=r"t\.py:1: `import dlbind\.sub` cannot be re-rooted"):
        reroot("import dlbind.sub\n", "h", "t.py")
    with pytest.raises(GeneratorError, match=r"t\.py:2: the string 'dlbind\._api' names a dlbind module"):
        reroot("import importlib\nimportlib.import_module('dlbind._api')\n", "h", "t.py")


@pytest.mark.parametrize("name", ["", "a..b", "1a", "a.class", "dlbind", "dlbind.inner", "a-b"])
def test_package_names_refused(name: str) -> None:
    with pytest.raises(GeneratorError, match="--package"):
        check_package(name)


# -- the files of a copy --------------------------------------------------------------------------


def _files(into: Path) -> dict[str, str]:
    return {p.relative_to(into).as_posix(): p.read_text() for p in sorted(into.rglob("*")) if p.is_file()}


def test_pure_copy_is_self_contained(tmp_path: Path, fetched: None) -> None:
    into = tmp_path / "hostlib" / "_dlpack"
    assert vendor(into, "hostlib._dlpack", "--pure") == 0
    files = _files(into)
    assert not any(rel.startswith("_fastpath/") or rel == "_build.py" for rel in files)
    assert not {name for name in EXCLUDED if name not in ("_backends.py", "_generated")} & {
        rel.split("/")[0] for rel in files
    }
    for rel, text in files.items():  # grep and ast: no import of dlbind anywhere
        assert not IMPORT_LINE.search(text), rel
        if rel.endswith(".py"):
            assert imports_of(text, "dlbind", rel) == [], rel
    for rel in ("_generated/enums.py", "_generated/tables.py", "_generated/_abi.py", "_backends.py"):
        assert SEAL_MARK in files[rel] and seal_ok(files[rel]), rel
    assert "hostlib._dlpack._generated._abi" in files["_generated/_abi.py"]
    # the fast path's stub, which the copy's Tensor is typed by (tensor.py imports it for mypy only)
    assert "from hostlib._dlpack.tensor import Tensor" in files["_fastpath.pyi"]
    record = tomllib.loads(files[RECORD])
    assert record["package"] == "hostlib._dlpack"
    assert record["header_version"] == format_version(CANONICAL)
    assert record["build"] == "pure"
    init = (ROOT / "packages/core/src/dlbind/__init__.py").read_text(encoding="utf-8")
    assert f'__version__ = "{record["dlbind_version"]}"' in init.splitlines()
    assert record["command"].startswith("python -m dlbind_generator vendor --into ")
    assert "--force" not in record["command"]
    assert set(record["files"]) == set(files) - {RECORD}
    assert all(record["files"][rel] == sha256(files[rel].encode()) for rel in record["files"])


def test_canonical_copy_generates_what_the_core_has(tmp_path: Path, fetched: None) -> None:
    """The same templates and join: below the banner, the canonical copy's tables are the core's."""
    into = tmp_path / "_dlpack"
    assert vendor(into, "h._dlpack") == 0
    for name in ("enums.py", "tables.py", "spec_tables.py", "adapters.py", "tables.h", "dlpack_types.h"):
        ours = (into / "_generated" / name).read_text().split("\n\n", 1)[1]
        core = (CORE_GENERATED / name).read_text().split("\n\n", 1)[1]
        assert ours == core, name
    build = (into / "_build.py").read_text()
    assert '"h._dlpack"' in build and "ffibuilder" in build
    assert sorted(p.name for p in (into / "_fastpath").iterdir()) == sorted(
        p.name for p in (ROOT / "packages/core/src/dlbind/_fastpath").iterdir() if p.suffix in (".c", ".h")
    )


@pytest.mark.parametrize("version", LISTED, ids=format_version)
def test_every_header_version(tmp_path: Path, fetched: None, version: tuple[int, ...]) -> None:
    text = format_version(version)
    into = tmp_path / "_dlpack"
    assert vendor(into, "h._dlpack", "--header-version", text) == 0  # compiled, 0.x included
    enums = (into / "_generated" / "enums.py").read_text()
    assert f"DLPACK_VERSION: tuple[int, int] = ({version[0]}, {version[1]})" in enums
    assert "DLPACK_VERSION: int" not in enums  # a 0.x header's own macro (80, 040) never shadows the tuple
    tables = (into / "_generated" / "tables.py").read_text()
    assert f"VERSIONED_CAPSULES: bool = {version >= (1, 0)}" in tables
    assert tomllib.loads((into / RECORD).read_text())["header_version"] == text
    types = (into / "_generated" / "dlpack_types.h").read_text()
    has_api = "DLPackExchangeAPI" in (ROOT / f"spec/models/dlpack-{text}.json").read_text()
    assert f"#define DLBIND_HEADER_HAS_EXCHANGE_API {int(has_api)}" in types
    assert f"#define DLBIND_VERSIONED_CAPSULES {int(version >= (1, 0))}" in types
    build = (into / "_build.py").read_text()
    cdef = build.split('CDEF = r"""', 1)[1].split('"""', 1)[0]
    if version < (1, 0):
        # the cffi declarations are the header's: no versioned struct, in either build's module
        assert "DLManagedTensorVersioned" not in (into / "_generated" / "_abi.py").read_text()
        assert "DLManagedTensorVersioned" not in cdef and "DLPACK_MAJOR_VERSION" not in cdef
        # the C header adds them after the header's declarations, C-private, for the fast path's code only
        private = types.split("C-private declarations for the fast path's code only", 1)[1]
        assert f"#define DLPACK_MAJOR_VERSION {version[0]}\n#define DLPACK_MINOR_VERSION {version[1]}\n" in private
        assert "} DLManagedTensorVersioned;" in private and "} DLPackVersion;" in private
    else:
        assert "C-private" not in types


@pytest.mark.parametrize("version", LISTED, ids=format_version)
def test_a_copy_describes_releases_up_to_its_own_header(
    tmp_path: Path, fetched: None, version: tuple[int, ...]
) -> None:
    """A copy's per-release tables end at its header: CANONICAL and the last release are the header's, and a
    name of a later release is unknown to its ``spec`` (expectations from spec/models/merged.json)."""
    text = format_version(version)
    (tmp_path / "host").mkdir()
    (tmp_path / "host" / "__init__.py").write_text("")
    assert vendor(tmp_path / "host" / "_d", "host._d", "--header-version", text, "--pure") == 0
    ns: dict[str, object] = {}
    tables = tmp_path / "host" / "_d" / "_generated" / "spec_tables.py"
    exec(compile(tables.read_text(), str(tables), "exec"), ns)

    def release(v: tuple[int, int]) -> str:  # PostMinor formats as "3.post1"
        return f"{v[0]}.{v[1]}"

    assert release(ns["CANONICAL"]) == text  # type: ignore[arg-type]
    assert [release(v) for v in ns["RELEASES"]][-1] == text  # type: ignore[attr-defined]
    merged = json.loads((ROOT / "spec/models/merged.json").read_text(encoding="utf-8"))["names"]
    up_to = {q: n for q, n in merged.items() if parse_release(n["since"]) <= version}
    assert set(ns["SINCE"]) == set(up_to)  # type: ignore[arg-type]
    assert {q: release(v) for q, v in ns["REMOVED"].items()} == {  # type: ignore[attr-defined]
        q: n["removed"] for q, n in up_to.items() if n["removed"] and parse_release(n["removed"]) <= version
    }
    later = sorted(q for q in merged if q not in up_to)
    releases = json.loads((ROOT / "spec/models/merged.json").read_text(encoding="utf-8"))["releases"]
    after = [v for v in releases if parse_release(v) > version]
    if not after:
        assert version == CANONICAL and not later
        return
    name = later[0] if later else "DLTensor.nope"  # 1.3 declares nothing new: any unknown name then
    # the first release after the copy's header that names_in takes as (major, minor): a post-release of the copy's
    # own release (a header that changed without a new version, as the bump gate's drift makes) has no such pair
    nxt = next((v for v in after if parse_release(v)[:2] > version[:2]), None)
    asked = "" if nxt is None else f"""
try:
    m.spec.names_in(({nxt.split(".")[0]}, {nxt.split(".")[1]}))
except ValueError as exc:
    print(exc)
"""
    code = f"""
import host._d as m
try:
    m.spec.since({name!r})
except KeyError as exc:
    print(exc.args[0])
{asked}"""
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    key_error, *value_error = proc.stdout.splitlines()
    assert f"{name!r} is not declared by any DLPack release up to {text}," in key_error
    assert len(value_error) == (nxt is not None), proc.stdout
    if nxt is not None:
        assert value_error[0].startswith(f"DLPack {nxt} is after {text}, the newest release these tables describe")


def test_unknown_and_old_header_versions_are_errors(
    tmp_path: Path, fetched: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert vendor(tmp_path / "a", "h._dlpack", "--header-version", "0.5") == 1
    assert "--header-version 0.5: no such header in spec/headers.toml (known: " in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
    # a compiled 0.x copy is no error: its fast path shuts every versioned path (test_every_header_version)
    assert vendor(tmp_path / "b", "h._dlpack", "--header-version", "0.8") == 0
    assert tomllib.loads((tmp_path / "b" / RECORD).read_text())["build"] == "compiled"


def test_0_x_copies_know_only_their_header(tmp_path: Path, fetched: None) -> None:
    """0.4 spells kDLCUDA kDLGPU and has no kDLBool, no flags, no versioned struct: the copy's tables
    are that header's, joined with spec/ by value (cuda's policy reaches kDLGPU), nothing hand-written."""
    into = tmp_path / "_dlpack"
    assert vendor(into, "h._dlpack", "--header-version", "0.4", "--pure") == 0
    enums = (into / "_generated" / "enums.py").read_text()
    tables = (into / "_generated" / "tables.py").read_text()
    assert "kDLGPU = 2" in enums and "kDLCUDA =" not in enums and "kDLBool" not in enums
    assert "class Flags(enum.IntFlag):" in enums and "READ_ONLY" not in enums
    assert '2: "cuda",  # kDLGPU' in tables and '3: "cuda_host",  # kDLCPUPinned' in tables
    assert "oneapi" not in tables and "cuda_managed" not in tables  # 0.6 and 0.7 device types
    assert "VERSIONED_CAPSULES: bool = False" in tables
    ns: dict[str, object] = {}
    exec(compile(tables, "tables.py", "exec"), ns)
    assert 6 not in ns["KNOWN_DTYPE_CODES"] and 13 not in ns["KNOWN_DEVICE_TYPES"]  # type: ignore[operator]
    assert "'oneapi'" not in (into / "_generated" / "adapters.py").read_text()
    abi = (into / "_generated" / "_abi.py").read_text()
    assert "DLManagedTensor" in abi and "DLManagedTensorVersioned" not in abi
    assert vendor(tmp_path / "b", "h._dlpack", "--header-version", "0.8", "--pure") == 0
    assert "kDLBool = 6" in (tmp_path / "b" / "_generated" / "enums.py").read_text()


# -- re-vendoring ---------------------------------------------------------------------------------


def test_revendoring_replaces_exactly(tmp_path: Path, fetched: None) -> None:
    into = tmp_path / "_dlpack"
    assert vendor(into, "h._dlpack", "--header-version", "1.0") == 0
    assert (into / "_fastpath" / "module.c").exists()
    (into / "__pycache__").mkdir()
    (into / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    (into / "_fastpath.cpython-311-x86_64-linux-gnu.so").write_bytes(b"")  # an in-place build
    assert vendor(into, "h._dlpack", "--pure") == 0
    after = _files(into)
    # no C source nor build output; the fast path's stub stays (the copy's tensor.py is typed by it)
    assert not any(rel.startswith("_fastpath/") or rel.endswith((".so", ".pyc")) for rel in after)
    assert "_fastpath.pyi" in after
    assert "_build.py" not in after
    assert set(tomllib.loads(after[RECORD])["files"]) == set(after) - {RECORD}
    fresh = tmp_path / "fresh"
    assert vendor(fresh, "h._dlpack", "--pure") == 0
    # the same files as a fresh copy (whose banners name its own folder in the command)
    same = {k: v.replace(str(fresh), str(into)) for k, v in _files(fresh).items() if k != RECORD}
    assert same == {k: v for k, v in after.items() if k != RECORD}


def test_revendoring_refuses_host_edits(tmp_path: Path, fetched: None, capsys: pytest.CaptureFixture[str]) -> None:
    into = tmp_path / "_dlpack"
    assert vendor(into, "h._dlpack", "--pure") == 0
    original = (into / "consumer.py").read_text()
    (into / "consumer.py").write_text(original + "# a host fix\n")
    (into / "extra.py").write_text("")
    assert vendor(into, "h._dlpack", "--pure") == 1
    err = capsys.readouterr().err
    assert "edited since they were vendored: consumer.py" in err
    assert "not written by the vendoring: extra.py" in err
    assert (into / "consumer.py").read_text().endswith("# a host fix\n")  # nothing was written
    assert vendor(into, "h._dlpack", "--pure", "--force") == 0
    assert (into / "consumer.py").read_text() == original
    assert not (into / "extra.py").exists()


def test_never_writes_into_a_folder_that_is_not_a_copy(
    tmp_path: Path, fetched: None, capsys: pytest.CaptureFixture[str]
) -> None:
    into = tmp_path / "src"
    into.mkdir()
    (into / "mine.py").write_text("x = 1\n")
    assert vendor(into, "h._dlpack", "--pure", "--force") == 1
    assert "holds files but no VENDORED.toml (mine.py)" in capsys.readouterr().err
    assert [p.name for p in into.iterdir()] == ["mine.py"]
