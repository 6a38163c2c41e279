"""A DLPack conformance suite any library can run in its own tests.

    from dlbind.testing import check_producer, check_consumer

    report = check_producer(lambda a: mylib.asarray(a))        # a numpy array in, your array out
    report = check_consumer(mylib.from_dlpack, to_numpy=np.asarray)
    assert report.ok, report.summary()

In a pytest suite, one item per check (dlbind's pytest plugin parametrizes it)::

    from dlbind.testing import conformance_tests

    test_dlpack = conformance_tests(make_array=mylib.asarray, from_dlpack=mylib.from_dlpack)

Each check comes from the DLPack Python spec or from a bug users hit (the reference list of the
project). A check either passes, warns (``warn``: the library did what the spec allows but what is
hazardous in use, e.g. read-only data imported writable; the reason cites the recommendation), fails
(with what was wrong), or is ``unsupported`` (the library cleanly refused something the spec lets it
refuse, e.g. a dtype it does not have). ``report.ok`` is true with warnings. numpy is needed.
"""

from dlbind.testing._checks import CONSUMER_CHECKS, PRODUCER_CHECKS, Check, Report, Result, check_producer
from dlbind.testing._consumer_checks import check_consumer
from dlbind.testing._suite import conformance_tests

__all__ = [
    "CONSUMER_CHECKS",
    "PRODUCER_CHECKS",
    "Check",
    "Report",
    "Result",
    "check_consumer",
    "check_producer",
    "conformance_tests",
]
