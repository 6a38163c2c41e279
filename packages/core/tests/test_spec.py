"""dlbind.spec: when each name of dlpack.h appeared, was renamed, was removed."""

from __future__ import annotations

from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import dlbind
from dlbind import spec

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("DLTensor", (0, 1)),
        ("DLManagedTensor", (0, 2)),
        ("DLDataTypeCode.kDLBfloat", (0, 3)),
        ("DLDevice", (0, 4)),
        ("DLDeviceType.kDLCUDA", (0, 5)),
        ("DLDeviceType.kDLCUDAManaged", (0, 6)),
        ("DLDeviceType.kDLOneAPI", (0, 7)),
        ("DLDataTypeCode.kDLBool", (0, 8)),
        ("DLManagedTensorVersioned", (1, 0)),
        ("DLDataTypeCode.kDLFloat8_e4m3fn", (1, 1)),
        ("DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED", (1, 1)),
        ("DLPackExchangeAPI", (1, 2)),
        ("DLDeviceType.kDLTrn", (1, 2)),
    ],
)
def test_since(name: str, version: tuple[int, int]) -> None:
    assert spec.since(name) == version


def test_renames_and_removals() -> None:
    assert spec.renamed_from("DLDeviceType.kDLCUDA") == (("kDLGPU", (0, 5)), ("kGPU", (0, 2)))
    assert spec.renamed_from("DLDevice") == (("DLContext", (0, 4)),)
    assert spec.removed_in("DLDeviceType.kDLGPU") == (0, 5)
    assert spec.removed_in("DLPACK_VERSION") == (1, 0)
    assert spec.removed_in("DLTensor") is None


def test_available_and_names_in() -> None:
    assert spec.available("DLDeviceType.kDLGPU", (0, 4))
    assert not spec.available("DLDeviceType.kDLGPU", (0, 5))
    assert not spec.available("DLManagedTensorVersioned", (0, 8))
    v10 = spec.names_in((1, 0))
    assert "DLManagedTensorVersioned.flags" in v10 and "DLPackExchangeAPI" not in v10
    assert "DLPackExchangeAPI" in spec.names_in((1, 3))
    assert spec.kind("DLTensor.ndim") == "field" and spec.kind("DLDeviceType") == "enum"


def test_releases() -> None:
    canonical = tomllib.loads((ROOT / "spec/headers.toml").read_text(encoding="utf-8"))["canonical"]
    assert spec.RELEASES[0] == (0, 1) and spec.RELEASES[-1] == spec.CANONICAL
    assert ".".join(map(str, spec.CANONICAL)) == canonical and spec.CANONICAL == dlbind.DLPACK_VERSION
    assert set(spec.FETCHED) <= set(spec.RELEASES)


def test_unknown_name() -> None:
    with pytest.raises(KeyError, match=r"'DLTensor\.nope' is not declared by any DLPack release"):
        spec.since("DLTensor.nope")
