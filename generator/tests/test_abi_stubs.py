"""The ``_abi.pyi`` stubs (templates ``_abi.pyi.j2`` and ``backend_abi.pyi.j2``) type ``ffi`` as the class the
generated ABI-mode module makes: ``_cffi_backend.FFI`` (types, ``new``, ``cast``; no ``cdef`` or ``compile``), not
the builder class ``cffi.FFI``. Each committed stub is held to its module, loaded from its file."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
STUBS = sorted(ROOT.glob("packages/*/src/*/_generated/_abi.pyi"))


def _stub_class(stub: Path) -> type:
    """The class the stub annotates ``ffi`` with, resolved through its own import."""
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    imported = {
        alias.asname or alias.name: (node.module, alias.name)
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }
    (annotation,) = (
        node.annotation
        for node in tree.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "ffi"
    )
    assert isinstance(annotation, ast.Name), ast.dump(annotation)
    module, name = imported[annotation.id]
    found: type = getattr(importlib.import_module(module), name)
    return found


def test_every_package_has_a_stub() -> None:
    assert {p.parents[3].name for p in STUBS} >= {"core", "cuda", "rocm", "metal", "vulkan"}


@pytest.mark.parametrize("stub", STUBS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_stub_types_ffi_as_the_module_makes_it(stub: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"_abi_of_{stub.parents[3].name}", stub.with_suffix(".py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the ABI-mode module: it imports _cffi_backend only
    assert type(module.ffi) is _stub_class(stub)
