"""Issue 10's acceptance: the worked example of docs/vendoring.md, built, installed and run (``nox -s vendor``).

Two throwaway libraries in a temp folder, made of the page's files and commands: ``hostlib`` vendors the
compiled build at DLPack 1.0, ``purelib`` the pure build at the canonical header; ``oldlib``, made here
from hostlib's files, the compiled build at DLPack 0.8 (legacy capsules only). All are built once
(wheels, with build isolation, as ``pip install`` would) and installed into a fresh venv without dlbind,
where they exchange with numpy, torch and each other, both directions. dlbind.testing's producer and
consumer checks run from this interpreter (which has dlbind) against the installed copies. Re-vendoring
after a host edit fails naming the file, and succeeds with --force.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "vendoring.md"
# Exact pins, as the other sessions use (torch: any other spec pulls a multi-GB CUDA build).
VENV_PINS = ["numpy==2.4.6", "torch==2.13.0", "cffi>=1.17"]

pytestmark = pytest.mark.skipif(
    not os.environ.get("DLBIND_VENDOR_ACCEPTANCE"),
    reason="builds two libraries and a fresh venv (minutes): run by `nox -s vendor`",
)

_BLOCK = re.compile(r"```\{code-block\} \w+\n:caption: (\S+)\n\n(.*?)```", re.S)


def doc_blocks() -> dict[str, str]:
    """The page's captioned code blocks: caption -> text."""
    return {caption: text for caption, text in _BLOCK.findall(DOC.read_text(encoding="utf-8"))}


def vendor_commands() -> list[list[str]]:
    lines = [ln for ln in doc_blocks()["commands"].splitlines() if ln.startswith("python -m dlbind_generator vendor")]
    assert len(lines) == 2, lines
    return [[sys.executable, *shlex.split(ln)[1:]] for ln in (ln.replace("path/to/dlbind", str(ROOT)) for ln in lines)]


def sh(
    *cmd: str | Path, cwd: Path, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True, env=env, timeout=1200)
    if ok and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


class Work:
    def __init__(self, base: Path) -> None:
        self.base = base
        self.venv = base / "venv"
        self.python = self.venv / "bin" / "python"
        self.wheels = base / "wheels"
        self.target = base / "installed"  # the same wheels, for this interpreter's dlbind.testing run
        self.times: dict[str, float] = {}


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Work:
    w = Work(tmp_path_factory.mktemp("acceptance"))
    start = time.monotonic()
    for caption, text in doc_blocks().items():
        if "/" in caption:  # a file of the example
            path = w.base / caption
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    for cmd in vendor_commands():
        sh(*cmd, cwd=w.base)
    # oldlib: hostlib's files under another name, its copy compiled at DLPack 0.8
    for path in sorted((w.base / "hostlib").rglob("*")):
        if path.is_file() and "_dlpack" not in path.parts:
            rel = Path(*("oldlib" if part == "hostlib" else part for part in path.relative_to(w.base).parts))
            (w.base / rel).parent.mkdir(parents=True, exist_ok=True)
            (w.base / rel).write_text(path.read_text(encoding="utf-8").replace("hostlib", "oldlib"), encoding="utf-8")
    sh(sys.executable, "-m", "dlbind_generator", "vendor", "--root", ROOT, "--into", "oldlib/src/oldlib/_dlpack",
       "--package", "oldlib._dlpack", "--header-version", "0.8", cwd=w.base)  # fmt: skip
    w.times["vendor"] = time.monotonic() - start
    start = time.monotonic()
    sh(sys.executable, "-m", "venv", w.venv, cwd=w.base)
    sh(w.python, "-m", "pip", "install", "-q", *VENV_PINS, cwd=w.base)
    w.times["venv"] = time.monotonic() - start
    start = time.monotonic()
    libs = ["./hostlib", "./oldlib", "./purelib"]
    sh(w.python, "-m", "pip", "wheel", "-q", "--no-deps", "-w", w.wheels, *libs, cwd=w.base)
    wheels = sorted(w.wheels.glob("*.whl"))
    assert [p.name.split("-")[0] for p in wheels] == ["hostlib", "oldlib", "purelib"], wheels
    sh(w.python, "-m", "pip", "install", "-q", "--no-deps", *wheels, cwd=w.base)
    sh(sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", w.target, *wheels, cwd=w.base)
    w.times["build and install"] = time.monotonic() - start
    return w


def in_venv(w: Work, code: str) -> str:
    return sh(w.python, "-c", textwrap.dedent(code), cwd=w.base).stdout


def test_the_venv_has_no_dlbind(work: Work) -> None:
    proc = sh(work.python, "-c", "import dlbind", cwd=work.base, ok=False)
    assert proc.returncode == 1 and "No module named 'dlbind'" in proc.stderr, proc.stderr
    site = Path(in_venv(work, "import hostlib, os; print(os.path.dirname(os.path.dirname(hostlib.__file__)))").strip())
    pattern = re.compile(r"^\s*(from\s+dlbind[\s.]|import\s+dlbind\b)", re.M)
    for lib in ("hostlib", "oldlib", "purelib"):
        sources = sorted((site / lib).rglob("*.py"))
        assert len(sources) > 15, sources
        assert [p for p in sources if pattern.search(p.read_text(encoding="utf-8"))] == []
    for lib in ("hostlib", "oldlib"):
        assert sorted(p.name.split(".")[0] for p in (site / lib / "_dlpack").glob("*.so")) == ["_api", "_fastpath"]


def test_the_worked_example_runs(work: Work) -> None:
    out = in_venv(work, doc_blocks()["example.py"])
    assert out.startswith("hostlib (1, 0) purelib (1, ") and out.strip().endswith("exchanged"), out


def test_exchanges_with_numpy_torch_and_each_other(work: Work) -> None:
    in_venv(
        work,
        """
        import sys
        import numpy as np, torch
        import hostlib, purelib
        from hostlib._dlpack import capsule as hcap, ffi_build as hb
        from purelib._dlpack import capsule as pcap, ffi_build as pb
        assert (hb(), pb()) == ("compiled", "pure")
        x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]  # strided
        tx = torch.arange(12, dtype=torch.int64).reshape(3, 4)
        for lib in (hostlib, purelib):
            assert np.array_equal(np.from_dlpack(lib.asdlpack(x)), x)                # lib -> numpy
            assert np.array_equal(np.asarray(lib.from_dlpack(x)), x)                 # numpy -> lib
            assert torch.equal(torch.from_dlpack(lib.asdlpack(tx.numpy())), tx)      # lib -> torch
            assert torch.equal(torch.from_dlpack(lib.from_dlpack(tx)), tx)           # torch -> lib -> torch
            assert np.array_equal(np.asarray(lib.from_dlpack(tx)), tx.numpy())       # torch -> lib
        assert np.array_equal(np.asarray(purelib.from_dlpack(hostlib.from_dlpack(x))), x)  # hostlib -> purelib
        assert np.array_equal(np.asarray(hostlib.from_dlpack(purelib.from_dlpack(x))), x)  # purelib -> hostlib
        # the versions each one speaks
        managed, versioned = hcap.take(hostlib.asdlpack(x).__dlpack__(max_version=(1, 3)))
        assert versioned and (managed.version.major, managed.version.minor) == (1, 0)
        t = hostlib.from_dlpack(purelib.from_dlpack(x))
        assert t.version == purelib.DLPACK_VERSION, t.version
        assert purelib.from_dlpack(hostlib.from_dlpack(x)).version == (1, 0)
        assert not [m for m in sys.modules if m == "dlbind" or m.startswith("dlbind.")]
        """,
    )


def test_a_compiled_0_8_copy(work: Work) -> None:
    """oldlib (compiled, DLPack 0.8) as tests/test_vendored_0x.py's pure 0.x copies: legacy capsules whatever
    max_version says, numpy and torch both ways, a versioned capsule refused unconsumed, hostlib (1.0) and
    purelib both ways."""
    in_venv(
        work,
        """
        import gc, sys
        import numpy as np, torch
        import hostlib, oldlib, purelib
        from oldlib._dlpack import _ffi, capsule as ocap
        from hostlib._dlpack import capsule as hcap
        assert _ffi.BUILD == "compiled" and _ffi.native is not None and oldlib.DLPACK_VERSION == (0, 8)
        x = np.arange(24, dtype=np.float32).reshape(4, 6)[:, ::2]
        tx = torch.arange(12, dtype=torch.int64).reshape(3, 4)
        name = lambda capsule: repr(capsule).split('"')[1]
        for kw in ({}, {"max_version": (1, 3)}, {"max_version": (2, 0)}, {"stream": None}):
            assert name(oldlib.asdlpack(x).__dlpack__(**kw)) == "dltensor"
            assert name(oldlib.from_dlpack(x).__dlpack__(**kw)) == "dltensor"
        assert np.array_equal(np.from_dlpack(oldlib.asdlpack(x)), x)
        assert np.array_equal(np.asarray(oldlib.from_dlpack(x)), x) and oldlib.from_dlpack(x).version is None
        assert torch.equal(torch.from_dlpack(oldlib.from_dlpack(tx)), tx)
        assert np.array_equal(np.asarray(oldlib.from_dlpack(tx)), tx.numpy())
        for other in (hostlib, purelib):
            assert np.array_equal(np.asarray(other.from_dlpack(oldlib.from_dlpack(x))), x)
            assert np.array_equal(np.asarray(oldlib.from_dlpack(other.from_dlpack(x))), x)
            assert other.from_dlpack(oldlib.asdlpack(x)).version is None
        before = hcap.stats()
        versioned = hostlib.asdlpack(x).__dlpack__(max_version=(1, 0))
        try:
            oldlib.from_dlpack(versioned)
        except BufferError as exc:
            assert "'dltensor_versioned'" in str(exc), exc
        else:
            raise AssertionError("a compiled 0.8 copy read a versioned capsule")
        assert name(versioned) == "dltensor_versioned"
        del versioned
        gc.collect()
        assert hcap.stats()[0] - before[0] == hcap.stats()[1] - before[1] == 1, (before, hcap.stats())
        gc.collect()
        exported, deleted = ocap.stats()
        assert exported > 5 and exported == deleted, (exported, deleted)
        assert not [m for m in sys.modules if m == "dlbind" or m.startswith("dlbind.")]
        """,
    )


def test_compiled_copies_keep_their_c_to_themselves(work: Work) -> None:
    """Each compiled copy's C is its own, even loaded with RTLD_GLOBAL (as some MPI and torch setups load
    extensions): its fast path exports no symbol but its module's init, so the 0.8 copy never reads the 1.0
    copy's configuration (it gave versioned capsules); its functions name its own package; both modules name
    libc, as auditwheel needs to repair a wheel for CPython 3.10."""
    site = Path(in_venv(work, "import hostlib, os; print(os.path.dirname(os.path.dirname(hostlib.__file__)))").strip())
    for lib in ("hostlib", "oldlib"):
        for so in sorted((site / lib / "_dlpack").glob("*.so")):
            symbols = sh("nm", "-D", "--defined-only", so, cwd=work.base).stdout.split()
            if so.name.startswith("_fastpath"):
                assert [s for s in symbols if s.startswith("dlbind")] == [], so
            needed = sh("readelf", "-d", so, cwd=work.base).stdout
            assert "libc.so" in needed, (so, needed)
    in_venv(
        work,
        """
        import os, sys
        sys.setdlopenflags(os.RTLD_GLOBAL | os.RTLD_NOW)
        import numpy as np
        import hostlib, oldlib
        from hostlib import _dlpack as host
        from oldlib import _dlpack as old
        x = np.arange(6.0)
        name = lambda capsule: repr(capsule).split('"')[1]
        assert name(old.asdlpack(x).__dlpack__(max_version=(1, 3))) == "dltensor"
        assert name(host.asdlpack(x).__dlpack__(max_version=(1, 3))) == "dltensor_versioned"
        assert type(host.from_dlpack(x)).__module__.startswith("hostlib."), type(host.from_dlpack(x))
        assert type(old.from_dlpack(x)).__module__.startswith("oldlib."), type(old.from_dlpack(x))
        assert repr(host.from_dlpack).startswith("<function hostlib._dlpack."), repr(host.from_dlpack)
        assert repr(old.from_dlpack).startswith("<function oldlib._dlpack."), repr(old.from_dlpack)
        """,
    )


@pytest.mark.parametrize("lib", ["hostlib", "purelib"])
def test_dlbind_testing_checks_pass(work: Work, lib: str) -> None:
    """From this interpreter (dlbind installed), the checks pointed at the installed copy's functions."""
    code = f"""
        import numpy as np
        import {lib}
        from {lib}._dlpack import ffi_build
        from dlbind.testing import check_consumer, check_producer
        produced = check_producer({lib}.asdlpack, name="{lib}.asdlpack")
        consumed = check_consumer({lib}.from_dlpack, to_numpy=np.asarray, name="{lib}.from_dlpack")
        print(ffi_build()); print(produced.summary()); print(consumed.summary())
        assert produced.ok and consumed.ok
        """
    env = {**os.environ, "PYTHONPATH": str(work.target)}
    out = sh(sys.executable, "-c", textwrap.dedent(code), cwd=work.base, env=env).stdout
    assert out.startswith("compiled" if lib == "hostlib" else "pure"), out
    assert re.search(r"asdlpack: \d+ passed, 0 failed", out) and re.search(r"from_dlpack: \d+ passed, 0 failed", out)


def test_revendoring_after_a_host_edit(work: Work) -> None:
    command = vendor_commands()[0]  # hostlib's
    edited = work.base / "hostlib/src/hostlib/_dlpack/consumer.py"
    original = edited.read_text(encoding="utf-8")
    edited.write_text(original.replace("def from_dlpack(", "def from_dlpack(  # patched by the host\n", 1))
    proc = sh(*command, cwd=work.base, ok=False)
    assert proc.returncode == 1 and "edited since they were vendored: consumer.py" in proc.stderr, proc.stderr
    assert "patched by the host" in edited.read_text(encoding="utf-8")
    proc = sh(*command, "--force", cwd=work.base)
    assert edited.read_text(encoding="utf-8") == original
    assert sh(*command, cwd=work.base).returncode == 0  # and the copy is clean again


def test_every_step_ran_and_is_timed(work: Work) -> None:
    """The fixture ran its three steps in order, each taking time; their times are printed (``-s``)."""
    print("acceptance steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in work.times.items()))
    assert list(work.times) == ["vendor", "venv", "build and install"], work.times
    assert all(seconds > 0 for seconds in work.times.values()), work.times
