"""The short fuzz pass of the normal suite (``nox -s fuzz`` runs the long one).

The seeded corpus (``dlfuzz.py``) runs in a subprocess of the current build, so a crash fails a test
instead of the session; the cross-build comparison runs once, from the compiled build's pass.
Hypothesis drives the same generator in-process for the properties that hold today.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import dlfuzz
import nativehelp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlbind

HERE = Path(__file__).resolve().parent
BUILD = dlbind.ffi_build()
PURE = BUILD == "pure"
COUNT = int(os.environ.get("DLBIND_FUZZ_SHORT", "400"))

# as faulty.PY310_PURE: the pure build's Python deleters cannot run while a consumer's exception is set on 3.10
_PY310 = "pure build on Python 3.10: its Python deleters cannot run while a consumer's exception is set"


@pytest.fixture(scope="module")
def corpus_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("fuzz") / "outcomes.tsv"
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    proc = subprocess.run(
        [sys.executable, str(HERE / "dlfuzz.py"), "--seed", "1", "--count", str(COUNT), "--convert-every", "10",
         "--jsonl", str(out)],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    records = {}
    for line in out.read_text().splitlines():
        if line and not line.startswith("#"):
            i, _, rec = line.split("\t", 2)
            records[int(i)] = json.loads(rec)
    return {"proc": proc, "records": records}


def test_corpus_never_crashes(corpus_run: dict[str, Any]) -> None:
    proc = corpus_run["proc"]
    assert "done:" in proc.stdout, f"crashed during the corpus (exit {proc.returncode}):\n{proc.stderr[-2000:]}"
    assert len(corpus_run["records"]) == COUNT


def test_corpus_exits_cleanly(corpus_run: dict[str, Any]) -> None:
    proc = corpus_run["proc"]
    assert proc.returncode in (0, 1), f"exit {proc.returncode}:\n{proc.stderr[-2000:]}"


def test_corpus_deleter_called_exactly_once(corpus_run: dict[str, Any]) -> None:
    bad = {i: rec[-1][1] for i, rec in corpus_run["records"].items() if rec[-1] != ["deleter_calls", 1]}
    assert not bad, f"{len(bad)} inputs with a wrong deleter count, e.g. {list(bad.items())[:5]}"


@pytest.mark.xfail(PURE and sys.version_info < (3, 11), reason=_PY310)  # strict=False: only inputs numpy refuses
def test_corpus_only_spec_exceptions(corpus_run: dict[str, Any]) -> None:
    allowed = {"BufferError", "TypeError", "ValueError"}
    bad = [
        (i, r[0], r[2], r[3][:80])
        for i, rec in corpus_run["records"].items()
        for r in rec
        if len(r) == 4 and r[1] == "exc" and r[2] not in allowed and (r[2], r[3]) not in dlfuzz.FOREIGN.get(r[0], ())
    ]
    assert not bad, f"{len(bad)} operations raised outside BufferError/TypeError/ValueError, e.g. {bad[:5]}"


@pytest.mark.skipif(PURE, reason="compares both builds once, from the compiled pass")
@pytest.mark.xfail(sys.version_info < (3, 11), reason=_PY310)  # the pure side diverges there
def test_builds_agree(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "drive.py"), "--seed", "2", "--count", "200", "--chunk", "200",
         "--out", str(tmp_path), "--show", "0", "--convert-every", "10"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    summary = [line for line in proc.stdout.splitlines() if line.startswith("SUMMARY")]
    assert summary, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert " 0 divergences" in summary[0], summary[0]


# -- producer objects (issue 38): lying __array_interface__, buffers, CUDA interfaces -----------------------


@pytest.mark.xfail(PURE and sys.version_info < (3, 11), reason=_PY310)  # strict=False: only inputs numpy refuses
def test_producer_objects_are_refused_cleanly() -> None:
    """Generated producer objects through every entry point and copy path of this build: no crash, only the spec's
    exceptions, values equal to numpy's reading where one is made (fuzz/producers.py)."""
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    count = os.environ.get("DLBIND_FUZZ_PRODUCERS", "3000")
    proc = subprocess.run(
        [sys.executable, str(HERE / "producers.py"), "--seed", "1", "--count", count],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, f"exit {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
    assert f"done: {count} inputs, 0 violations" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.skipif(PURE, reason="compares both builds once, from the compiled pass")
def test_producer_objects_builds_agree(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(HERE / "producers.py"), "--both", str(tmp_path), "--seed", "2", "--count", "1500"],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert "0 crashes, 0 violations, 0 divergences" in proc.stdout, proc.stdout[-2000:] + proc.stderr[-2000:]


# -- hypothesis: the same generator, in-process --------------------------------------------------------


@settings(
    max_examples=int(os.environ.get("DLBIND_FUZZ_HYPOTHESIS", "200")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(st.data())
def test_hypothesis_import_is_clean_and_deleter_runs_once(data: st.DataObject) -> None:
    item = dlfuzz.build(dlfuzz.HypothesisSource(data))
    item.convert = False
    item.block = nativehelp.name_block(item.name, item.versioned)
    capsule = nativehelp.new_capsule(item.base, item.block, has_name=item.name is not None)
    try:
        t = dlbind.from_dlpack(capsule)
    except dlfuzz.ALLOWED:
        t = None
    if t is not None:  # the metadata every valid view must answer
        assert len(t.shape) == len(t.strides) == t.ndim <= 64
        _ = (t.dtype, t.device, t.readonly, repr(t))
    del t, capsule
    if item.calls() != 1:
        gc.collect()
    assert item.calls() == 1, item.describe()
    dlfuzz.settle(item, [], [])  # frees the struct's memory
