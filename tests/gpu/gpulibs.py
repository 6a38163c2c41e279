"""What the GPU tests know about each array library, in one place.

For every library of the matrix: how it is loaded (or why its cases skip), how it makes a CUDA array of
given host values with its own constructor, how a view with a layout is made with its own indexing, how
its arrays are read back to the host with its own copy, how it imports a DLPack producer with its own
``from_dlpack``, and how to recognise its CUDA arrays. The producers are torch, CuPy, JAX, numba-cuda and
dlbind-cuda (``dlbind_cuda.asarray`` in device, pinned host or managed memory); the consumers are the same
four libraries and dlbind itself (``dlbind.from_dlpack``).

Nothing here imports an array library at import time: the test modules are collected (and skipped) on
machines without any of them.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlbind

SHAPE = (4, 6)
DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "bfloat16",
    "float8_e4m3fn", "float8_e5m2", "float32", "float64", "complex64", "complex128",
)  # fmt: skip
ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2")
# Views each producer makes with its own indexing, and numpy makes of the expected values.
LAYOUTS: dict[str, Callable[[Any], Any]] = {
    "contiguous": lambda a: a,
    "transposed": lambda a: a.T,
    "offset": lambda a: a[1:, 2:],  # starts inside its buffer: a data pointer or byte_offset past the start
    "reversed": lambda a: a[::-1],  # a negative stride
}
PRODUCERS = ("torch", "cupy", "jax", "numba", "dlbind_cuda")
CONSUMERS = ("torch", "cupy", "jax", "numba", "dlbind")
MEMORIES = ("device", "host", "managed")  # dlbind_cuda.asarray(memory=...)
TIMEOUT = 100  # seconds for a child process of the suite (pytest-timeout, where installed, allows 150 a test)


# -- is there a GPU ---------------------------------------------------------------------------------------------


@functools.cache
def no_gpu_reason() -> str | None:
    """None where a CUDA GPU is usable; else why not, in the CUDA runtime's words (dlbind-cuda's probe), or
    in the driver's where dlbind-cuda is not installed."""
    try:
        import dlbind_cuda
    except ImportError:
        return _driver_reason()
    probe = dlbind_cuda.probe()
    return None if probe.available else probe.reason


def _driver_reason() -> str | None:
    missing = "dlbind-cuda (whose probe asks the CUDA runtime) is not installed"
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"no NVIDIA driver: libcuda.so.1 does not load ({exc}); {missing}"
    code = lib.cuInit(0)
    if code:
        name = ctypes.c_char_p()
        lib.cuGetErrorName(code, ctypes.byref(name))
        said = (name.value or b"?").decode(errors="replace")
        return f"cuInit: {said} ({code}); {missing}"
    count = ctypes.c_int(0)
    lib.cuDeviceGetCount(ctypes.byref(count))
    return None if count.value > 0 else f"no device (cuDeviceGetCount: 0); {missing}"


# -- the libraries ----------------------------------------------------------------------------------------------


@functools.cache
def _load(name: str) -> tuple[Any, str | None]:
    """(module, None) where ``name`` works with CUDA here, else (None, why not)."""
    import importlib

    module_name = {"numba": "numba.cuda", "dlbind": "dlbind"}.get(name, name)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, or a broken install raising something else
        what = {"dlbind_cuda": "dlbind-cuda", "numba": "numba-cuda"}.get(name, name)
        return None, f"{what} is not installed here ({type(exc).__name__}: {exc})"
    try:
        return module, _usable(name, module)
    except Exception as exc:
        return None, f"{name} cannot use the GPU: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"


def _usable(name: str, module: Any) -> str | None:
    if name == "torch":
        if not module.cuda.is_available():
            return f"torch {module.__version__} has no CUDA support here (torch.cuda.is_available() is False)"
    elif name == "cupy":
        if module.cuda.runtime.getDeviceCount() < 1:
            return f"CuPy {module.__version__} sees no GPU"
    elif name == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)  # int64, uint64, float64, complex128 as such
        try:
            jax.devices("gpu")
        except RuntimeError as exc:
            return f"jax {jax.__version__} has no CUDA backend here: {str(exc).splitlines()[0]}"
    elif name == "numba":
        import numba

        if getattr(numba.config, "ENABLE_CUDASIM", 0):
            return "numba's CUDA target is the simulator here (NUMBA_ENABLE_CUDASIM=1)"
        if not module.is_available():
            return f"numba {numba.__version__} (numba-cuda) cannot use the GPU (numba.cuda.is_available() is False)"
    elif name == "dlbind_cuda":
        probe = module.probe()
        if not probe.available:
            return f"dlbind-cuda is unavailable: {probe.reason}"
    return None


def library(name: str) -> Any:
    """The module of library ``name`` (``numba``: ``numba.cuda``), or skip the test naming why it cannot run."""
    module, reason = _load(name)
    if module is None or reason is not None:
        pytest.skip(reason or f"{name} is not usable here")
    return module


def version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, packages_distributions
    from importlib.metadata import version as dist_version

    root = {"dlbind_cuda": "dlbind_cuda", "numba": "numba_cuda"}.get(name, name)
    for dist in packages_distributions().get(root, [root.replace("_", "-")]):
        try:
            return dist_version(dist)
        except PackageNotFoundError:
            continue
    return "?"


# -- values -----------------------------------------------------------------------------------------------------


def np_dtype(name: str) -> np.dtype[Any]:
    if name in ML_DTYPES:
        ml_dtypes = pytest.importorskip("ml_dtypes", reason=f"{name} needs ml_dtypes on the host")
        return np.dtype(getattr(ml_dtypes, name))
    return np.dtype(name)


def host_values(name: str, shape: tuple[int, ...] = SHAPE) -> np.ndarray:
    """Distinct values of dtype ``name``, each exactly representable in it (fp8 included), C-contiguous."""
    n = math.prod(shape)
    i = np.arange(n)
    dtype = np_dtype(name)
    if name == "bool":
        a: np.ndarray = i % 3 == 0
    elif name.startswith("uint"):
        a = (i * 7 + 3) % 200
    elif name.startswith("int"):
        a = (i * 7) % 200 - 100
    elif name.startswith("float8"):
        table = np.array([0, 0.5, 1, 1.5, 2, -2, -0.5, 3, 4, -4, 0.25, 6, -6, 8, -1, 0.75], dtype=np.float32)
        a = table[i % len(table)]
    elif name.startswith("complex"):
        a = (i - 7) * 0.5 + 1j * (i % 5 - 2)
    else:
        a = ((i - 7) * 0.5).astype(np.float32)
    return np.ascontiguousarray(a.astype(dtype).reshape(shape))


def same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
    """Same shape, dtype and bytes (NaN-safe, exact)."""
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    a, b = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if a.tobytes() != b.tobytes():
        raise AssertionError(f"{what}: values differ:\n{a.tolist()!r}\nexpected\n{b.tolist()!r}")


# -- making CUDA arrays with each library's own constructor ------------------------------------------------------

# dtypes torch.from_numpy cannot take: made from a bit-identical integer array, then viewed
_TORCH_RAW = {"bfloat16": "int16", "float8_e4m3fn": "uint8", "float8_e5m2": "uint8",
              "uint16": "int16", "uint32": "int32", "uint64": "int64"}  # fmt: skip


def make(producer: str, host: np.ndarray, memory: str = "device") -> Any:
    """A CUDA array of ``producer`` holding ``host`` (C-contiguous), made by the library's own constructor;
    skips naming the library when it cannot hold the dtype."""
    mod = library(producer)
    name = dtype_name(host.dtype)
    try:
        if producer == "torch":
            tdt = getattr(mod, name, None)
            if tdt is None:
                pytest.skip(f"torch {mod.__version__} has no {name}")
            if name in _TORCH_RAW:
                return mod.from_numpy(host.view(_TORCH_RAW[name])).to("cuda").view(tdt)
            return mod.from_numpy(host).to("cuda")
        if producer == "cupy":
            return mod.asarray(host)
        if producer == "jax":
            import jax

            return jax.device_put(host, jax.devices("gpu")[0])
        if producer == "numba":
            return mod.to_device(host)
        if producer == "dlbind_cuda":
            return mod.asarray(host, memory=memory)
    except pytest.skip.Exception:
        raise
    except Exception as exc:
        pytest.skip(f"{producer} cannot hold {name} on the GPU: {type(exc).__name__}: {_first(exc)}")
    raise ValueError(f"unknown producer {producer}")


def view(producer: str, x: Any, layout: str, host: np.ndarray) -> Any:
    """``x`` (holding ``host``) seen with ``layout``, by the library's own indexing (dlbind-cuda: a
    ``dlbind.from_pointer`` description of the same memory)."""
    if layout == "contiguous":
        return x
    if producer == "dlbind_cuda":
        v = LAYOUTS[layout](host)
        offset = v.__array_interface__["data"][0] - host.__array_interface__["data"][0]
        strides = [s // host.itemsize for s in v.strides]
        producer_obj = dlbind.from_pointer(
            x.data_ptr, v.shape, host.dtype, strides=strides, byte_offset=offset, device=x.device, owner=x
        )
        return dlbind.from_dlpack(producer_obj)
    if producer == "torch" and layout == "reversed":
        pytest.skip("torch tensors have no negative strides (flip copies)")
    try:
        return LAYOUTS[layout](x)
    except Exception as exc:
        pytest.skip(f"{producer} cannot make a {layout} view: {type(exc).__name__}: {_first(exc)}")


def dtype_name(dtype: Any) -> str:
    dt = np.dtype(dtype)
    return dt.name if dt.name in DTYPES else str(dt)


# -- reading back with each library's own copy --------------------------------------------------------------------


def read(consumer: str, y: Any, want: np.dtype[Any]) -> np.ndarray:
    """``y`` (an array of ``consumer``) as a host numpy array of dtype ``want``, copied by the library."""
    name = dtype_name(want)
    if consumer == "torch":
        c = y.detach().to("cpu").resolve_conj().contiguous()
        if name in _TORCH_RAW:
            torch = library("torch")
            return c.view(getattr(torch, _TORCH_RAW[name])).numpy().view(want)
        return np.asarray(c.numpy())
    if consumer == "cupy":
        return np.asarray(library("cupy").asnumpy(y))
    if consumer == "jax":
        return np.asarray(y)
    if consumer == "numba":
        if y.is_c_contiguous() or y.is_f_contiguous():
            return np.asarray(y.copy_to_host())
        # copy_to_host copies the allocation from the data pointer on: wrong for negative strides and views
        # that start inside it; dlbind reads the same memory through numba's __cuda_array_interface__
        return host_copy(y)
    if consumer in ("dlbind", "dlbind_cuda"):
        return host_copy(y)
    raise ValueError(f"unknown consumer {consumer}")


def host_copy(t: Any) -> np.ndarray:
    """A dlbind.Tensor (or any producer dlbind imports) as a host numpy array, copied by dlbind."""
    tensor = t if isinstance(t, dlbind.Tensor) else dlbind.from_dlpack(t)
    if int(tensor.device[0]) in (int(dlbind.DeviceType.kDLCPU), int(dlbind.DeviceType.kDLCUDAHost)):
        return np.array(tensor, copy=True)
    return np.array(dlbind.from_dlpack(tensor, device="cpu", copy=True), copy=True)


# -- importing with each library's own from_dlpack -----------------------------------------------------------------


def importer(consumer: str) -> Callable[[Any], Any]:
    """The consumer's own importer of a DLPack producer (numba: ``as_cuda_array``, through the CUDA Array
    Interface: numba-cuda arrays speak no DLPack)."""
    mod = library(consumer) if consumer != "dlbind" else dlbind
    if consumer == "jax":
        import jax.numpy as jnp

        return jnp.from_dlpack  # type: ignore[no-any-return]
    if consumer == "numba":
        return mod.as_cuda_array  # type: ignore[no-any-return]
    return mod.from_dlpack  # type: ignore[no-any-return]


def is_cuda_array(consumer: str, y: Any, *, host_ok: bool = False) -> str | None:
    """None when ``y`` is a CUDA array of ``consumer`` (or, ``host_ok``, one of its host arrays); else what it is."""
    what = f"{type(y).__module__}.{type(y).__qualname__}"
    if consumer == "torch":
        torch = library("torch")
        if isinstance(y, torch.Tensor) and (y.device.type == "cuda" or host_ok):
            return None
        return f"{what} on {getattr(y, 'device', '?')}"
    if consumer == "cupy":
        return None if isinstance(y, library("cupy").ndarray) else what
    if consumer == "jax":
        import jax

        platforms = {d.platform for d in y.devices()} if isinstance(y, jax.Array) else set()
        return None if platforms == {"gpu"} or (host_ok and platforms) else f"{what} on {platforms}"
    if consumer == "numba":
        numba_cuda = library("numba")
        return None if numba_cuda.is_cuda_array(y) and type(y).__name__ == "DeviceNDArray" else what
    if consumer == "dlbind":
        cuda = (int(dlbind.DeviceType.kDLCUDA), int(dlbind.DeviceType.kDLCUDAManaged))
        if isinstance(y, dlbind.Tensor) and (int(y.device[0]) in cuda or host_ok):
            return None
        return f"{what} on {getattr(y, 'device', '?')}"
    raise ValueError(f"unknown consumer {consumer}")


def data_pointer(lib: str, x: Any) -> int:
    """The address of the first element of ``x``."""
    if lib == "torch":
        return int(x.data_ptr())
    if lib == "cupy":
        return int(x.data.ptr)
    if lib == "jax":
        with warnings.catch_warnings():  # a deprecation of a newer jax would be attributed to the test
            warnings.simplefilter("ignore", DeprecationWarning)
            return int(x.unsafe_buffer_pointer())
    if lib == "numba":
        return int(x.__cuda_array_interface__["data"][0])
    if lib in ("dlbind", "dlbind_cuda"):
        return int(x.data_ptr + x.byte_offset)
    raise ValueError(lib)


# -- helpers ------------------------------------------------------------------------------------------------------


def _first(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else ""


def run_child(
    code: str, *, timeout: float = TIMEOUT, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in a fresh interpreter with this process's sys.path and environment (a crash there
    is a return code here, not the end of the suite)."""
    paths = os.pathsep.join(p for p in sys.path if p)
    environ = {**os.environ, "PYTHONPATH": paths, "XLA_PYTHON_CLIENT_PREALLOCATE": "false", **(env or {})}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=environ, check=False
    )


def describe_exit(proc: subprocess.CompletedProcess[str]) -> str:
    import signal

    if proc.returncode < 0:
        try:
            how = f"killed by {signal.Signals(-proc.returncode).name}"
        except ValueError:
            how = f"killed by signal {-proc.returncode}"
    else:
        how = f"exit {proc.returncode}"
    tail = "\n".join(proc.stderr.strip().splitlines()[-15:])
    return f"{how}\n--- stderr (last lines) ---\n{tail}\n--- stdout ---\n{proc.stdout[-2000:]}"
