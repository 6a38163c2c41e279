"""Bad input fails with one line naming the file, the line and the construct; nothing is written."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dlbind_generator.errors import GeneratorError
from dlbind_generator.parse import parse_header

DLPACK_BASICS = """\
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 3
#include <stdint.h>
typedef enum { kDLCPU = 1 } DLDeviceType;
typedef enum { kDLInt = 0U } DLDataTypeCode;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
"""


def _header(tmp_path: Path, text: str, name: str = "dlpack.h") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _cli_parse(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "parse", str(path)], capture_output=True, text=True
    )


def test_invalid_c_names_file_and_line(tmp_path: Path) -> None:
    path = _header(tmp_path, DLPACK_BASICS + "typedef struct {\n  int x\n} DLTensor;\n")
    with pytest.raises(GeneratorError, match=rf"^{path}:9: not valid C: before: }}"):
        parse_header(path)
    proc = _cli_parse(path)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: {path}:9: not valid C")


def test_missing_dlpack_types(tmp_path: Path) -> None:
    path = _header(tmp_path, DLPACK_BASICS)
    with pytest.raises(GeneratorError, match=rf"^{path}:1: not a DLPack header: no struct DLTensor$"):
        parse_header(path)


def test_missing_version_macro(tmp_path: Path) -> None:
    text = DLPACK_BASICS.replace("#define DLPACK_MAJOR_VERSION 1\n", "") + "typedef struct { void *data; } DLTensor;\n"
    with pytest.raises(GeneratorError, match=r"no DLPACK_MAJOR_VERSION/DLPACK_MINOR_VERSION or DLPACK_VERSION macro"):
        parse_header(_header(tmp_path, text))


@pytest.mark.parametrize(
    ("snippet", "line", "construct"),
    [
        ("typedef union { int a; float b; } U;\n", 7, "unsupported construct: union typedef U"),
        ("typedef struct { int a : 3; } B;\n", 7, r"unsupported construct: bit-field in struct B field a"),
        ("int global_counter;\n", 7, "unsupported construct: variable 'global_counter'"),
        ("static inline int f(void) { return 1; }\n", 7, "unsupported construct: function definition 'f'"),
        ("typedef struct { struct Later x; } S;\n", 7, "incomplete type 'struct Later' in struct S field x"),
        ("typedef enum { kBad = 1.5 } E;\n", 7, "enum E member kBad: value is not an integer constant"),
    ],
)
def test_unsupported_constructs(tmp_path: Path, snippet: str, line: int, construct: str) -> None:
    path = _header(tmp_path, DLPACK_BASICS + snippet)
    with pytest.raises(GeneratorError, match=rf"^{path}:{line}: {construct}"):
        parse_header(path, require_dlpack_types=False)


def test_preprocessor_error(tmp_path: Path) -> None:
    path = _header(tmp_path, '#include "missing.h"\n')
    with pytest.raises(GeneratorError, match=r"the C preprocessor failed: .*missing\.h"):
        parse_header(path)


def test_no_such_file(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match="no such file"):
        parse_header(tmp_path / "absent.h")


def test_invalid_c_without_a_line_names_the_file_once(tmp_path: Path) -> None:
    """pycparser names only the file for some syntax errors: the message says so, and names the file once."""
    path = _header(tmp_path, "int x = ;\n")
    with pytest.raises(GeneratorError) as info:
        parse_header(path)
    assert str(info.value) == f"{path}: not valid C: Invalid expression (the parser names no line)"


def test_a_directory_is_not_a_header(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match=rf"^{tmp_path}: is a directory, not a header file$"):
        parse_header(tmp_path)
    proc = _cli_parse(tmp_path)
    assert proc.returncode == 1 and proc.stderr == f"error: {tmp_path}: is a directory, not a header file\n"


@pytest.mark.parametrize(
    ("encode", "line", "what"),
    [
        (lambda text: text.encode("utf-16"), 1, "UTF-16, by its byte order mark"),
        (lambda text: text.encode("utf-32"), 1, "UTF-32, by its byte order mark"),
        (lambda text: text.replace("kDLCPU = 1", "kDLCPU = 1 /* caf\xe9 */").encode("latin-1"), 4,
         "byte 0xe9 at offset "),
    ],
    ids=["utf-16", "utf-32", "latin-1"],
)  # fmt: skip
def test_a_header_that_is_not_utf8_is_one_line(tmp_path: Path, encode: Any, line: int, what: str) -> None:
    path = tmp_path / "dlpack.h"
    path.write_bytes(encode(DLPACK_BASICS + "typedef struct { void *data; } DLTensor;\n"))
    with pytest.raises(GeneratorError, match=rf"^{path}:{line}: not UTF-8 text \({re.escape(what)}"):
        parse_header(path)
    proc = _cli_parse(path)
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"error: {path}:{line}: not UTF-8 text ("), proc.stderr


def _tree(tmp_path: Path, root: Path, headers: dict) -> Path:
    """A copy of the repository parts the generator reads and writes, with the header cache."""
    tree = tmp_path / "repo"
    shutil.copytree(root / "spec", tree / "spec")
    for src in sorted(root.glob("packages/*/src")):  # the core's and every backend's generated files
        rel = src.relative_to(root)
        shutil.copytree(src, tree / rel, ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    (tree / "generator").mkdir()
    shutil.copy(root / "generator/REPORT.md", tree / "generator/REPORT.md")
    (tree / ".cache/headers").mkdir(parents=True)
    for p in headers.values():
        shutil.copy(p, tree / ".cache/headers" / p.name)
    return tree


def _snapshot(tree: Path) -> dict[str, bytes]:
    return {
        p.relative_to(tree).as_posix(): p.read_bytes()
        for p in tree.rglob("*")
        if p.is_file() and ".cache" not in p.parts
    }


def _generate(tree: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "generate", "--offline", "--root", str(tree), *args],
        capture_output=True,
        text=True,
    )


def _use_local_canonical(tree: Path, header: Path) -> None:
    digest = hashlib.sha256(header.read_bytes()).hexdigest()
    toml = re.sub(r'^canonical = ".*"$', 'canonical = "9.9"', (tree / "spec/headers.toml").read_text(), flags=re.M)
    toml += f'\n[[header]]\nversion = "9.9"\nlocal = "{header}"\nsha256 = "{digest}"\n'
    (tree / "spec/headers.toml").write_text(toml)


def test_generate_with_broken_header_writes_nothing(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    bad = _header(tmp_path, DLPACK_BASICS + "typedef struct { void *data } DLTensor;\n", "broken.h")
    _use_local_canonical(tree, bad)
    before = _snapshot(tree)
    proc = _generate(tree)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith(f"error: {bad}:7: not valid C")
    assert _snapshot(tree) == before


def test_wrong_sha256_names_both_digests(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    header = _header(tmp_path, "/* not what was pinned */\n", "pinned.h")
    toml = (tree / "spec/headers.toml").read_text()
    toml += f'\n[[header]]\nversion = "9.9"\nlocal = "{header}"\nsha256 = "{"0" * 64}"\n'
    (tree / "spec/headers.toml").write_text(toml)
    before = _snapshot(tree)
    proc = _generate(tree)
    actual = hashlib.sha256(header.read_bytes()).hexdigest()
    assert proc.returncode == 1
    assert f"expected {'0' * 64}, got {actual}" in proc.stderr
    assert _snapshot(tree) == before


def test_header_changed_without_version_bump_is_caught(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    text = headers[(1, 3)].read_text().replace("kDLTrn = 18,", "kDLTrn = 18,\n  kDLSneaky = 30,")
    changed = _header(tmp_path, text, "changed.h")
    digest = hashlib.sha256(changed.read_bytes()).hexdigest()
    toml = (tree / "spec/headers.toml").read_text()
    listed = re.search(r'\[\[header\]\]\nversion = "1\.3"\n(.*\n)*?sha256 = "62052bef[0-9a-f]*"\n', toml)
    assert listed is not None
    toml = toml.replace(listed.group(0), f'[[header]]\nversion = "1.3"\nlocal = "{changed}"\nsha256 = "{digest}"\n')
    (tree / "spec/headers.toml").write_text(toml)
    (tree / ".cache/headers/dlpack-1.3.h").unlink()
    before = _snapshot(tree)
    proc = _generate(tree)
    assert proc.returncode == 1, proc.stderr
    assert "has a different ABI model than the one recorded" in proc.stderr
    assert "changed without a version bump" in proc.stderr
    assert _snapshot(tree) == before


def test_history_contradicting_headers_is_refused(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    history = (
        (tree / "spec/history.toml")
        .read_text()
        .replace('"DLDataTypeCode.kDLBfloat" = "0.3"', '"DLDataTypeCode.kDLBfloat" = "0.6"')
    )
    (tree / "spec/history.toml").write_text(history)
    proc = _generate(tree)
    assert proc.returncode == 1
    assert (
        "since DLDataTypeCode.kDLBfloat = 0.6 contradicts the fetched headers (must be no later than 0.4)"
        in proc.stderr
    )


@pytest.mark.parametrize(
    ("since", "message"),
    [
        # DLTensor.ctx is no fetched header's (0.4 renamed it device): [since] may name it, within [renamed]'s facts
        ('"DLTensor.ctx" = "0.5"', "since DLTensor.ctx = 0.5 contradicts [renamed]: DLTensor.device had that name "
         "until 0.4"),
        ('"DLTensor.nope" = "0.1"', "'DLTensor.nope' is in no fetched header, nor an earlier name of one ([renamed])"),
    ],
)  # fmt: skip
def test_history_since_of_a_name_before_a_rename_is_checked(
    tmp_path: Path, root: Path, headers: dict, since: str, message: str
) -> None:
    tree = _tree(tmp_path, root, headers)
    history = (tree / "spec/history.toml").read_text().replace("[since]\n", f"[since]\n{since}\n", 1)
    (tree / "spec/history.toml").write_text(history)
    before = _snapshot(tree)
    proc = _generate(tree)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1] == f"error: {tree / 'spec/history.toml'}: {message}"
    assert _snapshot(tree) == before


def _cached_header(tree: Path, headers: dict) -> tuple[Path, str]:
    """One cached header of the tree and its listed sha256."""
    cached = tree / ".cache/headers" / headers[min(headers)].name
    return cached, hashlib.sha256(cached.read_bytes()).hexdigest()


def test_offline_cached_header_with_another_sha256_names_both_digests(
    tmp_path: Path, root: Path, headers: dict
) -> None:
    """Offline, a cached header whose bytes changed is a sha256 mismatch (not "not cached"), as online."""
    tree = _tree(tmp_path, root, headers)
    cached, listed = _cached_header(tree, headers)
    cached.write_bytes(cached.read_bytes() + b"/* edited */\n")
    proc = _generate(tree, "--check")
    actual = hashlib.sha256(cached.read_bytes()).hexdigest()
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    (line,) = proc.stderr.splitlines()[-1:]
    assert line.startswith("error: sha256 mismatch for dlpack ") and f"from {cached}:" in line, line
    assert f"expected {listed}, got {actual}" in line and "without --offline" in line, line


def test_a_folder_in_place_of_a_cached_header_is_one_line(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    cached, _ = _cached_header(tree, headers)
    cached.unlink()
    cached.mkdir()
    proc = _generate(tree, "--check")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.splitlines()[-1].endswith(f"the cached header {cached} is not a file: remove it and fetch again")


@pytest.mark.parametrize(("out", "why"), [("missing/dlpack.h", "No such file or directory"), (".", "Is a directory")])
def test_rehearsal_header_to_an_unwritable_file(tmp_path: Path, root: Path, headers: dict, out: str, why: str) -> None:
    tree = _tree(tmp_path, root, headers)
    target = tmp_path / out
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "rehearsal-header", str(target), "--root", str(tree)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == f"error: {target}: cannot write the rehearsal header: {why}\n"


def test_bump_of_a_header_that_is_not_utf8_writes_nothing(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    utf16 = tmp_path / "dlpack-utf16.h"
    utf16.write_bytes(headers[max(headers)].read_text(encoding="utf-8").encode("utf-16"))
    before = _snapshot(tree)
    for source, message in (
        (utf16, f"{utf16}:1: not UTF-8 text (UTF-16, by its byte order mark)"),
        (tmp_path, f"bump source {str(tmp_path)!r}: is a directory, not a header file"),
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "dlbind_generator", "bump", str(source), "--root", str(tree)],
            capture_output=True, text=True,
        )  # fmt: skip
        assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.splitlines()[-1].startswith(f"error: {message}"), proc.stderr
    assert _snapshot(tree) == before


def test_offline_without_a_cached_header_says_how_to_fetch_it(tmp_path: Path, root: Path, headers: dict) -> None:
    tree = _tree(tmp_path, root, headers)
    cached, _ = _cached_header(tree, headers)
    cached.unlink()
    proc = _generate(tree, "--check")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr.splitlines()[-1]
    assert f"not cached in {cached.parent} and offline mode is on; fetch it first" in line, line
    assert "`python -m dlbind_generator fetch`" in line and "without --offline" in line, line


def test_every_option_of_every_command_has_help() -> None:
    """`python -m dlbind_generator COMMAND --help` explains every --option (fetch's --root said nothing)."""
    import argparse

    from dlbind_generator.__main__ import _parser

    parser = _parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    for name, command in commands.choices.items():
        for action in command._actions:
            if action.option_strings:  # positionals are the command's description's
                assert action.help, f"{name}: {'/'.join(action.option_strings)} has no help"
