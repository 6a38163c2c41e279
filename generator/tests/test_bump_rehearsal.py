"""The header bump, end to end, with upstream's real additions after DLPack v1.3.

``python -m dlbind_generator rehearsal-header`` adds what DLPack's main branch added after v1.3 —
``kDLTPU = 19``, ``kDLTPUHost = 20``, ``kDLAscend = 21`` and ``kDLBcomplex = 18U`` — to the released
header of the canonical version, in two forms: ``drift`` keeps the version macros (what upstream main
is: the bump records it as a post-release, ``1.3.post1``) and ``minor`` raises DLPACK_MINOR_VERSION
(what a release of them would be, ``1.4``). Each is bumped in a temporary copy of the repository: the
new names appear in every target with the policy spec/devices.toml and spec/dtypes.toml decided before
any header declared them (no hand edit, no decision left), ``generate --check`` is clean, and the core
built from that copy into a fresh venv passes its own tests in both builds.
"""

from __future__ import annotations

import datetime
import filecmp
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest
import tomllib
from test_errors import _generate, _snapshot, _tree

from dlbind_generator.parse import parse_header
from dlbind_generator.rehearsal import UPSTREAM_ADDITIONS, RehearsalHeader, derive
from dlbind_generator.sources import Release, base_of, format_version, load_sources

KINDS = ("drift", "minor")
ADDED = [f"{enum}.{name}" for enum, new in UPSTREAM_ADDITIONS.items() for name, _ in new]


@pytest.fixture(scope="module")
def released(root: Path) -> tuple[int, int]:
    """The released header the rehearsal starts from: the canonical one's release (1.3 for 1.3.post1)."""
    return base_of(load_sources(root / "spec/headers.toml").canonical)


@pytest.fixture(scope="module", params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def rehearsal(headers: dict, released: tuple[int, int], kind: str) -> RehearsalHeader:
    header = headers[released]
    return derive(header.read_text(), parse_header(header), kind)


def _new_release(root: Path, made: RehearsalHeader) -> Release:
    """What the bump records ``made`` as: a new version, or the next post-release of a listed one."""
    sources = load_sources(root / "spec/headers.toml")
    same = [h for h in sources.headers if h.version == made.version]
    return (*made.version, max(h.post for h in same) + 1) if same else made.version


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


def _cli(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlbind_generator", args[0], "--root", str(tree), *args[1:]],
        capture_output=True,
        text=True,
    )


def _skip_if_taken(root: Path, made: RehearsalHeader) -> None:
    """A clone where this very header is bumped already (the acceptance run of a drift bump) has nothing
    left to rehearse for it."""
    digest = hashlib.sha256(made.text.encode()).hexdigest()
    listed = [h for h in load_sources(root / "spec/headers.toml").headers if h.sha256 == digest]
    if listed:
        pytest.skip(f"this repository lists the {made.kind} rehearsal header already (DLPack "
                    f"{format_version(listed[0].release)}): its bump is the step already taken")  # fmt: skip


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory, root: Path, headers: dict, rehearsal: RehearsalHeader) -> Path:
    _skip_if_taken(root, rehearsal)
    tmp = tmp_path_factory.mktemp(f"bump-{rehearsal.kind}")
    tree = _repo_copy(tmp, root, headers)
    header = tmp / f"dlpack-{rehearsal.kind}.h"
    proc = _cli(tree, "rehearsal-header", str(header), "--kind", rehearsal.kind)
    assert proc.returncode == 0, proc.stderr
    assert header.read_text() == rehearsal.text  # the CLI writes what derive makes
    proc = _cli(tree, "bump", str(header))
    assert proc.returncode == 0, proc.stderr
    (tmp / "bump.out").write_text(proc.stdout)
    (tmp / "bump.err").write_text(proc.stderr)
    return tree


def test_rehearsal_header_adds_upstreams_values(headers: dict, released: tuple[int, int], kind: str,
                                                 rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """Exactly the four values upstream added; nothing else changes but, for `minor`, the minor version."""
    old = parse_header(headers[released])
    path = tmp_path / "dlpack.h"
    path.write_text(rehearsal.text)
    new = parse_header(path)
    assert rehearsal.version == new.version == (released if kind == "drift" else (released[0], released[1] + 1))
    for enum, added in UPSTREAM_ADDITIONS.items():
        assert new.enum(enum).members == (*old.enum(enum).members, *added)
    assert dict(new.enum("DLDeviceType").members)["kDLTPUHost"] == 20
    assert "  kDLBcomplex = 18U," in rehearsal.text  # written as upstream writes dtype codes
    assert new.structs == old.structs and new.typedefs == old.typedefs and new.layout_hash() == old.layout_hash()
    macros = dict(new.macros)
    assert macros.pop("DLPACK_MINOR_VERSION") == rehearsal.version[1]
    assert macros == {k: v for k, v in old.macros if k != "DLPACK_MINOR_VERSION"}


def test_headers_toml_records_the_local_file(bumped: Path, root: Path, rehearsal: RehearsalHeader) -> None:
    text = (bumped / "spec/headers.toml").read_text()
    data = tomllib.loads(text)
    new = data["header"][-1]
    release = format_version(_new_release(root, rehearsal))
    assert data["canonical"] == release
    assert new["version"] == release and Path(new["local"]).is_absolute()
    assert new["sha256"] == hashlib.sha256(Path(new["local"]).read_bytes()).hexdigest()
    # appended in the file's own layout; comments, order and the other entries (the released header's
    # among them) kept as they were
    before = (root / "spec/headers.toml").read_text()
    old_line = f'canonical = "{tomllib.loads(before)["canonical"]}"\n'
    assert before.count(old_line) == 1
    expected = before.replace(old_line, f'canonical = "{release}"\n').rstrip("\n")
    expected += f'\n\n[[header]]\nversion = "{release}"\nlocal = "{new["local"]}"\nsha256 = "{new["sha256"]}"\n'
    if rehearsal.kind == "drift":  # a post-release carries the date it was recorded (a TOML date)
        assert isinstance(new["date"], datetime.date) and new["date"] <= datetime.date.today()
        expected += f"date = {new['date'].isoformat()}\n"
    else:
        assert "date" not in new
    assert text == expected


def _first_release_with(root: Path, bumped: Path, headers: dict, qualname: str, new: Release) -> Release:
    """The release `since` must name: the first header listed before the bump that declares the name, else
    the new one (a clone that recorded the drift already keeps 1.3.post1 for a 1.4 bump)."""
    enum, member = qualname.split(".")
    for h in load_sources(root / "spec/headers.toml").headers:
        if member in dict(parse_header(headers[h.release]).enum(enum).members):
            return h.release
    return new


def _py_release(v: Release) -> str:
    return f"({v[0]}, PostMinor({v[1]}, {v[2]}))" if len(v) > 2 else f"({v[0]}, {v[1]})"


def test_new_names_in_every_target(bumped: Path, root: Path, headers: dict, rehearsal: RehearsalHeader) -> None:
    gen = bumped / "packages/core/src/dlbind/_generated"
    enums, build, c_types = [(gen / n).read_text() for n in ("enums.py", "build_api.py", "dlpack_types.h")]
    new = _new_release(root, rehearsal)
    v = format_version(new)
    added = [(n, value) for pairs in UPSTREAM_ADDITIONS.values() for n, value in pairs]
    for name, value in added:  # enums.py is typed in place (no separate stub)
        assert f"    {name} = {value}\n" in enums
    assert f"DLPACK_VERSION: tuple[int, int] = {rehearsal.version}" in enums  # the macros: (1, 3) for 1.3.post1
    assert f"(since DLPack {v})" in enums or _first_release_with(root, bumped, headers, ADDED[0], new) != new
    for text in (build, c_types):  # the cffi cdef and the C header of the same declarations
        for name, value in added:
            assert f"  {name} = {value}," in text
    spec_tables = (gen / "spec_tables.py").read_text()
    for qualname in ADDED:
        since = _first_release_with(root, bumped, headers, qualname, new)
        assert f'    "{qualname}": {_py_release(since)},\n' in spec_tables
    assert f"CANONICAL: tuple[int, int] = {_py_release(new)}\n" in spec_tables
    # the policy decided while the names waited for the header applies now: no derived default, none pending
    tables, tables_h = (gen / "tables.py").read_text(), (gen / "tables.h").read_text()
    for value, name, member in ((19, "tpu", "kDLTPU"), (20, "tpu_host", "kDLTPUHost"), (21, "ascend", "kDLAscend")):
        assert f'    {value}: "{name}",  # {member}\n' in tables
        assert f'  [{value}] = "{name}", /* {member} */\n' in tables_h
        assert f"  [{value}] = 0, /* {member}: none */\n" in tables_h  # stream rule "none" (index 0)
    assert "  [20] = 1, /* kDLTPUHost */\n" in tables_h and "  [19] = 1, /* kDLTPU */" not in tables_h
    host = re.search(r"^HOST_DEVICES: frozenset\[int\] = frozenset\(\{(.*)\}\)$", tables, re.MULTILINE)
    assert host is not None and "20" in host.group(1).split(", ") and "19" not in host.group(1).split(", ")
    assert '    18: "bcomplex{bits}",  # kDLBcomplex\n' in tables and '    (18, 32): "bcomplex32",\n' in tables
    for table in ("DTYPE_FORMATS", "FORMAT_DTYPES"):  # no buffer format
        assert "(18, 32)" not in tables.split(f"\n{table}: ", 1)[1].split("\n}\n", 1)[0]
    assert "PENDING_DEVICE_TYPES: dict[int, PendingName] = {}\n" in tables
    assert "PENDING_DTYPE_CODES: dict[int, PendingName] = {}\n" in tables
    assert "#define DLBIND_PENDING_DEVICE_COUNT 0\n" in tables_h
    model = json.loads((bumped / f"spec/models/dlpack-{v}.json").read_text())
    assert model["version"] == list(rehearsal.version)
    assert model.get("release") == (v if rehearsal.kind == "drift" else None)
    assert model["enums"]["DLDeviceType"]["kDLTPUHost"] == 20
    ledger = tomllib.loads((bumped / "spec/models/ledger.toml").read_text())
    base = format_version(
        rehearsal.version if rehearsal.kind == "drift" else (rehearsal.version[0], rehearsal.version[1] - 1)
    )
    assert v in ledger and ledger[v] != ledger[base]  # its own ABI model (new enum values)...
    assert ledger["layout"][v] == ledger["layout"][base]  # ...and no layout changed
    report = (bumped / "generator/REPORT.md").read_text()
    introduced = sorted(q for q in ADDED if _first_release_with(root, bumped, headers, q, new) == new)
    assert f"| {v} | {', '.join(introduced) or '–'} |" in report
    assert "## Waiting for the header\n\nNothing:" in report


def test_bump_prints_the_summary(bumped: Path, root: Path, rehearsal: RehearsalHeader) -> None:
    out, err = (bumped.parent / "bump.out").read_text(), (bumped.parent / "bump.err").read_text()
    report = (bumped / "generator/REPORT.md").read_text()
    summary = re.search(r"^## Summary\n\n(.*?)\n\n## ", report, re.MULTILINE | re.DOTALL)
    assert summary is not None and summary.group(1) in out
    v = format_version(_new_release(root, rehearsal))
    assert f"- canonical: DLPack {v} (local file)" in out
    assert "- needs a decision: nothing" in out  # the policy was written before the header declared the names
    assert "waiting for the header" not in out
    if rehearsal.kind == "drift":
        m = format_version(rehearsal.version)
        assert f"- post-release: {v} is a `dlpack.h` that changed after release {m} without a new version" in out
        assert f"layout of {m} unchanged" in out
        assert f"recorded DLPack {v} in spec/headers.toml: a post-release of {m}" in err
        assert f"back to the released header: python -m dlbind_generator canonical {m}" in err
    else:
        assert "post-release" not in out


def test_check_is_clean_after_bump(bumped: Path) -> None:
    proc = _generate(bumped, "--check")
    assert proc.returncode == 0, proc.stdout


def test_same_header_again_records_nothing(bumped: Path, root: Path, rehearsal: RehearsalHeader) -> None:
    header = tomllib.loads((bumped / "spec/headers.toml").read_text())["header"][-1]["local"]
    before = _snapshot(bumped)
    proc = _cli(bumped, "bump", header)
    assert proc.returncode == 0, proc.stderr
    assert f"DLPack {format_version(_new_release(root, rehearsal))} is listed already with this sha256" in proc.stderr
    assert _snapshot(bumped) == before


def _vendor(tree: Path, into: Path, *args: str) -> dict[str, bytes]:
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "vendor", "--into", str(into), "--package", "h._dlpack", *args],
        capture_output=True, text=True, cwd=tree,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {p.relative_to(into).as_posix(): p.read_bytes() for p in sorted(into.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("kind", ["drift"], indirect=True)  # a drift keeps the version of a listed release
def test_vendored_released_header_is_unchanged(bumped: Path, root: Path, released: tuple[int, int],
                                               rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """`vendor --header-version 1.3` gives the released header's copy, byte for byte what it gave before."""
    release = format_version(released)
    after = _vendor(bumped, tmp_path / "copy", "--header-version", release, "--pure")
    shutil.rmtree(tmp_path / "copy")
    before = _vendor(root, tmp_path / "copy", "--header-version", release, "--pure")
    assert after == before
    record = tomllib.loads(after["VENDORED.toml"].decode())
    assert record["header_version"] == release
    assert record["header_sha256"] == load_sources(root / "spec/headers.toml").by_release(released).sha256
    shutil.rmtree(tmp_path / "copy")
    post = _vendor(bumped, tmp_path / "copy", "--pure")  # the default: the canonical post-release
    assert tomllib.loads(post["VENDORED.toml"].decode())["header_version"] == format_version(
        _new_release(root, rehearsal)
    )
    assert b"    kDLTPUHost = 20\n" in post["_generated/enums.py"]


@pytest.mark.parametrize("kind", ["drift"], indirect=True)  # the way back is from a post-release
def test_the_way_back_and_post_release_numbers(bumped: Path, root: Path, released: tuple[int, int],
                                               rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """`canonical M.m` returns to the released header: headers.toml and every generated file as before the
    bump; the ABI ledger keeps the post-release's line (append-only), so the same header bumped again is
    post1 again and another header post2. A drifted header that changes a layout is refused."""
    tree = tmp_path / "repo"
    shutil.copytree(bumped, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    new = format_version(_new_release(root, rehearsal))
    proc = _cli(tree, "canonical", format_version(released))
    assert proc.returncode == 0, proc.stderr
    assert f"removed DLPack {new} from spec/headers.toml" in proc.stderr
    assert (tree / "spec/headers.toml").read_text() == (root / "spec/headers.toml").read_text()
    for folder in ("packages/core/src/dlbind/_generated",):
        cmp = filecmp.dircmp(tree / folder, root / folder, ignore=["__pycache__"])
        assert not (cmp.diff_files or cmp.left_only or cmp.right_only), (cmp.diff_files, cmp.left_only)
    for model in (root / "spec/models").glob("dlpack-*.json"):
        assert (tree / "spec/models" / model.name).read_bytes() == model.read_bytes()
    assert not (tree / f"spec/models/dlpack-{new}.json").exists()
    assert f'"{new}" = "' in (tree / "spec/models/ledger.toml").read_text()  # append-only

    header = tomllib.loads((bumped / "spec/headers.toml").read_text())["header"][-1]["local"]
    proc = _cli(tree, "bump", header)
    assert proc.returncode == 0 and f"recorded DLPack {new} in spec/headers.toml" in proc.stderr, proc.stderr
    other = tmp_path / "other.h"
    other.write_text(rehearsal.text + "\n/* one byte more is another header */\n")
    proc = _cli(tree, "bump", str(other))
    base = format_version(rehearsal.version)
    nxt = f"{base}.post{int(new.rsplit('post', 1)[1]) + 1}"
    assert proc.returncode == 0 and f"recorded DLPack {nxt} in spec/headers.toml" in proc.stderr, proc.stderr
    assert tomllib.loads((tree / "spec/headers.toml").read_text())["canonical"] == nxt

    layout = tmp_path / "layout.h"
    layout.write_text(rehearsal.text.replace("  uint64_t byte_offset;", "  uint64_t byte_offset;\n  int64_t extra;", 1))
    assert layout.read_text() != rehearsal.text
    before = _snapshot(tree)
    proc = _cli(tree, "bump", str(layout))
    assert proc.returncode == 1
    assert "changes the layout of" in proc.stderr and "DLTensor" in proc.stderr and "needs a new version" in proc.stderr
    assert _snapshot(tree) == before  # headers.toml restored, nothing written


def test_bad_source_is_refused(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    proc = _cli(tree, "bump", str(tmp_path / "absent.h"))
    assert proc.returncode == 1
    assert "absent.h': no such file (and not a URL, nor of the form PACKAGE==VERSION:PATH)" in proc.stderr


def test_url_source_is_recorded_by_url(tmp_path: Path, root: Path, headers: dict, released: tuple[int, int]) -> None:
    """A header named by URL (the raw dlpack.h of an upstream commit) is recorded with `url =`."""
    tree = _tree(tmp_path, root, headers)
    header = headers[released]
    made = derive(header.read_text(), parse_header(header), "drift")
    if any(h.sha256 == hashlib.sha256(made.text.encode()).hexdigest()
           for h in load_sources(root / "spec/headers.toml").headers):  # fmt: skip
        pytest.skip("this repository lists the drift rehearsal header already")
    served = tmp_path / "dmlc-dlpack-main.h"
    served.write_text(made.text)
    proc = _cli(tree, "bump", served.as_uri())
    assert proc.returncode == 0, proc.stderr
    entry = tomllib.loads((tree / "spec/headers.toml").read_text())["header"][-1]
    assert entry["url"] == served.as_uri() and "local" not in entry and "package" not in entry
    assert (tree / f".cache/headers/dlpack-{entry['version']}.h").read_text() == made.text
    served.unlink()  # read from the cache from now on (the sha256 decides)
    assert _generate(tree, "--check").returncode == 0


# -- run time: the core built from the bumped copy, its own tests in both builds --------------------------

PROBE = """
import sys
import dlbind
from dlbind._ffi import BUILD
from dlbind._generated.spec_tables import PostMinor

assert BUILD == sys.argv[1], BUILD
if BUILD == "compiled":
    import dlbind._fastpath  # the C extension, built against the regenerated dlpack_types.h and tables.h
kind = sys.argv[2]
assert dlbind.DLPACK_VERSION == ((1, 3) if kind == "drift" else (1, 4)), dlbind.DLPACK_VERSION
assert dlbind.DeviceType.kDLTPU == 19 and dlbind.DeviceType.kDLTPUHost == 20 and dlbind.DeviceType.kDLAscend == 21
assert dlbind.DataTypeCode.kDLBcomplex == 18
since = dlbind.spec.since("DLDeviceType.kDLTPU")
assert (1, 3) < since <= (1, 4) and since == dlbind.spec.since("DLDataTypeCode.kDLBcomplex"), since
if kind == "drift":
    assert isinstance(since[1], PostMinor) and f"{since[0]}.{since[1]}" == "1.3.post1", since
assert dlbind.spec.since("DLDeviceType.kDLCUDA") == (0, 5)
assert str(dlbind.DType(18, 32, 1)) == "bcomplex32", str(dlbind.DType(18, 32, 1))
print("ok")
"""


# The core's tests that do not depend on the header are left out here (the main run has them, in both
# builds): lifetimes and deleters under stress, threads at exit, leak counts, the pytest plugin's
# subprocess runs and the build's own checks take most of the suite's time and read no table a bump changes.
CORE_TEST_ARGS = tuple(
    f"--ignore=packages/core/tests/{name}"
    for name in (
        "test_reliability.py",
        "test_threads_exit.py",
        "test_leaks.py",
        "test_pytest_plugin.py",
        "test_build.py",
    )
)


def _runtime_venv(tree: Path, tmp: Path) -> Path:
    """A fresh venv with the core built from ``tree`` (compiled when the compiler works); the test
    dependencies (pytest, numpy, torch, ...) come from this interpreter's site-packages, after the venv's own."""
    env_dir = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env_dir)], check=True, capture_output=True)
    py = env_dir / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (Path(site) / "_dlbind_rehearsal_deps.pth").write_text(
        "".join(f"import site; site.addsitedir({p!r})\n" for p in sorted(ours))
    )
    proc = subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", str(tree / "packages/core")], capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return py


@pytest.fixture(scope="module")
def venv(bumped: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _runtime_venv(bumped, tmp_path_factory.mktemp("venv"))


def _env(build: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DLBIND_PURE")}
    env["DLBIND_PURE"] = "1" if build == "pure" else "0"
    return env


@pytest.mark.parametrize("build", ["pure", "compiled"])
def test_core_after_the_bump(venv: Path, bumped: Path, rehearsal: RehearsalHeader, build: str, tmp_path: Path) -> None:
    """The core built from the bumped copy knows the new names, and passes its own tests there."""
    probe = subprocess.run([str(venv), "-c", textwrap.dedent(PROBE), build, rehearsal.kind],
                           capture_output=True, text=True, env=_env(build), cwd=tmp_path)  # fmt: skip
    assert probe.stdout.strip() == "ok", probe.stderr
    # the parity test runs both builds itself: once is enough
    parity = ("--ignore=packages/core/tests/test_parity.py",) if build == "pure" else ()
    proc = subprocess.run(
        [str(venv), "-m", "pytest", "packages/core/tests", "-q", "-x", "-p", "no:cacheprovider", *CORE_TEST_ARGS,
         *parity],
        capture_output=True, text=True, env=_env(build), cwd=bumped,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]


@pytest.mark.network
def test_registry_source_of_a_listed_header(tmp_path: Path, root: Path, headers: dict) -> None:
    """PACKAGE==VERSION:PATH goes through the registry: the newest listed archive is found, the header's
    version read from its macros, its sha256 matched to the listed one, and nothing is recorded."""
    entry = max((h for h in load_sources(root / "spec/headers.toml").headers if h.package), key=lambda h: h.release)
    tree = _tree(tmp_path, root, headers)
    before = _snapshot(tree)
    proc = _cli(tree, "bump", f"{entry.package}=={entry.package_version}:{entry.path}")
    assert proc.returncode == 0, proc.stderr
    assert f"DLPack {format_version(entry.release)} is listed already with this sha256" in proc.stderr
    assert _snapshot(tree) == before


def test_new_flag_bits_need_a_decision() -> None:
    """Upstream's additions after v1.3 add no flag bit; a release that does gets a line in the summary."""
    from dlbind_generator.pipeline import _flag_decisions

    row = {"introduced": ["DLDeviceType.kDLTPU", "DLPACK_FLAG_BITMASK_NO_SUCH_BIT", "DLTensor"]}
    assert _flag_decisions(row) == [
        "DLPACK_FLAG_BITMASK_NO_SUCH_BIT: a new flag bit (does the runtime set or honour it?)"
    ]
