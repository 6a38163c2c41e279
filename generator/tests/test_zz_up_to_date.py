"""The committed generated files are exactly what the generator makes now (named zz to run last)."""

from __future__ import annotations

import time
from pathlib import Path

from dlbind_generator.pipeline import Paths, build


def test_generated_files_are_up_to_date(root: Path, headers: dict) -> None:
    start = time.perf_counter()
    files = build(Paths(root), progress=lambda _: None, offline=True)
    print(f"regenerated {len(files.files)} files in {time.perf_counter() - start:.2f} s")
    diffs = files.diff(root)
    assert not diffs, "generated files are stale; run `nox -s generate`:\n" + "".join(diffs)[:5000]
