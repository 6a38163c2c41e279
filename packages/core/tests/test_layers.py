"""The runtime's layers: each dlbind module imports only from its own layer or below, and nothing
imports in a circle (docs/design.md, "Runtime layering").

Every module of the package is parsed with ``ast`` from the source tree: imports at module level and
inside functions, ``from dlbind import x``, ``import dlbind.x``, relative imports, and
``importlib.import_module("dlbind.x")`` with a literal name. Importing a module implicitly imports
its parent packages; those edges are not counted (``dlbind/__init__.py`` is the facade on top).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

# Bottom to top. A module may import modules of its own layer (without a cycle) and of lower layers.
# This table is the one place the order is written down; a module that is not in it fails the test.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "generated spec and enums, cffi builds",
        (
            "dlbind._generated",
            "dlbind._generated._abi",
            "dlbind._generated.adapters",
            "dlbind._generated.build_api",
            "dlbind._generated.enums",
            "dlbind._generated.tables",
            "dlbind._generated.spec_tables",
            "dlbind._api",  # the compiled cffi module, built from _generated/build_api.py
            "dlbind._fastpath",  # the C extension of the hot paths, built from dlbind/_fastpath/*.c
            "dlbind._ffi",
            "dlbind._capi",
            "dlbind._load",  # how a module imported on its own gets the runtime loaded (calls up, imports nothing)
            "dlbind.spec",
        ),
    ),
    (
        "dtypes, devices, libraries",
        ("dlbind._names", "dlbind.dtypes", "dlbind.devices", "dlbind._backends", "dlbind._libraries"),
    ),
    ("dtypes and devices of every system, read and made", ("dlbind.crossing",)),
    ("the validator of memory descriptions", ("dlbind.validate",)),
    ("capsule and export engine", ("dlbind.capsule", "dlbind.export")),
    ("memory an object describes, and its Exporter", ("dlbind.described",)),
    ("producer types: what they export and how they are asked", ("dlbind.sources",)),
    ("asking a producer: its __dlpack__ call and the spec's retries", ("dlbind.asking",)),
    ("Tensor", ("dlbind.tensor",)),
    ("exchange", ("dlbind.exchange",)),
    ("consumer", ("dlbind.consumer",)),
    ("producers", ("dlbind.producer",)),
    ("targets' routes and the Decisions", ("dlbind.routes",)),
    ("bridges", ("dlbind.bridges",)),
    ("convert, compat", ("dlbind.conversion",)),
    ("package: public names, fast-path wiring", ("dlbind", "dlbind._wiring")),
    (
        "testing, CLI",
        (
            "dlbind.testing",
            "dlbind.testing._checks",
            "dlbind.testing._consumer_checks",
            "dlbind.testing._devices",
            "dlbind.testing._worker",
            "dlbind.testing._suite",
            "dlbind.testing.pytest_plugin",
            "dlbind.check",
            "dlbind.__main__",
        ),
    ),
    # On top, so that no module of the core imports them: only the backend distributions do.
    ("bases of the device backends", ("dlbind._gpu_runtime", "dlbind._device_tensors")),
)
# Modules made at install time (no source in the tree to parse).
BUILT = frozenset({"dlbind._api", "dlbind._fastpath"})

LAYER_OF = {module: index for index, (_, modules) in enumerate(LAYERS) for module in modules}


def package_sources() -> dict[str, str]:
    """Module name -> source text, for every ``.py`` file of the dlbind package."""
    sources = {}
    for path in sorted((SRC / "dlbind").rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        sources[".".join(parts)] = path.read_text(encoding="utf-8")
    return sources


def _is_package(module: str, sources: dict[str, str]) -> bool:
    return any(other.startswith(module + ".") for other in sources) or module == "dlbind"


def imports_of(module: str, source: str, known: set[str], is_package: bool) -> list[tuple[str, int]]:
    """The dlbind modules ``module`` imports, with line numbers, wherever the import statement is."""
    found: list[tuple[str, int]] = []
    package = module if is_package else module.rpartition(".")[0]

    def add(name: str, line: int) -> None:
        if (name == "dlbind" or name.startswith("dlbind.")) and (name, line) not in found:
            found.append((name, line))

    for node in ast.walk(ast.parse(source, filename=module)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            for alias in node.names:
                # `from a import b` imports the module a.b when there is one, else a name of a
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in known else base, node.lineno)
        elif (
            isinstance(node, ast.Call)
            and (
                (isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                or (isinstance(node.func, ast.Name) and node.func.id in ("import_module", "__import__"))
            )
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            add(node.args[0].value, node.lineno)
    return found


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each strongly connected component with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)

    cycles = []
    for component in components:
        members = set(component)
        start = min(component)
        path, seen = [start], {start}
        # walk inside the component until we come back to a module already on the path
        while True:
            succ = min(s for s in graph[path[-1]] if s in members)
            if succ in seen:
                cycles.append([*path[path.index(succ) :], succ])
                break
            path.append(succ)
            seen.add(succ)
    return cycles


def violations(sources: dict[str, str]) -> list[str]:
    """Every breach of the layer order in ``sources`` (module name -> source), as messages."""
    problems = []
    for module in sources:
        if module not in LAYER_OF:
            problems.append(f"{module} is missing from the layer table in {Path(__file__).name}")
    for module in LAYER_OF:
        if module not in sources and module not in BUILT:
            problems.append(f"{module} is in the layer table but is not a module of the package")
    known = set(sources) | set(LAYER_OF)
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        edges = graph.setdefault(module, set())
        for target, line in imports_of(module, source, known, _is_package(module, sources)):
            if target == module:
                continue
            edges.add(target)
            if target not in LAYER_OF:
                problems.append(f"{module} (line {line}) imports {target}, which is missing from the layer table")
                continue
            here, there = LAYER_OF.get(module), LAYER_OF[target]
            if here is not None and there > here:
                problems.append(
                    f"{module} (line {line}, layer {here}: {LAYERS[here][0]}) imports {target} "
                    f"(layer {there}: {LAYERS[there][0]}), a higher layer"
                )
    for cycle in _cycles(graph):
        problems.append("import cycle: " + " -> ".join(cycle))
    return problems


def test_the_package_keeps_its_layers() -> None:
    sources = package_sources()
    assert "dlbind.tensor" in sources and "dlbind._generated.enums" in sources  # the tree was found
    assert violations(sources) == []


def test_every_layer_is_used() -> None:
    sources = package_sources()
    for name, modules in LAYERS:
        assert any(m in sources or m in BUILT for m in modules), f"layer {name!r} has no module"


# Each case breaks the real package in one way; the checker must name the offending import.
_BREAKS = {
    "module-level upward": ("dlbind.capsule", "from dlbind import consumer\n", ["dlbind.capsule", "dlbind.consumer"]),
    "function-local upward": (
        "dlbind.tensor",
        "def _late():\n    from dlbind.producer import asdlpack\n    return asdlpack\n",
        ["dlbind.tensor", "dlbind.producer", "higher layer"],
    ),
    "import dotted": ("dlbind.consumer", "import dlbind.conversion\n", ["dlbind.consumer", "dlbind.conversion"]),
    "relative": (
        "dlbind.export",
        "def _late():\n    from .routes import route_to\n    return plan\n",
        ["dlbind.export", "dlbind.routes"],
    ),
    "name from the package": (
        "dlbind.producer",
        "from dlbind import convert\n",
        ["dlbind.producer", "imports dlbind "],
    ),
    "importlib": (
        "dlbind.exchange",
        "import importlib\n_check = importlib.import_module('dlbind.check')\n",
        ["dlbind.exchange", "dlbind.check"],
    ),
    "module not in the table": ("dlbind.helpers", "", ["dlbind.helpers is missing from the layer table"]),
    "target not in the table": ("dlbind.tensor", "from dlbind.nowhere import x\n", ["dlbind.nowhere"]),
}


@pytest.mark.parametrize("case", sorted(_BREAKS))
def test_the_checker_names_what_breaks_the_order(case: str) -> None:
    module, added, expected = _BREAKS[case]
    sources = package_sources()
    sources[module] = sources.get(module, "") + "\n" + added
    problems = violations(sources)
    assert problems, f"{case}: no violation found"
    assert any(all(text in p for text in expected) for p in problems), problems


def test_relative_imports_resolve_to_modules() -> None:
    sources = package_sources()
    known = set(sources)
    source = "from .. import exchange\nfrom . import _worker\nfrom ..export import Memory\nfrom .. import Tensor\n"
    assert imports_of("dlbind.testing._checks", source, known, is_package=False) == [
        ("dlbind.exchange", 1),
        ("dlbind.testing._worker", 2),
        ("dlbind.export", 3),
        ("dlbind", 4),
    ]
    assert imports_of("dlbind.testing", "from . import _checks\n", known, is_package=True) == [
        ("dlbind.testing._checks", 1)
    ]


def test_a_same_layer_cycle_is_reported_is_reported_as_a_cycle() -> None:
    sources = package_sources()
    sources["dlbind.dtypes"] += "\nfrom dlbind import devices\n"
    sources["dlbind.devices"] += "\nfrom dlbind import dtypes\n"
    problems = violations(sources)
    assert problems == ["import cycle: dlbind.devices -> dlbind.dtypes -> dlbind.devices"]


# -- the C fast path ------------------------------------------------------------------------------------------

# The C files of dlbind._fastpath, bottom to top: a file uses the non-static names (functions, globals) of
# the files below it only. What every file uses (the configuration, counters, keyword lookup) is common.c's.
C_LAYERS = (
    "common.c", "policy.c", "copy.c", "capsules.c", "exporter.c", "exchange.c", "tensor.c", "table.c", "convert.c",
    "module.c",
)  # fmt: skip
FASTPATH = SRC / "dlbind" / "_fastpath"
_C_DEFINITION = re.compile(r"^(?!static\b)[A-Za-z][\w \*]*?\b(dlbind_\w+)\s*(?:\(|=|;|\[)", re.MULTILINE)
_C_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.DOTALL)


def c_violations(sources: dict[str, str]) -> list[str]:
    """Every use of a name defined in a C file above the user (file name -> source), as messages."""
    problems = [f"{name} is missing from C_LAYERS" for name in sources if name not in C_LAYERS]
    problems += [f"{name} is in C_LAYERS but not a C file of the fast path" for name in C_LAYERS if name not in sources]
    code = {name: _C_COMMENT.sub(" ", text) for name, text in sources.items()}
    defined = {m.group(1): name for name, text in code.items() for m in _C_DEFINITION.finditer(text)}
    for name, text in code.items():
        if name not in C_LAYERS:
            continue
        for symbol, owner in defined.items():
            above = owner != name and owner in C_LAYERS and C_LAYERS.index(owner) > C_LAYERS.index(name)
            if above and re.search(rf"\b{symbol}\b", text):
                problems.append(f"{name} uses {symbol} of {owner}, a file above it")
    return problems


def c_sources() -> dict[str, str]:
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(FASTPATH.glob("*.c"))}


def test_the_c_files_are_layered() -> None:
    assert c_violations(c_sources()) == []


def test_the_c_check_names_an_upward_use() -> None:
    sources = c_sources()
    sources["capsules.c"] += "\nstatic void probe(void) { (void)dlbind_tensor_wrap; }\n"
    assert c_violations(sources) == ["capsules.c uses dlbind_tensor_wrap of tensor.c, a file above it"]
