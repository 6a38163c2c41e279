"""dlbind: the Python binding to DLPack, generated from ``dlpack.h``.

Importing dlbind loads no array library and no device backend, and none of its own runtime either: the
public names below are loaded on first use (``dlbind.from_dlpack``, ``from dlbind import Tensor``), so that
``import dlbind`` costs a library that imports it next to nothing (``benchmarks/startup.py``). A module of
the package imported directly (``import dlbind.consumer``) loads the rest when it first needs it.

PYTEST_DONT_REWRITE: dlbind ships a pytest plugin (``dlbind.testing.pytest_plugin``), so pytest marks the
package for assertion rewriting in every run; this marker lets ``import dlbind`` come before an in-process
``pytest.main()`` without a PytestAssertRewriteWarning (an error under ``filterwarnings = error``).
"""

import _thread


def _main_interpreter_only() -> None:
    """ImportError in a subinterpreter (issue 39): a deleter run there (a Tensor freed, a capsule dropped) takes
    the main interpreter's GIL from a thread that holds the subinterpreter's, which hung the process; and cffi's
    modules use single-phase init, which interpreters with a GIL of their own refuse. Said before anything loads."""
    is_main = getattr(_thread, "_is_main_interpreter", None)  # Python 3.12 and newer: no import needed
    if is_main is None:
        try:
            import _xxsubinterpreters as interpreters  # type: ignore[import-not-found]  # Python 3.10 and 3.11
        except ImportError:  # built without subinterpreters: only the main interpreter exists
            return
        main = int(interpreters.get_current()) == int(interpreters.get_main())
    else:
        main = is_main()
    if not main:
        raise ImportError(
            f"{__name__} runs in the main interpreter only, not in a subinterpreter: its deleters take the main "
            "interpreter's GIL (from a subinterpreter that would hang the process) and its cffi modules use "
            "single-phase init (docs/reliability.md)"
        )


_main_interpreter_only()

from dlbind import _load  # noqa: E402 (after the check: nothing of dlbind loads in a subinterpreter)

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name)
if TYPE_CHECKING:  # loaded on first use (__getattr__ below), not at `import dlbind`
    from typing import Any

    from dlbind import spec as spec
    from dlbind._backends import backends as backends
    from dlbind._generated.enums import *  # noqa: F403
    from dlbind._generated.enums import __all__ as __all__
    from dlbind.consumer import from_dlpack as from_dlpack
    from dlbind.conversion import compat as compat
    from dlbind.conversion import convert as convert
    from dlbind.conversion import explain as explain
    from dlbind.crossing import device as device
    from dlbind.crossing import dtype as dtype
    from dlbind.devices import Device as Device
    from dlbind.dtypes import DType as DType
    from dlbind.producer import Exporter as Exporter
    from dlbind.producer import asdlpack as asdlpack
    from dlbind.producer import from_pointer as from_pointer
    from dlbind.tensor import Tensor as Tensor

    # What __all__ is once the runtime loads (_load_runtime: the header's names, enums.__all__, and _NAMES), for
    # type checkers and stubtest (which holds the two to each other), in the forms the typing spec reads
    __all__ += [
        "DType", "Device", "Exporter", "Tensor", "__version__", "asdlpack", "backends", "compat", "convert",
        "device", "dtype", "explain", "ffi_build", "from_dlpack", "from_pointer", "spec",
    ]  # fmt: skip

__version__ = "0.1.0"

# The public names beside the header's enums, flags and constants (DLPACK_VERSION, DeviceType,
# DataTypeCode, Flags, DLPACK_FLAG_BITMASK_*, ...: all of them, whichever header version the runtime is
# generated from), which __all__ gains when the runtime loads.
_NAMES = [
    "DType",
    "Device",
    "Exporter",
    "Tensor",
    "__version__",
    "asdlpack",
    "backends",
    "compat",
    "convert",
    "device",
    "dtype",
    "explain",
    "ffi_build",
    "from_dlpack",
    "from_pointer",
    "spec",
]
# The package's modules: ``from dlbind import consumer`` (in the runtime's own modules too) and
# ``dlbind.spec`` import the module without loading the runtime. packages/core/tests/test_import.py
# keeps the set equal to the package's files.
_MODULES = frozenset({
    "__main__", "_api", "_backends", "_capi", "_device_tensors", "_fastpath", "_ffi", "_generated",
    "_gpu_runtime", "_libraries", "_load", "_names", "_wiring", "asking", "bridges", "capsule", "check", "consumer",
    "conversion", "crossing", "described", "devices", "dtypes", "exchange", "export", "producer", "routes", "sources",
    "spec", "tensor", "testing", "validate",
})  # fmt: skip
_lock = _thread.RLock()  # `threading` itself costs more to import than this whole module


def _load_runtime() -> None:
    """Import the runtime, wire the compiled fast path to it and publish the public names (once; a call
    made while the runtime is loading, from the loading thread, returns at once)."""
    with _lock:
        if _load.loader is None or _load.loading:  # loaded, or loading in this thread
            return
        _load.loading = True
        try:
            import importlib

            def module(name: str) -> "Any":  # relative: a vendored copy imports its own
                return importlib.import_module(name, __name__)

            enums = module("._generated.enums")
            names = {name: getattr(enums, name) for name in enums.__all__}
            # imported for the wiring: the C exchange table (dlbind.exchange) and every layer the fast
            # path hands calls to; configure() makes them ready
            compiled = module("._wiring").configure()
            consumer, producer = module(".consumer"), module(".producer")
            names.update(
                DType=module(".dtypes").DType,
                Device=module(".devices").Device,
                Exporter=producer.Exporter,
                Tensor=module(".tensor").Tensor,
                backends=module("._backends").backends,
                asdlpack=producer.asdlpack,
                from_pointer=producer.from_pointer,
                from_dlpack=consumer.from_dlpack,
            )
            # The compiled build answers the common calls in C and hands every other case to the Python
            # implementations (same signatures, same errors).
            names.update(compiled)
            globals().update(names)
            globals()["__all__"] = [*_NAMES, *enums.__all__]
            _load.loader = None  # loaded: the lower layers' _load.ensure() is a no-op from now on
        finally:
            _load.loading = False


_load.loader = _load_runtime


def __getattr__(name: str) -> "Any":
    """The public names, loaded on first use; the modules (``spec``: the per-version tables) when asked for,
    without the runtime; ``compat``, ``explain`` and, in the pure build, ``convert`` (the routes and the rows of
    ``spec/adapters.toml``), ``dtype`` and ``device`` only when asked for."""
    if name in _MODULES:  # `from dlbind import x` asks the package first, then imports the module
        import importlib

        try:
            return importlib.import_module("." + name, __name__)  # relative: a vendored copy imports its own
        except ModuleNotFoundError as error:  # a copy without it (vendored), a build without the extension
            if error.name != f"{__name__}.{name}":
                raise
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if name.startswith("__") and name != "__all__":  # probes of tools (pytest, inspect, copy): no load
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load_runtime()
    if name in globals():
        return globals()[name]
    if name in ("compat", "convert", "explain", "dtype", "device"):
        import importlib

        where = ".crossing" if name in ("dtype", "device") else ".conversion"
        value = getattr(importlib.import_module(where, __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> "list[str]":
    _load_runtime()
    return sorted({*globals(), *globals()["__all__"]})


def ffi_build() -> str:
    """Which cffi build is loaded: ``"compiled"`` (API mode) or ``"pure"`` (ABI mode, no compiler)."""
    from dlbind._ffi import BUILD

    return BUILD
