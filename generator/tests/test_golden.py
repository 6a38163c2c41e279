"""Golden pairs: one tiny header per C construct, its expected model (.json) and C declarations (.cdef).

Regenerate the expectations after a deliberate change with ``DLBIND_UPDATE_GOLDENS=1`` and review the
diff. Independently of the expectations, every golden's declarations are handed to cffi, whose own
layout engine must agree with the generator's sizes and offsets.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import cffi
import pytest

from dlbind_generator.cdecl import c_declarations
from dlbind_generator.model import dumps
from dlbind_generator.parse import parse_header

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p.stem for p in GOLDEN.glob("*.h"))
UPDATE = os.environ.get("DLBIND_UPDATE_GOLDENS") == "1"


def _check(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path.name} missing: run with DLBIND_UPDATE_GOLDENS=1"
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", CASES)
def test_model_and_cdef_match_golden(case: str) -> None:
    model = parse_header(GOLDEN / f"{case}.h", require_dlpack_types=False)
    _check(GOLDEN / f"{case}.json", dumps(model.to_json()))
    _check(GOLDEN / f"{case}.cdef", c_declarations(model))


@pytest.mark.parametrize("case", CASES)
def test_layout_agrees_with_cffi(case: str) -> None:
    model = parse_header(GOLDEN / f"{case}.h", require_dlpack_types=False)
    ffi = cffi.FFI()
    ffi.cdef(c_declarations(model))
    for s in model.structs:
        ctype = s.name if s.typedef else f"struct {s.name}"
        assert ffi.sizeof(ctype) == s.size, ctype
        assert ffi.alignof(ctype) == s.align, ctype
        for f in s.fields:
            assert ffi.offsetof(ctype, f.name) == f.offset, f"{ctype}.{f.name}"


def test_specific_facts() -> None:
    """Facts stated in the golden headers' comments, checked directly (not through the .json)."""
    parse = lambda name: parse_header(GOLDEN / f"{name}.h", require_dlpack_types=False).to_json()  # noqa: E731
    assert parse("enum_line_comment")["version"] == [0, 1]  # octal 010
    assert parse("enum_line_comment")["enums"]["DLDeviceType"] == {"kCPU": 1, "kGPU": 2, "kCPUPinned": 3, "kOpenCL": 4}
    flags = parse("flag_macros")
    assert flags["version"] == [0, 3]
    assert flags["macros"] == {"DLPACK_VERSION": 0o30, "FLAGS_BOTH": 5, "FLAG_A": 1, "FLAG_C": 4}
    assert parse("enum_suffixes")["enums"]["Suffixed"] == {"kA": 0, "kB": 1, "kC": 16, "kD": 17, "kE": 63}
    assert parse("enum_expressions")["enums"]["Expr"]["kShifted"] == (17 << 2) + 1
    bare = parse("bare_struct")
    assert bare["struct_info"]["DLManagedTensorVersioned"]["typedef"] is False
    assert bare["structs"]["DLManagedTensorVersioned"][2]["type"] == "void (*)(struct DLManagedTensorVersioned *self)"
    cpp = parse("cplusplus_enum")
    assert cpp["version"] == [0, 7] and cpp["docs"]["DLDeviceType"] == "Where memory lives."
    assert cpp["docs"]["DLDeviceType.kDLCUDA"] == "a device"
    assert parse("typedef_alias")["typedefs"] == {"DLContext": "DLDevice"}
    fp = parse("function_pointers")
    assert fp["typedefs"]["Allocator"].startswith("int (*)(DLTensor *prototype, DLTensor **out")
    assert "void (*SetError)(void *error_ctx" in fp["typedefs"]["Allocator"]
    assert json.dumps(parse("self_referential")["structs"]["Node"][0]) == json.dumps(
        {"name": "next", "type": "struct Node *", "offset": 0, "size": 8}
    )
