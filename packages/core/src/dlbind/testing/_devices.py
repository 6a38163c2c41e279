"""The checks on a device (``python -m dlbind check --device cuda``): where their samples are made.

On the CPU a check's sample is a numpy array that the library under test turns into its own array
(``dlbind.convert``). On a device each library makes its array with its own constructor of device arrays:
:data:`DEVICE_ARRAYS` says how, per device and library, as data (a proposed column of spec/adapters.toml).
What dlbind makes itself (the consumer checks' producers, host copies of the results) lives in memory of
the device's backend (``dlbind-cuda``): :class:`Place`. ``placed("cuda")`` makes a device current for the
checks run inside it.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Final, Literal

from dlbind._generated.adapters import ADAPTERS
from dlbind._generated.enums import DeviceType
from dlbind._libraries import dotted

#: What a :class:`DeviceArrays`' ``make`` takes (``takes``): a numpy array, or the library's own host array.
NDARRAY: Final = "ndarray"
HOST: Final = "host"


@dataclass(frozen=True)
class DeviceArrays:
    """How one library makes its arrays on one device (a row of :data:`DEVICE_ARRAYS`).

    ``make``: a dotted function, or ``"name()"`` a method of the library's CPU array; ``takes``: what it is
    given, ``"ndarray"`` (the sample as numpy) or ``"host"`` (the library's own CPU array of the sample,
    made by ``dlbind.convert``: bf16 and fp8 reach the library so); ``keywords``: its keyword arguments;
    ``device``: a dotted function whose result (its first item, for a list) is passed as ``device_keyword``,
    called with ``device_args``; ``probe``: a dotted function, true when the library can use the device here;
    ``streams``: how the stream checks keep the library's stream busy (a key of :data:`BUSY_WRITERS`, or "");
    ``consumer``: its importer of device memory, ``"row"`` (its row's ``import.function``), a dotted function,
    or ``""`` (none that takes DLPack there: ``consumer_note`` says why, and its consumer checks are
    unsupported).
    """

    make: str
    takes: Literal["ndarray", "host"] = NDARRAY
    keywords: tuple[tuple[str, Any], ...] = ()
    device: str = ""
    device_args: tuple[Any, ...] = ()
    device_keyword: str = "device"
    probe: str = ""
    streams: str = ""
    consumer: str = "row"
    consumer_note: str = ""


#: device name -> library name (spec/adapters.toml) -> how it makes its arrays there.
DEVICE_ARRAYS: dict[str, dict[str, DeviceArrays]] = {
    "cuda": {
        "torch": DeviceArrays(
            make="to()", takes=HOST, keywords=(("device", "cuda"),), probe="torch.cuda.is_available", streams="torch"
        ),
        "cupy": DeviceArrays(make="cupy.asarray", probe="cupy.cuda.is_available", streams="cupy"),
        "jax": DeviceArrays(make="jax.device_put", takes=HOST, device="jax.devices", device_args=("gpu",)),
        "numba": DeviceArrays(
            make="numba.cuda.to_device",
            probe="numba.cuda.is_available",
            consumer="",
            consumer_note="numba-cuda imports CUDA memory through __cuda_array_interface__ (as_cuda_array), not DLPack",
        ),
    },
}


def maker(library: str, device: str) -> Callable[[Any], Any]:
    """``make_array`` of the producer checks for ``library`` on ``device``: a numpy sample in, the library's
    array on the device out, made by the library's own constructor (its row of :data:`DEVICE_ARRAYS`)."""
    row = DEVICE_ARRAYS[device][library]

    def make(sample: Any) -> Any:
        import dlbind

        given = dlbind.convert(sample, library) if row.takes == HOST else sample
        keywords = dict(row.keywords)
        if row.device:
            found = dotted(row.device)(*row.device_args)
            keywords[row.device_keyword] = found[0] if isinstance(found, list | tuple) else found
        if row.make.endswith("()"):
            return getattr(given, row.make[:-2])(**keywords)
        return dotted(row.make)(given, **keywords)

    make.dlbind_device = device  # type: ignore[attr-defined]
    make.dlbind_library = library  # type: ignore[attr-defined]
    return make


def device_only(name: str) -> str:
    """Why system ``name`` cannot be checked with host arrays ("" where it can): it holds device arrays only, and
    takes no host data (CuPy: CUDA, ROCm). The checks of it run on its device (``check --device``)."""
    imp = ADAPTERS[name].import_  # how it takes DLPack (its row's [import])
    if "cpu" in imp.devices or "cpu" in imp.copy_from:
        return ""
    return f"{name} holds {', '.join(imp.devices)} arrays only: check it there (python -m dlbind check --device ...)"


def unusable(library: str, device: str) -> str | None:
    """Why ``library`` cannot make arrays on ``device`` here (no row, its probe says no), or None."""
    row = DEVICE_ARRAYS.get(device, {}).get(library)
    if row is None:
        return f"dlbind.testing knows no constructor of {library}'s {device} arrays (DEVICE_ARRAYS)"
    try:
        if row.probe and not dotted(row.probe)():
            return f"{library} cannot use {device} here ({row.probe}() is false)"
        if row.device:
            dotted(row.device)(*row.device_args)
    except Exception as exc:
        return f"{library} cannot use {device} here: {type(exc).__name__}: {str(exc).strip().splitlines()[0:1]}"
    return None


# -- where dlbind puts what it makes: the device's backend --------------------------------------------------------


@dataclass(frozen=True)
class Place:
    """A device the checks run on, and the backend through which dlbind allocates there."""

    name: str  # "cuda"
    backend: str  # "cuda": dlbind.backends()[backend], the module dlbind_<backend>
    device_type: int

    def module(self) -> Any:
        return importlib.import_module(f"dlbind_{self.backend}")

    def unavailable(self) -> str | None:
        """Why checks cannot run on this device here, or None."""
        import dlbind

        status = dlbind.backends().get(self.backend)
        if status is None:
            from dlbind._backends import install_hint

            return f"dlbind-{self.backend} is not installed ({install_hint(self.backend)})"
        if not status.available:
            return f"dlbind-{self.backend} is unavailable: {status.reason}"
        return None

    def upload(self, array: Any) -> tuple[Any, int]:
        """A device copy of the bytes ``array`` (a numpy array, any strides) reaches: (the owner, the device
        address of ``array``'s first element), laid out as on the host."""
        import numpy as np

        lo, hi = _span(array)
        if hi == lo:  # nothing to copy: an address of the device's own, for a zero-size array
            owner = self.module().asarray(np.zeros(1, dtype=np.uint8))
            return owner, int(owner.data_ptr + owner.byte_offset)
        reached = memoryview((ctypes.c_char * (hi - lo)).from_address(lo)).cast("B")
        owner = self.module().asarray(np.frombuffer(reached, dtype=np.uint8))
        start = array.__array_interface__["data"][0]
        return owner, int(owner.data_ptr + owner.byte_offset) + (start - lo)

    def tensor(self, array: Any) -> Any:
        """A row-major device copy of ``array`` (a ``dlbind.Tensor``)."""
        return self.module().asarray(array)

    # the backend's runtime, for the stream checks: streams, an ordered copy, a wait
    def _runtime(self) -> Any:
        return importlib.import_module(f"dlbind_{self.backend}._runtime").runtime()

    def new_stream(self) -> int:
        """A new non-blocking stream of the backend's runtime, as the int a consumer passes (``stream=``)."""
        rt = self._runtime()
        out = rt.ffi.new(f"{rt.prefix}Stream_t *")
        rt.check(rt.sym("StreamCreateWithFlags")(out, rt.sym("StreamNonBlocking")), "StreamCreateWithFlags")
        return int(rt.ffi.cast("uintptr_t", out[0]))

    def destroy_stream(self, stream: int) -> None:
        rt = self._runtime()
        rt.sym("StreamSynchronize")(rt._stream(stream))
        rt.sym("StreamDestroy")(rt._stream(stream))

    def synchronize(self, stream: int) -> None:
        """Wait for ``stream`` (1: the legacy default stream, 2: the per-thread default stream, or a handle)."""
        rt = self._runtime()
        rt.check(rt.sym("StreamSynchronize")(rt._stream(stream)), "StreamSynchronize")

    def copy_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        """Enqueue a device-to-device copy of ``nbytes`` on ``stream``."""
        rt = self._runtime()
        ffi = rt.ffi
        call = rt.sym("MemcpyAsync")
        kind = rt.sym("MemcpyDeviceToDevice")
        rt.check(
            call(ffi.cast("void *", dst), ffi.cast("void *", src), nbytes, kind, rt._stream(stream)), "MemcpyAsync"
        )


PLACES: dict[str, Place] = {"cuda": Place("cuda", "cuda", int(DeviceType.kDLCUDA))}
_CURRENT: ContextVar[Place | None] = ContextVar("dlbind_testing_place", default=None)


def current() -> Place | None:
    """The device the checks now run on (None: the CPU)."""
    return _CURRENT.get()


@contextlib.contextmanager
def placed(device: str | None) -> Iterator[Place | None]:
    """Run the checks inside on ``device`` ("cuda"; None: the CPU)."""
    if device is None:
        yield None
        return
    if device not in PLACES:
        raise ValueError(f"unknown device {device!r}; the checks run on: cpu, {', '.join(PLACES)}")
    token = _CURRENT.set(PLACES[device])
    try:
        yield PLACES[device]
    finally:
        _CURRENT.reset(token)


def _span(array: Any) -> tuple[int, int]:
    """[first byte, past the last byte) of the memory ``array`` reaches (negative strides included)."""
    data = array.__array_interface__["data"][0]
    if array.size == 0:
        return data, data
    lo = hi = data
    for extent, stride in zip(array.shape, array.strides, strict=True):
        reach = (extent - 1) * stride
        lo, hi = (lo + reach, hi) if reach < 0 else (lo, hi + reach)
    return lo, hi + array.itemsize


# -- a producer's stream kept busy (the stream checks) -----------------------------------------------------------

SPIN_CYCLES = 2 * 10**8  # GPU clock cycles: about 0.1 s at 2 GHz
VALUE = 7.0
_SPIN = r"""
extern "C" __global__ void dlbind_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""


@dataclass
class Busy:
    """A library's CUDA array, zeros then written with VALUE on a side stream behind a kernel that spins;
    ``current()`` makes that stream the library's current stream, ``busy()`` says whether it still runs."""

    array: Any
    current: Callable[[], Any]
    busy: Callable[[], bool]
    sync: Callable[[], None]


def _busy_torch(n: int) -> Busy:
    torch: Any = importlib.import_module("torch")

    x = torch.zeros(n, device="cuda", dtype=torch.float32)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SPIN_CYCLES)
        x.fill_(VALUE)
    return Busy(x, lambda: torch.cuda.stream(s), lambda: not s.query(), s.synchronize)


def _busy_cupy(n: int) -> Busy:
    import numpy as np

    cupy: Any = importlib.import_module("cupy")

    kernel = cupy.RawKernel(_SPIN, "dlbind_spin")
    x = cupy.zeros(n, dtype=cupy.float32)
    cupy.cuda.Device().synchronize()
    s = cupy.cuda.Stream(non_blocking=True)
    with s:
        kernel((1,), (1,), (np.int64(SPIN_CYCLES),))
        x.fill(VALUE)
    return Busy(x, lambda: s, lambda: not s.done, s.synchronize)


#: DeviceArrays.streams -> a function making a Busy array of n float32 elements
BUSY_WRITERS: dict[str, Callable[[int], Busy]] = {"torch": _busy_torch, "cupy": _busy_cupy}
