"""The link check of ``nox -s docs`` (.ci/links.py) fails where it should: a broken relative link, a missing
anchor, a bare upstream reference, a link that opens another issue than its text cites, a specification linked
elsewhere than its home, each planted in a small tree; a clean tree passes, and so do the real docs."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from file_trees import tree

ROOT = Path(__file__).resolve().parents[1]
CI = ROOT / ".ci"


@pytest.fixture(scope="module")
def links() -> Iterator[ModuleType]:
    sys.path.insert(0, str(CI))
    try:
        yield importlib.import_module("links")
    finally:
        sys.path.remove(str(CI))


GOOD = {
    "README.md": "See [the guide](docs/guide/page.md#the-dlbindconvert-call) and [DLPack](https://github.com/dmlc/dlpack).\n",
    "docs/index.md": (
        "# Index\n\n"
        "By [the DLPack spec](https://dmlc.github.io/dlpack/latest/) and\n"
        "[the array API standard](https://data-apis.org/array-api/latest/API_specification/index.html).\n"
        "Torch aborts ([pytorch/pytorch#188023](https://github.com/pytorch/pytorch/issues/188023)); see\n"
        "[below](#a-heading) and [the guide](guide/page.md), ![a chart](chart.png).\n\n"
        "## A heading\n\n"
        "```python\n"
        "x = 'numpy/numpy#28600 in code is not prose'  # [nowhere](gone.md)\n"
        "```\n\n"
        "Inline `cupy/cupy#10172` is code too.\n\n"
        "## A heading\n"
    ),
    "docs/chart.png": "",
    "docs/guide/page.md": (
        "# Page\n\n## The `dlbind.convert` call\n\nBack to [the second heading](../index.md#a-heading-1).\n"
        # an issue of the standard's repository is an upstream issue, not the standard
        "See [data-apis/array-api#749](https://github.com/data-apis/array-api/issues/749).\n"
    ),
    "docs/changelog.md": "- fixed numpy/numpy#1 (the changelog records what was: never checked)\n",
    "docs/_build/html/x.md": "[stale](nowhere.md)\n",
    "notes/other.md": "numpy/numpy#2 (not a page of the docs)\n",
}

PLANTED = {
    "docs/index.md": GOOD["docs/index.md"]
    + (
        "\nA [broken link](missing.md), a [lost anchor](guide/page.md#no-such-heading), a bare\n"
        "numpy/numpy#28600 and a short pytorch#188023, a [mislinked cupy/cupy#10172](https://github.com/cupy/cupy/issues/1),\n"
        "[the DLPack specification](https://github.com/dmlc/dlpack/blob/main/docs/source/python_spec.rst), an old\n"
        "<https://dmlc.github.io/dlpack/v0.8/> and [the array API](https://data-apis.github.io/array-api/2022.12/).\n"
    ),
}


def test_every_planted_violation_is_found(links: ModuleType, tmp_path: Path) -> None:
    found = [str(f) for f in links.check(tree(tmp_path, {**GOOD, **PLANTED}))]
    expected = [
        "docs/index.md:18: missing.md: no file missing.md beside docs/index.md",
        "docs/index.md:18: guide/page.md#no-such-heading: no heading #no-such-heading in docs/guide/page.md",
        "docs/index.md:19: numpy/numpy#28600: an upstream reference as plain text",
        "docs/index.md:19: pytorch#188023: an upstream reference as plain text",
        "docs/index.md:19: [cupy/cupy#10172](https://github.com/cupy/cupy/issues/1): the link does not open",
        "docs/index.md:20: https://github.com/dmlc/dlpack/blob/main/docs/source/python_spec.rst: the DLPack",
        "docs/index.md:21: https://dmlc.github.io/dlpack/v0.8/: the DLPack specification lives at",
        "docs/index.md:21: https://data-apis.github.io/array-api/2022.12/: the Python array API standard lives at",
    ]
    assert len(found) == len(expected), found
    for want in expected:
        assert any(f.startswith(want) for f in found), (want, found)


def test_a_clean_tree_passes_and_main_says_so(
    links: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert links.main(["links.py", str(tree(tmp_path, GOOD))]) == 0
    assert "every relative link resolves" in capsys.readouterr().out


def test_main_fails_on_a_plantedtree(links: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert links.main(["links.py", str(tree(tmp_path, {**GOOD, **PLANTED}))]) == 1
    assert "8 link finding(s)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("title", "anchor"),
    [
        ("Runtime layering", "runtime-layering"),
        ("`dlbind.convert`", "dlbindconvert"),
        ("One `convert`, drawn: the plan, then the executor", "one-convert-drawn-the-plan-then-the-executor"),
        ("[Streams](guide/streams.md) and *copies*", "streams-and-copies"),
        ("python -m dlbind check", "python--m-dlbind-check"),
    ],
)
def test_anchors_are_myst_s(links: ModuleType, title: str, anchor: str) -> None:
    assert links.slug(title) == anchor


def test_the_docs_pass(links: ModuleType) -> None:
    found = links.check(ROOT)
    assert not found, "\n".join(map(str, found))
