"""Regression tests for the seven reliability defects of issue 8, each run on both builds.

Where a defect is still open in one build the test is a strict xfail naming the defect and the build:
it starts failing (XPASS) the moment the runtime is fixed, and the mark must then be removed.
"""

from __future__ import annotations

import contextlib
import ctypes
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
from faulty import PY310_PURE, PY310_PURE_REASON

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
        strides: tuple[int, ...] | None = None,
    ) -> None:
        ffi = nativehelp.ffi
        # C memory never freed: a tensor kept by a traceback may outlive this object (interpreter exit)
        self.arena = nativehelp.raw_alloc(4096)
        self.counter = ffi.cast("int64_t *", nativehelp.raw_alloc(8))
        base = int(ffi.cast("uintptr_t", self.arena))
        buf = ffi.buffer(self.arena, 4096)
        ndim = len(shape)
        struct.pack_into(f"<{ndim}Q", buf, 256, *[d % 2**64 for d in shape])
        if strides is not None:
            struct.pack_into(f"<{ndim}q", buf, 512, *strides)
        ctx = int(ffi.cast("uintptr_t", self.counter))
        struct.pack_into("<IIQQQ", buf, 0, 1, 3, ctx, nativehelp.DELETER_V, 0)
        data_ptr = base + 1024 if data else 0
        struct.pack_into(
            "<QiiiBBHQQQ", buf, 32, data_ptr, *device, ndim, code, bits, 1, base + 256,
            0 if strides is None else base + 512, byte_offset % 2**64,
        )
        self.block = nativehelp.name_block(b"dltensor_versioned", True)
        self.base = base

    def capsule(self) -> object:
        return nativehelp.new_capsule(self.base, self.block)

    @property
    def calls(self) -> int:
        return int(self.counter[0])


# -- defect 1: a refusing consumer keeps its exception, and the export is released --------------------


@pytest.mark.xfail(PY310_PURE, strict=True, reason=PY310_PURE_REASON)
def test_defect1_refusing_consumer_keeps_its_exception() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    t = dlbind.from_dlpack(dlbind.asdlpack(np.zeros(4, ml_dtypes.bfloat16)))
    # numpy's own refusal (numpy 2.4 raises RuntimeError "Unsupported dtype in DLTensor."), not SystemError
    with pytest.raises((BufferError, RuntimeError)):
        np.from_dlpack(t)


@pytest.mark.xfail(PY310_PURE, strict=True, reason=PY310_PURE_REASON)
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


@pytest.mark.xfail(PY310_PURE, strict=True, reason=PY310_PURE_REASON)
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


@pytest.mark.xfail(PY310_PURE, strict=True, reason=PY310_PURE_REASON)
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
    h: Any
    t: Any


def _collected(make: Any, n: int = 50) -> int:
    """How many of ``n`` objects ``make()`` returned (each left in a reference cycle) survive a collection."""
    refs = [weakref.ref(make()) for _ in range(n)]
    gc.collect()
    return sum(r() is not None for r in refs)


def test_defect5_exporter_cycle_is_collected() -> None:
    def make() -> _Bytes:
        b = _Bytes(64)
        b.e = dlbind.asdlpack(b)
        return b

    kept = _collected(make)
    assert kept == 0, f"{kept} of 50 exporter cycles were never collected"


def test_defect5_exporter_cycle_with_its_python_exporter_is_collected() -> None:
    # copy=True goes to the Python Exporter of the same object, which the exporter then keeps
    def make() -> _Bytes:
        b = _Bytes(64)
        b.e = dlbind.asdlpack(b)
        np.from_dlpack(b.e, copy=True)
        return b

    kept = _collected(make)
    assert kept == 0, f"{kept} of 50 exporter cycles (with a Python Exporter inside) were never collected"


def test_defect5_tensor_cycle_is_collected() -> None:
    # b -> b.__dict__ -> Tensor -> its struct's owner (the exporter) -> b
    def make() -> _Bytes:
        b = _Bytes(64)
        b.t = dlbind.from_dlpack(dlbind.asdlpack(b))
        return b

    kept = _collected(make)
    assert kept == 0, f"{kept} of 50 tensor cycles were never collected"


def test_defect5_tensor_of_tensor_cycle_is_collected() -> None:
    # the struct a Tensor exports holds that Tensor: b -> t2 -> t1 -> exporter -> b
    def make() -> _Bytes:
        b = _Bytes(64)
        b.t = dlbind.from_dlpack(dlbind.from_dlpack(dlbind.asdlpack(b)))
        return b

    kept = _collected(make)
    assert kept == 0, f"{kept} of 50 cycles through two tensors were never collected"


def test_defect5_foreign_view_in_a_cycle_keeps_its_memory() -> None:
    # numpy (a foreign consumer) views a dlbind export of b, and the view sits in a cycle with b: the
    # struct's owner must stay with the registry until numpy calls the deleter, so collections
    # leave the view's memory valid; once the view is gone, the cycle is collected.
    b = _Bytes(bytes(range(64)))
    b.t = np.from_dlpack(dlbind.asdlpack(b))
    view = b.t
    alive = weakref.ref(b)
    del b
    for _ in range(3):
        gc.collect()
        bytearray(b"\x00" * 64)  # freed memory would be reused by these
    assert alive() is not None, "the collector freed an exporter a numpy view still points at"
    assert view.tobytes() == bytes(range(64))
    view[0] = 200
    del view
    gc.collect()
    back = alive()
    assert back is not None, "the exporter went away while its cycle still holds the numpy view"
    assert back[0] == 200 and back.t.tobytes()[1:] == bytes(range(1, 64))
    del back.t
    del back
    gc.collect()
    assert alive() is None, "the exporter was not freed once the numpy view was gone"


@pytest.mark.skipif(PURE, reason="the Handover producer is the compiled convert's")
def test_defect5_handover_kept_by_its_consumer_is_collected() -> None:
    # convert's C route hands the struct to the target's from_dlpack in a Handover; a consumer that
    # keeps it (without taking the struct) closes a cycle: b, its attribute h (the Handover), the struct's owner (the
    # exporter), b
    from dlbind._ffi import native
    from dlbind.routes import route_to

    def make() -> _Bytes:
        b = _Bytes(64)

        def keep(producer: Any) -> Any:
            b.h = producer
            return np.zeros(1)

        native.convert_to(dlbind.asdlpack(b), route_to("numpy")._replace(importer=keep))
        assert type(b.h).__name__ == "Handover"
        return b

    kept = _collected(make)
    assert kept == 0, f"{kept} of 50 cycles through a kept Handover were never collected"


def test_defect5_collection_leaves_a_live_capsule_its_data() -> None:
    # An unconsumed capsule holds the exporter (the collector cannot see inside it): the cycle must
    # survive, its memory intact, until the capsule is consumed and the tensor dropped.
    b = _Bytes(b"\x07" * 64)
    b.e = dlbind.asdlpack(b)
    capsule = b.e.__dlpack__(max_version=(1, 0))
    alive = weakref.ref(b)
    del b
    gc.collect()
    assert alive() is not None, "the collector freed an exporter a live capsule still points at"
    for _ in range(3):  # churn: freed memory would be reused by these
        bytearray(b"\x00" * 64)
        gc.collect()
    t = dlbind.from_dlpack(capsule)
    assert np.from_dlpack(t).tobytes() == b"\x07" * 64
    del capsule
    gc.collect()
    assert alive() is not None, "the collector freed an exporter a live tensor still points at"
    assert np.from_dlpack(t).tobytes() == b"\x07" * 64
    del t
    gc.collect()
    assert alive() is None, "the cycle was not collected once its last consumer was gone"


def test_defect5_exporter_cycle_collection_in_dev_mode() -> None:
    # many collections of half-built and cleared exporters, with the free list cycling: -X dev
    # (debug allocator) aborts on a double release or a use after free
    proc = _run(
        """
        import gc, numpy as np, dlbind
        class B(bytearray):
            pass
        for round in range(200):
            keep = []
            for i in range(40):
                b = B(8 * (i % 5 + 1))
                b.e = dlbind.asdlpack(b)
                if i % 3 == 0:
                    b.t = dlbind.from_dlpack(b.e)
                if i % 4 == 0:
                    keep.append((b.e, len(b)))
                np.from_dlpack(dlbind.asdlpack(bytes(8)))
            del b
            gc.collect()
            for e, n in keep:
                assert np.from_dlpack(dlbind.from_dlpack(e)).tobytes() == bytes(n)
        print("ok")
        """
    )
    _assert_clean_exit(proc)
    assert "ok" in proc.stdout


MEMORYVIEW_FIRST_SCRIPT = """
    import gc, weakref
    import dlbind

    class B(bytearray):
        pass

    def memoryviews(root, depth=4):
        # the memoryviews among the objects the tensor keeps (its owner and what that holds)
        seen, level, found = {id(root)}, [root], []
        for _ in range(depth):
            nxt = []
            for obj in level:
                for ref in gc.get_referents(obj):
                    if id(ref) in seen or isinstance(ref, type) or type(ref).__name__ == "module":
                        continue
                    seen.add(id(ref))
                    (found if type(ref) is memoryview else nxt).append(ref)
            level = nxt
        return found

    def main():
        gc.disable()
        keep = []  # older than everything below
        b = B(bytes(range(64)))
        t = dlbind.from_dlpack(dlbind.asdlpack(b))
        keep.extend(memoryviews(t))
        alive = weakref.ref(b)
        del b
        gc.collect()  # b is rescued through the memoryview, which now comes first in the collector's list
        keep.clear()
        b = alive()
        b.t = t  # b -> t -> its owner -> memoryview -> managed buffer -> b
        del b, t
        gc.collect()  # clears the cycle's memoryview first
        assert alive() is None, "the cycle was not collected"
        print("ok")

    main()
    """


def test_defect5_cycle_whose_memoryview_is_cleared_first() -> None:
    # CPython < 3.12.7 (gh-77894): a memoryview the collector clears while something holds a buffer
    # export of it drops its managed buffer, then crashes when freed. The pure build kept a buffer
    # exporter's memory through a cffi from_buffer pointer on a memoryview of it (an export), and that
    # pointer is the owner in b.t = from_dlpack(asdlpack(b)): whether the collector cleared the
    # memoryview first depended on the order of its list (a segfault in the defect 1 + 5 tests).
    # The memoryview is made to precede the cycle's other objects, deterministically.
    proc = _run(MEMORYVIEW_FIRST_SCRIPT)
    _assert_clean_exit(proc)
    assert "ok" in proc.stdout
    assert "exported buffer" not in proc.stderr, proc.stderr[-3000:]


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


@pytest.mark.parametrize("make", [_fresh_bytes_class, _fresh_producer_class])
@pytest.mark.parametrize("path", [_through_from_dlpack, _through_convert])
def test_defect6_types_seen_are_not_kept(make: Any, path: Any) -> None:
    refs = []
    for _ in range(50):
        cls = make()
        path(cls)
        refs.append(weakref.ref(cls))
    del cls
    gc.collect()
    kept = sum(r() is not None for r in refs)
    assert kept == 0, f"{kept} of 50 fresh classes are kept alive after use"


def test_defect6_array_types_as_targets_are_not_kept() -> None:
    refs = []
    for _ in range(50):
        target = type("Target", (np.ndarray,), {})
        out = dlbind.convert(dlbind.asdlpack(bytes(8)), to=target)
        assert isinstance(out, np.ndarray)
        refs.append(weakref.ref(target))
    del target, out
    gc.collect()
    kept = sum(r() is not None for r in refs)
    assert kept == 0, f"{kept} of 50 fresh target types are kept alive after use"


class _Recording:
    """A producer that records the keywords of each __dlpack__ call (the plain call passes stream and max_version);
    a type of it holding a foreign exchange table (``nativehelp.table_capsule``: 3 float32 made in C) is not asked
    through __dlpack__ at all. (dlbind's own table, held by a class other than dlbind.Tensor, is not used: it would
    ask __dlpack__ itself.)"""

    calls: list[tuple[str, ...]]

    def __init__(self) -> None:
        self.a = np.arange(4.0)
        self.calls = []

    def __dlpack__(self, **kw: Any) -> object:
        self.calls.append(tuple(sorted(kw)))
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self) -> Any:
        return self.a.__dlpack_device__()


@pytest.mark.skipif(PURE, reason="the pure build imports through __dlpack__ only (no exchange tables)")
def test_defect6_table_cache_follows_the_type() -> None:
    from nativehelp import table_capsule

    table = table_capsule()
    cls = type("Producer", (_Recording,), {})
    x = cls()
    for _ in range(3):
        assert dlbind.from_dlpack(x).shape == (4,)
    assert x.calls[-1] == ("max_version", "stream")
    asked = len(x.calls)
    cls.__dlpack_c_exchange_api__ = table  # type: ignore[attr-defined]
    assert dlbind.from_dlpack(x).shape == (3,), "a table set on the type after its first use was not seen"
    assert len(x.calls) == asked
    del cls.__dlpack_c_exchange_api__  # type: ignore[attr-defined]
    assert dlbind.from_dlpack(x).shape == (4,)
    assert x.calls[-1] == ("max_version", "stream"), "a table removed from the type was still used"


@pytest.mark.skipif(PURE, reason="the pure build imports through __dlpack__ only (no exchange tables)")
def test_defect6_a_new_type_at_a_freed_types_address_is_looked_up_afresh() -> None:
    from nativehelp import table_capsule

    table = table_capsule()
    for i in range(200):
        with_table = type("WithTable", (_Recording,), {"__dlpack_c_exchange_api__": table})
        x = with_table()
        assert dlbind.from_dlpack(x).shape == (3,)
        assert x.calls == []
        freed = weakref.ref(with_table)
        del with_table, x
        gc.collect(1)  # the young generations hold the class (a full collection costs ~0.2 s a round here)
        if freed() is not None:
            gc.collect()
        assert freed() is None
        plain = type("Plain", (_Recording,), {})  # often at the address the freed class had
        y = plain()
        dlbind.from_dlpack(y)
        assert y.calls == [("max_version", "stream")], f"round {i}: a freed type's table was used"
        del plain, y


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
def test_defect8_undefined_dtypes_are_refused(code: int, bits: int) -> None:
    s = Struct((4,), code=code, bits=bits)
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())


def test_defect8_negative_device_id_is_refused() -> None:
    s = Struct((4,), device=(1, -1))
    with pytest.raises(BufferError):
        dlbind.from_dlpack(s.capsule())


def test_defect9_convert_to_a_library_without_the_device() -> None:
    pytest.importorskip("torch")
    t = dlbind.from_dlpack(Struct((4,), device=(2, 0)).capsule())
    with pytest.raises(BufferError):
        dlbind.convert(t, to="torch")


@pytest.mark.parametrize("byte_offset", [2**64 - 8, 2**63], ids=["wraps the pointer", "past int64"])
def test_defect10_byte_offset_overflow_is_refused(byte_offset: int) -> None:
    """A byte_offset of 2**63 or more is refused at import (torch reads it as int64: a negative storage offset,
    then a crash), whether or not it wraps the pointer; and in a description (from_pointer's)."""
    s = Struct((2, 3), byte_offset=byte_offset)
    with pytest.raises(BufferError, match="byte_offset"):
        dlbind.from_dlpack(s.capsule())
    assert s.calls == 1
    buf = np.zeros(16, np.uint8)
    with pytest.raises(BufferError, match=r"byte_offset .* (int64|address space)"):
        dlbind.from_pointer(buf.ctypes.data, (1,), "uint8", byte_offset=byte_offset, owner=buf)


_DELETES_WITHOUT_RENAMING = """
import gc, sys
sys.path.insert(0, {here!r})
import dlbind, torch
from test_reliability import Struct
gc.freeze()  # each collect below walks what the loop made, not torch's heap (0.15 s a collect)
for _ in range(40):
    s = Struct((1, 81, 4354022882241638462, 3, 0), strides=(-2, 2**62, 6, -(2**31), -1))
    t = dlbind.from_dlpack(s.capsule())
    for _ in range(3):
        try:
            torch.from_dlpack(t)
        except RuntimeError:
            pass
    del t
    gc.collect()
    assert s.calls == 1, s.calls
if dlbind.ffi_build() == "compiled":
    from dlbind._ffi import native
    print("pinned", native.pinned())
print("survived")
"""


def test_a_consumer_that_deletes_without_renaming_is_survived() -> None:
    # issue 8 defect 16, found by nox -s fuzz (seed 0, input 55820): torch.from_dlpack takes the struct,
    # fails, runs the deleter and leaves the capsule unrenamed, so the capsule's destructor would release
    # the struct a second time. In a subprocess: a regression kills the interpreter.
    pytest.importorskip("torch")
    code = _DELETES_WITHOUT_RENAMING.format(here=os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "survived" in proc.stdout, proc.stderr[-2000:]
    if COMPILED:
        # the block of a capsule that outlives its deleter is pinned (never freed) and reused first:
        # 40 such failures pin one block, not 40
        pinned = int(proc.stdout.split("pinned ")[1].split()[0])
        assert 1 <= pinned <= 2, proc.stdout


_STALE_CAPSULE = """
import gc, sys, weakref
sys.path.insert(0, {here!r})
import numpy as np, dlbind, torch
from test_reliability import Struct
s = Struct((1, 81, 4354022882241638462, 3, 0), strides=(-2, 2**62, 6, -(2**31), -1))
t = dlbind.from_dlpack(s.capsule())
stale = []
for _ in range(3):  # torch takes each struct, fails, runs its deleter and leaves the capsule unrenamed
    cap = t.__dlpack__(max_version=(1, 3))
    try:
        torch.from_dlpack(cap)
    except RuntimeError:
        stale.append(cap)
for i in range(3):  # later exports (their blocks may be the stale capsules')
    b = np.full((2, 8), float(i))
    kept = weakref.ref(b)
    cap = dlbind.asdlpack(b).__dlpack__(max_version=(1, 3))
    del b
    for old in stale:
        try:
            dlbind.from_dlpack(old)
            raise SystemExit("a stale capsule was imported")
        except BufferError as exc:
            assert "already released" in str(exc), exc
        try:  # a foreign consumer's retry reads the struct itself: poisoned, never the later export's
            torch.from_dlpack(old)
            raise SystemExit("torch imported a stale capsule")
        except (BufferError, RuntimeError) as exc:
            assert "Stride calculation" not in str(exc), exc
    if i == 2:
        del stale[:]  # their destructors run: they must not release the live export
        gc.collect()
    assert kept() is not None, "a live export's owner was freed"
    assert np.asarray(dlbind.from_dlpack(cap))[0, 0] == i
print("survived")
"""


def test_a_stale_capsule_neither_imports_nor_releases_another_export() -> None:
    """After torch ran the deleter of a capsule it left unrenamed (above), the stale capsule is refused by dlbind's
    import and by torch's retry (its struct poisoned, and not reused for a later export while the capsule lives:
    torch's retry took the next export's struct, two owners of one struct), and its destructor leaves later exports
    alone (the pure build released that one's owner, a use after free)."""
    pytest.importorskip("torch")
    code = _STALE_CAPSULE.format(here=os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, DLBIND_PURE="1" if PURE else "0")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0 and "survived" in proc.stdout, (proc.stdout, proc.stderr[-2000:])


def test_capsules_consumed_without_their_destructor_reuse_quarantined_blocks() -> None:
    # tvm-ffi takes a capsule by clearing its destructor and renaming it, so the capsule dies without telling us:
    # its block, deleted while the capsule lived, waits in the quarantine. Past its bound the oldest is reused: the
    # blocks kept stay bounded and carry the right data.
    tvm_ffi = pytest.importorskip("tvm_ffi")
    import dlbind.capsule as capsule

    if COMPILED:
        from dlbind._ffi import native

        assert native.QUARANTINE == capsule.QUARANTINE  # one bound, both builds
        before = native.pinned()
    live: list[tuple[np.ndarray, Any, Any]] = []
    for i in range(capsule.QUARANTINE + 300):
        ref = np.arange(6.0) + i
        cap = dlbind.from_dlpack(ref.copy()).__dlpack__(max_version=(1, 3))
        live.append((ref, cap, tvm_ffi.from_dlpack(cap)))
        if len(live) > 5:
            live.pop(0)
        for want, _, got in live:
            np.testing.assert_array_equal(np.from_dlpack(got), want)
    if COMPILED:
        assert 1 <= native.pinned() - before <= capsule.QUARANTINE + 7, native.pinned() - before
    else:
        assert 1 <= len(capsule._HELD) <= capsule.QUARANTINE
    live.clear()
    gc.collect()


@pytest.mark.parametrize("shape", [(1, -3, 0), (0, -1), (-2, 0, 5)])
def test_negative_dimension_beside_a_zero_is_refused(shape: tuple[int, ...]) -> None:
    # found by the fuzzer: the compiled check skipped the sign once a zero made the shape empty
    s = Struct(shape, strides=(1,) * len(shape))
    with pytest.raises(BufferError, match="negative dimension"):
        dlbind.from_dlpack(s.capsule())
    assert s.calls == 1


@pytest.mark.parametrize(
    ("shape", "strides"), [((0, 2**62, 4), None), ((0, 3, 7137094064693853749), (1, 7, -4))], ids=["null", "given"]
)
def test_defect11_zero_size_with_huge_dims(shape: tuple[int, ...], strides: tuple[int, ...] | None) -> None:
    s = Struct(shape, bits=64, strides=strides)
    try:
        t = dlbind.from_dlpack(s.capsule())
    except BufferError:
        return  # refusing it is fine too
    assert t.copy().shape == shape  # the compact strides of a copy overflow int64: no element, so any will do
    assert dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3), copy=True)).shape == shape
    assert dlbind.from_dlpack(t.__dlpack__(max_version=(1, 3))).shape == shape


_NO_PURE_BUFFER = PURE and sys.version_info < (3, 12)


@pytest.mark.xfail(_NO_PURE_BUFFER, strict=True, reason="the pure build's buffer protocol needs Python 3.12 (PEP 688)")
def test_defect12_buffer_protocol_in_both_builds() -> None:
    t = dlbind.from_dlpack(dlbind.asdlpack(bytearray(b"abcd")))
    assert memoryview(t).tobytes() == b"abcd"


_BUFFER_CASES = {
    "2-D": lambda: np.arange(6.0).reshape(2, 3),
    "0-d": lambda: np.array(5.0),
    "1-D step 3": lambda: np.arange(10, dtype=np.int16)[::3],
    "1-D reversed": lambda: np.arange(10, dtype=np.int32)[::-2],
    "empty": lambda: np.zeros((0,)),
    "bool": lambda: np.array([True, False, True]),
    "float16": lambda: np.arange(3, dtype=np.float16),
    "read-only": lambda: _read_only(np.arange(3.0)),
}


def _read_only(a: Any) -> Any:
    a.flags.writeable = False
    return a


@pytest.mark.skipif(_NO_PURE_BUFFER, reason="the pure build's buffer protocol needs Python 3.12 (PEP 688)")
@pytest.mark.parametrize("case", list(_BUFFER_CASES))
def test_memoryview_of_a_tensor_matches_numpy(case: str) -> None:
    """``memoryview(t)`` in both builds (the pure one through ``__buffer__``): values, shape, read-only, and
    the view keeps the tensor's memory alive."""
    a = _BUFFER_CASES[case]()
    t = dlbind.from_dlpack(a)
    view = memoryview(t)
    del t
    gc.collect()
    assert view.shape == a.shape and view.tobytes() == a.tobytes() and view.readonly == (not a.flags.writeable)
    assert view.format == a.dtype.char
    if not view.readonly and a.size and view.format != "e":  # memoryview reads no float16 items
        view[(0,) * a.ndim] = view[(0,) * a.ndim] or 1  # writes reach the source
        assert view[(0,) * a.ndim] == a[(0,) * a.ndim]


@pytest.mark.skipif(not PURE or _NO_PURE_BUFFER, reason="the pure build's limits (Python 3.12+); the C build has all")
@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: np.arange(12.0).reshape(3, 4)[:, ::2], "row-major contiguous or 1-D tensors only"),
        (lambda: np.arange(3, dtype=np.complex128), "cannot give complex128"),
        (lambda: np.broadcast_to(np.arange(1.0), (4,)), "broadcast"),
        (lambda: np.zeros((0, 3)), "zero-size tensor of shape"),
    ],
)
def test_the_pure_buffer_protocol_refuses_what_it_cannot_give(make: Any, message: str) -> None:
    with pytest.raises(BufferError, match=message):
        memoryview(dlbind.from_dlpack(make()))


# the buffer flags of the CPython C API (its pybuffer header), as inspect.BufferFlags names them on 3.12
_BUFFER_FLAGS = {"ND": 0x8, "STRIDES": 0x18, "C_CONTIGUOUS": 0x38, "F_CONTIGUOUS": 0x58, "ANY_CONTIGUOUS": 0x98}
_LAYOUTS = {
    "row-major": lambda: np.arange(6.0).reshape(2, 3),
    "column-major": lambda: np.arange(6.0).reshape(2, 3).T,
    "every other column": lambda: np.arange(12.0).reshape(3, 4)[:, ::2],
    "reversed": lambda: np.arange(5.0)[::-1],
    "size-1 rows": lambda: np.arange(8.0).reshape(4, 2)[:1],
    "empty": lambda: np.zeros((0, 3)),
}


def _buffer_refusal(obj: object, flags: int) -> type[BaseException] | None:
    """The type of the exception ``obj``'s buffer protocol raises when asked with ``flags`` (PyObject_GetBuffer),
    None where it gives the buffer (numpy refuses with ValueError, dlbind with BufferError)."""
    view = ctypes.create_string_buffer(128)  # a Py_buffer (80 bytes on 64-bit platforms)
    get = ctypes.pythonapi.PyObject_GetBuffer
    get.argtypes, get.restype = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int], ctypes.c_int
    try:
        get(obj, view, flags)
    except (BufferError, ValueError) as exc:
        return type(exc)
    release = ctypes.pythonapi.PyBuffer_Release
    release.argtypes, release.restype = [ctypes.c_void_p], None
    release(view)
    return None


@pytest.mark.skipif(_NO_PURE_BUFFER, reason="the pure build's buffer protocol needs Python 3.12 (PEP 688)")
@pytest.mark.parametrize("flags", list(_BUFFER_FLAGS))
@pytest.mark.parametrize("layout", list(_LAYOUTS))
def test_a_buffer_asked_contiguous_is_given_as_numpy_gives_it(layout: str, flags: str) -> None:
    """A consumer asking for C-, Fortran- or any contiguous memory reads ``len`` bytes from ``buf``: a tensor
    gives such a buffer where numpy gives one of the same array, and refuses it (BufferError) where numpy does
    (the compiled build gave every layout whatever was asked)."""
    a = _LAYOUTS[layout]()
    t = dlbind.from_dlpack(a)
    if PURE and _buffer_refusal(t, _BUFFER_FLAGS["STRIDES"]) is not None:
        pytest.skip("a layout the pure build's buffer protocol does not give")
    refused = _buffer_refusal(t, _BUFFER_FLAGS[flags])
    assert (refused is None) == (_buffer_refusal(a, _BUFFER_FLAGS[flags]) is None)
    assert refused in (None, BufferError)


@pytest.mark.parametrize("case", ["null shape", "negative dimension", "ndim too large"])
@pytest.mark.parametrize("legacy_call", [False, True], ids=["versioned call", "older call"])
def test_convert_refuses_a_bad_legacy_struct_cleanly(case: str, legacy_call: bool) -> None:
    """convert's C route views a legacy struct as a versioned one only after validating it (a NULL shape
    crashed it, found by review); the struct's deleter runs once and the error is the BufferError of
    from_dlpack."""
    from faulty import make_capsule

    counters = []
    kwargs: dict[str, Any] = {
        "null shape": {"null_shape": True, "strides": None},
        "negative dimension": {"shape": (-4,), "strides": None},
        "ndim too large": {"ndim": 100, "shape": (1,) * 100, "strides": None},
    }[case]

    class Producer:
        def __dlpack__(self, stream: Any = None, **more: Any) -> object:
            if legacy_call and more:
                raise TypeError("__dlpack__() got an unexpected keyword argument 'max_version'")
            made, counter = make_capsule(versioned=False, name=b"dltensor", **kwargs)
            counters.append(counter)
            return made

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    for _ in range(3):  # the first call teaches the older producer's call style
        with pytest.raises(BufferError):
            dlbind.convert(Producer(), to="numpy")
    gc.collect()
    assert counters and all(c.calls == 1 for c in counters), [c.calls for c in counters]


@pytest.mark.parametrize("shape", [(0,), (1,)])
def test_convert_copies_huge_strides_without_overflow(shape: tuple[int, ...]) -> None:
    """A copy convert's C route makes (negative strides to torch) of strides whose byte size overflows
    int64 (found by the fuzzer under UBSan: signed overflow) is left to Python, which makes the copy: empty, or
    the one element a size-1 dimension's stride never moves from; nothing overflows (``nox -s asan`` runs this
    under UBSan)."""
    torch = pytest.importorskip("torch")
    from faulty import make_capsule

    counters = []

    class Producer:
        def __dlpack__(self, **kwargs: Any) -> object:
            made, counter = make_capsule(shape=shape, strides=(-(2**62) - 3,))
            counters.append(counter)
            return made

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    out = dlbind.convert(Producer(), to="torch")
    # a size-1 dimension's stride never moves the pointer: its one element is read where data points
    assert isinstance(out, torch.Tensor) and tuple(out.shape) == shape and out.tolist() == [0.0] * shape[0]
    assert out.is_contiguous()  # the copy dlbind made, not a view of the producer's strides
    del out
    gc.collect()
    assert counters and all(c.calls == 1 for c in counters)
