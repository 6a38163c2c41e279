"""Build hook of the core: two compiled modules beside the pure Python code.

* ``dlbind._api``: the cffi API-mode module of the generated declarations
  (``src/dlbind/_generated/build_api.py``);
* ``dlbind._fastpath``: the C extension of the hot paths (``src/dlbind/_fastpath/*.c``), which
  includes the generated ``dlbind/_generated/dlpack_types.h`` and ``tables.h``.

Without a working C compiler (or with ``DLBIND_NO_COMPILE=1``) the core installs as the pure build
(cffi ABI mode), which is also what ``DLBIND_PURE=1`` selects at run time. Every build goes to a
fresh temporary build folder: a stale ``build/`` never leaks old objects into a wheel.

The extras (``dlbind[cuda]``, ..., ``dlbind[all]``) pin the backends of this release: the version is
``__version__`` of ``src/dlbind/__init__.py``, the one place the five distributions' version is written
(docs/releasing.md); setuptools reads the same assignment for the core's own version.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup

HERE = Path(__file__).resolve().parent
FASTPATH = Path("src/dlbind/_fastpath")
GENERATED = Path("src/dlbind/_generated")
BACKENDS = ("cuda", "rocm", "vulkan", "metal")  # dlbind-<name>: one extra each, and `all`


def _version() -> str:
    """The literal of ``__version__ = "..."`` in ``src/dlbind/__init__.py``, read without importing it."""
    init = (HERE / "src/dlbind/__init__.py").read_text(encoding="utf-8")
    return re.search(r'^__version__ = "([^"]+)"', init, re.M)[1]  # type: ignore[index]


def _extras(version: str) -> dict[str, list[str]]:
    pins = {name: [f"dlbind-{name}=={version}"] for name in BACKENDS}
    return {**pins, "all": [pin for name in BACKENDS for pin in pins[name]]}


def _compiler_problem() -> str | None:
    """None when a C compiler builds against this Python's headers; otherwise what went wrong."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.sysconfig import customize_compiler

    probe = Path(tempfile.mkdtemp(prefix="dlbind-cc-"))
    command = "the C compiler"
    try:
        source = probe / "probe.c"
        source.write_text("#include <Python.h>\nint dlbind_probe(void) { return Py_IsInitialized(); }\n")
        compiler = new_compiler()
        customize_compiler(compiler)
        command = str(getattr(compiler, "compiler_so", [command])[0])
        compiler.compile([str(source)], output_dir=str(probe), include_dirs=[sysconfig.get_paths()["include"]])
    except Exception as exc:  # any failure (distutils' errors come from more than one module) means no compiler
        status = re.search(r"exit (?:status|code) (-?\d+)", str(exc))
        reason = (
            f"exit status {status.group(1)}" if status else (" ".join(str(exc).split()) or type(exc).__name__)[:120]
        )
        return f"{command} failed on a test file: {reason}"
    finally:
        shutil.rmtree(probe, ignore_errors=True)
    return None


def _say(line: str) -> None:
    # setup.py runs once per build hook (requirements, metadata, wheel): say it where the wheel is built
    if any(command.startswith(("bdist", "build", "install", "develop", "editable")) for command in sys.argv[1:]):
        print(line, file=sys.stderr)


def _options() -> dict[str, object]:
    if os.environ.get("DLBIND_NO_COMPILE", "") not in ("", "0"):
        _say("dlbind: DLBIND_NO_COMPILE is set; installing the pure build")
        return {}
    problem = _compiler_problem()
    if problem is not None:
        _say(f"dlbind: no working C compiler ({problem}); installing the pure build")
        return {}
    fastpath = Extension(
        "dlbind._fastpath",
        sources=sorted(str(p) for p in FASTPATH.glob("*.c")),
        depends=[str(p) for p in (*FASTPATH.glob("*.h"), GENERATED / "dlpack_types.h", GENERATED / "tables.h")],
        # a missing declaration is an error, not a module that fails at import and falls back to pure; only
        # PyInit_ is exported (PyMODINIT_FUNC), so the compiler may inline the files' small helpers into
        # their callers (an exported function of a -fPIC object could be interposed, and is never inlined)
        extra_compile_args=["-std=c11", "-Werror=implicit-function-declaration", "-fvisibility=hidden"]
        if os.name != "nt"
        else [],
    )
    return {
        "cffi_modules": [f"{GENERATED}/build_api.py:ffibuilder"],
        "ext_modules": [fastpath],
        "cmdclass": {"build_ext": _build_ext()},
    }


def _build_ext() -> type:
    """setuptools' build_ext, linking every module (cffi's too) against libc by name on Linux.

    ``dlbind._api`` calls nothing from libc, so the linker's ``--as-needed`` leaves libc out of its
    ``DT_NEEDED``; auditwheel then cannot tell glibc from musl for a CPython 3.10 module (3.10's file
    names do not say which) and refuses to repair the wheel. cffi subclasses this command for its module.
    """
    from setuptools.command.build_ext import build_ext

    class BuildExt(build_ext):  # type: ignore[misc]
        def build_extension(self, ext: Extension) -> None:
            if sys.platform.startswith("linux"):
                ext.extra_link_args = [*(ext.extra_link_args or []), "-Wl,--no-as-needed", "-lc"]
            super().build_extension(ext)

    return BuildExt


def _fresh_build_base() -> str:
    base = tempfile.mkdtemp(prefix="dlbind-build-")
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    return base


os.chdir(HERE)
setup(
    options={"build": {"build_base": _fresh_build_base()}},
    extras_require=_extras(_version()),
    **_options(),  # type: ignore[arg-type]
)
