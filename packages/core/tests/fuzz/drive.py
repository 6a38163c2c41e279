"""Run the seeded fuzz corpus on both builds in subprocesses, survive crashes, compare the builds.

``python drive.py --count 1000000 --seed 0 --out .cache/fuzz`` runs inputs [0, count) of the seed on
the compiled build then the pure build, in chunks (one subprocess each). A crash (a signal, or any exit
that is not 0/1) is recorded with the input that caused it (the one after the chunk's last written
line) and the chunk resumes after it. Then the per-input outcome digests of the two builds are compared
and the first divergent inputs are rerun to print both builds' outcomes side by side.

Exit status 0 only with zero crashes, zero property violations and zero divergences.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
FUZZ = HERE / "dlfuzz.py"
BUILDS = {"compiled": "0", "pure": "1"}


def _env(build: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(os.environ, DLBIND_PURE=BUILDS[build])
    env.update(extra or {})
    return env


def run_build(build: str, seed: int, count: int, chunk: int, out: Path, extra: list[str]) -> tuple[list[int], int]:
    """Run the corpus on one build: (inputs that crashed, inputs with violations)."""
    digests = out / f"{build}.tsv"
    digests.unlink(missing_ok=True)
    crashes: list[int] = []
    violations = 0
    start, end = 0, count
    t0 = time.perf_counter()
    while start < end:
        n = min(chunk, end - start)
        part = out / f"{build}.part"
        proc = subprocess.run(
            [sys.executable, str(FUZZ), "--seed", str(seed), "--start", str(start), "--count", str(n),
             "--jsonl", str(part), "--hash", *extra],
            env=_env(build), capture_output=True, text=True,
        )  # fmt: skip
        raw = part.read_text().splitlines() if part.exists() else []
        started = [int(line[1:]) for line in raw if line.startswith("#")]
        lines = [line for line in raw if line and not line.startswith("#")]
        with digests.open("a") as f:
            f.writelines(line + "\n" for line in lines)
        violations += sum(1 for line in lines if line.split("\t")[1] != "0")
        for line in proc.stdout.splitlines():
            if line.startswith("VIOLATION"):
                print(f"[{build}] {line}", flush=True)
        for line in proc.stderr.splitlines():  # sanitizer reports (nox -s asan) are passed on, to be counted
            if "runtime error:" in line or "ERROR: AddressSanitizer" in line:
                print(f"[{build}] SANITIZER {line}", flush=True)
        complete = "done:" in proc.stdout
        done = start + n if complete else (started[-1] if started else start)
        if proc.returncode not in (0, 1):
            crashes.append(-1 if complete else done)  # -1: at interpreter exit, after the chunk's inputs
            tail = proc.stderr.strip().splitlines()[-5:]
            where = "at interpreter exit after the chunk" if complete else f"at input {done}"
            print(f"[{build}] CRASH (exit {proc.returncode}) {where}: {' | '.join(tail)}", flush=True)
            start = done + (0 if complete else 1)
        else:
            start = done
            if not complete:  # pragma: no cover - a chunk that stopped early without crashing
                print(f"[{build}] chunk ended early at {done}: {proc.stderr[-500:]}", flush=True)
                start = done + 1
        rate = (start) / (time.perf_counter() - t0)
        print(f"[{build}] {start}/{count} inputs, {rate:.0f}/s, {len(crashes)} crashes, {violations} violations",
              flush=True)  # fmt: skip
    return crashes, violations


def outcomes(build: str, seed: int, index: int, extra: list[str]) -> list[object]:
    proc = subprocess.run(
        [sys.executable, str(FUZZ), "--seed", str(seed), "--start", str(index), "--count", "1",
         "--jsonl", "/dev/stdout", *extra],
        env=_env(build), capture_output=True, text=True,
    )  # fmt: skip
    for line in proc.stdout.splitlines():
        if line.startswith(f"{index}\t"):  # (the '#index' start marker is skipped)
            record = json.loads(line.split("\t", 2)[2])
            # as in the digests: the buffer protocol (compiled only) is left out of the comparison
            return [r for r in record if not str(r[0]).startswith("memoryview")]
    return [f"no outcome (exit {proc.returncode})"]


def describe(seed: int, index: int) -> str:
    code = (
        f"import sys; sys.path.insert(0, {str(HERE)!r}); import dlfuzz; "
        f"print(dlfuzz.build(dlfuzz.RandomSource('{seed}:{index}')).describe())"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip()


def compare(seed: int, out: Path, extra: list[str], show: int) -> int:
    tables = {}
    for build in BUILDS:
        rows = {}
        for line in (out / f"{build}.tsv").read_text().splitlines():
            i, _, digest = line.split("\t")
            rows[int(i)] = digest
        tables[build] = rows
    common = sorted(set(tables["compiled"]) & set(tables["pure"]))
    diverging = [i for i in common if tables["compiled"][i] != tables["pure"][i]]
    print(f"compared {len(common)} inputs: {len(diverging)} diverge", flush=True)
    for i in diverging[:show]:
        a, b = outcomes("compiled", seed, i, extra), outcomes("pure", seed, i, extra)
        print(f"--- input {i}: {describe(seed, i)}")
        for x, y in zip(a, b, strict=False):
            if x != y:
                print(f"    compiled: {x}\n    pure:     {y}")
        if len(a) != len(b):
            print(f"    compiled has {len(a)} outcomes, pure {len(b)}")
    return len(diverging)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--chunk", type=int, default=50_000)
    parser.add_argument("--out", default=".cache/fuzz")
    parser.add_argument("--show", type=int, default=20, help="how many divergent inputs to print in full")
    parser.add_argument("--builds", default="compiled,pure")
    parser.add_argument("--jobs", type=int, default=1, help="builds run at once (each in its own subprocesses)")
    parser.add_argument("--no-convert", action="store_true")
    parser.add_argument("--convert-every", type=int, default=1, help="convert every k-th input (conversions are slow)")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    extra = ["--no-convert"] if args.no_convert else ["--convert-every", str(args.convert_every)]
    total_crashes = total_violations = 0
    builds = args.builds.split(",")
    jobs = max(1, min(args.jobs, len(builds)))
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:  # each build runs in its own subprocesses
        results = list(pool.map(lambda b: run_build(b, args.seed, args.count, args.chunk, out, extra), builds))
    for build, (crashes, violations) in zip(builds, results, strict=True):
        total_crashes += len(crashes)
        total_violations += violations
        for i in [c for c in crashes if c >= 0][: args.show]:
            print(f"[{build}] crashed on input {i}: {describe(args.seed, i)}")
    diverging = compare(args.seed, out, extra, args.show) if len(builds) == 2 else 0
    summary = {"seed": args.seed, "count": args.count, "crashes": total_crashes, "violations": total_violations,
               "divergences": diverging, "builds": builds}  # fmt: skip
    (out / "summary.json").write_text(json.dumps(summary))
    print(
        f"SUMMARY seed {args.seed}: {args.count} inputs per build, {total_crashes} crashes, "
        f"{total_violations} property violations, {diverging} divergences",
        flush=True,
    )
    return 1 if total_crashes or total_violations or diverging else 0


if __name__ == "__main__":
    sys.exit(main())
