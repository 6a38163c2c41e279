"""The header bump, end to end, rehearsed from whatever header is canonical.

``python -m dlbind_generator rehearsal-header`` adds to the canonical header the names it does not declare
yet: upstream's additions after v1.3 (``kDLTPU = 19``, ``kDLTPUHost = 20``, ``kDLAscend = 21``,
``kDLBcomplex = 18U``) where it lacks them, else (and always for ``minor``) one device type and one dtype
code of the rehearsal's own, whose policy rows ``--policy`` writes. ``drift`` keeps the version macros (a
bump records the next post-release), ``minor`` raises DLPACK_MINOR_VERSION. Each is bumped in a temporary
copy of the repository: the new names appear in every target with the policy decided before the header
declared them (no hand edit, no decision left), ``generate --check`` is clean, the way back returns to what
was canonical, and the core built from that copy knows the new names in both builds. Nothing here assumes
which header is canonical: the same tests run in a tree bumped already (``nox -s bump_gate`` runs them there,
with the whole suite).
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
from dataclasses import replace
from pathlib import Path

import pytest
import tomllib
from test_errors import _generate, _snapshot, _tree

from dlbind_generator.parse import parse_header
from dlbind_generator.rehearsal import UPSTREAM_ADDITIONS, RehearsalHeader, derive, policy_rows
from dlbind_generator.sources import Release, format_version, load_sources

KINDS = ("drift", "minor")


@pytest.fixture(scope="module")
def before(root: Path) -> Release:
    """The header the rehearsal starts from: whatever is canonical (a release or a post-release)."""
    return load_sources(root / "spec/headers.toml").canonical


def _model_of(headers: dict, release: Release):  # type: ignore[no-untyped-def]
    model = parse_header(headers[release])
    return replace(model, post=release[2]) if len(release) > 2 else model


@pytest.fixture(scope="module", params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def rehearsal(headers: dict, before: Release, kind: str) -> RehearsalHeader:
    return derive(headers[before].read_text(), _model_of(headers, before), kind)


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


@pytest.fixture(scope="module")
def bumped(tmp_path_factory: pytest.TempPathFactory, root: Path, headers: dict, rehearsal: RehearsalHeader) -> Path:
    tmp = tmp_path_factory.mktemp(f"bump-{rehearsal.kind}")
    tree = _repo_copy(tmp, root, headers)
    header = tmp / f"dlpack-{rehearsal.kind}.h"
    proc = _cli(tree, "rehearsal-header", str(header), "--kind", rehearsal.kind, "--policy")
    assert proc.returncode == 0, proc.stderr
    for table in ("devices", "dtypes"):  # the policy rows of the rehearsal's own names, and nothing else
        old, new = (root / f"spec/{table}.toml").read_text(), (tree / f"spec/{table}.toml").read_text()
        assert new.startswith(old.rstrip("\n")) and all(
            f".{q.split('.')[1]}]" in new for q in rehearsal.own if q.startswith("DLDeviceType") == (table == "devices")
        )
    assert header.read_text() == rehearsal.text  # the CLI writes what derive makes
    proc = _cli(tree, "bump", str(header))
    assert proc.returncode == 0, proc.stderr
    (tmp / "bump.out").write_text(proc.stdout)
    (tmp / "bump.err").write_text(proc.stderr)
    return tree


def test_rehearsal_header_adds_names_not_there_yet(headers: dict, before: Release, kind: str,
                                                    rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """Upstream's additions the canonical header lacks, else (and always for `minor`) names of the rehearsal's
    own at the next free values; nothing else changes but, for `minor`, the minor version."""
    old = _model_of(headers, before)
    path = tmp_path / "dlpack.h"
    path.write_text(rehearsal.text)
    new = parse_header(path)
    assert rehearsal.base == before
    minor = (old.version[0], old.version[1] + 1)
    assert rehearsal.version == new.version == (old.version if kind == "drift" else minor)
    missing = {enum: tuple((n, v) for n, v in adds if n not in dict(old.enum(enum).members))
               for enum, adds in UPSTREAM_ADDITIONS.items()}  # fmt: skip
    for enum, added in rehearsal.added.items():
        assert new.enum(enum).members == (*old.enum(enum).members, *added)
        assert added[: len(missing[enum])] == missing[enum]  # upstream's first, with upstream's values
        values = [v for _, v in new.enum(enum).members]
        assert len(values) == len(set(values))  # every added value was free
    own = [q for q in rehearsal.qualnames if q.split(".")[1] not in {n for a in missing.values() for n, _ in a}]
    assert list(rehearsal.own) == own
    assert bool(own) == (kind == "minor" or not any(missing.values()))
    assert rehearsal.devices and rehearsal.dtypes  # something to rehearse in each enum
    if "kDLBcomplex" in dict(rehearsal.dtypes):
        assert "  kDLBcomplex = 18U," in rehearsal.text  # written as upstream writes dtype codes
    assert new.structs == old.structs and new.typedefs == old.typedefs and new.layout_hash() == old.layout_hash()
    macros = dict(new.macros)
    assert macros.pop("DLPACK_MINOR_VERSION") == rehearsal.version[1]
    assert macros == {k: v for k, v in old.macros if k != "DLPACK_MINOR_VERSION"}


def test_a_rehearsal_of_a_rehearsal_adds_new_names(headers: dict, before: Release, kind: str,
                                                   rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """Derived from its own output (a tree bumped already), a rehearsal still adds names: the bump it
    rehearses can happen again and again."""
    path = tmp_path / "dlpack.h"
    path.write_text(rehearsal.text)
    again = derive(rehearsal.text, parse_header(path), kind)
    assert again.own and not set(again.qualnames) & set(rehearsal.qualnames)
    assert again.version == (rehearsal.version if kind == "drift" else (rehearsal.version[0], rehearsal.version[1] + 1))


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


def _policy(tree: Path) -> tuple[dict, dict, list[str]]:
    """The device rows, the dtype code rows and the stream rules' order of ``tree``'s policy tables."""
    devices = tomllib.loads((tree / "spec/devices.toml").read_text())
    codes = tomllib.loads((tree / "spec/dtypes.toml").read_text())["codes"]
    return devices["devices"], codes, list(devices["stream_rules"])


def test_new_names_in_every_target(bumped: Path, root: Path, headers: dict, rehearsal: RehearsalHeader) -> None:
    gen = bumped / "packages/core/src/dlbind/_generated"
    new = _new_release(root, rehearsal)
    since = {q: _first_release_with(root, bumped, headers, q, new) for q in rehearsal.qualnames}
    _check_declarations(gen, rehearsal, new, since)
    devices, codes, rules = _policy(bumped)
    waiting = [f"{e}.{m}" for e, t in (("DLDeviceType", devices), ("DLDataTypeCode", codes))
               for m, r in t.items() if "value" in r and f"{e}.{m}" not in rehearsal.qualnames]  # fmt: skip
    _check_policy_tables(gen, rehearsal, (devices, codes, rules), waiting)
    _check_model_and_ledger(bumped, rehearsal, new)
    report = (bumped / "generator/REPORT.md").read_text()
    v = format_version(new)
    introduced = sorted(q for q in rehearsal.qualnames if since[q] == new)
    assert f"| {v} | {', '.join(introduced) or '–'} |" in report
    if not waiting:
        assert "## Waiting for the header\n\nNothing:" in report


def _check_declarations(gen: Path, rehearsal: RehearsalHeader, new: Release, since: dict[str, Release]) -> None:
    """The new names in enums.py, the cffi cdef and the C header, with their values; the version macros; each name's
    first release in spec_tables.py (``since``), and the new canonical release."""
    enums, build, c_types = [(gen / n).read_text() for n in ("enums.py", "build_api.py", "dlpack_types.h")]
    v = format_version(new)
    added = [(n, value) for pairs in rehearsal.added.values() for n, value in pairs]
    for name, value in added:  # enums.py is typed in place (no separate stub)
        assert f"    {name} = {value}\n" in enums
    assert f"DLPACK_VERSION: tuple[int, int] = {rehearsal.version}" in enums  # the macros: (1, 3) for 1.3.post1
    assert f"(since DLPack {v})" in enums or since[rehearsal.qualnames[0]] != new
    for text in (build, c_types):  # the cffi cdef and the C header of the same declarations
        for name, value in added:
            assert f"  {name} = {value}," in text
    spec_tables = (gen / "spec_tables.py").read_text()
    for qualname in rehearsal.qualnames:
        assert f'    "{qualname}": {_py_release(since[qualname])},\n' in spec_tables
    assert f"CANONICAL: tuple[int, int] = {_py_release(new)}\n" in spec_tables


def _check_policy_tables(
    gen: Path, rehearsal: RehearsalHeader, policy: tuple[dict, dict, list[str]], waiting: list[str]
) -> None:
    """The policy decided while the names waited for the header applies now, in tables.py and tables.h: each new
    device type's name, stream rule and host flag, each new dtype code's names (and no buffer format); no derived
    default, none pending (and nothing pending at all where nothing else ``waiting``)."""
    tables, tables_h = (gen / "tables.py").read_text(), (gen / "tables.h").read_text()
    devices, codes, rules = policy
    host = re.search(r"^HOST_DEVICES: frozenset\[int\] = frozenset\(\{(.*)\}\)$", tables, re.MULTILINE)
    assert host is not None
    for member, value in rehearsal.devices:
        row = devices[member]
        assert row["value"] == value
        assert f'    {value}: "{row["name"]}",  # {member}\n' in tables
        assert f'  [{value}] = "{row["name"]}", /* {member} */\n' in tables_h
        stream = rules.index(row["stream"])
        assert f"  [{value}] = {stream}, /* {member}: {row['stream']} */\n" in tables_h
        assert (f"  [{value}] = 1, /* {member} */\n" in tables_h) == row["host"]
        assert (str(value) in host.group(1).split(", ")) == row["host"]
    formats = {t: tables.split(f"\n{t}: ", 1)[1].split("\n}\n", 1)[0] for t in ("DTYPE_FORMATS", "FORMAT_DTYPES")}
    for member, value in rehearsal.dtypes:
        row = codes[member]
        assert row["value"] == value
        assert f'    {value}: "{row["name"]}",  # {member}\n' in tables
        for bits in row["bits"]:
            assert f'    ({value}, {bits}): "{row["name"].format(bits=bits)}",\n' in tables
            for table in formats.values():  # no buffer format: the rows name none
                assert f"({value}, {bits})" not in table
    pending_h = re.search(r"#define DLBIND_PENDING_DEVICE_COUNT (\d+)\n", tables_h)
    assert pending_h is not None
    for _, value in rehearsal.devices:
        assert f"{value}: PendingName(" not in tables.split("PENDING_DEVICE_TYPES", 1)[1].split("\n}", 1)[0]
    if not waiting:  # nothing else waits for a header
        assert "PENDING_DEVICE_TYPES: dict[int, PendingName] = {}\n" in tables
        assert "PENDING_DTYPE_CODES: dict[int, PendingName] = {}\n" in tables
        assert pending_h.group(1) == "0"


def _check_model_and_ledger(bumped: Path, rehearsal: RehearsalHeader, new: Release) -> None:
    """The new release's ABI model (its version, its release for a drift, the new device types) and its own ledger
    entry, with the layout unchanged."""
    v = format_version(new)
    model = json.loads((bumped / f"spec/models/dlpack-{v}.json").read_text())
    assert model["version"] == list(rehearsal.version)
    assert model.get("release") == (v if rehearsal.kind == "drift" else None)
    for member, value in rehearsal.devices:
        assert model["enums"]["DLDeviceType"][member] == value
    ledger = tomllib.loads((bumped / "spec/models/ledger.toml").read_text())
    base = format_version(rehearsal.base)
    assert v in ledger and ledger[v] != ledger[base]  # its own ABI model (new enum values)...
    assert ledger["layout"][v] == ledger["layout"][base]  # ...and no layout changed


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
    else:
        assert "post-release" not in out
    back = format_version(rehearsal.base)  # the way back names what was canonical before the bump
    assert f"back to the header canonical before: python -m dlbind_generator canonical {back}" in err


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
def test_vendored_canonical_header_is_unchanged(bumped: Path, root: Path, headers: dict, before: Release,
                                                rehearsal: RehearsalHeader, tmp_path: Path) -> None:  # fmt: skip
    """`vendor --header-version <the canonical before>` gives that header's copy, byte for byte what it gave
    before the bump with the same policy tables (the rows written for the rehearsal's own names, if any, are
    in the copy's pending tables either way)."""
    release = format_version(before)
    after = _vendor(bumped, tmp_path / "copy", "--header-version", release, "--pure")
    shutil.rmtree(tmp_path / "copy")
    unbumped = _tree(tmp_path / "unbumped", root, headers)
    for table, rows in policy_rows(rehearsal).items():
        path = unbumped / f"spec/{table}.toml"
        path.write_text(path.read_text() + rows)
    was = _vendor(unbumped, tmp_path / "copy", "--header-version", release, "--pure")
    assert after == was
    record = tomllib.loads(after["VENDORED.toml"].decode())
    assert record["header_version"] == release
    assert record["header_sha256"] == load_sources(root / "spec/headers.toml").by_release(before).sha256
    shutil.rmtree(tmp_path / "copy")
    post = _vendor(bumped, tmp_path / "copy", "--pure")  # the default: the canonical post-release
    assert tomllib.loads(post["VENDORED.toml"].decode())["header_version"] == format_version(
        _new_release(root, rehearsal)
    )
    name, value = rehearsal.devices[0]
    assert f"    {name} = {value}\n".encode() in post["_generated/enums.py"]


@pytest.mark.parametrize("kind", KINDS, indirect=True)
def test_the_way_back(bumped: Path, root: Path, before: Release, rehearsal: RehearsalHeader, tmp_path: Path) -> None:
    """`canonical <the canonical before>` returns to it, with the policy rows a maintainer wrote for the
    rehearsal's own names taken out again: headers.toml and every generated file as before the bump, the removed
    model said to be removed; the ABI ledger keeps the bumped header's line (append-only), which the report counts."""
    tree = tmp_path / "repo"
    shutil.copytree(bumped, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    new = format_version(_new_release(root, rehearsal))
    for table in ("devices", "dtypes"):  # the maintainer's own rows go with the header (git checkout)
        shutil.copy(root / f"spec/{table}.toml", tree / f"spec/{table}.toml")
    proc = _cli(tree, "canonical", format_version(before))
    assert proc.returncode == 0, proc.stderr
    assert f"removed DLPack {new} from spec/headers.toml" in proc.stderr
    err = proc.stderr.splitlines()
    assert f"removed spec/models/dlpack-{new}.json" in err and f"wrote spec/models/dlpack-{new}.json" not in err, err
    assert any(line.endswith(" generated files changed, 1 removed (no longer generated)") for line in err), err
    assert (tree / "spec/headers.toml").read_text() == (root / "spec/headers.toml").read_text()
    # the report is as before but for the ledger's count: the ledger keeps the bumped header's line
    ledger = [ln for ln in (tree / "spec/models/ledger.toml").read_text().splitlines() if ln.startswith('"')]
    report, was = ((t / "generator/REPORT.md").read_text().splitlines() for t in (tree, root))
    assert len(report) == len(was)
    changed = [(a, b) for a, b in zip(report, was, strict=True) if a != b]
    assert len(changed) == 1 and f"ledger.toml ({len(ledger) // 2} releases)" in changed[0][0], changed
    for folder in ("packages/core/src/dlbind/_generated",):
        cmp = filecmp.dircmp(tree / folder, root / folder, ignore=["__pycache__"])
        assert not (cmp.diff_files or cmp.left_only or cmp.right_only), (cmp.diff_files, cmp.left_only)
    for model in (root / "spec/models").glob("dlpack-*.json"):
        assert (tree / "spec/models" / model.name).read_bytes() == model.read_bytes()
    assert not (tree / f"spec/models/dlpack-{new}.json").exists()
    assert f'"{new}" = "' in (tree / "spec/models/ledger.toml").read_text()  # append-only
    assert _generate(tree, "--check").returncode == 0


@pytest.mark.parametrize("kind", ["drift"], indirect=True)  # post-release numbers
def test_post_release_numbers(bumped: Path, root: Path, before: Release, rehearsal: RehearsalHeader,
                              tmp_path: Path) -> None:  # fmt: skip
    """After the way back the same header bumped again is the same post-release again (the ledger remembers
    its ABI model) and another header the next one; a drifted header that changes a layout is refused."""
    tree = tmp_path / "repo"
    shutil.copytree(bumped, tree, ignore=shutil.ignore_patterns("__pycache__", "*.so", "build"))
    new = format_version(_new_release(root, rehearsal))
    proc = _cli(tree, "canonical", format_version(before))
    assert proc.returncode == 0, proc.stderr
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
    was = _snapshot(tree)
    proc = _cli(tree, "bump", str(layout))
    assert proc.returncode == 1
    assert "changes the layout of" in proc.stderr and "DLTensor" in proc.stderr and "needs a new version" in proc.stderr
    assert _snapshot(tree) == was  # headers.toml restored, nothing written


def test_bad_source_is_refused(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    proc = _cli(tree, "bump", str(tmp_path / "absent.h"))
    assert proc.returncode == 1
    assert "absent.h': no such file (and not a URL, nor of the form PACKAGE==VERSION:PATH)" in proc.stderr


def test_url_source_is_recorded_by_url(tmp_path: Path, root: Path, headers: dict, before: Release) -> None:
    """A header named by URL (the raw dlpack.h of an upstream commit) is recorded with `url =`."""
    tree = _tree(tmp_path, root, headers)
    made = derive(headers[before].read_text(), _model_of(headers, before), "drift")
    for table, rows in policy_rows(made).items():  # the rehearsal's own names need their rows (none for upstream's)
        path = tree / f"spec/{table}.toml"
        path.write_text(path.read_text() + rows)
    served = tmp_path / "dmlc-dlpack-main.h"
    served.write_text(made.text)
    proc = _cli(tree, "bump", served.as_uri())
    assert proc.returncode == 0, proc.stderr
    entry = tomllib.loads((tree / "spec/headers.toml").read_text())["header"][-1]
    assert entry["url"] == served.as_uri() and "local" not in entry and "package" not in entry
    assert (tree / f".cache/headers/dlpack-{entry['version']}.h").read_text() == made.text
    served.unlink()  # read from the cache from now on (the sha256 decides)
    assert _generate(tree, "--check").returncode == 0


# -- run time: the core built from the bumped copy knows the new names, in both builds ----------------------
# (The core's whole suite in a bumped tree is `nox -s bump_gate`'s: it runs there, not again here.)

PROBE = """
import json, sys
import dlbind
from dlbind._ffi import BUILD

assert BUILD == sys.argv[1], BUILD
if BUILD == "compiled":
    import dlbind._fastpath  # the C extension, built against the regenerated dlpack_types.h and tables.h
want = json.loads(sys.argv[2])
assert list(dlbind.DLPACK_VERSION) == want["version"], dlbind.DLPACK_VERSION
def since(name):
    got = dlbind.spec.since(name)
    return f"{got[0]}.{got[1]}"  # 1.4, or 1.3.post1 (a PostMinor prints as 3.post1)
for name, value in want["devices"]:
    assert dlbind.DeviceType[name] == value, name
    assert since("DLDeviceType." + name) == want["since"][name], since("DLDeviceType." + name)
for name, value in want["dtypes"]:
    assert dlbind.DataTypeCode[name] == value, name
    assert since("DLDataTypeCode." + name) == want["since"][name], since("DLDataTypeCode." + name)
for code, bits, expected in want["dtype_names"]:
    assert str(dlbind.DType(code, bits, 1)) == expected, (str(dlbind.DType(code, bits, 1)), expected)
from dlbind.devices import device_name, parse_device
for value, expected in want["device_names"]:
    assert device_name(value) == expected, (device_name(value), expected)
    assert parse_device(expected + ":1") == (value, 1), parse_device(expected + ":1")
assert dlbind.spec.since("DLDeviceType.kDLCUDA") == (0, 5)
print("ok")
"""


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
def test_runtime_after_the_bump(venv: Path, bumped: Path, root: Path, headers: dict, rehearsal: RehearsalHeader,
                                build: str, tmp_path: Path) -> None:  # fmt: skip
    """The core built from the bumped copy knows the new names: values, `since`, device and dtype names."""
    new = _new_release(root, rehearsal)
    devices, codes, _ = _policy(bumped)
    spec_tables = (bumped / "packages/core/src/dlbind/_generated/spec_tables.py").read_text()
    want = {
        "version": list(rehearsal.version),
        "devices": rehearsal.devices,
        "dtypes": rehearsal.dtypes,
        "since": {
            q.split(".")[1]: format_version(_first_release_with(root, bumped, headers, q, new))
            for q in rehearsal.qualnames
        },
        "dtype_names": [
            (v, b, codes[m]["name"].format(bits=b)) for m, v in rehearsal.dtypes for b in codes[m]["bits"]
        ],
        "device_names": [(v, devices[m]["name"]) for m, v in rehearsal.devices],
    }
    assert "PostMinor" in spec_tables or len(new) == 2
    probe = subprocess.run([str(venv), "-c", textwrap.dedent(PROBE), build, json.dumps(want)],
                           capture_output=True, text=True, env=_env(build), cwd=tmp_path)  # fmt: skip
    assert probe.stdout.strip() == "ok", probe.stderr


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
