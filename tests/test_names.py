"""The names check of ``nox -s lint`` (.ci/names.py) fails on a stale name: each kind planted in a small tree."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

CHECKER = Path(__file__).resolve().parents[1] / ".ci" / "names.py"


@pytest.fixture(scope="module")
def names() -> ModuleType:
    spec = importlib.util.spec_from_file_location("dlbind_names_check", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _tree(root: Path, files: dict[str, str]) -> Path:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "add", "."], check=True)
    return root


PLANTED = {
    "src/pkg/mod.py": '''"""Cites dlbind.convert and dlbind.routes.Route (both real), dlbind.no_such_name (stale),
:func:`dlbind.routes.plan` (stale), dlbind.producer.export_view (imported there, defined in dlbind.export:
stale), present.c:real_fn (real), present.c:gone_fn (stale), missing.h (stale), present.h (real) and test_gone.py
(stale)."""

# a comment citing dlbind.Tensor.copy (real) and dlbind.Tensor.paste (stale)
''',
    "src/pkg/present.c": "/* present.h */\nint real_fn(void) { return 0; }\n",
    "src/pkg/present.h": "int real_fn(void);\n",
    "docs/page.md": "A page citing `dlbind.from_dlpack` (real) and `dlbind.nothing_here` (stale).\n",
    "CHANGELOG.md": "- Removed `dlbind.old_name` (the changelog records what was: never checked).\n",
}


def test_every_planted_stale_name_is_found(names: ModuleType, tmp_path: Path) -> None:
    found = {(s.kind, s.name) for s in names.check(_tree(tmp_path, PLANTED))}
    assert found == {
        ("name", "dlbind.no_such_name"),
        ("role", "dlbind.routes.plan"),
        ("name", "dlbind.routes.plan"),
        ("name", "dlbind.producer.export_view"),
        ("file:function", "present.c:gone_fn"),
        ("file", "missing.h"),
        ("file", "test_gone.py"),
        ("name", "dlbind.Tensor.paste"),
        ("name", "dlbind.nothing_here"),
    }


def test_a_clean_tree_passes_and_main_says_so(
    names: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean = {path: text for path, text in PLANTED.items() if path != "src/pkg/mod.py"}
    clean["docs/page.md"] = "A page citing `dlbind.from_dlpack` and dlbind.routes.Route.adapter (a field).\n"
    assert names.main(["names.py", str(_tree(tmp_path, clean))]) == 0
    assert "every cited name resolves" in capsys.readouterr().out


def test_a_rename_leaves_the_old_name_stale(names: ModuleType, tmp_path: Path) -> None:
    """A function renamed in a C file while a comment still cites it by ``file:function``."""
    root = _tree(
        tmp_path, {"a.c": "/* b.c:helper does the work */\n", "b.c": "static int helper2(void) { return 1; }\n"}
    )
    assert [str(s) for s in names.check(root)] == ["a.c:1: file:function b.c:helper"]
    assert names.main(["names.py", str(root)]) == 1
