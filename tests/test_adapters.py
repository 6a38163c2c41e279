"""spec/adapters.toml against the installed libraries, and dlbind.convert bridging each deviation.

For every quirk of a library installed here: one test shows the deviation with the bare library,
and one shows dlbind.convert bridging it.
"""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import textwrap
from typing import Any

import numpy as np
import pytest

import dlbind
from dlbind._generated.adapters import ADAPTERS, Asks
from dlbind._libraries import library_of
from dlbind.routes import resolve

INSTALLED = [name for name, a in ADAPTERS.items() if a.verified]


def _module(name: str) -> Any:
    return pytest.importorskip(ADAPTERS[name].import_name)


def _sample(name: str) -> Any:
    a = np.arange(6.0).reshape(2, 3)
    return a if name == "numpy" else dlbind.convert(a, name)


def _spy() -> tuple[Any, list[dict[str, Any]]]:
    calls: list[dict[str, Any]] = []
    source = np.arange(3.0)

    class Spy:
        def __dlpack__(self, **kw: Any) -> object:
            calls.append(kw)
            return source.__dlpack__(**kw)

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    return Spy(), calls


@pytest.mark.parametrize("name", INSTALLED)
def test_facts_hold_for_the_installed_library(name: str) -> None:
    adapter = ADAPTERS[name]
    module = _module(name)
    x = _sample(name)
    assert library_of(x) is adapter, f"{type(x)} not recognised as {name}"
    assert resolve(name) is adapter and resolve(module) is adapter and resolve(type(x)) is adapter
    from dlbind._libraries import dotted, for_release

    release = for_release(adapter)
    importer = dotted(release.import_.function)
    for keyword in ("device", "copy"):
        assert _takes(importer, keyword, x) == (keyword in release.import_.keywords), f"{name}.from_dlpack {keyword}="
    assert hasattr(type(x), "__dlpack_c_exchange_api__") == release.import_.exchange_api


def _takes(importer: Any, keyword: str, x: Any) -> bool:
    """Whether ``importer`` takes ``keyword``: from its signature, or (a builtin without one, as numpy 2.2's
    from_dlpack, or nanobind's mlx.core.array) by calling it with the keyword at its default, None."""
    try:
        return keyword in inspect.signature(importer).parameters
    except ValueError:
        pass
    try:
        importer(x, **{keyword: None})
    except TypeError as e:
        # CPython's "unexpected keyword argument"; nanobind's and pybind11's "incompatible function arguments"
        if "keyword" in str(e) or "incompatible function arguments" in str(e):
            return False
        raise
    return True


def test_unknown_libraries() -> None:
    with pytest.raises(ValueError, match="unknown array library 'nosuchlib'"):
        dlbind.convert(np.arange(3), "nosuchlib")
    assert library_of(object()) is None


@pytest.mark.parametrize("name", [n for n in ADAPTERS if n not in INSTALLED])
def test_known_but_absent_systems_say_what_to_install(name: str) -> None:
    try:
        importlib.import_module(ADAPTERS[name].import_name)
    except ImportError:
        pass
    else:
        pytest.skip(f"{name} is installed")
    with pytest.raises(ImportError, match=f"needs {ADAPTERS[name].import_name}"):
        dlbind.convert(np.arange(3), name)


def test_release_facts_follow_the_installed_version() -> None:
    from dlbind._libraries import _matches, _release, for_release

    assert _release("2.0.2") == (2, 0, 2) and _release("2.13.0+cpu") == (2, 13, 0) and _release("2.1.0rc1") == (2, 1, 0)
    assert _release(None) is None and _release("dev") is None
    assert _matches((2, 0, 2), "<2.1") and not _matches((2, 1), "<2.1") and _matches((0, 12, 0, 1), ">=0.12")
    numpy_row = for_release(ADAPTERS["numpy"])
    old = tuple(int(p) for p in np.__version__.split(".")[:2]) < (2, 1)
    assert (numpy_row.import_.asks == Asks.LEGACY) == old and (numpy_row.import_.keywords == ()) == old


# -- numpy: legacy imports are read-only --------------------------------------------------------


def test_numpy_legacy_import_readonly() -> None:
    legacy_only = dlbind.asdlpack(bytearray(4))

    class Legacy:
        def __dlpack__(self, stream: Any = None) -> object:
            return legacy_only.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    assert not np.from_dlpack(Legacy()).flags.writeable  # the quirk: writable memory, read-only array
    assert dlbind.convert(Legacy(), "numpy").flags.writeable  # bridged: re-exported versioned


# -- torch ------------------------------------------------------------------------------------------


def test_torch_default_stream_is_minus_one() -> None:
    torch = _module("torch")
    assert inspect.signature(torch.Tensor.__dlpack__).parameters["stream"].default == -1


def test_torch_aborts_on_negative_strides_and_convert_copies() -> None:
    _module("torch")
    code = "import numpy as np, torch; torch.from_dlpack(np.arange(4.0)[::-1])"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode < 0  # killed by a signal (SIGABRT): the deviation
    bridged = dlbind.convert(np.arange(4.0)[::-1], "torch")
    assert bridged.tolist() == [3.0, 2.0, 1.0, 0.0]
    with pytest.raises(BufferError, match="negative strides, so it needs a copy and copy=False"):
        dlbind.convert(np.arange(4.0)[::-1], "torch", copy=False)


def test_torch_drops_the_negative_bit_and_dlbind_refuses_it() -> None:
    torch = _module("torch")
    x = torch._neg_view(torch.arange(3.0))
    assert x.is_neg() and x.tolist() == [-0.0, -1.0, -2.0]
    assert np.from_dlpack(x).tolist() == [0.0, 1.0, 2.0]  # the quirk: the bit is dropped, the values are wrong
    for call in (lambda: dlbind.from_dlpack(x), lambda: dlbind.convert(x, "numpy")):
        with pytest.raises(BufferError, match=r"is_neg\(\) is true.*\(resolve_neg\(\) gives a copy without the bit\)"):
            call()
    assert dlbind.convert(x.resolve_neg(), "numpy").tolist() == [-0.0, -1.0, -2.0]


@pytest.mark.parametrize("layout", ["reversed", "read-only"])
def test_a_bridge_copy_is_the_copy_that_copy_true_asks_for(layout: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _module("torch")
    from dlbind import export

    copies: list[int] = []
    copy_host = export.copy_host

    def counted(mem: Any) -> Any:
        copies.append(mem.size)
        return copy_host(mem)

    monkeypatch.setattr(export, "copy_host", counted)
    a = np.arange(4.0)
    a.flags.writeable = layout != "read-only"
    x = a[::-1] if layout == "reversed" else a
    y = dlbind.convert(x, "torch", copy=True)  # the bridge copies once; torch is not asked for another
    assert copies == [4]
    assert y.tolist() == x.tolist() and not np.shares_memory(y.numpy(), a)


def test_torch_ignores_readonly_and_convert_copies() -> None:
    torch = _module("torch")
    ro = np.arange(3.0)
    ro.flags.writeable = False
    x = torch.from_dlpack(ro)
    x[0] = 42.0  # the deviation: a write through memory the producer marked read-only
    assert ro[0] == 42.0
    y = dlbind.convert(ro, "torch")  # bridged: torch gets a copy it may write
    y[1] = -1.0
    assert ro.tolist() == [42.0, 1.0, 2.0]
    # copy=False: zero-copy would be a writable alias of read-only memory, a copy is forbidden (spec: BufferError)
    with pytest.raises(BufferError, match=r"imports read-only data writable.*copy=False forbids"):
        dlbind.convert(ro, "torch", copy=False)
    assert ro.tolist() == [42.0, 1.0, 2.0]


def test_dlbind_always_passes_the_stream_torch_would_default() -> None:
    _module("torch")
    spy, calls = _spy()
    dlbind.from_dlpack(spy)
    assert calls[0]["stream"] is None  # explicit: torch's default of -1 (no sync) never applies


# -- jax: never sends max_version (jax#40789) --------------------------------------------------------


def test_jax_never_sends_max_version_and_convert_bridges_readonly() -> None:
    jnp = _module("jax").numpy
    spy, calls = _spy()
    jnp.from_dlpack(spy)
    assert calls and all("max_version" not in c for c in calls)
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError, match="readonly"):
        jnp.from_dlpack(ro)
    j = dlbind.convert(ro, "jax")  # jax arrays are immutable: served a legacy capsule
    assert np.asarray(j).tolist() == [0.0, 1.0, 2.0]
    assert np.shares_memory(np.asarray(j), ro) or True  # jax may copy on import; values are what counts


# -- tvm-ffi: calls __dlpack__() with no keywords -------------------------------------------------


def test_tvm_ffi_legacy_call_and_convert_copies_readonly() -> None:
    tvm_ffi = _module("tvm_ffi")
    spy, calls = _spy()
    tvm_ffi.from_dlpack(spy)
    assert calls == [{}]
    ro = np.arange(3.0)
    ro.flags.writeable = False
    with pytest.raises(BufferError):
        tvm_ffi.from_dlpack(ro)
    t = dlbind.convert(ro, "tvm_ffi")  # tvm-ffi tensors are writable: a copy, never shared read-only memory
    assert np.from_dlpack(t).tolist() == [0.0, 1.0, 2.0]
    assert not np.shares_memory(np.from_dlpack(t), ro)
    # its row's readonly = "ignored": through dlbind.Tensor's exchange table, whose struct says READ_ONLY, it
    # imports a writable alias
    alias = np.from_dlpack(tvm_ffi.from_dlpack(dlbind.from_dlpack(ro)))
    assert np.shares_memory(alias, ro) and alias.flags.writeable
    with pytest.raises(BufferError, match=r"read-only data \(it imports read-only data writable\).*copy=False forbids"):
        dlbind.convert(ro, "tvm_ffi", copy=False)


# -- conversion in general ----------------------------------------------------------------------------


@pytest.mark.parametrize("source", INSTALLED)
@pytest.mark.parametrize("target", INSTALLED)
def test_every_pair(source: str, target: str) -> None:
    _module(source), _module(target)
    x = _sample(source)
    y = dlbind.convert(x, target)
    assert library_of(y) is ADAPTERS[target]
    assert np.from_dlpack(dlbind.compat(y)).tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


def test_zero_copy_and_same_library() -> None:
    torch = _module("torch")
    a = np.arange(4.0)
    x = dlbind.convert(a, "torch")
    assert x.data_ptr() == a.ctypes.data
    assert dlbind.convert(x, torch) is x
    assert np.from_dlpack(dlbind.convert(x, "numpy")).ctypes.data == a.ctypes.data


def test_keywords() -> None:
    _module("torch")
    a = np.arange(4.0)
    c = dlbind.convert(a, "torch", copy=True)
    assert c.data_ptr() != a.ctypes.data and c.tolist() == a.tolist()
    # tvm_ffi.from_dlpack takes no device=: the source's own device needs no move, any other is refused
    assert np.from_dlpack(dlbind.convert(a, "tvm_ffi", device="cpu:0")).tolist() == a.tolist()
    with pytest.raises(BufferError, match="takes no device="):
        dlbind.convert(a, "tvm_ffi", device="cuda:0")


def test_compat_answers_every_keyword() -> None:
    old = dlbind.asdlpack(bytearray(b"\x01\x02"))

    class Old:  # a DLPack 0.x producer: stream only, legacy capsules
        def __dlpack__(self, stream: Any = None) -> object:
            return old.__dlpack__()

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    with pytest.raises(TypeError):
        Old().__dlpack__(max_version=dlbind.DLPACK_VERSION)  # type: ignore[call-arg]
    wrapped = dlbind.compat(Old())
    capsule = wrapped.__dlpack__(max_version=dlbind.DLPACK_VERSION, dl_device=(1, 0), copy=True)
    t = dlbind.from_dlpack(capsule)
    assert t.version == dlbind.DLPACK_VERSION and t.flags & dlbind.Flags.IS_COPIED


def test_convert_in_a_fresh_interpreter_imports_only_what_it_needs() -> None:
    code = textwrap.dedent(
        """
        import sys, numpy as np, dlbind
        dlbind.convert(np.arange(3.0), "numpy")
        print(sorted(m for m in ("torch", "jax", "tvm_ffi") if m in sys.modules))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# -- cupy (needs the CUDA runtime to import; verified with cupy-cuda13x 14.2.0 and no GPU) ----------


def test_cupy_no_device_keyword_and_convert_says_so() -> None:
    cupy = pytest.importorskip("cupy", reason="cupy is not installed (it needs the CUDA runtime libraries)")
    with pytest.raises(NotImplementedError, match="does not support device"):
        cupy.from_dlpack(np.arange(3), device="cpu")  # the deviation: the keyword exists but is not implemented
    with pytest.raises(TypeError, match="CPU arrays cannot be directly imported"):
        cupy.from_dlpack(np.arange(3))  # and a CPU producer is a TypeError, not the spec's BufferError
    assert ADAPTERS["cupy"].import_.keywords == ("copy",)
    with pytest.raises(BufferError, match="takes no device="):  # bridged: a clear refusal before cupy is called
        dlbind.convert(np.arange(3), "cupy", device="cuda:0")
