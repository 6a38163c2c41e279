"""Vendored copies of DLPack 0.x headers at work (made here): legacy capsules only.

``lib08._dlpack`` is vendored at DLPack 0.8, ``lib04._dlpack`` at 0.4 (which spells kDLCUDA kDLGPU and has
no kDLBool), ``lib10._dlpack`` at 1.0, all pure; ``clib08._dlpack`` is the compiled build at 0.8, its cffi
module and C fast path built in place (setuptools' build_ext, as a host's setup.py runs it). A 0.x copy
exports legacy ``"dltensor"`` capsules whatever ``max_version`` it is asked for, calls producers the 0.x
way (``__dlpack__(stream=...)``) and refuses a versioned capsule unconsumed, in either build. Each
scenario runs in a fresh interpreter, like ``tests/test_vendored.py``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("dlbind_generator", reason="vendoring needs the generator (pip install -e generator)")
pytest.importorskip("numpy")

from test_vendored import make_copies, run  # noqa: E402

COPIES = {"lib08": "0.8", "lib04": "0.4", "lib10": "1.0"}
#: The compiled 0.8 copy (vendored without --pure, then built in place).
COMPILED = "clib08"

SETUP = """
import runpy
from setuptools import setup

dlpack = runpy.run_path("{lib}/_dlpack/_build.py")
setup(name="{lib}", packages=["{lib}"], cffi_modules=["{lib}/_dlpack/_build.py:ffibuilder"],
      ext_modules=[dlpack["fastpath_extension"]()])
"""


def build_compiled(base: Path, lib: str, version: str) -> None:
    """Vendor ``lib._dlpack`` at ``version`` without --pure, then build its two modules in place."""
    (base / lib).mkdir()
    (base / lib / "__init__.py").write_text("")
    subprocess.run(
        [sys.executable, "-m", "dlbind_generator", "vendor", "--into", str(base / lib / "_dlpack"),
         "--package", f"{lib}._dlpack", "--header-version", version, "--root", str(ROOT)],
        check=True, cwd=ROOT, capture_output=True,
    )  # fmt: skip
    (base / f"setup_{lib}.py").write_text(SETUP.format(lib=lib))
    proc = subprocess.run(
        [sys.executable, f"setup_{lib}.py", "-q", "build_ext", "--inplace"], cwd=base, capture_output=True, text=True
    )
    assert proc.returncode == 0, f"the compiled {version} copy does not build:\n{proc.stdout}\n{proc.stderr}"
    built = sorted(p.name.split(".")[0] for p in (base / lib / "_dlpack").glob("*.so"))
    assert built == ["_api", "_fastpath"], built


@pytest.fixture(scope="module")
def libs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("setuptools", reason="the compiled 0.8 copy is built with setuptools")
    copies = {lib: ["--header-version", version] for lib, version in COPIES.items()}
    base = make_copies(tmp_path_factory.mktemp("vendored0x"), copies)
    build_compiled(base, COMPILED, "0.8")
    return base


#: The legacy-capsule scenario (the test below runs its four parts as one script). First the copies, their
#: versions and builds; ``x`` and ``name(capsule)`` for the parts after.
LOADED = """
import gc
import numpy as np
import lib08._dlpack as v08, lib04._dlpack as v04, lib10._dlpack as v10, clib08._dlpack as c08
assert v08.DLPACK_VERSION == c08.DLPACK_VERSION == (0, 8) and v04.DLPACK_VERSION == (0, 4)
assert v10.DLPACK_VERSION == (1, 0)
assert v08.ffi_build() == v04.ffi_build() == "pure"
assert c08.ffi_build() == c08._ffi.BUILD == "compiled" and c08._ffi.native is not None
x = np.arange(12, dtype=np.float32).reshape(3, 4)

def name(capsule):
    return repr(capsule).split('"')[1]
"""

#: Each 0.x copy, in either build: legacy capsules whatever it is asked, what a legacy capsule cannot carry refused
#: naming the copy, numpy and a 1.0 copy both ways, a versioned capsule refused unconsumed, ``convert``.
EACH_COPY = """
for lib in (v08, v04, c08):
    # producer: legacy whatever max_version says (a producer that does not know 1.0)
    for kw in ({}, {"max_version": (1, 3)}, {"max_version": (2, 0)}, {"max_version": (0, 8)},
               {"max_version": (1, 0), "dl_device": (1, 0), "copy": False}, {"stream": None}):
        assert name(lib.asdlpack(x).__dlpack__(**kw)) == "dltensor", (lib, kw)
        assert name(lib.from_dlpack(x).__dlpack__(**kw)) == "dltensor", (lib, kw)
    # what a legacy capsule cannot honour: refused with BufferError, naming the copy
    for kw in ({"copy": True}, {"dl_device": (2, 0)}):
        try:
            lib.asdlpack(x).__dlpack__(max_version=(1, 3), **kw)
        except BufferError as exc:
            assert lib.__name__ in str(exc), exc
        else:
            raise AssertionError(f"{lib.__name__} honoured {kw}")
    # numpy both ways (numpy 2 passes max_version, dl_device, copy; it accepts a legacy answer)
    assert np.array_equal(np.from_dlpack(lib.asdlpack(x)), x)
    t = lib.from_dlpack(x)
    assert t.version is None and t.flags == 0 and np.array_equal(np.asarray(t), x)
    assert np.array_equal(np.from_dlpack(t), x)
    assert np.shares_memory(np.from_dlpack(t), x)
    c = lib.from_dlpack(x, copy=True)  # copied on this side: the call of a 0.x consumer has no copy=
    assert not np.shares_memory(np.asarray(c), x) and np.array_equal(np.asarray(c), x)
    assert repr(t).startswith(f"{lib.__name__}.Tensor(") and repr(lib.asdlpack(x)).startswith(lib.__name__)
    # with a 1.0 copy, both ways
    assert np.array_equal(np.asarray(v10.from_dlpack(lib.asdlpack(x))), x)
    assert np.array_equal(np.asarray(lib.from_dlpack(v10.asdlpack(x))), x)
    assert np.array_equal(np.asarray(lib.from_dlpack(v10.from_dlpack(lib.from_dlpack(x)))), x)
    assert v10.from_dlpack(lib.asdlpack(x)).version is None
    # a versioned capsule is never read: refused unconsumed, and its destructor frees it
    before = v10.capsule.stats()
    try:
        lib.from_dlpack(v10.asdlpack(x).__dlpack__(max_version=(1, 0)))
    except BufferError as exc:
        assert "dltensor_versioned" in str(exc), exc
    else:
        raise AssertionError("a 0.x copy read a versioned capsule")
    gc.collect()
    exported, deleted = v10.capsule.stats()
    assert exported - before[0] == deleted - before[1] == 1, (before, v10.capsule.stats())
    # read-only data has no legacy form
    ro = np.arange(3.0); ro.flags.writeable = False
    try:
        lib.asdlpack(ro).__dlpack__(max_version=(1, 0))
    except BufferError as exc:
        assert "read-only" in str(exc)
    else:
        raise AssertionError("read-only data in a legacy capsule")
    # convert: the general route (no C route of the compiled copy carries a versioned struct)
    out = lib.convert(lib.from_dlpack(x), "numpy")
    assert type(out) is np.ndarray and np.array_equal(out, x) and np.shares_memory(out, x)
"""

#: The 0.8 copy in its two builds, both ways; the compiled copy's C entry points never make, read or ask for a
#: versioned struct, and release every export (``t``, ``c`` and ``out`` are the last loop's, c08's).
THE_COMPILED_COPY = """
# the same copy in two builds, both ways
assert np.array_equal(np.asarray(c08.from_dlpack(v08.from_dlpack(x))), x)
assert np.array_equal(np.asarray(v08.from_dlpack(c08.from_dlpack(x))), x)
assert np.array_equal(np.asarray(c08.from_dlpack(v04.asdlpack(x))), x)
# the compiled copy's C entry points never make, read or ask for a versioned struct
native = c08._ffi.native
cap = v10.asdlpack(x).__dlpack__(max_version=(1, 0))
for attempt in (lambda: native.take(cap), lambda: native.from_dlpack(cap), lambda: c08.from_dlpack(cap)):
    try:
        attempt()
    except BufferError as exc:
        assert "clib08._dlpack reads DLPack 0.8 legacy 'dltensor' capsules only" in str(exc), exc
    else:
        raise AssertionError("the compiled 0.8 copy read a versioned capsule")
assert name(cap) == "dltensor_versioned"  # unconsumed: its destructor frees it
del cap
for attempt in (lambda: native.wrap(x.ctypes.data, True, False), lambda: native.export(x, x.ctypes.data, True)):
    try:
        attempt()
    except ValueError as exc:
        assert "clib08._dlpack (DLPack 0.x)" in str(exc), exc
    else:
        raise AssertionError("the compiled 0.8 copy took a versioned struct")
assert native.exchange_table() is None and native.exchange_import(x) is None
import clib08._dlpack.routes as c08_routes
assert native.convert_to(x, c08_routes.route_to("numpy")) is NotImplemented
del t, c, out  # the last loop's (c08's) imports: their tensors hold c08's exports
gc.collect()
exported, deleted = c08.capsule.stats()
assert exported > 20 and exported == deleted, (exported, deleted)  # every export released, in C
"""

#: What the 0.4 header does not define (bool, kDLCUDAManaged): carried by number, refused where a policy is needed.
NOT_IN_THE_HEADER = """
# what the header does not define is carried by number (DLPack's versions only add values), and refused
# with a BufferError naming it wherever a policy is needed (reading it, exporting from numpy)
b = np.array([True, False, True])
assert v08.from_dlpack(b).dtype.name == "bool" and np.array_equal(np.asarray(v08.from_dlpack(b)), b)
carried = v04.from_dlpack(b)
assert carried.dtype.name == "code 6:8", carried.dtype
assert np.array_equal(np.asarray(v08.from_dlpack(carried)), b)  # re-exported unchanged
for attempt, words in ((lambda: np.asarray(carried), "code 6:8"), (lambda: v04.asdlpack(b), "bool")):
    try:
        attempt()
    except (BufferError, ValueError) as exc:
        assert words in str(exc), exc
    else:
        raise AssertionError("DLPack 0.4 has no bool")
del carried
managed = v10.from_pointer(x.ctypes.data, x.shape, "float32", device=(13, 0), owner=x)  # kDLCUDAManaged: 0.6
on13 = v04.from_dlpack(managed)
assert tuple(on13.device) == (13, 0), on13.device
try:
    np.asarray(on13)
except BufferError as exc:
    assert "device type 13" in str(exc) and "header bump" in str(exc), exc
else:
    raise AssertionError("DLPack 0.4 has no kDLCUDAManaged")
del on13
assert v04.DeviceType(2).name == "kDLGPU" and v04.from_dlpack(x).device[0] == 1
"""


def test_0_x_copies_export_and_import_legacy_capsules(libs: Path) -> None:
    run(libs, LOADED + EACH_COPY + THE_COMPILED_COPY + NOT_IN_THE_HEADER)


def test_0_x_copies_and_dlbind_in_one_process(libs: Path) -> None:
    run(
        libs,
        """
        import numpy as np
        import dlbind, lib08._dlpack as v08, lib04._dlpack as v04, clib08._dlpack as c08
        assert c08.ffi_build() == "compiled"
        x = np.arange(8, dtype=np.float64).reshape(2, 4)
        for lib in (v08, v04, c08):
            t = dlbind.from_dlpack(lib.asdlpack(x))  # dlbind (1.3) asks for 1.3, takes the legacy answer
            assert t.version is None and np.array_equal(np.asarray(t), x)
            assert np.array_equal(np.asarray(lib.from_dlpack(dlbind.asdlpack(x))), x)
            assert np.array_equal(np.asarray(lib.from_dlpack(dlbind.from_dlpack(x))), x)
            assert np.array_equal(np.asarray(dlbind.from_dlpack(lib.from_dlpack(x))), x)
            assert isinstance(dlbind.from_dlpack(lib.from_dlpack(x)), dlbind.Tensor)
            assert repr(dlbind.from_dlpack(x)).startswith("dlbind.Tensor(")  # dlbind's own names unchanged
        """,
        block=False,
    )


#: dlbind.testing's checks that need a versioned capsule (DLPack 1.0), by side: they do not apply to a 0.x
#: copy, and fail against it because it is legacy (no max_version asked or answered; read-only data, which
#: only a versioned capsule's flag can carry, neither exported nor imported).
VERSIONED_ONLY = {
    ("asdlpack", "versioned_capsule"),
    ("from_dlpack", "sends_max_version"),
    ("from_dlpack", "readonly_respected"),
}


@pytest.mark.parametrize("lib", ["lib08", "lib04", COMPILED])
def test_0_x_copies_pass_dlbind_testing(libs: Path, lib: str) -> None:
    """dlbind.testing's checks against the copy: every one passes or is unsupported, except those that need
    a versioned capsule (listed), which must fail for the reason that it is legacy."""
    out = run(
        libs,
        f"""
        import numpy as np
        import {lib}._dlpack as v
        from dlbind.testing import check_consumer, check_producer
        produced = check_producer(v.asdlpack, name="{lib} asdlpack")
        consumed = check_consumer(v.from_dlpack, to_numpy=np.asarray, name="{lib} from_dlpack")
        for who, report in (("{lib} asdlpack", produced), ("{lib} from_dlpack", consumed)):
            for r in report.results:
                print(who, r.check, r.status, r.detail.replace("|", "/").replace("\\n", " "), sep="|")
        assert produced.count("pass") > 10 and consumed.count("pass") > 10
        """,
        block=False,
    )
    rows = [line.split("|") for line in out.splitlines()]
    failed = {(who.split()[1], check): detail for who, check, status, detail in rows if status in ("fail", "crash")}
    assert set(failed) == VERSIONED_ONLY, failed
    assert "dltensor" in failed["asdlpack", "versioned_capsule"], failed
