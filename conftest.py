"""Every test run from this tree (the core's, the backends', the generator's, ``tests/``): the heap that lived
before a test is frozen (``gc.freeze``) as the test starts.

The cyclic collector then walks only what the current test makes. Without it, each ``gc.collect`` a test calls
(the leak, lifetime and reliability tests call it hundreds of times) walked the whole suite's heap, with
torch, JAX and TensorFlow loaded: about 0.15 s a call, 48 s of a compiled run of the suite. What a test makes
is collected as before, and its deleters run when it drops them; the garbage of the test before is collected
first, so none of it is frozen. What outlives its test (a module's fixture, a cache) is never collected by the
cycle collector after that, which no test asks of it.

``gc.get_referrers`` does not see frozen objects. Hypothesis asks it whether the PRNG it registers at its first
test is referred to, and warns (an error here) where it finds nothing, as on Python 3.14 and 3.15 with the heap
frozen: a Hypothesis test runs with the heap unfrozen.
"""

from __future__ import annotations

import gc

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before the test's fixtures are made: collect the last test's garbage, then freeze what is left (unfreeze
    it for a Hypothesis test)."""
    gc.collect()
    if getattr(getattr(item, "obj", None), "is_hypothesis_test", False):
        gc.unfreeze()
    else:
        gc.freeze()
