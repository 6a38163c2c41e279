"""The backend stage on the shapes of CUDA's and HIP's runtime headers, on a tiny header made here.

CUDA's cuda_runtime_api.h uses structs and enums by their tags, without typedefs (``struct
cudaPointerAttributes``, ``enum cudaMemoryType``, ``typedef enum cudaError cudaError_t``), and both
vendor headers include system headers the generator stands in for (``limits.h``, ``string.h``,
``stdbool.h``). HIP encodes its version as major * 10^7 + minor * 10^5 + patch.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import cffi

from dlbind_generator.backends import load_backend_spec, select

HEADER = """\
#include <limits.h>
#include <string.h>
#include <stdbool.h>
#define RT_VERSION (5 * 10000000 + 2 * 100000 + 21153)
enum rtMemoryType { rtMemoryTypeHost = 1, rtMemoryTypeDevice = 2 };
enum rtError { rtSuccess = 0, rtErrorInvalidValue = 1, rtErrorNoDevice = 100 };
typedef enum rtError rtError_t;
struct rtPointerAttributes { enum rtMemoryType type; int device; void *devicePointer; bool managed; };
struct rtUnused { size_t n; };
rtError_t rtPointerGetAttributes(struct rtPointerAttributes *attributes, const void *ptr);
rtError_t rtMemcpy(void *dst, const void *src, size_t n, enum rtMemoryType kind);
"""


def _select(tmp: Path, types: str = '"struct rtPointerAttributes"') -> object:
    inc = tmp / "include"
    inc.mkdir(parents=True, exist_ok=True)
    (inc / "rt.h").write_text(HEADER)
    spec = tmp / "rt.toml"
    spec.write_text(
        f"""
[header]
include = "rt.h"
roots = ["{inc}"]
version = {{ macro = "RT_VERSION", encoding = "hip" }}
sha256 = "{hashlib.sha256(HEADER.encode()).hexdigest()}"

[select]
functions = ["rtPointerGetAttributes", "rtMemcpy"]
types = [{types}]

[enums]
rtError = ["rtSuccess", "rtErrorNoDevice"]
"""
    )
    return select(load_backend_spec(spec))


def test_tagged_structs_and_enums_are_selected_complete(tmp_path: Path) -> None:
    sel = _select(tmp_path)
    cdef = sel.cdef  # type: ignore[attr-defined]
    assert "struct rtPointerAttributes {\n    enum rtMemoryType type;" in cdef
    assert "enum rtMemoryType {\n    rtMemoryTypeHost = 1,\n    rtMemoryTypeDevice = 2,\n};" in cdef
    # the typedef of a tagged enum follows the enum, which keeps only the listed members
    assert "enum rtError {\n    rtSuccess = 0,\n    rtErrorNoDevice = 100,\n};\ntypedef enum rtError rtError_t;" in cdef
    assert "rtUnused" not in cdef
    ffi = cffi.FFI()
    ffi.cdef(cdef)  # cffi reads it
    assert ffi.sizeof("struct rtPointerAttributes") == 24
    assert ffi.typeof("rtError_t").kind == "enum"


def test_hip_version_encoding(tmp_path: Path) -> None:
    assert _select(tmp_path).header_version == "5.2.21153"  # type: ignore[attr-defined]


def test_a_tagged_struct_pointed_to_only_stays_opaque(tmp_path: Path) -> None:
    cdef = _select(tmp_path, types="").cdef  # type: ignore[attr-defined]
    assert "struct rtPointerAttributes {" not in cdef
    assert "rtError_t rtPointerGetAttributes(struct rtPointerAttributes *attributes, const void *ptr);" in cdef
