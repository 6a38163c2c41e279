"""benchmarks/instructions.py runs each statement as timeit does: set-up and loop inside one function, so
the counted rounds read names as locals and store nothing into a globals dict (issue 27's counts)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import CodeType, ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _instructions() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_bench_instructions", ROOT / "benchmarks" / "instructions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function_code(program: str) -> CodeType:
    consts = [c for c in compile(program, "<bench>", "exec").co_consts if isinstance(c, CodeType)]
    assert len(consts) == 1, "one function holds set-up and loop"
    return consts[0]


def test_the_counted_loop_reads_locals() -> None:
    bench = _instructions()
    code = _function_code(bench._program("dlbind.from_dlpack(a)", 3, "function"))
    assert {"np", "dlbind", "a", "_"} <= set(code.co_varnames)
    module_level = compile(bench._program("dlbind.from_dlpack(a)", 3, "module"), "<bench>", "exec")
    assert "_" in module_level.co_names  # the module-level loop stores its variable by name


@pytest.mark.parametrize("harness", ["function", "module"])
def test_both_harnesses_run_the_statement_once_more_than_counted(harness: str) -> None:
    bench = _instructions()
    calls: list[int] = []
    exec(compile(bench._program("calls.append(0)", 4, harness), "<bench>", "exec"), {"calls": calls})
    assert len(calls) == 5  # one warm-up after the set-up, then the four counted rounds
