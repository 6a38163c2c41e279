"""Vendored copies at work (pure builds, made here): without dlbind, beside each other and beside dlbind.

``liba._dlpack`` is vendored at the canonical header, ``libb._dlpack`` at DLPack 1.0. Each scenario runs
in a fresh interpreter; "without dlbind" blocks every import of ``dlbind``. The compiled builds, built
and installed into a venv without dlbind, are ``tests/vendoring`` (``nox -s vendor``).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("dlbind_generator", reason="vendoring needs the generator (pip install -e generator)")

BLOCK_DLBIND = """
import sys
class _NoDlbind:
    def find_spec(self, name, path=None, target=None):
        if name == "dlbind" or name.startswith("dlbind."):
            raise ImportError(f"{name} is blocked: a vendored copy must not import dlbind")
        return None
sys.meta_path.insert(0, _NoDlbind())
"""


def make_copies(base: Path, copies: dict[str, list[str]]) -> Path:
    """Vendor a pure copy as ``<lib>._dlpack`` under ``base`` for each ``lib``, with its extra vendor arguments."""
    for lib, extra in copies.items():
        (base / lib).mkdir()
        (base / lib / "__init__.py").write_text("")
        subprocess.run(
            [sys.executable, "-m", "dlbind_generator", "vendor", "--into", str(base / lib / "_dlpack"),
             "--package", f"{lib}._dlpack", "--pure", "--root", str(ROOT), *extra],
            check=True, cwd=ROOT, capture_output=True,
        )  # fmt: skip
    return base


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_copies(tmp_path_factory.mktemp("vendored"), {"liba": [], "libb": ["--header-version", "1.0"]})


def run(libs: Path, code: str, *, block: bool = True) -> str:
    script = (BLOCK_DLBIND if block else "") + textwrap.dedent(code)
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=libs, capture_output=True, text=True, env={"PYTHONPATH": str(libs),
        "PATH": "/usr/bin:/bin"}, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_copies_without_dlbind_exchange_with_numpy_torch_and_each_other(libs: Path) -> None:
    pytest.importorskip("torch")
    out = run(
        libs,
        """
        import numpy as np, torch
        import liba._dlpack as a, libb._dlpack as b
        assert a.DLPACK_VERSION > (1, 0) and b.DLPACK_VERSION == (1, 0), (a.DLPACK_VERSION, b.DLPACK_VERSION)
        assert a.ffi_build() == b.ffi_build() == "pure"
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        for lib in (a, b):
            assert np.array_equal(np.from_dlpack(lib.asdlpack(x)), x)
            assert np.array_equal(np.asarray(lib.from_dlpack(x)), x)
            assert torch.equal(torch.from_dlpack(lib.asdlpack(x)), torch.from_numpy(x))
            assert np.array_equal(np.asarray(lib.from_dlpack(torch.arange(5))), np.arange(5))
        assert np.array_equal(np.asarray(b.from_dlpack(a.asdlpack(x))), x)
        assert np.array_equal(np.asarray(a.from_dlpack(b.asdlpack(x))), x)
        assert np.array_equal(np.asarray(a.from_dlpack(b.from_dlpack(a.from_dlpack(x)))), x)
        print(sorted({m.split(".")[0] for m in sys.modules} & {"dlbind", "liba", "libb"}))
        """,
    )
    assert out.split() == ["['liba',", "'libb']"]


def test_negotiation_of_a_1_0_copy(libs: Path) -> None:
    """A 1.0 copy exports 1.0 capsules, reads newer 1.x ones whose codes it knows, and legacy ones."""
    run(
        libs,
        """
        import numpy as np
        import liba._dlpack as a, libb._dlpack as b
        from libb._dlpack import capsule as bcap
        from liba._dlpack import capsule as acap
        x = np.arange(6, dtype=np.int16)

        def version(cap, take):
            managed, versioned = take(cap)
            return (int(managed.version.major), int(managed.version.minor)) if versioned else None

        # producer: a versioned 1.0 capsule for any 1.x or newer consumer, legacy without max_version
        assert version(b.asdlpack(x).__dlpack__(max_version=(1, 3)), bcap.take) == (1, 0)
        assert version(b.asdlpack(x).__dlpack__(max_version=(2, 0)), bcap.take) == (1, 0)
        assert version(b.asdlpack(x).__dlpack__(max_version=(0, 8)), bcap.take) is None
        assert version(b.asdlpack(x).__dlpack__(), bcap.take) is None
        # the newer copy's capsules as the 1.0 consumer gets them
        assert version(a.asdlpack(x).__dlpack__(max_version=b.DLPACK_VERSION), acap.take) == a.DLPACK_VERSION
        t = b.from_dlpack(a.asdlpack(x))
        assert t.version == a.DLPACK_VERSION and np.array_equal(np.asarray(t), x)
        # a dtype code 1.0 does not know, in a newer minor's capsule: carried (named by its number, refused where
        # reading it needs a name), and re-exported unchanged to the newer copy
        import ml_dtypes
        f8 = np.arange(3, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn)
        before = a.capsule.stats()
        t8 = b.from_dlpack(a.asdlpack(f8))
        assert t8.dtype.name.startswith("code "), t8.dtype.name
        try:
            np.asarray(t8)
        except (BufferError, TypeError, ValueError):
            pass
        else:
            raise AssertionError("a 1.0 copy read a float8 tensor it has no name for")
        back8 = a.from_dlpack(t8)
        assert back8.dtype.name == "float8_e4m3fn", back8.dtype
        assert np.array_equal(np.asarray(back8).view(np.uint8), f8.view(np.uint8))
        del t8, back8
        import gc; gc.collect()
        exported, deleted = a.capsule.stats()
        assert exported - before[0] == deleted - before[1], (before, a.capsule.stats())

        # an older producer (no max_version keyword): the 1.0 consumer asks again without it
        class Old:
            def __init__(self, arr): self.arr = arr
            def __dlpack__(self, stream=None): return a.asdlpack(self.arr).__dlpack__()
            def __dlpack_device__(self): return (1, 0)
        t = b.from_dlpack(Old(x))
        assert t.version is None and np.array_equal(np.asarray(t), x)
        # read-only data needs a versioned capsule, which 1.0 has
        ro = np.arange(3.0); ro.flags.writeable = False
        assert b.from_dlpack(ro).readonly and a.from_dlpack(b.asdlpack(ro)).readonly
        # no C exchange table in a 1.0 copy; the canonical copy offers one
        assert not hasattr(b.Tensor, "__dlpack_c_exchange_api__")
        assert hasattr(a.Tensor, "__dlpack_c_exchange_api__")
        """,
    )


def test_two_copies_and_dlbind_in_one_process(libs: Path) -> None:
    pytest.importorskip("torch")
    run(
        libs,
        """
        import numpy as np, torch
        import dlbind, liba._dlpack as a, libb._dlpack as b
        assert a.Tensor is not dlbind.Tensor and b.Tensor is not a.Tensor
        assert a.from_dlpack.__module__.startswith("liba._dlpack")
        x = np.arange(8, dtype=np.float64).reshape(2, 4)
        for lib in (a, b):
            assert np.array_equal(np.asarray(dlbind.from_dlpack(lib.asdlpack(x))), x)
            assert np.array_equal(np.asarray(lib.from_dlpack(dlbind.asdlpack(x))), x)
            assert np.array_equal(np.asarray(lib.from_dlpack(dlbind.from_dlpack(x))), x)
            assert isinstance(dlbind.from_dlpack(lib.from_dlpack(x)), dlbind.Tensor)
            assert torch.equal(dlbind.convert(lib.from_dlpack(x), to="torch"), torch.from_numpy(x))
        assert np.array_equal(np.asarray(b.from_dlpack(a.from_dlpack(dlbind.from_dlpack(x)))), x)
        """,
        block=False,
    )


@pytest.mark.parametrize("lib", ["liba", "libb"])
def test_copies_pass_dlbind_testing(libs: Path, lib: str) -> None:
    """dlbind.testing's producer and consumer checks, pointed at the copy's asdlpack and from_dlpack."""
    out = run(
        libs,
        f"""
        import numpy as np
        import {lib}._dlpack as v
        from dlbind.testing import check_consumer, check_producer
        produced = check_producer(v.asdlpack, name="{lib} asdlpack")
        consumed = check_consumer(v.from_dlpack, to_numpy=np.asarray, name="{lib} from_dlpack")
        print(produced.summary()); print(consumed.summary())
        assert produced.ok and consumed.ok
        assert produced.count("pass") > 10 and consumed.count("pass") > 10
        """,
        block=False,
    )
    assert "0 failed" in out


def test_a_copys_messages_name_its_package(libs: Path) -> None:
    """What a copy raises names the copy (docs/vendoring.md: "A copy's reprs and messages name its own package"):
    each exception a copy's modules raise is built without the word dlbind, and the refusals users meet most say
    the copy's name."""
    said = []
    for path in sorted((libs / "liba" / "_dlpack").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                texts = [c.value for c in ast.walk(node.exc) if isinstance(c, ast.Constant) and type(c.value) is str]
                said += [f"{path.name}:{node.lineno}: {t!r}" for t in texts if re.search(r"\bdlbind\b", t)]
    assert said == []
    out = run(
        libs,
        """
        import numpy as np
        import liba._dlpack as a
        for call in (lambda: a.from_dlpack(42), lambda: a.explain(np.arange(3).__dlpack__(), "numpy")):
            try:
                call()
            except TypeError as exc:
                print(exc)
        """,
    )
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("liba._dlpack needs a DLPack producer"), out
    assert lines[1].startswith("liba._dlpack.explain takes the producer"), out
