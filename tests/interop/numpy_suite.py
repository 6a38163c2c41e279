"""numpy's own DLPack tests, run from the installed wheel with dlbind in the exchange (issue 13).

``python tests/interop/numpy_suite.py --role producer|consumer [--summary PATH] [pytest args]`` runs the
``test_dlpack.py`` that ships inside the installed numpy (``numpy/_core/tests/`` from 2.0,
``numpy/core/tests/`` before); nothing of it is copied into this repository. This module is also the
pytest plugin of that run:

- producer role: ``np.from_dlpack(x)`` becomes ``np.from_dlpack(dlbind.asdlpack(x))`` (raw capsules pass
  unchanged), so numpy imports what dlbind exports;
- consumer role: ``np.from_dlpack(x, device=, copy=)`` becomes ``np.asarray(dlbind.from_dlpack(x, ...))``,
  an ndarray view of what dlbind imported.

Every call is counted; a test that made none did not go through dlbind and fails. Every difference that
remains is listed in numpy_differences.toml (test, role, numpy versions, build, the spec clause that allows
it): a listed test is an xfail(strict=True), so an unlisted failure fails, and so does a listed difference
that no longer fails.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
DIFFERENCES = HERE / "numpy_differences.toml"
ROLES = ("producer", "consumer")


def numpy_test_file() -> Path:
    base = Path(np.__file__).resolve().parent
    for sub in ("_core/tests/test_dlpack.py", "core/tests/test_dlpack.py"):
        if (base / sub).is_file():
            return base / sub
    raise SystemExit(f"numpy {np.__version__} at {base} ships no test_dlpack.py")


def load_differences(role: str, numpy_version: str, build: str) -> dict[str, str]:
    """Test patterns (after the file's ``::``) -> why they differ, for this role, numpy version and build."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    with open(DIFFERENCES, "rb") as f:
        data = tomllib.load(f)
    here = Version(numpy_version)
    out = {}
    for entry in data["difference"]:
        missing = {"test", "role", "numpy", "build", "clause", "why"} - set(entry)
        if missing:
            raise SystemExit(f"{DIFFERENCES.name}: entry {entry.get('test')!r} lacks {sorted(missing)}")
        if entry["role"] not in (role, "both") or entry["build"] not in (build, "both"):
            continue
        if here not in SpecifierSet(entry["numpy"]):
            continue
        out[entry["test"]] = f"{entry['why']} [allowed by: {entry['clause']}]"
    return out


class DlbindInTheExchange:
    """The pytest plugin: substitutes dlbind for one side of numpy's from_dlpack and counts the calls."""

    def __init__(self, role: str) -> None:
        import dlbind

        self.dlbind = dlbind
        self.role = role
        self.calls = 0
        self.original = np.from_dlpack
        self.differences = load_differences(role, np.__version__, dlbind.ffi_build())

    def producer(self, x: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if type(x).__name__ != "PyCapsule":
            x = self.dlbind.asdlpack(x)
        return self.original(x, *args, **kwargs)

    def consumer(self, x: Any, *, device: Any = None, copy: bool | None = None) -> Any:
        self.calls += 1
        return np.asarray(self.dlbind.from_dlpack(x, device=device, copy=copy))

    def pytest_configure(self, config: pytest.Config) -> None:
        np.from_dlpack = self.producer if self.role == "producer" else self.consumer

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        np.from_dlpack = self.original

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        for item in items:
            name = item.nodeid.split("::", 1)[1]
            for pattern, why in self.differences.items():
                if fnmatch.fnmatchcase(name, pattern.replace("[", "[[]")):
                    item.add_marker(pytest.mark.xfail(strict=True, reason=f"listed difference: {why}"))
                    break

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        self.calls = 0
        result = yield
        if self.calls == 0:
            raise AssertionError(f"{item.name} made no exchange through dlbind ({self.role} role)")
        return result

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        import dlbind

        terminalreporter.write_line(
            f"numpy {np.__version__} test_dlpack.py with dlbind {dlbind.ffi_build()} as {self.role}: "
            f"{len(self.differences)} listed difference pattern(s)"
        )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=ROLES, required=True)
    parser.add_argument("--summary", help="write the run's counts as JSON here")
    args, rest = parser.parse_known_args(argv)
    sys.path.insert(0, str(HERE))
    from _suite import write_summary

    plugin = DlbindInTheExchange(args.role)
    path = numpy_test_file()

    class Summary:
        def pytest_terminal_summary(self, terminalreporter: Any) -> None:
            if args.summary:
                write_summary(terminalreporter, args.summary)

    # numpy's own conftest and ini stay out (--confcutdir, -c): only the test file runs, with xfail_strict
    ini = HERE / "numpy_suite.ini"
    options = ["-c", str(ini), "--rootdir", str(path.parent), "--confcutdir", str(path.parent)]
    return int(pytest.main([str(path), *options, "-p", "no:cacheprovider", "-q", *rest], plugins=[plugin, Summary()]))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main(sys.argv[1:]))
