"""dlbind.spec: when each name of dlpack.h appeared, was renamed, was removed."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

import dlbind
from dlbind import spec
from dlbind._generated.spec_tables import PostMinor

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


def _fetched_names() -> set[str]:
    """Every qualified name some fetched header declares (spec/models/dlpack-*.json)."""
    names: set[str] = set()
    for path in (ROOT / "spec/models").glob("dlpack-*.json"):
        model = json.loads(path.read_text(encoding="utf-8"))
        for enum, members in model["enums"].items():
            names |= {enum} | {f"{enum}.{m}" for m in members}
        for struct, fields in model["structs"].items():
            names |= {struct} | {f"{struct}.{f['name']}" for f in fields}
        names |= set(model["macros"]) | set(model["typedefs"])
    return names


def _history_renames() -> list[tuple[str, str, tuple[int, int]]]:
    """spec/history.toml's [renamed]: (new name, old qualified name, the release that renamed it)."""
    table = tomllib.loads((ROOT / "spec/history.toml").read_text(encoding="utf-8"))["renamed"]
    out = []
    for new, entry in table.items():
        parent = new.rsplit(".", 1)[0] + "." if "." in new else ""
        major, minor = entry["in"].split(".")
        out.append((new, parent + entry["from"], (int(major), int(minor))))
    return out


def test_names_before_a_rename() -> None:
    """A name an older release had before a rename (DLPack 0.1's kCPU, 0.1-0.3's DLTensor.ctx) is known: the
    release before the rename declares it, the rename removes it (unless a header keeps it, as 0.4 kept a
    DLContext typedef), and a renamed struct's fields were the old name's until then."""
    fetched = _fetched_names()
    renames = _history_renames()
    assert renames
    for new, old, when in renames:
        before = max(v for v in spec.RELEASES if v < when)
        assert old in spec.names_in(before) and spec.since(old) <= before, old
        if old not in fetched:  # a name no fetched header shows: made from [renamed]
            assert spec.removed_in(old) == when and old not in spec.names_in(when), old
            assert spec.kind(old) == spec.kind(new), old
        if "." not in new:  # a renamed struct or enum: its fields or members had the old name as parent
            for child in spec.names_in(when):
                if child.startswith(new + ".") and not spec.renamed_from(child):
                    assert f"{old}.{child.split('.', 1)[1]}" in spec.names_in(before), child
    first = spec.RELEASES[0]
    enums = [q for q in spec.names_in(first) if spec.kind(q) == "enum"]
    assert enums and all(any(q.startswith(enum + ".") for q in spec.names_in(first)) for enum in enums), enums


def test_releases() -> None:
    canonical = tomllib.loads((ROOT / "spec/headers.toml").read_text(encoding="utf-8"))["canonical"]
    assert spec.RELEASES[0] == (0, 1) and spec.RELEASES[-1] == spec.CANONICAL
    assert f"{spec.CANONICAL[0]}.{spec.CANONICAL[1]}" == canonical  # "1.3", or "1.3.post1" after a drift bump
    # a post-release keeps its release's version macros: DLPACK_VERSION is (M, m)
    assert (spec.CANONICAL[0], int(spec.CANONICAL[1])) == dlbind.DLPACK_VERSION
    assert set(spec.FETCHED) <= set(spec.RELEASES)
    assert list(spec.RELEASES) == sorted(spec.RELEASES)


def test_post_release_versions() -> None:
    """A post-release M.m.postN (a header that changed after M.m without a new version) is (M, PostMinor(m, N)):
    a (major, minor) tuple that sorts after M.m and before M.(m+1), equals only itself and reads "M.m.postN"."""
    post1, post2 = (1, PostMinor(3, 1)), (1, PostMinor(3, 2))
    assert (1, 2) < (1, 3) < post1 < post2 < (1, 4)
    assert post1 != (1, 3) and post1 == (1, PostMinor(3, 1)) and post1 in {post1} and (1, 3) not in {post1}
    assert sorted([(1, 4), post2, (1, 3), post1]) == [(1, 3), post1, post2, (1, 4)]
    assert f"{post1[0]}.{post1[1]}" == "1.3.post1" and repr(post1) == "(1, 3.post1)" and int(post1[1]) == 3
    assert tuple(post1) == post1  # what spec.available() compares
    assert pickle.loads(pickle.dumps(post1)) == post1
    with pytest.raises(ValueError, match="post-release number"):
        PostMinor(3, 0)


def test_names_of_a_post_release() -> None:
    """Names a post-release added have it as `since`; every other name keeps its release."""
    posts = [v for v in spec.RELEASES if isinstance(v[1], PostMinor)]
    for v in posts:
        new = [q for q in spec.names_in(v) if spec.since(q) == v]
        assert new and all(spec.available(q, v) and not spec.available(q, (v[0], int(v[1]))) for q in new)
    assert spec.since("DLDeviceType.kDLTrn") == (1, 2) and type(spec.since("DLTensor")[1]) is int


def test_unknown_name() -> None:
    canonical = f"{spec.CANONICAL[0]}.{spec.CANONICAL[1]}"
    with pytest.raises(KeyError, match=rf"'DLTensor\.nope' is not declared by any DLPack release up to {canonical},"):
        spec.since("DLTensor.nope")


def test_nothing_after_the_canonical_release() -> None:
    """The tables end at CANONICAL: what a later release declares is not known, not the canonical's names."""
    later = (spec.CANONICAL[0], int(spec.CANONICAL[1]) + 1)
    for ask in (lambda: spec.names_in(later), lambda: spec.available("DLTensor", later)):
        with pytest.raises(ValueError, match=rf"DLPack {later[0]}\.{later[1]} is after .*the newest release these"):
            ask()
    assert spec.names_in(spec.CANONICAL) and spec.available("DLTensor", spec.CANONICAL)
