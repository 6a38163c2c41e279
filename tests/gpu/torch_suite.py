"""torch's own DLPack tests with dlbind in the exchange (issue 37), run on the device torch's users run them on.

``python tests/gpu/torch_suite.py --role native|consumer|producer [--device cuda|cpu] [--summary PATH]
[pytest args]`` runs torch's ``test/test_dlpack.py`` (``--roles native,consumer,producer --out DIR``: each role
in a child process). torch's wheels do not ship it, so it is read from ``$DLBIND_TORCH_TESTS`` (default
``.cache/torch-tests/test_dlpack.py``), a copy of the file from torch's repository that is carried to the GPU
machine and never committed here (``.cache/torch-tests/SOURCE.txt`` names its commit). Its tests need
``expecttest`` (torch's test utilities import it), which ``.ci/gpu`` installs from the wheel folder where the
interpreter lacks it.

- native role: torch alone, the figures the other two roles are counted beside;
- consumer role: ``torch.from_dlpack(x, device=, copy=)`` becomes ``torch.from_dlpack(dlbind.from_dlpack(x,
  device=, copy=))``: dlbind imports what torch (or the test's wrapper) exports, torch imports dlbind's Tensor;
- producer role: ``torch.from_dlpack(x, ...)`` becomes ``torch.from_dlpack(dlbind.asdlpack(x), ...)`` (raw
  capsules pass unchanged): torch imports what dlbind exports.

Only the test classes of ``--device`` run (``TestTorchDlPackCUDA`` for cuda). Every substituted call is
counted per test: a test that made none exercised torch alone (its own ``__dlpack__`` checks) and is counted
apart, never as a dlbind result. Every failure that remains is listed in ``torch_differences.toml`` (test,
role, torch versions, build, the cause); a listed test is an ``xfail(strict=True)``, so an unlisted failure
fails, and so does a listed difference that no longer fails.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
DIFFERENCES = HERE / "torch_differences.toml"
DEFAULT_FILE = ROOT / ".cache" / "torch-tests" / "test_dlpack.py"
ROLES = ("native", "consumer", "producer")
FIELDS = {"test", "role", "torch", "build", "device", "why"}


def torch_test_file() -> Path:
    path = Path(os.environ.get("DLBIND_TORCH_TESTS", DEFAULT_FILE))
    if not path.is_file():
        raise SystemExit(
            f"torch_suite: no {path}: torch's test/test_dlpack.py (from torch's repository, at the release "
            "installed) is not shipped in its wheels; put a copy there or set DLBIND_TORCH_TESTS"
        )
    return path


def load_differences(role: str, torch_version: str, build: str, device: str) -> dict[str, str]:
    """Test patterns (after the file's ``::``) -> why they differ, for this role, torch version, build, device."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

    with open(DIFFERENCES, "rb") as f:
        data = tomllib.load(f)
    here = Version(torch_version.split("+")[0])
    out = {}
    for entry in data.get("difference", []):
        missing = FIELDS - set(entry)
        if missing:
            raise SystemExit(f"{DIFFERENCES.name}: entry {entry.get('test')!r} lacks {sorted(missing)}")
        if entry["role"] not in (role, "both") or entry["build"] not in (build, "both"):
            continue
        if entry["device"] not in (device, "both") or here not in SpecifierSet(entry["torch"]):
            continue
        out[entry["test"]] = entry["why"]
    return out


def _device_arg(device: Any) -> Any:
    """torch's ``device=`` (a torch.device, a string or an index) in the form dlbind.from_dlpack takes."""
    if device is None or isinstance(device, (str, tuple)):
        return device
    import torch

    if isinstance(device, int):
        return f"cuda:{device}"
    if isinstance(device, torch.device):
        return str(device)
    return device


class DlbindInTorchsTests:
    """The pytest plugin: dlbind on one side of torch.from_dlpack, calls counted per test."""

    def __init__(self, role: str, device: str) -> None:
        import torch
        import torch.utils.dlpack

        import dlbind

        self.torch = torch
        self.dlbind = dlbind
        self.role = role
        self.device = device
        self.calls = 0
        self.by_test: dict[str, dict[str, Any]] = {}
        self.original = torch.utils.dlpack.from_dlpack
        self.build = dlbind.ffi_build() if role != "native" else "both"
        self.differences = (
            load_differences(role, torch.__version__, dlbind.ffi_build(), device) if role != "native" else {}
        )

    def _keywords(self, device: Any, copy: bool | None) -> dict[str, Any]:
        return {k: v for k, v in (("device", device), ("copy", copy)) if v is not None}

    def consumer(self, ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Any:
        self.calls += 1
        tensor = self.dlbind.from_dlpack(ext_tensor, device=_device_arg(device), copy=copy)
        return self.original(tensor)

    def producer(self, ext_tensor: Any, *, device: Any = None, copy: bool | None = None) -> Any:
        if type(ext_tensor).__name__ != "PyCapsule":
            self.calls += 1
            ext_tensor = self.dlbind.asdlpack(ext_tensor)
        return self.original(ext_tensor, **self._keywords(device, copy))

    def pytest_configure(self, config: pytest.Config) -> None:
        if self.role == "native":
            return
        # before collection: the test module's `from torch.utils.dlpack import from_dlpack` takes this one
        replacement = self.consumer if self.role == "consumer" else self.producer
        self.torch.utils.dlpack.from_dlpack = replacement
        self.torch.from_dlpack = replacement

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.torch.utils.dlpack.from_dlpack = self.original
        self.torch.from_dlpack = self.original

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        suffix = self.device.upper()
        keep, drop = [], []
        for item in items:
            cls = getattr(item, "cls", None)
            (keep if cls is not None and cls.__name__.endswith(suffix) else drop).append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        for item in items:
            name = item.nodeid.split("::", 1)[1]
            for pattern, why in self.differences.items():
                if fnmatch.fnmatchcase(name, pattern.replace("[", "[[]")):
                    item.add_marker(pytest.mark.xfail(strict=True, reason=f"listed difference: {why}"))
                    break

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        self.calls = 0
        try:
            return (yield)
        finally:
            self.by_test[item.nodeid.split("::", 1)[1]] = {"calls": self.calls}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        name = report.nodeid.split("::", 1)[1]
        entry = self.by_test.setdefault(name, {"calls": 0})
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            if hasattr(report, "wasxfail"):
                entry["outcome"] = "xpassed" if report.outcome == "passed" else "xfailed"
            else:
                entry["outcome"] = report.outcome

    def counts(self) -> dict[str, Any]:
        outcomes = [entry.get("outcome", "error") for entry in self.by_test.values()]
        counts: dict[str, Any] = {
            key: outcomes.count(key) for key in ("passed", "failed", "skipped", "xfailed", "xpassed", "error")
        }
        through = [e for e in self.by_test.values() if e["calls"] and e.get("outcome") in ("passed", "xfailed")]
        counts["through_dlbind"] = sum(1 for e in through if e.get("outcome") == "passed")
        counts["torch_alone"] = sum(1 for e in self.by_test.values() if not e["calls"] and e.get("outcome") == "passed")
        counts["differences"] = {
            name: str(item) for name, item in sorted(self.differences.items()) if self.role != "native"
        }
        return counts

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        c = self.counts()
        who = "torch alone" if self.role == "native" else f"dlbind {self.dlbind.ffi_build()} as {self.role}"
        line = (
            f"torch {self.torch.__version__} test_dlpack.py on {self.device} with {who}: {c['passed']} passed"
            f" ({c['through_dlbind']} through dlbind), {c['failed']} failed, {c['xfailed']} listed differences,"
            f" {c['skipped']} skipped"
        )
        terminalreporter.write_line(line)


def run_roles(roles: list[str], device: str, out: Path, rest: list[str]) -> int:
    """Each role in a child process of its own (the substitution is per process); one line per role, then
    the comparison with torch's native run. Exit 1 when a role failed (an unlisted failure or a listed
    difference that passed)."""
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    rc = 0
    records = []
    for role in roles:
        build = "" if role == "native" else ("-pure" if os.environ.get("DLBIND_PURE") == "1" else "-compiled")
        summary = out / f"torch-dlpack-{role}{build}.json"
        summary.unlink(missing_ok=True)
        cmd = [sys.executable, __file__, "--role", role, "--device", device, "--summary", str(summary), *rest]
        done = subprocess.run(cmd, check=False)
        if done.returncode != 0:
            rc = 1
        if not summary.is_file():
            print(f"torch-dlpack: {role}: no summary (exit {done.returncode})")
            rc = 1
            continue
        record = json.loads(summary.read_text())
        ran = any(record[k] for k in ("passed", "failed", "skipped", "xfailed", "xpassed", "error"))
        if not ran and done.returncode == 0:
            print(f"torch-dlpack: skipped: torch {record['torch']} made no {device} test class here")
            return rc
        if not ran:
            print(f"torch-dlpack: {role}: no test ran (exit {done.returncode}: a collection error above)")
            rc = 1
            continue
        records.append(record)
    parts = []
    for r in records:
        dlbind_part = "" if r["role"] == "native" else f" ({r['through_dlbind']} through dlbind {r['build']})"
        parts.append(
            f"{r['role']} {r['passed']} passed{dlbind_part}, {r['failed']} failed, {r['xfailed']} listed,"
            f" {r['skipped']} skipped"
        )
    print(f"torch-dlpack: torch {records[0]['torch'] if records else '?'} on {device}: " + " | ".join(parts))
    return rc


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--role", choices=ROLES)
    parser.add_argument("--roles", help="comma-separated roles, each in a child process, with summaries under --out")
    parser.add_argument("--out", default=str(ROOT / ".cache" / "gpu"), help="where --roles writes its JSON")
    parser.add_argument("--device", default="cuda", help="run the test classes of this device (default cuda)")
    parser.add_argument("--summary", help="write the run's counts as JSON here")
    args, rest = parser.parse_known_args(argv)
    path = torch_test_file()
    if args.roles:
        roles = args.roles.split(",")
        unknown = sorted(set(roles) - set(ROLES))
        if unknown:
            parser.error(f"unknown roles {unknown}; known: {', '.join(ROLES)}")
        return run_roles(roles, args.device, Path(args.out), rest)
    if args.role is None:
        parser.error("give --role or --roles")
    plugin = DlbindInTorchsTests(args.role, args.device)

    class Summary:
        def pytest_terminal_summary(self, terminalreporter: Any) -> None:
            if args.summary:
                import dlbind

                record = {
                    "role": args.role,
                    "device": args.device,
                    "torch": plugin.torch.__version__,
                    "build": dlbind.ffi_build() if args.role != "native" else "none",
                    "file": str(path),
                    **plugin.counts(),
                }
                with open(args.summary, "w") as f:
                    json.dump(record, f, indent=1)

    # torch's own conftest and the repository's ini stay out (--confcutdir, -c): only the test file runs
    ini = HERE / "torch_suite.ini"
    options = ["-c", str(ini), "--rootdir", str(path.parent), "--confcutdir", str(path.parent)]
    rc = int(pytest.main([str(path), *options, "-p", "no:cacheprovider", "-q", *rest], plugins=[plugin, Summary()]))
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED and not plugin.by_test:
        # torch makes a device's test class only where the device works (TestTorchDlPackCUDA: a CUDA GPU)
        print(f"torch_suite: skipped: torch {plugin.torch.__version__} made no {args.device} test class here")
        return 0
    return rc


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    os.environ.setdefault("PYTORCH_PRINT_REPRO_ON_FAILURE", "0")
    sys.exit(main(sys.argv[1:]))
