"""Every fetched header parses, and its model says what the DLPack history says (reference notes §1)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from listed_headers import CANONICAL, LISTED

from dlbind_generator.parse import parse_header

# The releases whose facts this file checks; spec/headers.toml may list more (a bump adds one).
RELEASED = [(0, 4), (0, 6), (0, 8), (1, 0), (1, 2), (1, 3)]


@pytest.fixture(scope="module")
def models(headers: dict[tuple[int, int], Path]) -> dict[tuple[int, int], dict]:
    return {v: parse_header(p).to_json() for v, p in headers.items()}


def test_all_listed_versions_are_fetched(headers: dict[tuple[int, int], Path]) -> None:
    assert sorted(headers) == LISTED
    assert set(RELEASED) <= set(LISTED)


@pytest.mark.parametrize("version", LISTED)
def test_version_and_common_layout(models: dict, version: tuple[int, int]) -> None:
    m = models[version]
    assert tuple(m["version"]) == version[:2]  # a post-release (1, 3, 1) keeps its release's macros
    assert m["struct_info"]["DLTensor"]["size"] == 48
    assert m["struct_info"]["DLDataType"]["size"] == 4
    assert [f["name"] for f in m["structs"]["DLDataType"]] == ["code", "bits", "lanes"]
    assert m["structs"]["DLDataType"][0]["type"] == "uint8_t"  # not the enum
    offsets = {f["name"]: f["offset"] for f in m["structs"]["DLTensor"]}
    assert offsets == {"data": 0, "device": 8, "ndim": 16, "dtype": 20, "shape": 24, "strides": 32, "byte_offset": 40}


def test_v04_facts(models: dict) -> None:
    m = models[(0, 4)]
    assert m["macros"]["DLPACK_VERSION"] == 0o40  # written 040: octal in C
    assert m["typedefs"] == {"DLContext": "DLDevice"}
    assert m["enums"]["DLDeviceType"]["kDLGPU"] == 2 and "kDLCUDA" not in m["enums"]["DLDeviceType"]
    assert m["enums"]["DLDataTypeCode"]["kDLComplex"] == 5


def test_v06_facts(models: dict) -> None:
    devices = models[(0, 6)]["enums"]["DLDeviceType"]
    assert devices["kDLCUDAManaged"] == 13 and devices["kDLROCMHost"] == 11 and devices["kDLCUDA"] == 2
    assert models[(0, 6)]["macros"]["DLPACK_VERSION"] == 60


def test_v08_facts(models: dict) -> None:
    m = models[(0, 8)]
    assert m["enums"]["DLDataTypeCode"]["kDLBool"] == 6
    assert m["macros"]["DLPACK_ABI_VERSION"] == 1
    assert m["struct_info"]["DLManagedTensor"]["size"] == 64


def test_v10_bare_versioned_struct(models: dict) -> None:
    m = models[(1, 0)]
    info = m["struct_info"]["DLManagedTensorVersioned"]
    assert info == {"tag": "DLManagedTensorVersioned", "typedef": False, "size": 80, "align": 8}
    assert m["macros"]["DLPACK_FLAG_BITMASK_READ_ONLY"] == 1 and m["macros"]["DLPACK_FLAG_BITMASK_IS_COPIED"] == 2
    assert m["enums"]["DLDeviceType"]["kDLMAIA"] == 17
    assert "kDLFloat8_e4m3fn" not in m["enums"]["DLDataTypeCode"]


def test_v12_exchange_api(models: dict) -> None:
    m = models[(1, 2)]
    assert m["struct_info"]["DLManagedTensorVersioned"]["typedef"] is True
    api = m["structs"]["DLPackExchangeAPI"]
    assert api[0] == {"name": "header", "type": "DLPackExchangeAPIHeader", "offset": 0, "size": 16}
    function_pointers = [f for f in api[1:] if m["typedefs"][f["type"]].startswith("int (*)(")]
    assert len(function_pointers) == 5
    assert m["struct_info"]["DLPackExchangeAPI"]["size"] == 56
    assert m["structs"]["DLPackExchangeAPIHeader"][1]["type"] == "struct DLPackExchangeAPIHeader *"
    assert m["enums"]["DLDeviceType"]["kDLTrn"] == 18
    assert m["enums"]["DLDataTypeCode"]["kDLFloat4_e2m1fn"] == 17
    assert m["macros"]["DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED"] == 4


def test_v12_to_v13_differs_only_in_version(models: dict) -> None:
    a, b = dict(models[(1, 2)]), dict(models[(1, 3)])
    for m in (a, b):
        for key in ("version", "header_sha256", "docs"):
            m.pop(key)
        m["macros"] = {k: v for k, v in m["macros"].items() if k != "DLPACK_MINOR_VERSION"}
    assert a == b


def test_parse_cli_prints_the_contract_shape(headers: dict[tuple[int, int], Path]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "parse", str(headers[CANONICAL])],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    data = json.loads(out)
    assert data["version"] == list(CANONICAL[:2])
    assert data["enums"]["DLDeviceType"]["kDLCUDA"] == 2
    assert {"name": "ndim", "type": "int32_t", "offset": 16, "size": 4} in data["structs"]["DLTensor"]
    assert data["macros"]["DLPACK_MINOR_VERSION"] == CANONICAL[1]
    assert data["typedefs"]["DLPackCurrentWorkStream"].startswith("int (*)(DLDeviceType device_type")
