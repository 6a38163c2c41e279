"""Structure-aware fuzzing of dlbind's consumer: random DLPack structs in capsules, every public operation.

One generator (:func:`build`) draws every field from a *source* of integers, so the same code serves
hypothesis (``HypothesisSource``), a seeded corpus (``RandomSource``: input ``i`` of seed ``s`` is
always the same struct, in either build) and atheris (``AtherisSource``).

Memory safety of the harness itself: every pointer the struct holds (shape, strides, data, the
name) points into an arena this process allocated and keeps alive until the deleter ran, or is
NULL, or (data only) a small wild integer that nothing may read. Operations that read the data
(copies, conversions that copy, ``tobytes``) run only when the struct's own claims stay inside the
arena, as a correct producer's would.

Property (checked by :func:`run_one`): every operation ends in a value or an exception of type
BufferError, TypeError or ValueError; the struct's deleter runs exactly once once everything was
released; the outcome (operation, kind, exception type, message) is recorded for the cross-build
comparison.

Run as a script: ``python dlfuzz.py --seed 0 --count 100000 [--jsonl out.jsonl] [--progress N]``.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import random
import re
import struct
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import nativehelp

import dlbind

ALLOWED = (BufferError, TypeError, ValueError)
# Operations another library performs on a dlbind Tensor by itself (the user calls it, not dlbind): that
# library's own documented refusals are its behaviour, not dlbind's, and are recorded without being a
# violation. numpy's dlpack.c raises RuntimeError for a dtype or device it cannot import.
FOREIGN = {
    "np.from_dlpack": {
        ("RuntimeError", "Unsupported dtype in DLTensor."),
        ("RuntimeError", "Unsupported device in DLTensor."),
        # dlbind carries vector dtypes (DLPack's lanes) to consumers that take them; numpy does not
        ("RuntimeError", "Unsupported lanes in DLTensor dtype."),
    },
}

_ADDRESS = re.compile(r"0x[0-9a-f]{8,}")

# Arena layout (bytes): the managed struct, a region for shape/strides arrays, the data region.
STRUCT_AT = 0
META_AT = 256
META_SIZE = 4096
DATA_AT = META_AT + META_SIZE
DATA_SIZE = 8192
ARENA = DATA_AT + DATA_SIZE

_V = struct.Struct("<IIQQQ")  # version.major, version.minor, manager_ctx, deleter, flags
_T = struct.Struct("<QiiiBBHQQQ")  # data, device type, device id, ndim, code, bits, lanes, shape, strides, byte_offset

BIG = [2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**62, 2**63 - 1, 2**63, 2**64 - 1, 3037000500, 4294967296 + 1]
NAMES = [b"dltensor_versioned", b"dltensor", b"used_dltensor_versioned", b"used_dltensor", b"", b"x", None]


class Source:
    """Integers for the generator; subclasses draw them from hypothesis, a seeded RNG, or atheris."""

    def int(self, lo: int, hi: int) -> int:  # pragma: no cover - interface
        raise NotImplementedError

    def pick(self, options: list[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]

    def bytes(self, n: int) -> bytes:
        return bytes(self.int(0, 255) for _ in range(n))


class RandomSource(Source):
    def __init__(self, seed: str) -> None:
        self.rng = random.Random(seed)

    def int(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def bytes(self, n: int) -> bytes:
        return self.rng.randbytes(n)


class HypothesisSource(Source):
    def __init__(self, data: Any) -> None:
        from hypothesis import strategies as st

        self.data, self.st = data, st

    def int(self, lo: int, hi: int) -> int:
        return int(self.data.draw(self.st.integers(lo, hi)))


class AtherisSource(Source):
    def __init__(self, provider: Any) -> None:
        self.p = provider

    def int(self, lo: int, hi: int) -> int:
        return int(self.p.ConsumeIntInRange(lo, hi))


def _u64(v: int) -> int:
    return v & (2**64 - 1)


def _dim(src: Source) -> int:
    kind = src.int(0, 9)
    if kind <= 5:
        return src.int(0, 5)
    if kind == 6:
        return src.int(0, 300)
    if kind == 7:
        return src.pick(BIG)
    if kind == 8:
        return -src.int(1, 3)
    return src.int(-(2**63), 2**63 - 1)


def _stride(src: Source) -> int:
    kind = src.int(0, 9)
    if kind <= 5:
        return src.int(-4, 8)
    if kind == 6:
        return src.int(-300, 300)
    if kind == 7:
        return src.pick(BIG)
    if kind == 8:
        return -src.pick(BIG)
    return src.int(-(2**63), 2**63 - 1)


@dataclass
class Input:
    """One generated struct in its arena, with what the harness knows about it."""

    arena: Any
    base: int
    versioned: bool
    name: bytes | None
    ndim: int
    shape: list[int] | None
    strides: list[int] | None
    code: int
    bits: int
    lanes: int
    device: tuple[int, int]
    byte_offset: int
    flags: int
    version: tuple[int, int]
    data: int  # 0: NULL, 1: arena, 2: wild
    readable: bool = False
    convert: bool = True
    counter: Any = None
    block: Any = None
    fields: dict[str, Any] = field(default_factory=dict)

    def calls(self) -> int:
        return int(self.counter[0]) if self.counter is not None else 1

    def describe(self) -> str:
        return (
            f"{'versioned' if self.versioned else 'legacy'} name={self.name!r} ndim={self.ndim} shape={self.shape} "
            f"strides={self.strides} dtype=({self.code},{self.bits},{self.lanes}) device={self.device} "
            f"byte_offset={self.byte_offset} flags={self.flags:#x} version={self.version} data={self.data}"
        )


def build(src: Source) -> Input:
    """Draw one struct from ``src`` and lay it out in a fresh arena."""
    ffi = nativehelp.ffi
    arena = nativehelp.raw_alloc(ARENA)  # freed by settle() once the deleter ran, else never
    base = int(ffi.cast("uintptr_t", arena))
    buf = ffi.buffer(arena, ARENA)
    versioned, name = _name(src)
    ndim = _ndim(src)
    n_entries = max(0, min(ndim, 70))
    shape, strides = _shape_and_strides(src, n_entries)
    buf[DATA_AT : DATA_AT + 64] = src.bytes(64)  # some non-zero data; the rest stays zero
    # shape/strides pointers: NULL, the usual spot, or anywhere past the struct that fits the entries (the
    # struct holds this process's addresses: read as dimensions they would differ between the builds' runs)
    shape, shape_ptr = _place(src, buf, base, shape, n_entries, null_up_to=0, usual=META_AT)
    strides, strides_ptr = _place(src, buf, base, strides, n_entries, null_up_to=1, usual=META_AT + META_SIZE // 2)
    code, bits, lanes = _dtype(src)
    dev_type, dev_id = _device(src)
    byte_offset, flags, version = _header_fields(src)
    data_kind, data = _data(src, base)
    counter = ffi.cast("int64_t *", nativehelp.raw_alloc(8))
    ctx = int(ffi.cast("uintptr_t", counter))
    tensor = _T.pack(
        data, dev_type, _s32(dev_id), _s32(ndim), code, bits, lanes, shape_ptr, strides_ptr, _u64(byte_offset)
    )
    _write_struct(buf, versioned, tensor, version, ctx, flags)
    # Re-read what the pointers show: wild pointers may overlap each other or the struct.
    if shape_ptr:
        shape = list(struct.unpack_from(f"<{n_entries}q", buf, shape_ptr - base))
    if strides_ptr:
        strides = list(struct.unpack_from(f"<{n_entries}q", buf, strides_ptr - base))
    item = Input(
        arena, base, versioned, name, ndim, shape, strides, code, bits, lanes, (dev_type, dev_id),
        byte_offset, flags if versioned else 0, version if versioned else (0, 0), data_kind, counter=counter,
    )  # fmt: skip
    item.readable = _readable(item, data - base if data_kind == 1 else -1)
    return item


def _name(src: Source) -> tuple[bool, bytes | None]:
    """Whether the struct is versioned, and the capsule's name (``None``: a nameless capsule)."""
    versioned = src.int(0, 3) != 0
    name = src.pick(NAMES) if src.int(0, 3) == 0 else (b"dltensor_versioned" if versioned else b"dltensor")
    if name in (b"dltensor_versioned", b"dltensor"):
        # The name decides the layout a consumer reads: a mismatch would make it call a garbage deleter
        # pointer, which no consumer can survive (the producer lied about the memory, not the metadata).
        versioned = name == b"dltensor_versioned"
    if name is None:
        versioned = True  # a nameless capsule is never consumed; the helper's destructor reads it as versioned
    return versioned, name


def _ndim(src: Source) -> int:
    """Mostly 0 to 4 dimensions; sometimes up to 70, or a count no consumer may take."""
    k = src.int(0, 19)
    return src.int(0, 4) if k < 14 else src.int(0, 70) if k < 18 else src.pick([-1, -(2**31), 2**31 - 1, 65, 64])


def _shape_and_strides(src: Source, n_entries: int) -> tuple[list[int], list[int]]:
    """``n_entries`` dimensions and strides, the strides contiguous for a quarter of the inputs."""
    shape = [_dim(src) for _ in range(n_entries)]
    strides = [_stride(src) for _ in range(n_entries)]
    if src.int(0, 3) == 0 and n_entries:  # well-formed: contiguous strides
        acc = 1
        for i in reversed(range(n_entries)):
            strides[i] = acc
            acc *= max(shape[i], 1)
            if acc >= 2**63:
                acc = 1
    return shape, strides


def _place(
    src: Source, buf: Any, base: int, values: list[int], n_entries: int, null_up_to: int, usual: int
) -> tuple[list[int] | None, int]:
    """Where the array ``values`` goes: NULL (a draw up to ``null_up_to`` of 0 to 9), ``usual`` (below 8) or anywhere
    past the struct that fits it, written there. The array (``None`` for NULL) and its address (0 for NULL)."""
    where = src.int(0, 9)
    if where <= null_up_to:
        return None, 0
    span = 8 * n_entries
    off = usual if where < 8 else META_AT + 8 * src.int(0, (ARENA - META_AT - span) // 8)
    struct.pack_into(f"<{n_entries}Q", buf, off, *[_u64(v) for v in values])
    return values, base + off


def _dtype(src: Source) -> tuple[int, int, int]:
    """(code, bits, lanes): mostly DLPack's codes and widths, one lane; a tenth of each drawn from its whole range."""
    k = src.int(0, 9)
    code = src.int(0, 255) if k == 0 else src.pick([0, 1, 2, 4, 5, 6, 7, 8])
    k = src.int(0, 9)
    bits = src.int(0, 255) if k == 0 else src.pick([1, 4, 8, 16, 32, 64, 128])
    k = src.int(0, 9)
    lanes = src.int(0, 65535) if k == 0 else (2 if k == 1 else 1)
    return code, bits, lanes


def _device(src: Source) -> tuple[int, int]:
    """(device type, device id): mostly the CPU, a few others, any type a tenth of the time."""
    k = src.int(0, 9)
    dev_type = src.int(0, 255) if k == 0 else src.pick([1, 1, 1, 1, 2, 3, 13])
    dev_id = src.pick([0, 0, 0, 1, -1, 2**31 - 1])
    return dev_type, dev_id


def _header_fields(src: Source) -> tuple[int, int, tuple[int, int]]:
    """(byte_offset, flags, version): mostly usual values, each drawn from its whole range a tenth of the time."""
    k = src.int(0, 9)
    byte_offset = src.int(0, 2**64 - 1) if k == 0 else src.pick([0, 0, 0, 0, 8, 16, 3, 256, 2**63, 2**64 - 8])
    k = src.int(0, 9)
    flags = src.int(0, 2**64 - 1) if k == 0 else src.pick([0, 0, 0, 1, 2, 4, 3, 7])
    k = src.int(0, 9)
    version = (src.int(0, 2**32 - 1), src.int(0, 2**32 - 1)) if k == 0 else (src.pick([1, 1, 1, 0, 2]), src.int(0, 5))
    return byte_offset, flags, version


def _data(src: Source, base: int) -> tuple[int, int]:
    """(kind, pointer) of the data: 0 NULL, 1 an 8-byte aligned spot in the arena's data region, 2 a small wild
    integer that nothing may read."""
    k = src.int(0, 9)
    data_kind = 0 if k == 0 else 2 if k == 1 else 1
    data = {0: 0, 1: base + DATA_AT + 8 * src.int(0, DATA_SIZE // 8 - 1), 2: src.int(1, 4096)}[data_kind]
    return data_kind, data


def _write_struct(buf: Any, versioned: bool, tensor: bytes, version: tuple[int, int], ctx: int, flags: int) -> None:
    """The managed struct at the arena's start, with the helper's deleter: versioned (version, manager_ctx, deleter,
    flags, then the tensor) or legacy (the tensor, then manager_ctx and deleter)."""
    if versioned:
        buf[0:32] = _V.pack(*version, ctx, nativehelp.DELETER_V, flags)
        buf[32 : 32 + _T.size] = tensor
    else:
        buf[0 : _T.size] = tensor
        struct.pack_into("<QQ", buf, 48, ctx, nativehelp.DELETER_L)


def _s32(v: int) -> int:
    return ((v + 2**31) % 2**32) - 2**31


def _readable(item: Input, data_off: int) -> bool:
    """True when every byte the struct claims lies in the arena's data region (so reading it is safe)."""
    if data_off < 0 or item.ndim < 0 or item.ndim > 70 or (item.shape is None and item.ndim > 0):
        return False
    shape = item.shape or []
    if any(d < 0 for d in shape):
        return False
    if 0 in shape:
        return True
    if item.strides is None:
        strides, acc = [], 1
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    else:
        strides = item.strides
    count = 1
    for d in shape:
        count *= d
    if count * max(1, -(-item.bits * item.lanes // 8)) > 1 << 20:
        return False  # zero strides can make a huge tensor of a few bytes: a compact copy would be huge
    lo = sum(min(0, (d - 1) * s) for d, s in zip(shape, strides, strict=False))
    hi = sum(max(0, (d - 1) * s) for d, s in zip(shape, strides, strict=False))
    size = max(1, -(-item.bits * item.lanes // 8))
    start = data_off + item.byte_offset + lo * size
    end = data_off + item.byte_offset + (hi + 1) * size
    return start >= DATA_AT and end <= ARENA


def _libraries() -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("numpy", "torch", "jax", "array_api_strict", "tvm_ffi"):
        try:
            out[name] = __import__(name)
        except Exception:
            continue
    return out


LIBS = _libraries()


def _buffer_protocol() -> bool:
    """Whether this build's Tensor exports the buffer protocol (the pure build does not: reported, not fuzzed)."""
    try:
        memoryview(dlbind.from_dlpack(dlbind.asdlpack(bytearray(4))))
    except TypeError:
        return False
    return True


BUFFER = _buffer_protocol()


class Violation(Exception):
    """The property failed for an input (wrong exception type or deleter count)."""


def _summary(value: Any) -> str:
    if isinstance(value, dlbind.Tensor):
        return f"Tensor{value.shape}{value.strides}"
    if isinstance(value, (tuple, int, bool, str)):
        return repr(value)
    return type(value).__name__


def _ops(item: Input, t: Any) -> Iterator[tuple[str, Callable[[], Any]]]:
    """Every public operation on a Tensor, those that read the data only when reading is safe."""
    yield "shape", lambda: t.shape
    yield "strides", lambda: t.strides
    yield "byte_strides", lambda: t.byte_strides
    yield "dtype", lambda: str(t.dtype)
    yield "device", lambda: t.device
    yield "nbytes", lambda: t.nbytes
    yield "size", lambda: t.size
    yield "readonly", lambda: t.readonly
    yield "flags", lambda: int(t.flags)
    yield "is_contiguous", lambda: t.is_contiguous
    yield "repr", lambda: repr(t)
    yield "__dlpack_device__", lambda: t.__dlpack_device__()
    yield "reexport_v", lambda: dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3)))
    yield "reexport_legacy", lambda: dlbind.from_dlpack(t.__dlpack__())
    yield "reexport_stream", lambda: dlbind.from_dlpack(t.__dlpack__(stream=None, max_version=(1, 0)))
    yield "reexport_device", lambda: dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), dl_device=t.device))
    yield "dlpack_bad_stream", lambda: t.__dlpack__(stream=0, max_version=(1, 3))
    yield "dlpack_copy_false", lambda: dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), copy=False))
    yield "from_dlpack(tensor)", lambda: dlbind.from_dlpack(t)
    np = LIBS.get("numpy")
    if np is not None:
        yield "np.asarray", lambda: np.asarray(t).shape
        yield "np.from_dlpack", lambda: np.from_dlpack(t).shape
    if BUFFER:
        yield "memoryview", lambda: memoryview(t).nbytes
    if not item.readable:
        return
    yield "copy", lambda: t.copy().shape
    yield "dlpack_copy_true", lambda: dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), copy=True)).shape
    if np is not None:
        yield "np.asarray.tobytes", lambda: len(np.asarray(t).tobytes())
    if BUFFER:
        yield "memoryview.tobytes", lambda: len(memoryview(t).tobytes())
    for name in LIBS:
        yield f"convert:{name}", lambda name=name: type(dlbind.convert(t, to=name)).__name__


def run_one(item: Input, record: list[tuple[Any, ...]]) -> list[str]:
    """Feed ``item`` through dlbind; append outcomes to ``record``; return property violations so far.

    The deleter count is checked by :func:`settle` (after a garbage collection when needed).
    """
    problems: list[str] = []
    item.block = nativehelp.name_block(item.name, item.versioned)
    capsule = nativehelp.new_capsule(item.base, item.block, has_name=item.name is not None)
    t = None
    try:
        t = dlbind.from_dlpack(capsule)
        record.append(("from_dlpack", "ok", _summary(t)))
    except ALLOWED as exc:
        record.append(("from_dlpack", "exc", type(exc).__name__, str(exc)))
    except BaseException as exc:
        record.append(("from_dlpack", "exc", type(exc).__name__, str(exc)))
        problems.append(f"from_dlpack raised {type(exc).__name__}: {exc}")
    if t is not None:
        for op, fn in _ops(item, t):
            if op.startswith("convert") and not item.convert:
                continue
            try:
                value = fn()
                record.append((op, "ok", _summary(value)))
            except ALLOWED as exc:
                record.append((op, "exc", type(exc).__name__, str(exc)))
            except BaseException as exc:
                record.append((op, "exc", type(exc).__name__, str(exc)))
                if (type(exc).__name__, str(exc)) not in FOREIGN.get(op, ()):
                    problems.append(f"{op} raised {type(exc).__name__}: {exc}")
            del fn
    del t, capsule
    return problems


def settle(item: Input, record: list[tuple[Any, ...]], problems: list[str]) -> None:
    """Record the deleter count of a released input; exactly one call is the property."""
    calls = item.calls()
    record.append(("deleter_calls", calls))
    if calls != 1:
        problems.append(f"deleter called {calls} times")
    if calls:  # nobody can use the struct any more: free it (a leaked one stays, so a late deleter is safe)
        for block in (item.arena, item.block, item.counter):
            if block is not None:
                nativehelp.lib.free(block)
        item.arena = item.block = item.counter = None


def run_checked(item: Input) -> tuple[list[tuple[Any, ...]], list[str]]:
    """:func:`run_one` then :func:`settle` after a garbage collection (for single inputs)."""
    record: list[tuple[Any, ...]] = []
    problems = run_one(item, record)
    if item.calls() != 1:
        gc.collect()
    settle(item, record, problems)
    return record, problems


def corpus(seed: int, start: int, count: int) -> Iterator[tuple[int, Input]]:
    for i in range(start, start + count):
        yield i, build(RandomSource(f"{seed}:{i}"))


#: An input run and not settled yet: its number, the input, its outcomes so far and its violations so far.
Entry = tuple[int, Input, list[tuple[Any, ...]], list[str]]


def main(argv: list[str] | None = None) -> int:
    args = _arguments(argv)
    if args.no_convert:
        LIBS.clear()
        LIBS.update({k: v for k, v in _libraries().items() if k == "numpy"})
    out = open(args.jsonl, "w") if args.jsonl else None  # noqa: SIM115
    violations = 0
    t0 = time.perf_counter()
    done = 0
    pending: list[Entry] = []
    for i, item in corpus(args.seed, args.start, args.count):
        item.convert = args.convert_every > 0 and i % args.convert_every == 0
        _announce(i, item, out)
        record: list[tuple[Any, ...]] = []
        problems = run_one(item, record)
        if item.calls() == 1:
            violations += _finish((i, item, record, problems), out, args.hash)
        else:  # something still holds the tensor (a cycle, a traceback): settle after one gc for many
            pending.append((i, item, record, problems))
            if len(pending) >= 500:
                violations += _finish_all(pending, out, args.hash)
        done += 1
        if args.progress and done % args.progress == 0:
            rate = done / (time.perf_counter() - t0)
            build = dlbind.ffi_build()
            print(f"[{build}] {done}/{args.count} inputs, {rate:.0f}/s, {violations} violations", flush=True)
    violations += _finish_all(pending, out, args.hash)
    elapsed = time.perf_counter() - t0
    print(
        f"[{dlbind.ffi_build()}] done: {done} inputs in {elapsed:.1f} s ({done / elapsed:.0f}/s), "
        f"{violations} violations, deleter total {nativehelp.total_calls()}",
        flush=True,
    )
    if out is not None:
        out.close()
    return 1 if violations else 0


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--jsonl", help="write one JSON line of outcomes per input (for the cross-build diff)")
    parser.add_argument("--progress", type=int, default=0, help="print a progress line every N inputs")
    parser.add_argument("--hash", action="store_true", help="write a digest of each input's outcomes, not the outcomes")
    parser.add_argument("--no-convert", action="store_true", help="skip the conversions to other libraries")
    parser.add_argument("--convert-every", type=int, default=1, help="convert every k-th input only (they are slow)")
    return parser.parse_args(argv)


def _announce(i: int, item: Input, out: Any) -> None:
    """Name input ``i`` before it runs, so that a crash names it: in ``out``, and on stderr under DLFUZZ_TRACE."""
    if out is not None:
        out.write(f"#{i}\n")
        out.flush()
    if os.environ.get("DLFUZZ_TRACE"):
        print(f"input {i}: {item.describe()}", file=sys.stderr, flush=True)


def _finish(entry: Entry, out: Any, digest: bool) -> int:
    """:func:`settle` an input, print its violations and write its line to ``out``; 1 if it violated the property."""
    i, item, record, problems = entry
    settle(item, record, problems)
    if problems:
        print(f"VIOLATION input {i} ({item.describe()}): {problems}", flush=True)
    if out is not None:
        out.write(f"{i}\t{len(problems)}\t{_outcomes(record, digest)}\n")
    return 1 if problems else 0


def _finish_all(pending: list[Entry], out: Any, digest: bool) -> int:
    """:func:`_finish` every pending input after one garbage collection; how many violated the property."""
    gc.collect()
    violations = sum(_finish(entry, out, digest) for entry in pending)
    pending.clear()
    return violations


def _outcomes(record: list[tuple[Any, ...]], digest: bool) -> str:
    """An input's outcomes as JSON, or (``digest``) a digest of those both builds give."""
    if not digest:
        return json.dumps(record)
    # the buffer protocol is compiled-only: left out of the cross-build digest
    shared = [r for r in record if not str(r[0]).startswith("memoryview")]
    text = _ADDRESS.sub("0x?", json.dumps(shared))  # object reprs name process addresses
    return hashlib.sha256(text.encode()).hexdigest()[:16]


if __name__ == "__main__":
    sys.exit(main())
