"""Build hook of a dlbind backend: its version is the core's, and it pins that core release (docs/releasing.md).

The five distributions' version is written once, as ``__version__`` in ``packages/core/src/dlbind/__init__.py``.
From the repository this reads it there; from an sdist, which holds no core, from the sdist's own ``PKG-INFO``
(written from the same assignment when the sdist was made). The same file in every backend
(tests/test_distribution_files.py keeps the copies identical).
"""

from __future__ import annotations

import ast
from email.parser import HeaderParser
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
CORE_INIT = HERE.parent / "core" / "src" / "dlbind" / "__init__.py"


def core_version(init: Path) -> str:
    """The literal assigned to ``__version__`` in ``init``, read without importing it."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__version__"]
            and isinstance(node.value, ast.Constant)
        ):
            return str(node.value.value)
    raise SystemExit(f"{init} assigns no literal __version__")


def version() -> str:
    pkg_info = HERE / "PKG-INFO"  # only an sdist has one at its top
    if pkg_info.is_file():
        return str(HeaderParser().parsestr(pkg_info.read_text(encoding="utf-8"))["Version"])
    if CORE_INIT.is_file():
        return core_version(CORE_INIT)
    raise SystemExit(f"no PKG-INFO in {HERE} and no {CORE_INIT}: build from the repository or from an sdist")


VERSION = version()
setup(version=VERSION, install_requires=[f"dlbind=={VERSION}", "cffi>=1.17"])
