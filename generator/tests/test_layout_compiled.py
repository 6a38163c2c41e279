"""The C compiler, given the real header, agrees with every size, offset and enum value we derived.

cffi API mode compiles our declarations' field list against ``#include "dlpack.h"`` (it emits
checks that each declared field exists with the declared type), then we compare ``sizeof`` and
``offsetof`` as the compiler computed them with the model, for every fetched release, and with
the tables generated into the core for the canonical one.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import cffi
import pytest
from listed_headers import LISTED

from dlbind_generator.cdecl import c_declarations
from dlbind_generator.parse import parse_header


def _compile(header: Path, cdef: str, tmp: Path, name: str):  # type: ignore[no-untyped-def]
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(name, '#include "dlpack.h"', include_dirs=[str(tmp)])
    (tmp / "dlpack.h").write_bytes(header.read_bytes())
    so = ffi.compile(tmpdir=str(tmp), verbose=False)
    spec = importlib.util.spec_from_file_location(name, so)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules.pop(name, None)
    return module


@pytest.mark.parametrize("version", LISTED)
def test_model_layout_matches_compiler(headers: dict, version: tuple[int, int], tmp_path: Path) -> None:
    model = parse_header(headers[version])
    mod = _compile(headers[version], c_declarations(model), tmp_path, f"_layout_v{'_'.join(map(str, version))}")
    ffi, lib = mod.ffi, mod.lib
    for s in model.structs:
        ctype = s.name if s.typedef else f"struct {s.name}"
        assert ffi.sizeof(ctype) == s.size, ctype
        assert ffi.alignof(ctype) == s.align, ctype
        for f in s.fields:
            assert ffi.offsetof(ctype, f.name) == f.offset, f"{ctype}.{f.name}"
    for e in model.enums:
        for member, value in e.members:
            assert getattr(lib, member) == value, member  # the value the compiler sees


def test_generated_c_header_matches_compiler(headers: dict, root: Path, tmp_path: Path) -> None:
    """The generated dlpack_types.h (what the C fast path compiles against) has the real header's layout."""
    generated = root / "packages/core/src/dlbind/_generated"
    canonical = json.loads((root / "spec/models/merged.json").read_text())["canonical"]
    model = json.loads((root / f"spec/models/dlpack-{canonical}.json").read_text())
    probe = tmp_path / "probe.c"
    lines = ['#include "dlpack_types.h"', "#include <stddef.h>", "#include <stdio.h>", "int main(void) {"]
    for struct, info in model["struct_info"].items():
        ctype = struct if info["typedef"] else f"struct {struct}"
        lines.append(f'  printf("{struct} %zu\\n", sizeof({ctype}));')
        for field in model["structs"][struct]:
            lines.append(f'  printf("{struct}.{field["name"]} %zu\\n", offsetof({ctype}, {field["name"]}));')
    lines += ["  return 0;", "}"]
    probe.write_text("\n".join(lines) + "\n")
    exe = tmp_path / "probe"
    subprocess.run(["cc", "-std=c99", "-Wall", "-Werror", "-I", str(generated), str(probe), "-o", str(exe)], check=True)
    output = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    measured = dict(line.rsplit(" ", 1) for line in output.splitlines())
    for struct, info in model["struct_info"].items():
        assert int(measured[struct]) == info["size"], struct
        for field in model["structs"][struct]:
            assert int(measured[f"{struct}.{field['name']}"]) == field["offset"], f"{struct}.{field['name']}"
