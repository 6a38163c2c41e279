"""``python tests/interop/run_check.py NAME``: ``python -m dlbind check --libs NAME`` for the interop matrix.

A system dlbind knows (spec/adapters.toml) must check without error; for one it does not know yet (issue 13)
the check is an expected failure, strictly: it must still refuse the name, so the session notices the day it
is learnt. The output (the conformance matrix) is printed either way; its FAIL, CRASH and WARN marks are counted.
"""

from __future__ import annotations

import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: run_check.py NAME", file=sys.stderr)
        return 2
    name = argv[0]
    from dlbind._generated.adapters import ADAPTERS

    known = all(n in ADAPTERS for n in name.split(","))  # NAME may list several: numpy,pyarrow,warp
    proc = subprocess.run(
        [sys.executable, "-m", "dlbind", "check", "--libs", name, "--details"], capture_output=True, text=True
    )
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr[-4000:])
    fails = sum(line.split().count("FAIL") for line in proc.stdout.splitlines())
    crashes = sum(line.split().count("CRASH") for line in proc.stdout.splitlines())
    warnings = sum(line.split().count("WARN") for line in proc.stdout.splitlines())
    if known:
        if proc.returncode != 0:
            print(f"dlbind check --libs {name}: exit {proc.returncode}", file=sys.stderr)
            return 1
        print(f"dlbind check --libs {name}: {fails} FAIL, {crashes} CRASH, {warnings} WARN marks in the matrix")
        return 0
    if proc.returncode == 0:
        print(f"dlbind check --libs {name} now works: mark {name} known in the interop matrix", file=sys.stderr)
        return 1
    print(f"dlbind check --libs {name}: expected failure (issue 13: dlbind does not know {name} yet)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
