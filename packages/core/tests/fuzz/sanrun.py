"""Run a command under the sanitizers, pass its output through, and count the sanitizer reports in it.

``python sanrun.py COUNTS.json -- command ...``: appends {"command", "exit", "reports"} to COUNTS.json (a list).
Reports are counted from the output (``ERROR: AddressSanitizer``, ``runtime error:``, a fuzz input
that ended with ``CRASH (exit 86)`` in ``drive.py``) and from the
exit code 86 the session gives the sanitizers, because a report inside a pytest test can be swallowed
by pytest's output capture when the process halts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

MARKERS = ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "CRASH (exit 86)")


def main() -> int:
    counts_path = Path(sys.argv[1])
    command = sys.argv[sys.argv.index("--") + 1 :]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    assert proc.stdout is not None
    reports = 0
    for line in proc.stdout:
        sys.stdout.write(line)
        reports += any(m in line for m in MARKERS)
    code = proc.wait()
    if code == 86 and not reports:
        reports = 1  # halted on a report whose text was captured away
    counts = json.loads(counts_path.read_text()) if counts_path.exists() else []
    counts.append({"command": " ".join(command[:4]), "exit": code, "reports": reports})
    counts_path.write_text(json.dumps(counts, indent=1))
    print(f"sanrun: exit {code}, {reports} sanitizer report(s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
