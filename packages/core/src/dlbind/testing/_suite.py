"""dlbind's conformance checks as pytest items in a library's own test suite (the user-facing half).

``conformance_tests(...)`` returns a test function that the plugin (:mod:`dlbind.testing.pytest_plugin`,
loaded by pytest through the ``pytest11`` entry point) parametrizes with one item per check, and whose
results it turns into pytest outcomes (its fixture ``dlbind_outcome``). This module does not import
pytest nor the plugin: dlbind does not depend on pytest, and only the plugin, which pytest loads, does.
"""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from dlbind.testing._checks import CONSUMER_CHECKS, PRODUCER, PRODUCER_CHECKS, Check, Result, run_check
from dlbind.testing._consumer_checks import _default_to_numpy

#: The attribute of a test function made by :func:`conformance_tests` that the plugin looks for.
MARK = "_dlbind_conformance"

#: Seconds an isolated check may take before it counts as hung.
ISOLATED_TIMEOUT = 300.0


def key(check: Check) -> str:
    """The check's name in test ids, ``only=``/``skip=`` and ``python -m dlbind check``: ``producer:values``."""
    return f"{check.kind}:{check.id}"


@dataclass(frozen=True)
class Subject:
    """What the checks run against: the library's array maker and importer, and which checks apply."""

    make_array: Callable[[Any], Any] | None
    from_dlpack: Callable[[Any], Any] | None
    to_numpy: Callable[[Any], Any] | None
    checks: tuple[Check, ...]
    isolate: bool

    def run(self, check: Check) -> Result:
        """Run one check, here or (``isolate``) in a child process; a crash there is a ``crash`` result."""
        if self.isolate:
            return _run_isolated(check, self.make_array, self.from_dlpack, self.to_numpy)
        if check.kind == PRODUCER:
            return run_check(check, self.make_array)
        return run_check(check, self.from_dlpack, self.to_numpy or _default_to_numpy)


def _select(checks: list[Check], only: Iterable[str] | None, skip: Iterable[str]) -> tuple[Check, ...]:
    known = {key(c) for c in checks} | {c.id for c in checks}
    wanted = None if only is None else set(only)
    unwanted = set(skip)
    unknown = sorted((wanted or set()) - known) + sorted(unwanted - known)
    if unknown:
        names = ", ".join(key(c) for c in checks)
        raise ValueError(f"unknown check(s) {', '.join(unknown)}; the checks are: {names}")

    def picked(c: Check) -> bool:
        names = {key(c), c.id}
        return (wanted is None or bool(names & wanted)) and not names & unwanted

    return tuple(c for c in checks if picked(c))


def conformance_tests(
    make_array: Callable[[Any], Any] | None = None,
    from_dlpack: Callable[[Any], Any] | None = None,
    *,
    to_numpy: Callable[[Any], Any] | None = None,
    only: Iterable[str] | None = None,
    skip: Iterable[str] = (),
    isolate: bool = False,
) -> Callable[..., None]:
    """A pytest test function that runs dlbind's conformance checks, one test item per check.

    Assign it to a ``test_*`` name in a test module::

        test_dlpack = conformance_tests(make_array=mylib.asarray, from_dlpack=mylib.from_dlpack)

    ``make_array(numpy_array)`` returns the library's array holding the same values (the producer
    checks); ``from_dlpack(obj)`` is the library's importer (the consumer checks), whose results
    ``to_numpy`` reads back (default: numpy arrays as they are, anything else through dlbind).
    Give either or both. ``only``/``skip`` take check names (``"values"``, or ``"producer:values"``
    for one side). A failed check fails its item with the check's reason; a check that does not apply
    (e.g. a dtype the library does not have) skips with the reason.

    ``isolate=True`` runs each check in a child process, so that a check that crashes the interpreter
    fails its item instead of ending the test run; the callables then travel by reference (pickle), so
    they must be importable: module-level functions, not lambdas or local functions.
    """
    if make_array is None and from_dlpack is None:
        raise TypeError("conformance_tests() needs make_array (producer checks), from_dlpack (consumer checks) or both")
    checks = [*(PRODUCER_CHECKS if make_array is not None else ())]
    checks += CONSUMER_CHECKS if from_dlpack is not None else []
    if isolate:
        try:
            pickle.dumps((make_array, from_dlpack, to_numpy))
        except Exception as exc:
            raise TypeError(
                "isolate=True sends make_array, from_dlpack and to_numpy to a child process by reference: "
                f"pass module-level functions, not lambdas or local functions ({type(exc).__name__}: {exc})"
            ) from None
    subject = Subject(make_array, from_dlpack, to_numpy, _select(checks, only, skip), isolate)

    def test_dlpack_conformance(dlbind_check: Check, dlbind_outcome: Callable[[Check, Result], None]) -> None:
        """One of dlbind's DLPack conformance checks (the item's id names it); the plugin gives both arguments."""
        dlbind_outcome(dlbind_check, subject.run(dlbind_check))

    setattr(test_dlpack_conformance, MARK, subject)
    return test_dlpack_conformance


def _run_isolated(
    check: Check,
    make_array: Callable[[Any], Any] | None,
    from_dlpack: Callable[[Any], Any] | None,
    to_numpy: Callable[[Any], Any] | None,
) -> Result:
    payload = pickle.dumps((key(check), make_array, from_dlpack, to_numpy))
    # The child imports what the callables need from the same places: this process's sys.path.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    args = [sys.executable, "-m", "dlbind.testing._worker", "--pickled"]
    try:
        proc = subprocess.run(args, input=payload, capture_output=True, env=env, timeout=ISOLATED_TIMEOUT)
    except subprocess.TimeoutExpired:
        return Result(check.id, "crash", f"the isolated check did not finish in {ISOLATED_TIMEOUT:g} s")
    lines = proc.stdout.decode(errors="replace").strip().splitlines()
    if proc.returncode == 0 and lines:
        msg = json.loads(lines[-1])
        return Result(check.id, msg["status"], msg["detail"])
    if proc.returncode < 0:
        try:
            how = f"killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            how = f"killed by signal {-proc.returncode}"
    else:
        how = f"exit {proc.returncode}"
    tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
    return Result(check.id, "crash", f"the process running the check died ({how})" + (f": {tail[0]}" if tail else ""))
