"""Device backends: found through the ``dlbind.backends`` entry-point group, loaded on first need.

A backend distribution (``dlbind-vulkan``, ``dlbind-cuda``, ...) registers one object under the group
``dlbind.backends``, named after the backend (``vulkan = "dlbind_vulkan._backend:backend"``). The object
follows :class:`Backend`. The core only routes: it never scans the entry points at ``import dlbind`` time,
loading an entry point must not load the vendor library (only :meth:`Backend.probe` and the calls after it
do), and a backend that fails to load or whose runtime is missing is reported, never raised, so it breaks
neither the core nor the other backends. Where a device type has no usable backend, the error says which
distribution to install, or why the installed one cannot serve.
"""

from __future__ import annotations

import _thread
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from dlbind._generated.enums import DeviceType
from dlbind._generated.tables import DEVICE_BACKENDS, DEVICE_NAMES
from dlbind.devices import DevicePair, device_name

__all__ = [
    "GROUP",
    "Backend",
    "BackendStatus",
    "OwnBackend",
    "PassedOver",
    "Probe",
    "StreamFreeBackend",
    "backends",
    "device_count",
    "find_library",
    "for_device",
    "serving",
]

GROUP = "dlbind.backends"
# Which distribution serves which device type (for the "install ..." hint): spec/devices.toml.
DISTRIBUTIONS = DEVICE_BACKENDS
#: Whether the backends' distributions are on the package index. The one switch of every install hint dlbind
#: prints (:func:`install_hint`) and the docs show (tests/test_doc_counts.py holds them to it): until they are
#: published, ``pip install 'dlbind[cuda]'`` finds nothing, and the hint names the backend's path in a clone.
PUBLISHED = False


def install_hint(backend: str) -> str:
    """What installs ``backend`` ("cuda"): the core's extra once published, its path in a clone of dlbind's
    repository until then (:data:`PUBLISHED`)."""
    if PUBLISHED:
        return f"pip install 'dlbind[{backend}]'"
    return f"pip install ./packages/{backend} in a clone of dlbind's repository"


class PassedOver(OSError):
    """A vendor library that opened and is not taken (an older runtime than the binding serves), saying why."""


class Probe(NamedTuple):
    """What a backend's runtime says when loaded: available, or why not in one line.

    ``reason`` starts with one of the kinds users act on: ``"runtime library not found"``, ``"no driver"``,
    ``"no device"``, ``"wrong platform"`` (or ``"runtime error"`` for anything else the runtime reports),
    then what was found. ``runtime_version`` and ``device_count`` are set whenever the runtime loaded.
    """

    available: bool
    reason: str = ""
    runtime_version: str | None = None
    device_count: int | None = None


@runtime_checkable
class Backend(Protocol):
    """What a backend gives the core (and its users, through its own module).

    * ``name``: the backend's name (``"vulkan"``), as in the entry point and ``spec/devices.toml``;
    * ``device_types``: the DLPack device types it serves;
    * ``probe()``: loads the runtime (once; later calls return the same answer) and says whether it is usable;
    * ``wait(producer_stream, consumer_stream, device)``: make the consumer's stream wait for the work queued
      on the producer's (an event recorded on one, waited on by the other); the core has validated both
      values by the device's stream rule and never calls it for ``-1``;
    * ``copy_to_host(memory)``: a compact row-major host copy of device :class:`dlbind.export.Memory`, as
      host ``Memory`` with ``Flags.IS_COPIED`` (``__dlpack__(dl_device=(kDLCPU, 0), copy=True)``), ready
      when returned; GPU backends also take ``stream=``, the stream the data is ready on;
    * ``copy_on_device(memory, stream)``: a compact row-major copy of ``memory`` in new memory on the same
      device, ``Flags.IS_COPIED``, writable, byte_offset 0, queued on ``stream`` (an int of the device's
      stream rule, never None or -1) without host synchronisation, returned with ``stream=stream`` so that
      consumers on other streams wait for it; its owner frees the new memory. A backend without device
      copies raises ``BufferError`` saying so;
    * ``device_of(pointer)``: the ``(device_type, device_id)`` that owns a data pointer of the backend;
    * ``empty(shape, dtype, *, device_id=0)`` and ``asarray(host_array, *, device_id=0)``: a
      :class:`dlbind.Tensor` on the device that owns new memory.

    Everything but ``name``, ``device_types`` and ``probe`` may raise ``BufferError`` naming the probe's
    reason when the runtime is unavailable.
    """

    name: str
    device_types: tuple[int, ...]

    def probe(self) -> Probe: ...

    def wait(self, producer_stream: int, consumer_stream: int | None, device: DevicePair) -> None: ...

    def copy_to_host(self, memory: Any) -> Any: ...

    def copy_on_device(self, memory: Any, stream: int) -> Any: ...

    def device_of(self, pointer: int) -> DevicePair: ...

    def empty(self, shape: Sequence[int], dtype: Any, *, device_id: int = 0) -> Any: ...

    def asarray(self, host_array: Any, *, device_id: int = 0) -> Any: ...


class OwnBackend:
    """What the backends dlbind ships do alike: the probe of their runtime (``runtime()``, loaded on first
    call), and tensors made and found by their ``tensors`` module (``device_of``, ``empty``, ``asarray``)."""

    name: ClassVar[str]
    device_types: tuple[int, ...]
    tensors: Any  # the backend's _tensors module

    @staticmethod
    def runtime() -> Any:
        raise NotImplementedError

    def probe(self) -> Probe:
        return self.runtime().probe  # type: ignore[no-any-return]

    def device_of(self, pointer: int) -> DevicePair:
        return self.tensors.device_of(pointer)  # type: ignore[no-any-return]

    def empty(self, shape: Sequence[int], dtype: Any, *, device_id: int = 0) -> Any:
        return self.tensors.empty(shape, dtype, device_id=device_id)

    def asarray(self, host_array: Any, *, device_id: int = 0) -> Any:
        return self.tensors.asarray(host_array, device_id=device_id)


class StreamFreeBackend(OwnBackend):
    """The :class:`Backend` of a device type without DLPack streams (``spec/devices.toml``: the rule "none") and
    without device copies yet (Metal, Vulkan): a subclass names ``name``, ``device_types`` (one type),
    ``runtime`` and ``tensors`` (:class:`OwnBackend`)."""

    def wait(self, producer_stream: int, consumer_stream: int | None, device: DevicePair) -> None:
        """Nothing can be waited on: the core refuses any ``stream`` but None for these devices before it gets
        here, so a call is a caller's error."""
        raise BufferError(
            f"{_enum_name(self.device_types[0])} has no DLPack stream (stream must be None), not producer "
            f"{producer_stream!r} / consumer {consumer_stream!r}: its producers hand over buffers with their device "
            "work completed"
        )

    def copy_to_host(self, memory: Any) -> Any:
        return self.tensors.copy_to_host(memory)

    def copy_on_device(self, memory: Any, stream: int) -> Any:
        """No device copy yet: BufferError saying so (a host copy is :meth:`copy_to_host`)."""
        raise BufferError(
            f"dlbind-{self.name} has no device copy yet: {_enum_name(self.device_types[0])} memory is copied to "
            "the host only; copy it with the array library that made it"
        )


def _enum_name(device_type: int) -> str:
    """The header's name of a device type (``kDLVulkan``)."""
    return DeviceType(device_type).name


class BackendStatus(NamedTuple):
    """One backend as :func:`dlbind.backends` reports it: installed (available or why not), or, with
    ``known=True``, not installed (``installed`` false, ``version`` empty, ``reason`` saying what to install)."""

    name: str
    distribution: str  # "dlbind-vulkan"
    version: str  # the distribution's version ("" when not installed)
    device_types: tuple[str, ...]  # user-facing names ("vulkan")
    available: bool
    reason: str  # "" when available; otherwise one line
    runtime_version: str | None
    device_count: int | None
    installed: bool = True

    def __str__(self) -> str:
        if not self.installed:
            return f"{self.name}: not installed ({self.reason})"
        if self.available:
            return f"{self.name}: available ({self.runtime_version}, {self.device_count} device(s))"
        loaded = f" [runtime {self.runtime_version}]" if self.runtime_version else ""
        return f"{self.name}: unavailable: {self.reason}{loaded}"


_LOCK = _thread.allocate_lock()  # threading's Lock, without importing threading at `import dlbind`
_LOADED: dict[str, Any] = {}  # name -> backend object
_BROKEN: dict[str, tuple[str, str, str]] = {}  # name -> (distribution, version, why it did not load)
_META: dict[str, tuple[str, str]] = {}  # name -> (distribution, version)
_SCANNED = False


def _scan() -> None:
    global _SCANNED
    with _LOCK:
        if _SCANNED:
            return
        from importlib.metadata import entry_points

        for ep in entry_points(group=GROUP):
            if ep.name in _LOADED or ep.name in _BROKEN:
                continue  # two distributions register one name: the first on sys.path serves, as imports do
            dist = ep.dist
            meta = (dist.metadata["Name"], dist.version) if dist is not None else (f"dlbind-{ep.name}", "?")
            try:
                obj = ep.load()
                if not isinstance(obj, Backend):
                    raise TypeError(f"{ep.value} is not a dlbind backend (see dlbind._backends.Backend)")
            except Exception as exc:  # a broken backend is reported, not fatal
                _BROKEN[ep.name] = (*meta, f"the backend failed to load: {type(exc).__name__}: {exc}")
                continue
            _LOADED[ep.name] = obj
            _META[ep.name] = meta
        _SCANNED = True


def _probe(backend: Any) -> Probe:
    try:
        found = backend.probe()
    except Exception as exc:  # a probe must not raise; if it does, that is its answer
        return Probe(False, f"runtime error: the probe raised {type(exc).__name__}: {exc}")
    return found if isinstance(found, Probe) else Probe(False, f"runtime error: the probe returned {found!r}")


def backends(*, known: bool = False) -> dict[str, BackendStatus]:
    """Every installed backend (name -> :class:`BackendStatus`): available, or why not; loads their runtimes.

    ``known=True`` adds every backend dlbind knows of that is not installed (``installed`` false), with the
    device types it would serve and what to install: what ``python -m dlbind backends`` prints.
    """
    _scan()
    out: dict[str, BackendStatus] = {}
    if known:
        for name in sorted(set(DISTRIBUTIONS.values())):
            types = tuple(device_name(t) for t, n in sorted(DISTRIBUTIONS.items()) if n == name)
            why = f"{install_hint(name)}, for {', '.join(types)} memory"
            out[name] = BackendStatus(name, f"dlbind-{name}", "", types, False, why, None, None, installed=False)
    for name, (dist, version, why) in _BROKEN.items():
        out[name] = BackendStatus(name, dist, version, (), False, why, None, None)
    for name, backend in _LOADED.items():
        p = _probe(backend)
        types = tuple(device_name(t) for t in backend.device_types)
        dist, version = _META[name]
        out[name] = BackendStatus(name, dist, version, types, p.available, p.reason, p.runtime_version, p.device_count)
    return dict(sorted(out.items()))


def for_device(device_type: int, need: str = "") -> Any:
    """The available backend serving ``device_type``; BufferError naming what to install (or why not) otherwise.

    ``need`` says what was asked ("copying vulkan memory to the host"), for the message.
    """
    _scan()
    need = need or f"synchronising {device_name(device_type)} streams"
    for name, backend in _LOADED.items():
        if device_type in backend.device_types:
            p = _probe(backend)
            if not p.available:
                raise BufferError(f"{need} needs dlbind-{name}, which is installed but unavailable: {p.reason}")
            return backend
    serving = DISTRIBUTIONS.get(device_type)
    if serving in _BROKEN:
        raise BufferError(f"{need} needs dlbind-{serving}, which is installed but {_BROKEN[serving][2]}")
    hint = install_hint(serving) if serving else "no dlbind backend exists for it yet"
    if device_type not in DEVICE_NAMES:
        hint = f"device type {device_type} is not named by this dlbind's DLPack header (a header bump would name it)"
    raise BufferError(f"{need} needs a dlbind backend: {hint}")


def serving(device_type: int) -> Any:
    """The available backend serving ``device_type``, or None (none installed, or its runtime unusable)."""
    _scan()
    for backend in _LOADED.values():
        if device_type in backend.device_types:
            return backend if _probe(backend).available else None
    return None


def device_count(device_type: int) -> tuple[int | None, str]:
    """How many devices of ``device_type`` this machine has, as the installed backend serving it says, and in
    words: ``(count, why)``; ``(None, why)`` when no backend can say (none installed, or it failed to load)."""
    _scan()
    name = device_name(device_type)
    for backend_name, backend in _LOADED.items():
        if device_type in backend.device_types:
            p = _probe(backend)
            if not p.available:
                return 0, f"dlbind-{backend_name} finds none: {p.reason}"
            return p.device_count or 0, f"dlbind-{backend_name} finds {p.device_count or 0}"
    serving = DISTRIBUTIONS.get(device_type)
    if serving in _BROKEN:
        return None, f"dlbind-{serving} {_BROKEN[serving][2]}"
    return None, f"no dlbind backend for {name} is installed" + (f": {install_hint(serving)}" if serving else "")


# -- for backends: finding the vendor library ------------------------------------------------------------


def _platform() -> str:
    return "linux" if sys.platform.startswith("linux") else sys.platform


def _wheel_files(distributions: Mapping[str, Sequence[str]]) -> list[str]:
    """Files of the installed vendor wheels whose names match the patterns, in the order given."""
    import fnmatch
    from importlib.metadata import PackageNotFoundError, distribution

    found = []
    for dist_name, patterns in distributions.items():
        try:
            dist = distribution(dist_name)
        except PackageNotFoundError:
            continue
        for f in dist.files or ():
            if any(fnmatch.fnmatch(f.name, pattern) for pattern in patterns):
                found.append(str(dist.locate_file(f)))
    return found


def find_library(
    env: str,
    wheels: Mapping[str, Sequence[str]],
    names: Mapping[str, Sequence[str]],
    opener: Callable[[str], Any],
) -> tuple[Any, str]:
    """Open a vendor library: ``$env`` if set (and then only it), else the vendor's wheels, else the system.

    ``opener`` opens one path or name (``ffi.dlopen``) and raises OSError when it cannot (:class:`PassedOver`: it
    opened, and is not taken, saying why). Returns ``(handle, what was opened)``; OSError starting "runtime library
    not found" lists what was tried, with why a library was passed over.
    """
    explicit = os.environ.get(env, "")
    if explicit:
        try:
            return opener(explicit), explicit
        except OSError as exc:
            raise OSError(f"runtime library not found: {env}={explicit} cannot be loaded ({exc})") from None
    import ctypes.util  # here, not at import dlbind: it imports subprocess, tempfile and shutil (~9 ms)

    tried: list[str] = []
    candidates = _wheel_files(wheels) + list(names.get(_platform(), ()))
    for candidate in candidates:
        for path in (candidate, ctypes.util.find_library(candidate.removeprefix("lib").split(".")[0])):
            if not path or path in tried:
                continue
            tried.append(path)
            try:
                return opener(path), path
            except PassedOver as exc:
                tried[-1] = f"{path} ({exc})"
            except OSError:
                continue
    if not candidates:
        raise OSError(f"wrong platform: no {env.removeprefix('DLBIND_').removesuffix('_LIBRARY').lower()} "
                      f"runtime is known on {sys.platform}")  # fmt: skip
    raise OSError(f"runtime library not found: tried {', '.join(tried)} (set {env} to its path)")
