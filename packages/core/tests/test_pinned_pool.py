"""``dlbind._gpu_runtime.PinnedPool``: the pinned blocks GPU host copies land in, over a made-up allocator.

The GPU backends' tests drive the same pool through the recording runtimes (``tests/gpu_backends``); here
its bookkeeping is checked alone: size classes, reuse, the bound (eviction, PoolFull, blocks freed when
given back past it), staging blocks past the bound, a failed allocation, threads, the environment variable.
"""

from __future__ import annotations

import gc
import threading

import pytest

from dlbind._gpu_runtime import DEFAULT_POOL_BYTES, POOL_ENV, PinnedPool, PoolFull, pool_bound

MiB = 1 << 20


class Pinning:
    """A made-up runtime's pinned allocations: addresses counted up, what was freed."""

    def __init__(self) -> None:
        self.next = 0x1000
        self.live: dict[int, int] = {}
        self.freed: list[int] = []
        self.fail = 0

    def allocate(self, nbytes: int) -> tuple[int, object]:
        if self.fail:
            self.fail -= 1
            raise MemoryError("cudaHostAlloc failed: out of memory (cudaErrorMemoryAllocation)")
        address, self.next = self.next, self.next + nbytes
        self.live[address] = nbytes
        return address, self.free

    def free(self, address: int) -> None:
        del self.live[address]
        self.freed.append(address)


@pytest.fixture
def pinning() -> Pinning:
    return Pinning()


def test_size_classes() -> None:
    size = PinnedPool.size_class
    assert size(1) == size(MiB) == MiB
    assert size(MiB + 1) == MiB + MiB // 4  # quarter steps: at most 25 % more than asked
    assert size(256 * MiB) == 256 * MiB
    assert size(256 * MiB + 1) == 320 * MiB
    for n in (MiB + 1, 3 * MiB + 5, 1000 * MiB - 7, (1 << 34) + 3):
        assert n <= size(n) <= n * 1.25


def test_blocks_are_reused(pinning: Pinning) -> None:
    pool = PinnedPool(pinning.allocate, 64 * MiB)
    a = pool.take(3 * MiB)
    assert a.size == 3 * MiB and pool.leased == 3 * MiB and pool.idle == 0
    address = a.address
    del a
    gc.collect()
    assert pool.leased == 0 and pool.idle == 3 * MiB and pinning.freed == []
    b = pool.take(3 * MiB - 100)  # the same size class
    assert b.address == address and len(pinning.live) == 1
    c = pool.take(3 * MiB)  # b is leased: a new block
    assert c.address != address and len(pinning.live) == 2
    b.release()
    b.release()  # once only
    assert pool.leased == 3 * MiB and pool.idle == 3 * MiB


def test_the_bound(pinning: Pinning) -> None:
    pool = PinnedPool(pinning.allocate, 8 * MiB)
    a = pool.take(4 * MiB)
    b = pool.take(2 * MiB)
    with pytest.raises(PoolFull, match=rf"the pinned pool is full: {6 * MiB} of its {8 * MiB} bytes are in use "
                       rf"and a copy needs {4 * MiB} more \(raise {POOL_ENV}\)"):  # fmt: skip
        pool.take(4 * MiB)
    assert isinstance(PoolFull(), MemoryError)
    staging = pool.take(4 * MiB, over_bound=True)  # staging blocks may pass the bound...
    assert pool.leased == 10 * MiB
    staging.release()  # ... and are freed when given back past it
    assert pinning.freed == [staging.address] and pool.idle == 0
    a_address = a.address
    a.release()
    b.release()
    assert pool.idle == 6 * MiB and pinning.freed == [staging.address]
    # a block of another size class makes room by freeing idle ones, largest first
    c = pool.take(3 * MiB)
    assert pinning.freed[-1] == a_address and pool.idle == 2 * MiB and pool.leased == 3 * MiB
    c.release()
    pool.trim()
    assert pool.idle == 0 and pinning.live == {}


def test_a_failed_allocation_leaves_the_pool_as_it_was(pinning: Pinning) -> None:
    pool = PinnedPool(pinning.allocate, 8 * MiB)
    pinning.fail = 1
    with pytest.raises(MemoryError, match="out of memory"):
        pool.take(2 * MiB)
    assert pool.leased == 0 and pool.idle == 0
    assert pool.take(2 * MiB).size == 2 * MiB


def test_a_zero_bound_pins_nothing_for_long(pinning: Pinning) -> None:
    pool = PinnedPool(pinning.allocate, 0)
    with pytest.raises(PoolFull):
        pool.take(1)
    block = pool.take(1, over_bound=True)
    block.release()
    assert pinning.live == {} and pool.leased == pool.idle == 0


def test_threads(pinning: Pinning) -> None:
    pool = PinnedPool(pinning.allocate, 16 * MiB)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(200):
                size = MiB * (1 + (seed + i) % 3)
                try:
                    block = pool.take(size)
                except PoolFull:
                    continue
                with lock:  # no two leases share memory
                    assert block.address in pinning.live
                block.release()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pool.leased == 0 and pool.idle == sum(pinning.live.values()) <= 16 * MiB


@pytest.mark.parametrize(
    ("value", "bound"),
    [(None, DEFAULT_POOL_BYTES), ("", DEFAULT_POOL_BYTES), ("0", 0), ("1048576", MiB), ("512M", 512 * MiB),
     ("2g", 2 << 30), ("64K", 64 << 10)],
)  # fmt: skip
def test_the_environment_variable(monkeypatch: pytest.MonkeyPatch, value: str | None, bound: int) -> None:
    if value is None:
        monkeypatch.delenv(POOL_ENV, raising=False)
    else:
        monkeypatch.setenv(POOL_ENV, value)
    assert pool_bound() == bound


@pytest.mark.parametrize("value", ["lots", "-5", "1.5G", "M"])
def test_a_bad_environment_variable_says_so(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(POOL_ENV, value)
    with pytest.raises(ValueError, match=f"{POOL_ENV}='{value}' is not a number of bytes"):
        pool_bound()
