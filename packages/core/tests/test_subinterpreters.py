"""Subinterpreters (issue 39): dlbind refuses to load in one, with a clear ImportError, instead of hanging.

A Tensor freed inside a subinterpreter ran its deleter, which took the main interpreter's GIL from a thread
holding the subinterpreter's: the whole process hung (both builds). dlbind now loads in the main interpreter
only: in a subinterpreter ``import dlbind`` raises ImportError, shared GIL or own GIL. Each case
runs in a child process under a timeout, so a hang fails the test instead of the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dlbind

RUN = textwrap.dedent(
    """
    import sys
    out, config = sys.argv[1], sys.argv[2]
    code = f'''
    try:
        import dlbind
        t = dlbind.from_dlpack(bytearray(8))
        del t
        result = "loaded"
    except ImportError as exc:
        result = "ImportError: " + str(exc)
    with open({out!r}, "w") as f:
        f.write(result)
    '''
    try:
        import _interpreters as m  # 3.13 and newer
        try:
            interp = m.create(config) if config != "default" else m.create()
        except TypeError:  # a release whose create() names its configurations otherwise: its default
            interp = m.create()
        failed = m.exec(interp, code)
        if failed is not None:
            raise SystemExit(f"the subinterpreter raised: {failed}")
    except ImportError:
        import _xxsubinterpreters as m
        interp = m.create(isolated=config != "legacy") if config != "default" else m.create()
        m.run_string(interp, code)
    import dlbind  # the main interpreter still loads it
    print(dlbind.from_dlpack(bytearray(8)).shape)
    """
)


@pytest.mark.parametrize("config", ["default", "legacy"])
def test_a_subinterpreter_gets_an_import_error_not_a_hang(tmp_path: Path, config: str) -> None:
    """``legacy``: a subinterpreter that shares the main GIL (3.12's isolated=False, 3.13's "legacy" config)."""
    if sys.version_info < (3, 12) and config == "legacy":
        pytest.skip("before Python 3.12 every subinterpreter shares the main GIL: the default case is this one")
    out = tmp_path / "outcome.txt"
    env = dict(os.environ, DLBIND_PURE="1" if dlbind.ffi_build() == "pure" else "0")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", RUN, str(out), config], capture_output=True, text=True, timeout=60, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the process hung (60 s) with dlbind in a subinterpreter")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert out.read_text().startswith("ImportError: dlbind runs in the main interpreter only"), out.read_text()
    assert proc.stdout.strip() == "(8,)", proc.stdout
