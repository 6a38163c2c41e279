"""The C compiler, given the real header, agrees with every size, offset and enum value we derived.

cffi API mode compiles our declarations' field list against ``#include "dlpack.h"`` (it emits
checks that each declared field exists with the declared type), then we compare ``sizeof`` and
``offsetof`` as the compiler computed them with the model, for every fetched release, and with
the tables generated into the core for the canonical one.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import cffi
import pytest

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


@pytest.mark.parametrize("version", [(0, 4), (0, 6), (0, 8), (1, 0), (1, 2), (1, 3)])
def test_model_layout_matches_compiler(headers: dict, version: tuple[int, int], tmp_path: Path) -> None:
    model = parse_header(headers[version])
    mod = _compile(headers[version], c_declarations(model), tmp_path, f"_layout_v{version[0]}{version[1]}")
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


def test_generated_core_tables_match_compiler(headers: dict, root: Path, tmp_path: Path) -> None:
    namespace: dict[str, object] = {}
    generated = root / "packages/core/src/dlbind/_generated"
    exec((generated / "layout.py").read_text(), namespace)
    build_ns: dict[str, object] = {"__name__": "not_main", "__file__": str(generated / "build_api.py")}
    exec((generated / "build_api.py").read_text(), build_ns)
    mod = _compile(headers[(1, 3)], str(build_ns["CDEF"]), tmp_path, "_layout_core")
    sizes, offsets = namespace["STRUCT_SIZES"], namespace["FIELD_OFFSETS"]
    assert isinstance(sizes, dict) and isinstance(offsets, dict)
    assert set(sizes) == {
        "DLPackVersion",
        "DLDevice",
        "DLDataType",
        "DLTensor",
        "DLManagedTensor",
        "DLManagedTensorVersioned",
        "DLPackExchangeAPIHeader",
        "DLPackExchangeAPI",
    }
    for struct, size in sizes.items():
        assert mod.ffi.sizeof(struct) == size, struct
        for field, offset in offsets[struct].items():
            assert mod.ffi.offsetof(struct, field) == offset, f"{struct}.{field}"
