"""Regression tests for the seven reliability defects of issue 8, each run on both builds.

Where a defect is still open in one build the test is a strict xfail naming the defect and the build:
it starts failing (XPASS) the moment the runtime is fixed, and the mark must then be removed.
"""

from __future__ import annotations

import contextlib
import gc
import os
import struct
import subprocess
import sys
import textwrap
import weakref
from typing import Any

import nativehelp
import numpy as np
import pytest

import dlbind
from dlbind import capsule

BUILD = dlbind.ffi_build()
COMPILED = BUILD == "compiled"
PURE = BUILD == "pure"
ALLOWED = (BufferError, TypeError, ValueError)


def _run(code: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh ``python -X dev`` of the same build."""
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    return subprocess.run(
        [sys.executable, "-X", "dev", "-c", textwrap.dedent(code), *args],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip


def _assert_clean_exit(proc: subprocess.CompletedProcess[str]) -> None:
    bad = [w for w in ("Fatal", "Segmentation", "Traceback", "SystemError", "AddressSanitizer") if w in proc.stderr]
    assert proc.returncode == 0 and not bad, f"exit {proc.returncode}, stderr:\n{proc.stderr[-3000:]}"


class Struct:
    """A ``DLManagedTensorVersioned`` built by hand, in a capsule made by a foreign (C) producer."""

    def __init__(
        self,
        shape: tuple[int, ...],
        *,
        code: int = 2,
        bits: int = 32,
        data: bool = True,
        byte_offset: int = 0,
        device: tuple[int, int] = (1, 0),
    ) -> None:
        ffi = nativehelp.ffi
        # C memory never freed: a tensor kept by a traceback may outlive this object (interpreter exit)
        self.arena = nativehelp.raw_alloc(4096)
        self.counter = ffi.cast("int64_t *", nativehelp.raw_alloc(8))
        base = int(ffi.cast("uintptr_t", self.arena))
        buf = ffi.buffer(self.arena, 4096)
        ndim = len(shape)
        struct.pack_into(f"<{ndim}Q", buf, 256, *[d % 2**64 for d in shape])
        ctx = int(ffi.cast("uintptr_t", self.counter))
        struct.pack_into("<IIQQQ", buf, 0, 1, 3, ctx, nativehelp.DELETER_V, 0)
        data_ptr = base + 1024 if data else 0
        struct.pack_into(
            "<QiiiBBHQQQ", buf, 32, data_ptr, *device, ndim, code, bits, 1, base + 256, 0, byte_offset % 2**64
        )
        self.block = nativehelp.name_block(b"dltensor_versioned", True)
        self.base = base

    def capsule(self) -> object:
        return nativehelp.new_capsule(self.base, self.block)

    @property
    def calls(self) -> int:
        return int(self.counter[0])


# -- defect 1: a refusing consumer keeps its exception, and the export is released --------------------


def test_defect1_refusing_consumer_keeps_its_exception() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = dlbind.from_dlpack(dlbind.asdlpack(np.zeros(4, ml_dtypes.bfloat16)))
    # numpy's own refusal (numpy 2.4 raises RuntimeError "Unsupported dtype in DLTensor."), not SystemError
    with pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(t)


def test_defect1_refused_export_is_released() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    source = np.zeros(4, ml_dtypes.bfloat16)
    alive = weakref.ref(source)
    t = dlbind.from_dlpack(dlbind.asdlpack(source))
    del source
    for _ in range(3):
        with contextlib.suppress(Exception):  # the exception type is the other test's business
            np.from_dlpack(t)
    del t
    gc.collect()
    assert alive() is None, "the refused exports keep the source alive"


def test_defect1_deleter_called_with_an_exception_pending() -> None:
    # The failed reshape's ValueError is already set when the eval loop drops the temporary array, whose
    # DLPack base then calls our deleter: the exception must survive and the deleter run once.
    source = np.arange(4.0)
    alive = weakref.ref(source)
    exports0, deleted0 = capsule.stats()
    with pytest.raises(ValueError, match="cannot reshape"):
        np.from_dlpack(dlbind.asdlpack(source)).reshape(())
    del source
    gc.collect()
    exports, deleted = capsule.stats()
    assert (exports - exports0, deleted - deleted0) == (1, 1)
    assert alive() is None


def test_defect1_capsule_dropped_with_an_exception_pending() -> None:
    # An unconsumed capsule freed while an exception is set (the operand of a failed call): released once.
    source = np.arange(4.0)
    alive = weakref.ref(source)
    exports0, deleted0 = capsule.stats()
    with pytest.raises(TypeError):
        len(dlbind.asdlpack(source).__dlpack__(max_version=(1, 3)))  # type: ignore[arg-type]
    del source
    gc.collect()
    exports, deleted = capsule.stats()
    assert (exports - exports0, deleted - deleted0) == (1, 1)
    assert alive() is None


# -- defect 2: objects alive at interpreter exit ----------------------------------------------------


EXIT_SCRIPT = """
    import numpy as np
    import dlbind

    t = dlbind.from_dlpack(dlbind.asdlpack(np.arange(8.0)))
    KEEP = [np.asarray(t), t.__dlpack__(), t.__dlpack__(max_version=(1, 3))]

    class Node:
        pass

    n = Node()
    n.t = dlbind.from_dlpack(dlbind.asdlpack(np.arange(4.0)))
    n.self = n
    n.capsule = dlbind.asdlpack(np.arange(3.0)).__dlpack__(max_version=(1, 3))
    KEEP.append(n)
    """


def test_defect2_objects_alive_at_exit() -> None:
    for _ in range(3):
        _assert_clean_exit(_run(EXIT_SCRIPT))


# -- defect 3: checked arithmetic in the shape checks ------------------------------------------------


def test_defect3_element_count_overflow_with_null_data_is_refused() -> None:
    s = Struct((2**32, 2**32), data=False)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())
    gc.collect()
    assert s.calls == 1


@pytest.mark.parametrize(
    "shape",
    [(2**32, 2**32), (2**31, 2**31, 4), (3, 2**62)],
    ids=["2^32x2^32", "2^31x2^31x4", "3x2^62"],
)
def test_defect3_element_count_overflow_is_refused(shape: tuple[int, ...]) -> None:
    s = Struct(shape)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())
    gc.collect()
    assert s.calls == 1


def test_defect3_byte_size_overflow_is_refused() -> None:
    s = Struct((2**61,), bits=64)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())
    gc.collect()
    assert s.calls == 1


# -- defect 4: element counts >= 2**63 never reach torch ---------------------------------------------


def test_defect4_convert_huge_to_torch_does_not_abort() -> None:
    pytest.importorskip("torch")
    proc = _run(
        """
        import sys
        sys.path.insert(0, sys.argv[1])
        import nativehelp, struct
        import dlbind
        ffi = nativehelp.ffi
        arena = nativehelp.raw_alloc(4096); counter = ffi.cast("int64_t *", nativehelp.raw_alloc(8))
        base = int(ffi.cast("uintptr_t", arena)); buf = ffi.buffer(arena, 4096)
        struct.pack_into("<2q", buf, 256, 2**62, 2)
        struct.pack_into("<IIQQQ", buf, 0, 1, 3, int(ffi.cast("uintptr_t", counter)), nativehelp.DELETER_V, 0)
        struct.pack_into("<QiiiBBHQQQ", buf, 32, base + 1024, 1, 0, 2, 0, 8, 1, base + 256, 0, 0)
        block = nativehelp.name_block(b"dltensor_versioned", True)
        try:
            dlbind.convert(dlbind.from_dlpack(nativehelp.new_capsule(base, block)), to="torch")
        except BufferError as exc:
            print("refused:", exc)
        else:
            raise SystemExit("accepted 2**63 elements")
        """,
        os.path.dirname(nativehelp.__file__),
    )
    _assert_clean_exit(proc)
    assert "refused:" in proc.stdout


# -- defect 5: the buffer exporter is visible to the garbage collector --------------------------------


class _Bytes(bytearray):
    e: Any


@pytest.mark.xfail(COMPILED, strict=True, reason="issue 8 defect 5: compiled exporter is invisible to the gc")
def test_defect5_exporter_cycle_is_collected() -> None:
    refs = []
    for _ in range(50):
        b = _Bytes(64)
        b.e = dlbind.asdlpack(b)
        refs.append(weakref.ref(b))
    del b
    gc.collect()
    kept = sum(r() is not None for r in refs)
    assert kept == 0, f"{kept} of 50 exporter cycles were never collected"


# -- defect 6: types seen are not kept forever -------------------------------------------------------


def _fresh_bytes_class() -> type:
    return type("Fresh", (bytearray,), {})


def _fresh_producer_class() -> type:
    def __dlpack__(self: Any, **kw: Any) -> object:
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self: Any) -> Any:
        return self.a.__dlpack_device__()

    return type("FreshProducer", (), {"__dlpack__": __dlpack__, "__dlpack_device__": __dlpack_device__})


def _through_from_dlpack(cls: type) -> None:
    obj = cls(16) if issubclass(cls, bytearray) else cls()
    if not issubclass(cls, bytearray):
        obj.a = np.zeros(4)
        dlbind.from_dlpack(obj)
    else:
        dlbind.from_dlpack(dlbind.asdlpack(obj))


def _through_convert(cls: type) -> None:
    obj = cls(16) if issubclass(cls, bytearray) else cls()
    if not issubclass(cls, bytearray):
        obj.a = np.zeros(4)
    else:
        obj = dlbind.asdlpack(obj)
    dlbind.convert(obj, to="numpy")


def _defect6_open(make: Any, path: Any) -> bool:
    """Where defect 6 still reproduces today: producer classes are cached by type (compiled: both paths;
    pure: convert's ``_BY_TYPE``)."""
    return make is _fresh_producer_class and (COMPILED or path is _through_convert)


@pytest.mark.parametrize("make", [_fresh_bytes_class, _fresh_producer_class])
@pytest.mark.parametrize("path", [_through_from_dlpack, _through_convert])
def test_defect6_types_seen_are_not_kept(make: Any, path: Any, request: pytest.FixtureRequest) -> None:
    if _defect6_open(make, path):
        request.applymarker(
            pytest.mark.xfail(strict=True, reason=f"issue 8 defect 6: {BUILD} build keeps every type it has seen")
        )
    refs = []
    for _ in range(50):
        cls = make()
        path(cls)
        refs.append(weakref.ref(cls))
    del cls
    gc.collect()
    kept = sum(r() is not None for r in refs)
    assert kept == 0, f"{kept} of 50 fresh classes are kept alive after use"


# -- defect 7: the builds agree -------------------------------------------------------------------------


def test_defect7_unknown_keyword_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="bogus"):
        dlbind.from_dlpack(np.zeros(3), bogus=None)  # type: ignore[call-arg]


@pytest.mark.parametrize("raw", [True, False], ids=["capsule", "exporter"])
def test_defect7_byte_offset_reaches_torch(raw: bool) -> None:
    torch = pytest.importorskip("torch")
    a = np.arange(8, dtype=np.float32)
    exporter = dlbind.from_pointer(a.ctypes.data, (6,), "float32", byte_offset=8, owner=a)
    source = exporter.__dlpack__(max_version=(1, 3)) if raw else exporter
    out = dlbind.convert(source, to="torch")
    assert isinstance(out, torch.Tensor)
    assert out.tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


# -- found by the fuzzer (issue 8 harness): reported for the integrator -------------------------------------
# Each: an input dlbind accepts today, then an operation that ends outside BufferError/TypeError/ValueError.


@pytest.mark.parametrize(
    ("code", "bits"), [(2, 4), (6, 128), (0, 7), (5, 8)], ids=["float4-as-kDLFloat", "bool128", "int7", "complex8"]
)
@pytest.mark.xfail(strict=True, reason="issue 8 defect 8: dtype (code, bits) pairs no spec defines are accepted")
def test_defect8_undefined_dtypes_are_refused(code: int, bits: int) -> None:
    s = Struct((4,), code=code, bits=bits)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())


@pytest.mark.xfail(strict=True, reason="issue 8 defect 8: a negative device id is accepted (jax then raises)")
def test_defect8_negative_device_id_is_refused() -> None:
    s = Struct((4,), device=(1, -1))
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())


@pytest.mark.xfail(strict=True, reason="issue 8 defect 9: convert hands a CUDA tensor to a CPU-only torch")
def test_defect9_convert_to_a_library_without_the_device() -> None:
    pytest.importorskip("torch")
    t = dlbind.from_dlpack(Struct((4,), device=(2, 0)).capsule())
    with pytest.raises(BufferError):
        dlbind.convert(t, to="torch")


def test_defect10_byte_offset_overflow_is_refused() -> None:
    s = Struct((2, 3), byte_offset=2**64 - 8)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())


def test_defect11_zero_size_with_huge_dims() -> None:
    s = Struct((0, 2**62, 4))
    try:
        t = dlbind.from_dlpack(s.capsule())
    except BufferError:
        return  # refusing it is fine too
    assert t.copy().shape == (0, 2**62, 4)
    assert dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3))).shape == (0, 2**62, 4)


@pytest.mark.xfail(PURE, strict=True, reason="issue 8 defect 12: the pure build's Tensor has no buffer protocol")
def test_defect12_buffer_protocol_in_both_builds() -> None:
    t = dlbind.from_dlpack(dlbind.asdlpack(bytearray(b"abcd")))
    assert memoryview(t).tobytes() == b"abcd"
