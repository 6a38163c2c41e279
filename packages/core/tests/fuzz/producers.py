"""Fuzzing of producer objects (issue 38): what describes memory wrongly, through every entry point.

``python producers.py --seed S --count N [--jsonl FILE]`` generates N objects from seed S and hands each to
every entry point and copy path of the build the environment selects (``DLBIND_PURE``); ``--both DIR`` runs
both builds in child processes (surviving crashes), compares them input by input and writes
``DIR/summary.json`` (``nox -s fuzz``):

- ``__array_interface__`` dicts whose ``data`` is a ``(pointer, read_only)`` tuple or a buffer object, with
  pointers valid, valid plus an offset, NULL, negative, at or past 2**64 or close enough below it that the
  elements wrap; lying shapes (negative, huge, too many dimensions), strides (too few, not multiples of the
  item size, huge) and buffers shorter than the description; missing or malformed keys;
- objects with only a buffer (memoryviews of real bytes, reshaped and sliced);
- ``__cuda_array_interface__`` dicts (with ``device_id`` given, so no GPU is asked), through ``asdlpack``.

A pointer in a tuple is only ever one the generator owns (a real buffer, as far as its description says)
or one the validator must refuse: dlbind trusts a consistent raw pointer, as the docs say. Every outcome
must be a value, or one of ``BufferError``, ``TypeError``, ``ValueError``, ``MemoryError``; a value's data
must equal numpy's reading of the same bytes. Each input's outcomes (exception type and message, or a
digest of the values) are written one JSON line per input, for the cross-build comparison.

Exit status: 0 with no violation, 1 with violations (printed as ``VIOLATION`` lines). A crash is the
driver's to see (its exit status).
"""

from __future__ import annotations

import argparse
import ctypes
import hashlib
import json
import math
import os
import random
import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import dlbind

ALLOWED = ("BufferError", "TypeError", "ValueError", "MemoryError")
MAX = 2**64
TYPESTRS = ["<f8", "<f4", "<i2", "|u1", "|b1", "<c8", "<i8", "<u4"]
WRONG_TYPESTRS: list[Any] = ["f", "", "<x8", ">f8", 8, None, "<f3"]
# the entry points and copy paths every object goes through (name -> call)
ENTRIES: dict[str, Callable[[Any], Any]] = {
    "from_dlpack": lambda x: dlbind.from_dlpack(x),
    "from_dlpack copy": lambda x: dlbind.from_dlpack(x, copy=True),
    "from_dlpack cpu": lambda x: dlbind.from_dlpack(x, device="cpu"),
    "asdlpack": lambda x: np.from_dlpack(dlbind.asdlpack(x)),
    "asdlpack copy": lambda x: np.from_dlpack(dlbind.asdlpack(x), copy=True),
    "asdlpack legacy": lambda x: dlbind.from_dlpack(dlbind.asdlpack(x).__dlpack__()),
    "convert numpy": lambda x: dlbind.convert(x, to="numpy"),
    "convert numpy copy": lambda x: dlbind.convert(x, to="numpy", copy=True),
    "explain": lambda x: str(dlbind.explain(x, to="numpy")),
}
CUDA_ENTRIES: dict[str, Callable[[Any], Any]] = {
    "asdlpack device_id": lambda x: dlbind.asdlpack(x, device_id=0).__dlpack_device__(),
}


_ADDRESS = re.compile(r"0x[0-9a-f]+|\b[0-9]{12,}\b")  # hex addresses, and decimal ones (12 digits and more)


class Interface:
    """An object whose ``__array_interface__`` is whatever the generator made (lies included)."""

    def __init__(self, iface: dict[str, Any], keep: Any) -> None:
        self.__array_interface__ = iface
        self.keep = keep  # the real buffer its pointer may point into


class CudaInterface:
    def __init__(self, cai: dict[str, Any]) -> None:
        self.__cuda_array_interface__ = cai


def _reach(shape: tuple[int, ...], strides: Any, item: int) -> tuple[int, int] | None:
    """The bytes ``(low, high)`` a well-formed description's elements reach from its pointer (the generator's own
    count, not dlbind's), or None when the description is malformed (the validator refuses it whatever the
    pointer) or addresses nothing (zero elements)."""
    if any(d < 0 for d in shape) or (strides is not None and len(strides) != len(shape)):
        return None
    if strides is None:
        strides, acc = [], item
        for d in reversed(shape):
            strides.insert(0, acc)
            acc *= d
    if any(s % item for s in strides) or 0 in shape:
        return None
    low = sum(s * (d - 1) for d, s in zip(shape, strides, strict=True) if s < 0)
    high = sum(s * (d - 1) for d, s in zip(shape, strides, strict=True) if s > 0) + item
    if high - low > 2**63:
        return None
    return low, high


def _pointer(
    rng: random.Random, base: int, length: int, reach: tuple[int, int] | None, huge: bool = False
) -> tuple[int, str]:
    """A pointer and its kind: one whose elements lie inside the real buffer, or one the validator must refuse
    (NULL, negative, at or past 2**64, or so close below it that the elements wrap). Never a consistent pointer
    to memory the generator does not own: dlbind trusts those."""
    kinds = ["inside", "inside", "inside", "null", "negative", "past", "wrap"]
    kind = rng.choice(kinds)
    if reach is None:  # refused for its description (or nothing is addressed): any pointer will do
        return rng.choice([base, 0, -8, MAX, MAX - 8, base + 8]), "any"
    low, high = reach
    if huge:
        kind = rng.choice(["null", "negative", "past"])
    if kind == "inside":
        first, last = base - low, base + length - high  # where the first element may be
        if first <= last:
            return rng.randint(first, last), kind
        kind = rng.choice(kinds[3:])
    if kind == "null":
        return 0, kind
    if kind == "negative":
        return -rng.choice([1, 8, 4096, 2**63]), kind
    if kind == "past":
        return MAX + rng.choice([0, 8, 2**64]), kind
    if high >= 2:  # a pointer below 2**64 whose last element's end passes it
        return MAX - rng.randint(0, high - 2), kind
    return MAX + 8, "past"


def _shape(rng: random.Random) -> tuple[int, ...]:
    ndim = rng.choice([0, 1, 1, 2, 2, 3, 65])
    if ndim == 65:
        return (1,) * 65
    choices = [0, 1, 2, 3, 4, 5, -1, -5, 2**31, 2**62]
    weights = [2, 4, 4, 4, 3, 3, 1, 1, 1, 1]
    return tuple(rng.choices(choices, weights)[0] for _ in range(ndim))


def _strides(rng: random.Random, shape: tuple[int, ...], item: int) -> Any:
    kind = rng.choice(["none", "none", "compact", "reversed", "few", "odd", "huge", "zero"])
    if kind == "none":
        return None
    if kind == "few":
        return tuple(item for _ in shape[1:])
    if kind == "odd":
        return tuple(item + 1 for _ in shape)
    if kind == "huge":
        return tuple(2**62 for _ in shape)
    if kind == "zero":
        return tuple(0 for _ in shape)
    out, acc = [], item
    for d in reversed(shape):
        out.append(acc)
        acc *= max(d, 1) if 0 <= d < 2**20 else 1
    out.reverse()
    return tuple(-s for s in out) if kind == "reversed" else tuple(out)


def make(rng: random.Random) -> tuple[Any, str]:
    """One producer object and a short label of what it is."""
    length = rng.choice([0, 8, 24, 64, 256])
    store = (ctypes.c_char * max(length, 1))()
    base = ctypes.addressof(store)
    which = rng.choice(["interface tuple"] * 5 + ["interface buffer"] * 3 + ["interface malformed", "buffer", "cuda"])
    typestr = rng.choice(TYPESTRS)
    item = int(typestr[2:])
    shape = _shape(rng)
    iface: dict[str, Any] = {"version": 3, "shape": shape, "typestr": typestr}
    strides = _strides(rng, shape, item)
    if strides is not None:
        iface["strides"] = strides
    if which == "buffer":
        view = memoryview(bytearray(rng.choice([0, 8, 24, 64])))
        fmt = rng.choice(["B", "d", "i", "h"])
        size = {"B": 1, "d": 8, "i": 4, "h": 2}[fmt]
        view = view[: len(view) // size * size].cast(fmt) if len(view) >= size else view
        return view[:: rng.choice([1, 2, -1])], f"buffer {fmt}"
    reach = _reach(shape, strides, item)
    # a broadcast this large is a legitimate, huge copy: never placed inside the buffer (refused pointers only)
    huge = reach is not None and math.prod(shape) > 1 << 20
    if which == "cuda":
        pointer, kind = _pointer(rng, base, length, reach, huge)
        cai = dict(iface, data=(pointer, False), version=3)
        return CudaInterface(cai), f"cuda {kind} {shape}"
    if which == "interface buffer":
        if huge:  # compact: its elements reach past the buffer (a broadcast of it would be a huge, legitimate copy)
            iface.pop("strides", None)
        iface["data"] = rng.choice([bytearray(length), bytes(length), memoryview(bytearray(length))[::2] if length
                                    else bytearray()])  # fmt: skip
        if rng.random() < 0.3:
            iface["offset"] = rng.choice([0, 8, -8, length])
        return Interface(iface, store), f"interface buffer {shape} {strides}"
    if which == "interface malformed":
        broken = dict(iface, data=(base, False))
        fault = rng.choice(["no shape", "no typestr", "typestr", "data", "shape", "strides", "mask", "offset"])
        if fault == "no shape":
            del broken["shape"]
        elif fault == "no typestr":
            del broken["typestr"]
        elif fault == "typestr":
            broken["typestr"] = rng.choice(WRONG_TYPESTRS)
        elif fault == "data":
            broken["data"] = rng.choice([(base,), (base, False, 1), ("x", False), (None, False), 3.5, "data"])
        elif fault == "shape":
            broken["shape"] = rng.choice(["abc", 3, (1.5,), ("2",), None, [True]])
        elif fault == "strides":
            broken["strides"] = rng.choice(["abc", 8, (1.5,), [None]])
        elif fault == "mask":
            broken["mask"] = object()
        else:
            broken["offset"] = rng.choice(["8", 1.5, None])
        return Interface(broken, store), f"interface malformed {fault}"
    pointer, kind = _pointer(rng, base, length, reach, huge)
    iface["data"] = (pointer, rng.random() < 0.3)
    return Interface(iface, store), f"interface {kind} {shape} {strides}"


def _values(value: Any) -> str:
    """A digest of what an entry point gave: its type, and for arrays and Tensors their bytes."""
    if isinstance(value, str):  # explain's sentence: the builds word their C and Python routes apart
        return "a sentence"
    if isinstance(value, tuple):
        return repr(value)
    array = np.asarray(value) if isinstance(value, dlbind.Tensor) else value
    if isinstance(array, np.ndarray):
        data = array.tobytes() if array.size < 2**16 else b"large"
        return f"{type(value).__name__} {array.dtype} {array.shape} {hashlib.sha256(data).hexdigest()[:16]}"
    return type(value).__name__


def check(x: Any, label: str) -> tuple[dict[str, str], list[str]]:
    """Every entry point on ``x``: outcomes by entry, and the violations found."""
    outcomes: dict[str, str] = {}
    violations: list[str] = []
    entries = CUDA_ENTRIES if isinstance(x, CudaInterface) else ENTRIES
    reference = None
    # numpy's own reading of the same description, where it is safe to ask (a buffer, whose length numpy checks,
    # or a pointer the generator placed inside its own buffer): the values dlbind gives must be the same
    if isinstance(x, memoryview) or label.startswith(("interface inside", "interface buffer")):
        try:
            reference = np.asarray(x)
        except Exception:
            reference = None
    for name, call in entries.items():
        try:
            value = call(x)
            outcomes[name] = "ok " + _values(value)
            if reference is not None and name != "explain" and not isinstance(value, str | tuple):
                got = np.asarray(value) if isinstance(value, dlbind.Tensor) else value
                if got.dtype == reference.dtype and not np.array_equal(got, reference, equal_nan=True):
                    violations.append(f"{label}: {name} gave other values than numpy's reading of the buffer")
        except Exception as exc:  # what escapes is the test: only the spec's types, named
            kind = type(exc).__name__
            outcomes[name] = f"{kind}: {_ADDRESS.sub('?', str(exc))}"  # addresses differ from run to run
            if kind not in ALLOWED:
                violations.append(f"{label}: {name} raised {kind}: {exc}")
    return outcomes, violations


def both(seed: int, count: int, out_dir: str) -> dict[str, Any]:
    """Inputs [0, count) of ``seed`` on the compiled then the pure build, each in child processes (a crash is
    recorded with its input and the run resumes after it), then the builds' outcomes compared input by input:
    ``{"inputs": .., "crashes": {build: [inputs]}, "violations": {build: n}, "divergences": [inputs]}``."""
    import subprocess

    os.makedirs(out_dir, exist_ok=True)
    summary: dict[str, Any] = {"inputs": count, "seed": seed, "crashes": {}, "violations": {}, "divergences": []}
    lines: dict[str, dict[int, str]] = {}
    for build, pure in (("compiled", "0"), ("pure", "1")):
        got: dict[int, str] = {}
        crashes: list[int] = []
        violations = 0
        start = 0
        while start < count:
            part = os.path.join(out_dir, f"{build}.jsonl")
            proc = subprocess.run(
                [sys.executable, __file__, "--seed", str(seed), "--start", str(start), "--count", str(count - start),
                 "--jsonl", part],
                env=dict(os.environ, DLBIND_PURE=pure), capture_output=True, text=True,
            )  # fmt: skip
            violations += sum(1 for line in proc.stdout.splitlines() if line.startswith("VIOLATION"))
            last = start - 1
            with open(part) as f:
                for line in f:
                    if line.startswith("#"):
                        last = int(line[1:])
                    elif line.strip():
                        i, _, record = line.rstrip("\n").partition("\t")
                        got[int(i)] = record
            if proc.returncode in (0, 1):
                break
            crashes.append(last)  # the input started and never written: the crash's
            print(f"CRASH [{build}] input {last} (exit {proc.returncode}): {proc.stderr[-400:]}", flush=True)
            start = last + 1
        lines[build] = got
        summary["crashes"][build] = crashes
        summary["violations"][build] = violations
    summary["divergences"] = [i for i in range(count) if lines["compiled"].get(i) != lines["pure"].get(i)]
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(summary, f)
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--jsonl", help="write one JSON line of outcomes per input (for the cross-build diff)")
    parser.add_argument("--both", metavar="DIR", help="run both builds in child processes and compare them")
    args = parser.parse_args(argv)
    if args.both:
        summary = both(args.seed, args.count, args.both)
        crashes = sum(len(v) for v in summary["crashes"].values())
        violations = sum(summary["violations"].values())
        print(
            f"SUMMARY {args.count} producer objects per build (seed {args.seed}): {crashes} crashes, "
            f"{violations} violations, {len(summary['divergences'])} divergences",
            flush=True,
        )
        return 0 if not (crashes or violations or summary["divergences"]) else 1
    out = open(args.jsonl, "w") if args.jsonl else None  # noqa: SIM115
    violations = 0
    for i in range(args.start, args.start + args.count):
        rng = random.Random(f"{args.seed}:{i}")
        x, label = make(rng)
        if out is not None:  # what was started: a crash is blamed on this input
            out.write(f"#{i}\n")
            out.flush()
        outcomes, found = check(x, f"input {i} ({label})")
        for line in found:
            print(f"VIOLATION {line}", flush=True)
        violations += len(found)
        if out is not None:
            out.write(f"{i}\t{json.dumps({'label': label, 'outcomes': outcomes}, sort_keys=True)}\n")
    if out is not None:
        out.close()
    print(f"done: {args.count} inputs, {violations} violations, build {dlbind.ffi_build()}", flush=True)
    return 1 if violations else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
