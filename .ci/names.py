"""Every name the prose cites exists: the dotted Python names, ``file:function`` references, Sphinx roles and
``*.c``/``*.h``/``*.py`` files named in comments, docstrings and the docs (CHANGELOG.md excluded: it records
what was).

    python .ci/names.py [ROOT]      (nox -s lint runs it; exit status 1 lists each stale name where it stands)

A dotted name of dlbind's packages must import and resolve attribute by attribute (an instance attribute a
class declares in ``__slots__``, its annotations or its ``__init__`` counts); a third-party name is checked
where that library is installed and passed over where it is not. A file must be one of the repository's (a
basename or a path's tail), and a ``file:function`` must define that function there. Files that are not the
repository's and are named on purpose (the header the generator downloads, system headers, what a downstream
build writes) are listed in :data:`ELSEWHERE` with where they are.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import io
import re
import sys
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _checks import Finding, main_of
from _checks import tracked as tracked_files

# what the check prints when it finds something (its count formatted in), and when it does not
FOUND = "{count} stale name(s): rename them where they stand, or say in .ci/names.py why one is not ours"
PASSED = "names: every cited name resolves"

OURS = ("dlbind", "dlbind_cuda", "dlbind_rocm", "dlbind_metal", "dlbind_vulkan", "dlbind_generator")
THEIRS = (
    "numpy", "torch", "jax", "cupy", "ml_dtypes", "tvm_ffi", "paddle", "tensorflow", "mlx", "mindspore", "mxnet",
    "tinygrad", "dpnp", "pyarrow", "warp", "onnxruntime", "numba", "array_api_strict", "array_api_compat", "cffi",
    "pycparser", "jinja2", "hypothesis", "pytest", "nox",
)  # fmt: skip
ALIASES = {"np": "numpy", "jnp": "jax.numpy"}

# Named on purpose, and not files of this repository: where they are.
ELSEWHERE = {
    "dlpack.h": "the header the generator downloads (spec/headers.toml), never committed",
    "HEADER.h": "a placeholder in the generator's usage",
    "OUT.h": "a placeholder in the README's usage",
    "object.h": "CPython's",
    "mman.h": "the C library's (sys/mman.h)",
    "cuda_runtime_api.h": "the CUDA toolkit's",
    "hip_runtime_api.h": "ROCm's",
    "_api.c": "what a vendoring library's build writes (docs/vendoring.md)",
    "_build.py": "the build script vendoring writes into a library (generator/templates/vendored_build.py.j2)",
    "conf.py": "Sphinx's configuration (docs/conf.py)",
    "test_dlpack.py": "numpy's (numpy/_core/tests) and PyTorch's (test/) own DLPack tests, which the suites run",
    "dlpack.c": "numpy's DLPack implementation (numpy/_core/src/multiarray/dlpack.c)",
    "dpnp_iface_arraycreation.py": "dpnp's, where its from_dlpack is (a finding of docs/interop.md)",
    "types.py": "warp's (warp/types.py, a finding of docs/interop.md)",
    "driver_types.h": "the CUDA toolkit's",
    "host_defines.h": "the CUDA toolkit's (crt/host_defines.h)",
    "vulkan_core.h": "the Vulkan headers' (libvulkan-dev)",
    "test_mylib.py": "a user's test file in docs/pytest-plugin.md",
    "example.py": "a user's script in docs/vendoring.md",
    "hostlib/setup.py": "the example libraries of docs/vendoring.md (tests/vendoring writes them from the page)",
    "hostlib/src/hostlib/__init__.py": "the example libraries of docs/vendoring.md",
    "purelib/src/purelib/__init__.py": "the example libraries of docs/vendoring.md",
}
# Placeholders written as names: not references.
PLACEHOLDERS = {"dlbind.x", "dlbind.x.y"}

_ROOTS = "|".join(sorted({*OURS, *THEIRS, *ALIASES}, key=len, reverse=True))
DOTTED = re.compile(rf"(?<![\w./\[-])((?:{_ROOTS})(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
ROLE = re.compile(r":(?:func|class|mod|meth|attr|data|exc|obj):`~?\.?([A-Za-z_][\w.]*)`")
FILE_FUNCTION = re.compile(r"(?<![\w/.-])((?:[\w-]+/)*[A-Za-z_][\w-]*\.(?:py|c|h)):([A-Za-z_]\w*)")
FILE = re.compile(r"(?<![\w.-])((?:[\w-]+/)*[A-Za-z_][\w-]*\.(?:py|c|h))(?![\w/])")


Stale = Finding  # a name cited at ``path:line`` that does not resolve; ``kind``: name, role, file:function or file


def _sources(tracked: list[str]) -> Iterator[str]:
    for path in tracked:
        if "/_generated/" in path or path.startswith(("docs/_build", ".")) or path == "CHANGELOG.md":
            continue
        page = path.endswith(".md") and (path.startswith("docs/") or "/" not in path)
        if page or path.endswith((".py", ".c", ".h")):
            yield path


def texts(path: str, source: str) -> Iterator[tuple[int, str, str]]:
    """(line, text, module) of each comment and docstring of a file; a page of the docs whole."""
    if path.endswith(".md"):
        yield 1, source, ""
    elif path.endswith((".c", ".h")):
        for found in re.finditer(r"/\*.*?\*/|//[^\n]*", source, re.S):
            yield source.count("\n", 0, found.start()) + 1, found.group(0), ""
    else:
        module = _module_of(path)
        try:
            for token in tokenize.generate_tokens(io.StringIO(source).readline):
                if token.type == tokenize.COMMENT:
                    yield token.start[0], token.string, module
        except (tokenize.TokenError, SyntaxError):
            pass
        try:
            tree = ast.parse(source)
        except SyntaxError:
            return
        yield from _docstrings(tree, module, module)


def _docstrings(node: ast.AST, module: str, owner: str) -> Iterator[tuple[int, str, str]]:
    """Each docstring under ``node`` with the name roles in it are relative to: its class, else its module."""
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        doc = ast.get_docstring(node, clean=False)
        if isinstance(node, ast.ClassDef) and module:
            owner = f"{owner}.{node.name}"
        if doc:
            yield getattr(node, "lineno", 1), doc, owner
    for child in ast.iter_child_nodes(node):
        yield from _docstrings(child, module, owner)


def _module_of(path: str) -> str:
    """The importable name of a source file of a package's ``src/`` (``""`` elsewhere)."""
    parts = Path(path).with_suffix("").parts
    if "src" not in parts:
        return ""
    names = list(parts[parts.index("src") + 1 :])
    if names and names[-1] == "__init__":
        names.pop()
    return ".".join(names)


def _instance_attribute(klass: type, name: str) -> bool:
    if name in getattr(klass, "__slots__", ()) or name in getattr(klass, "_fields", ()):
        return True
    for k in klass.__mro__:
        if name in getattr(k, "__annotations__", {}):
            return True
    try:
        import inspect

        return re.search(rf"\bself\.{name}\s*[:=]", inspect.getsource(klass)) is not None
    except (OSError, TypeError):
        return False


def resolves(name: str, strict: bool = True) -> bool | None:
    """Whether dotted ``name`` names something (``strict``: where it is defined, not a module it is imported
    into); None where its library is not installed here."""
    first, _, rest = name.partition(".")
    name = f"{ALIASES[first]}.{rest}" if first in ALIASES else name
    parts = name.split(".")
    if importlib.util.find_spec(parts[0]) is None:
        return None if parts[0] in THEIRS else False
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name and not module.startswith(exc.name):
                return None  # a library it imports is not installed here: nothing to say of it
            continue
        except ImportError:
            continue
        except Exception:  # a library that fails to import here: nothing to say of it
            return None
        for attribute in parts[i:]:
            if not hasattr(obj, attribute):  # an instance attribute its class declares, or nothing
                return isinstance(obj, type) and _instance_attribute(obj, attribute)
            obj = getattr(obj, attribute)
        return not strict or _defined_there(parts, i)
    return False


def _defined_there(parts: list[str], found: int) -> bool:
    """A function or class of dlbind's cited through a module (not a package) it is only imported into is
    cited where it is not: ``dlbind.producer.export_view`` for ``dlbind.export.export_view``."""
    if parts[0] not in OURS or len(parts) - found != 1:
        return True
    module = importlib.import_module(".".join(parts[:found]))
    obj = getattr(module, parts[-1])
    defined = isinstance(obj, type) or (callable(obj) and hasattr(obj, "__code__"))
    if hasattr(module, "__path__") or not defined:
        return True
    return getattr(obj, "__module__", module.__name__) == module.__name__


def _defines(source: str, path: str, function: str) -> bool:
    if path.endswith(".py"):
        found = re.search(rf"^\s*(?:async\s+def|def|class)\s+{function}\b|^\s*{function}\s*[:=]", source, re.M)
        return found is not None
    return re.search(rf"^[\w \t*]*\b{function}\s*\(|#\s*define\s+{function}\b|\b(?:struct|enum)\s+{function}\b",
                     source, re.M) is not None  # fmt: skip


def check(root: Path) -> list[Stale]:
    """Every stale reference of the tree at ``root``."""
    tracked = tracked_files(root)
    by_name: dict[str, list[str]] = {}
    for path in tracked:
        by_name.setdefault(Path(path).name, []).append(path)
    stale: list[Stale] = []
    for path in _sources(tracked):
        source = (root / path).read_text(encoding="utf-8", errors="replace")
        for line, text, module in texts(path, source):
            stale += _stale_in(path, line, text, module, root, by_name)
    return sorted(set(stale))


def _files_named(name: str, by_name: dict[str, list[str]]) -> list[str]:
    return [p for p in by_name.get(Path(name).name, []) if p == name or p.endswith("/" + name)]


def _stale_in(
    path: str, line: int, text: str, module: str, root: Path, by_name: dict[str, list[str]]
) -> Iterator[Stale]:
    for found in DOTTED.finditer(text):
        name = found.group(1)
        if name not in PLACEHOLDERS and resolves(name) is False:
            yield Stale(path, line, "name", name)
    for found in ROLE.finditer(text):
        name = found.group(1)
        if name.split(".")[0] in (*OURS, *THEIRS, *ALIASES):
            scopes = [""]
        elif module:  # relative: to the class, its module, or the package (as Sphinx looks it up)
            scopes = [f"{'.'.join(module.split('.')[:i])}." for i in range(module.count(".") + 1, 0, -1)]
        else:
            continue
        if name not in PLACEHOLDERS and not any(resolves(scope + name, strict=False) for scope in scopes):
            yield Stale(path, line, "role", name)
    for found in FILE_FUNCTION.finditer(text):
        file, function = found.groups()
        where = _files_named(file, by_name)
        if where and not any(_defines((root / p).read_text(errors="replace"), p, function) for p in where):
            yield Stale(path, line, "file:function", f"{file}:{function}")
    for found in FILE.finditer(text):
        file = found.group(1)
        if file not in ELSEWHERE and Path(file).name not in ELSEWHERE and not _files_named(file, by_name):
            yield Stale(path, line, "file", file)


main = main_of(check, FOUND, PASSED)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
