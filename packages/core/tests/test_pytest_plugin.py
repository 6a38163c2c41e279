"""dlbind's pytest plugin (dlbind.testing.conformance_tests): one pytest item per check, in a user's suite.

Each test writes a tiny user suite and runs pytest on it in a subprocess, where the plugin loads through
the ``pytest11`` entry point of the installed core, as in a library author's own run. The subjects are
numpy and producers broken on purpose (real wrappers of numpy arrays, each with one bug of the kind
the checks are about).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dlbind.testing import CONSUMER_CHECKS, PRODUCER_CHECKS, conformance_tests

pytest_plugins = ["pytester"]

DOCS = Path(__file__).resolve().parents[3] / "docs" / "pytest-plugin.md"
ALL = len(PRODUCER_CHECKS) + len(CONSUMER_CHECKS)


def run(pytester: pytest.Pytester, *args: str) -> tuple[pytest.RunResult, dict[str, str]]:
    """pytest in a subprocess (warnings are errors there too); the outcome of each item by its node id."""
    result = pytester.runpytest_subprocess("-v", "-rfs", "-W", "error", "-p", "no:cacheprovider", *args)
    outcomes = {}
    for line in result.outlines:
        m = re.match(r"^(\S+::\S+) (PASSED|FAILED|SKIPPED|ERROR)\b", line)
        if m:
            outcomes[m.group(1)] = m.group(2)
    return result, outcomes


def of(outcomes: dict[str, str], status: str) -> set[str]:
    return {item for item, got in outcomes.items() if got == status}


def _numpy_before(version: tuple[int, int]) -> bool:
    import numpy as np

    return tuple(int(p) for p in np.__version__.split(".")[:2]) < version


#: Checks numpy's own producer fails before 2.3 (NULL strides for compact arrays, ValueError for a device):
#: findings of numpy that every suite exporting through numpy's __dlpack__ reports there.
NUMPY_OWN = ["producer:strides_emitted", "producer:dl_device_unsupported"] if _numpy_before((2, 3)) else []


def test_numpy_passes_one_item_per_check_named_by_the_check(pytester: pytest.Pytester) -> None:
    # numpy retries __dlpack__ on any TypeError (docs/matrix.md): a finding of its own, skipped here, as
    # are the findings of numpy before 2.3
    findings = ["consumer:real_typeerror_propagates", *NUMPY_OWN]
    pytester.makepyfile(
        test_numpy=f"""
        import numpy as np
        from dlbind.testing import conformance_tests

        test_dlpack = conformance_tests(np.asarray, np.from_dlpack, skip={findings!r})
        """
    )
    result, outcomes = run(pytester)
    assert result.ret == 0, result.stdout.str()
    expected = {f"test_numpy.py::test_dlpack[{c.kind}:{c.id}]" for c in (*PRODUCER_CHECKS, *CONSUMER_CHECKS)}
    expected -= {f"test_numpy.py::test_dlpack[{f}]" for f in findings}
    assert set(outcomes) == expected and len(outcomes) == ALL - len(findings)
    assert "test_numpy.py::test_dlpack[producer:values]" in of(outcomes, "PASSED")
    assert "test_numpy.py::test_dlpack[consumer:deleter_once]" in of(outcomes, "PASSED")
    assert not of(outcomes, "FAILED") and not of(outcomes, "ERROR")
    # whatever numpy cannot hold or import (bf16, fp8 without ml_dtypes' help) is skipped with the reason
    for item in of(outcomes, "SKIPPED"):
        assert "dtype_" in item, item
    if of(outcomes, "SKIPPED"):
        result.stdout.fnmatch_lines(["SKIPPED * producer:dtype_bfloat16 does not apply: *"])


def test_numpys_own_finding_fails_its_item_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_numpy="""
        import numpy as np
        from dlbind.testing import conformance_tests

        test_dlpack = conformance_tests(from_dlpack=np.from_dlpack, only=["real_typeerror_propagates", "zero_d"])
        """
    )
    result, outcomes = run(pytester)
    # numpy 2.x retries on an unrelated TypeError: if a numpy release stops doing so, this item passes
    assert outcomes["test_numpy.py::test_dlpack[consumer:zero_d]"] == "PASSED"
    if outcomes["test_numpy.py::test_dlpack[consumer:real_typeerror_propagates]"] == "FAILED":
        result.stdout.fnmatch_lines(["*consumer:real_typeerror_propagates failed: *", "retried __dlpack__ * times *"])
    assert len(outcomes) == 2


IGNORES_READONLY = """
import numpy as np

import dlbind
from dlbind.testing import conformance_tests


class _Alias:
    def __init__(self, interface, keep):
        self.__array_interface__, self.keep = interface, keep


def from_dlpack(p):
    \"\"\"Imports read-only data writable (the flag ignored, as torch does).\"\"\"
    t = dlbind.from_dlpack(p)
    interface = {**np.asarray(t).__array_interface__, "data": (t.data_ptr, False)}
    return np.asarray(_Alias(interface, t))


test_readonly = conformance_tests(from_dlpack=from_dlpack, only=["readonly_respected", "zero_d"])
"""


def test_a_warning_passes_its_item_and_says_why(pytester: pytest.Pytester) -> None:
    """A check that warns (allowed by the spec, hazardous in use) passes its item with a DLPackHazardWarning in
    pytest's warnings summary, citing the recommendation; ``-W error::...DLPackHazardWarning`` fails it."""
    pytester.makepyfile(test_mylib=IGNORES_READONLY)
    warning = "dlbind.testing.pytest_plugin.DLPackHazardWarning"
    result, outcomes = run(pytester, "-W", f"default::{warning}")
    assert result.ret == 0, result.stdout.str()
    assert outcomes == {
        "test_mylib.py::test_readonly[consumer:readonly_respected]": "PASSED",
        "test_mylib.py::test_readonly[consumer:zero_d]": "PASSED",
    }
    result.stdout.fnmatch_lines(
        ["*DLPackHazardWarning: consumer:readonly_respected warned: *data-apis/array-api#749*flag ignored*"]
    )
    _, outcomes = run(pytester)  # run() turns every warning into an error
    assert outcomes["test_mylib.py::test_readonly[consumer:readonly_respected]"] == "FAILED"


BROKEN = """
import numpy as np

import dlbind
from dlbind.testing import conformance_tests


class IgnoresMaxVersion:
    \"\"\"Forwards every keyword to numpy but max_version: always a legacy capsule.\"\"\"

    def __init__(self, a):
        self.a = np.asarray(a)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.a.__dlpack__(stream=stream, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


class SwallowsKeywords(IgnoresMaxVersion):
    \"\"\"Accepts any keyword silently (consumers cannot fall back on a TypeError).\"\"\"

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None, **ignored):
        return self.a.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def assumes_row_major(a):
    \"\"\"Exports the array's memory as row-major whatever its strides (forgets to pass them).\"\"\"
    return dlbind.from_pointer(a.ctypes.data, a.shape, a.dtype, owner=a)


def no_float16(a):
    if a.dtype == np.float16:
        raise TypeError("mylib has no float16")
    return np.asarray(a)


test_ignores = conformance_tests(make_array=IgnoresMaxVersion)
test_swallows = conformance_tests(make_array=SwallowsKeywords)
# only views whose row-major reading stays inside the buffer (a negative stride would read past it)
test_row_major = conformance_tests(make_array=assumes_row_major, only=["values", "transposed", "offset_view"])
test_no_f16 = conformance_tests(make_array=no_float16)
"""


def test_broken_producers_fail_exactly_their_checks_with_the_reason(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mylib=BROKEN)
    result, outcomes = run(pytester)
    assert result.ret == 1
    assert of(outcomes, "FAILED") == {
        "test_mylib.py::test_ignores[producer:versioned_capsule]",
        "test_mylib.py::test_swallows[producer:unknown_keyword_typeerror]",
        "test_mylib.py::test_row_major[producer:transposed]",
        "test_mylib.py::test_row_major[producer:offset_view]",
    } | {f"test_mylib.py::test_{suite}[{check}]" for suite in ("ignores", "swallows", "no_f16") for check in NUMPY_OWN}
    assert len(outcomes) == 3 * len(PRODUCER_CHECKS) + 3
    assert outcomes["test_mylib.py::test_row_major[producer:values]"] == "PASSED"
    assert outcomes["test_mylib.py::test_no_f16[producer:dtype_float16]"] == "SKIPPED"
    assert outcomes["test_mylib.py::test_no_f16[producer:dtype_float32]"] == "PASSED"
    result.stdout.fnmatch_lines(
        [
            "*producer:versioned_capsule failed: __dlpack__(max_version=(1, 0)) gives 'dltensor_versioned'*",
            "max_version=(1, 0) returned a b'dltensor' capsule*",
        ]
    )
    result.stdout.fnmatch_lines(["*producer:unknown_keyword_typeerror failed: *", "accepted an unknown keyword"])
    result.stdout.fnmatch_lines(["*producer:transposed failed: *", "transposed: values differ *"])
    result.stdout.fnmatch_lines(
        ["SKIPPED * producer:dtype_float16 does not apply: cannot make this array: TypeError: mylib has no float16"]
    )


CRASHES = """
import ctypes

import numpy as np

from dlbind.testing import conformance_tests


class CrashesOnAFutureVersion:
    \"\"\"Dereferences NULL when asked for max_version=(2, 0): a crash, not an exception.\"\"\"

    def __init__(self, a):
        self.a = np.asarray(a)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if max_version is not None and max_version[0] >= 2:
            ctypes.string_at(0)
        return self.a.__dlpack__(stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


test_isolated = conformance_tests(
    make_array=CrashesOnAFutureVersion, isolate=True, only=["values", "future_max_version", "zero_d"]
)
"""


def test_isolate_turns_a_crash_into_a_failed_item(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_crashing=CRASHES)
    result, outcomes = run(pytester)
    assert outcomes == {
        "test_crashing.py::test_isolated[producer:values]": "PASSED",
        "test_crashing.py::test_isolated[producer:future_max_version]": "FAILED",
        "test_crashing.py::test_isolated[producer:zero_d]": "PASSED",
    }
    result.stdout.fnmatch_lines(
        ["*producer:future_max_version crashed: *", "the process running the check died (killed by SIGSEGV)*"]
    )


def test_isolate_needs_callables_importable_by_name() -> None:
    with pytest.raises(TypeError, match="module-level functions, not lambdas"):
        conformance_tests(make_array=lambda a: a, isolate=True)


def test_subject_and_check_names_are_validated() -> None:
    with pytest.raises(TypeError, match="needs make_array"):
        conformance_tests()
    with pytest.raises(ValueError, match=r"unknown check\(s\) producer:nope; the checks are: producer:protocol"):
        conformance_tests(make_array=list, only=["producer:nope"])
    with pytest.raises(ValueError, match="unknown check"):  # a consumer check without from_dlpack
        conformance_tests(make_array=list, skip=["consumer:zero_d"])


def test_loading_the_plugin_imports_no_array_library(pytester: pytest.Pytester) -> None:
    """The entry point loads the plugin in every pytest run of an environment with dlbind: it stays light."""
    pytester.makepyfile(
        test_other="""
        import sys

        def test_unrelated():
            assert "dlbind.testing.pytest_plugin" in sys.modules  # loaded, through the entry point
            heavy = sorted({"numpy", "ml_dtypes", "torch", "jax"} & set(sys.modules))
            assert not heavy, heavy
        """
    )
    result, outcomes = run(pytester)
    assert outcomes == {"test_other.py::test_unrelated": "PASSED"}, result.stdout.str()
    result, outcomes = run(pytester, "-p", "no:dlbind")  # and it can be kept out
    assert outcomes == {"test_other.py::test_unrelated": "FAILED"}


def test_importing_dlbind_before_an_in_process_pytest_warns_nothing(pytester: pytest.Pytester) -> None:
    """pytest marks the packages of a distribution with a pytest11 entry point for assertion rewriting and
    warns when one is imported already, an error under filterwarnings=error: tests/interop/numpy_suite.py
    imports dlbind before its in-process pytest.main(). dlbind's docstring opts out (PYTEST_DONT_REWRITE)."""
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    code = "import sys, dlbind, pytest; sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', '-W', 'error']))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=pytester.path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed" in proc.stdout


def test_dlbind_does_not_import_pytest() -> None:
    """pytest is no dependency of dlbind: only the plugin, which pytest loads, imports it."""
    code = "import sys, dlbind, dlbind.testing; assert 'pytest' not in sys.modules, 'pytest imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def documented_example() -> str:
    """The first ``python`` block of docs/pytest-plugin.md: the example the page promises to be ≤ 5 lines."""
    match = re.search(r"^```python\n(.*?)^```", DOCS.read_text(encoding="utf-8"), re.S | re.M)
    assert match, f"no python block in {DOCS}"
    return match.group(1)


def test_the_documented_example_runs_as_shown(pytester: pytest.Pytester) -> None:
    example = documented_example()
    assert len([line for line in example.splitlines() if line.strip()]) <= 5, example
    pytester.makepyfile(test_mylib=example)
    result, outcomes = run(pytester)
    assert result.ret == (1 if NUMPY_OWN else 0), result.stdout.str()
    assert len(outcomes) >= ALL - 1
    assert of(outcomes, "FAILED") == {f"test_mylib.py::test_dlpack[{c}]" for c in NUMPY_OWN}
    assert "test_mylib.py::test_dlpack[producer:values]" in of(outcomes, "PASSED")
    assert "test_mylib.py::test_dlpack[consumer:deleter_once]" in of(outcomes, "PASSED")
