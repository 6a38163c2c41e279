"""dlbind's pytest plugin: runs the conformance checks of :mod:`dlbind.testing` as pytest items.

pytest loads it through the ``pytest11`` entry point ``dlbind`` of the core distribution (``-p dlbind``
loads it where plugin autoloading is off; ``-p no:dlbind`` keeps it out). Loading it costs
``import dlbind`` and nothing else: it does nothing until a test module holds a test function made by
:func:`dlbind.testing.conformance_tests`, which it parametrizes with one item per check. numpy and the
checks are imported only then. This is the only module of dlbind that imports pytest.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable

    from dlbind.testing._checks import Check, Result

# dlbind.testing._suite.MARK, spelled out so that loading the plugin imports no checks.
_MARK = "_dlbind_conformance"


class DLPackHazardWarning(UserWarning):
    """A check warned: the library did what the spec allows but what is hazardous in use (its item passes, and
    pytest's warnings summary says what and why; ``-W error::dlbind.testing.pytest_plugin.DLPackHazardWarning``
    fails it instead)."""


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One item per check for a test function made by ``conformance_tests``, named ``producer:values`` etc."""
    subject = getattr(metafunc.function, _MARK, None)
    if subject is None:
        return
    from dlbind.testing._suite import key

    metafunc.parametrize("dlbind_check", subject.checks, ids=[key(c) for c in subject.checks])


@pytest.fixture
def dlbind_outcome() -> Callable[[Check, Result], None]:
    """How a test function made by ``conformance_tests`` reports a check's result: :func:`outcome`."""
    return outcome


def outcome(check: Check, result: Result) -> None:
    """The check's result as the item's outcome: pass, pass with a warning (allowed, hazardous in use), skip (does
    not apply) or fail, each with the reason."""
    from dlbind.testing import _checks
    from dlbind.testing._suite import key

    if result.status == _checks.PASS:
        return
    ref = f" [{check.ref}]" if check.ref else ""
    if result.status == _checks.WARN:
        warnings.warn(DLPackHazardWarning(f"{key(check)} warned: {check.text}{ref}: {result.detail}"), stacklevel=2)
        return
    if result.status == _checks.UNSUPPORTED:
        pytest.skip(f"{key(check)} does not apply: {result.detail}")
    what = "crashed" if result.status == _checks.CRASH else "failed"
    pytest.fail(f"{key(check)} {what}: {check.text}{ref}\n{result.detail}", pytrace=False)
