"""Check the built distributions in dist/ the way a user meets them: as files, then installed in fresh venvs.

Run by ``nox -s build`` after ``python -m build`` (sdist, then the wheel from the sdist) of every
distribution; usable alone as ``python .ci/check_dist.py [DIST_DIR]`` once dist/ holds them.

1. Contents: each sdist and wheel carries ``LICENSE``; the core's sdist carries every C source and header,
   ``.pyi`` stub and ``py.typed`` under ``packages/core/src/dlbind`` (at any depth), its wheel the stubs and
   ``py.typed`` and no C source; the generator's wheel carries its templates and stub headers.
2. The wheels, installed (non-editable) in a fresh venv: ``import dlbind`` reports the compiled build,
   ``python -m dlbind_generator --help`` works, and ``generate --check`` run from the repository root finds
   ``spec/`` and the headers and reports the generated files up to date.
3. The core's sdist, installed in another fresh venv with ``CC=/bin/false`` (no working C compiler), gives
   the pure build: ``dlbind.ffi_build() == "pure"``.
4. Every backend under ``packages/`` (``dlbind-<name>``): its sdist and wheel carry the license, ``py.typed``
   and the sealed ``_generated/`` files, its wheel the ``dlbind.backends`` entry point and a pin of this
   core's version; ``pip install --find-links DIST "dlbind[<name>]"`` in a fresh venv installs the core and
   that backend only, imports it without loading the vendor library, and ``dlbind.backends()`` lists it;
   ``"dlbind[all]"`` installs the core and every backend.
5. Issue 9's acceptance, from the built files: in ``dlbind[vulkan]`` venvs with this Python's newest numpy
   and with numpy 2.5 (Python 3.12), ``dlbind_vulkan.asarray`` makes a ``(kDLVulkan, 0)`` tensor on Mesa's
   lavapipe that ``np.from_dlpack(t, device="cpu", copy=True)`` copies back equal, that plain
   ``np.from_dlpack(t)`` refuses (``BufferError`` from numpy 2.5; numpy before 2.5 raises its own
   ``RuntimeError``) and that ``dlbind.from_dlpack`` imports zero-copy; in a ``dlbind[cuda,rocm]``
   venv, ``dlbind.backends()`` lists both unavailable with a one-line reason, ``asarray`` raises a
   ``BufferError`` naming the backend, and the two backends' own tests (recording runtimes) pass against
   the installed wheels with their GPU tests collected and skipped naming the reason. Where no Vulkan
   driver is found (``dlbind_vulkan.probe()``), the lavapipe checks are skipped and named with the reason,
   listed again at the end; ``DLBIND_EXPECT_VULKAN=1`` (``.ci/run``'s build) makes that a failure.

6. The core's binary wheels (issue 23): one per CPython 3.10-3.15, each tagged ``manylinux_2_N_x86_64``
   by ``auditwheel repair`` and accepted by ``auditwheel show`` with that tag.
7. The README's tour (the python block under "## Using it") runs in a fresh venv of every one of those
   Pythons with its wheel (``dlbind[all]`` from dist/: the core and every backend) and numpy, and its
   ``dlbind.backends()`` lists every backend. torch joins on Python 3.11 (the CPU build on this disk); where
   it has no CPU wheel the tour runs with numpy in torch's place, and says so. Python 3.14 and 3.15 are
   Debian unstable's, run in the root of ``.ci/sidroot.py``.

Exit status 0 when every check passes; otherwise 1, after printing every failure.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import venv
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import sidroot  # Python 3.14 and 3.15 in Debian unstable's root

ROOT = Path(__file__).resolve().parents[1]
# The CPythons the core ships a binary wheel for; the last two live in sidroot's root.
WHEEL_PYTHONS = ["3.10", "3.11", "3.12", "3.13", *sidroot.PYTHONS]
# The Python this script runs on (3.11): its venvs have torch (the CPU build lies on this disk for 3.11 only).
TORCH = "torch==2.13.0"
TORCH_PYTHON = "3.11"
CORE_SRC = ROOT / "packages" / "core" / "src" / "dlbind"
GENERATOR = ROOT / "generator"


class Failures:
    def __init__(self) -> None:
        self.messages: list[str] = []
        self.skipped: list[str] = []

    def check(self, ok: bool, message: str) -> None:
        print(f"  {'ok  ' if ok else 'FAIL'} {message}", flush=True)
        if not ok:
            self.messages.append(message)

    def skip(self, message: str, reason: str) -> None:
        """A check this machine cannot make, named with the reason (listed again at the end)."""
        print(f"  SKIP {message}: {reason}", flush=True)
        self.skipped.append(f"{message}: {reason}")


def _one(dist_dir: Path, pattern: str) -> Path:
    found = sorted(dist_dir.glob(pattern))
    if len(found) != 1:
        names = ", ".join(p.name for p in found) or "none"
        raise SystemExit(
            f"check_dist: expected exactly one {pattern} in {dist_dir}, found {names} (run `nox -s build`)"
        )
    return found[0]


def _core_wheels(dist_dir: Path) -> list[Path]:
    """The core's binary wheels (one per CPython), e.g. dlbind-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl."""
    found = sorted(dist_dir.glob("dlbind-*.whl"))
    if not found:
        raise SystemExit(f"check_dist: no core wheel (dlbind-*.whl) in {dist_dir} (run `nox -s build`)")
    return found


def _core_wheel(dist_dir: Path, version: str) -> Path | None:
    tag = "cp" + version.replace(".", "")
    found = [p for p in _core_wheels(dist_dir) if p.name.split("-")[2:4] == [tag, tag]]
    return found[0] if len(found) == 1 else None


def _sdist_names(path: Path) -> set[str]:
    with tarfile.open(path) as tf:
        # Drop the leading "name-version/" folder.
        return {m.name.split("/", 1)[1] for m in tf.getmembers() if "/" in m.name and m.isfile()}


def _wheel_names(path: Path) -> set[str]:
    with zipfile.ZipFile(path) as zf:
        return set(zf.namelist())


def _core_build_inputs() -> set[str]:
    """Every file of the source tree the core's build reads besides Python: C, headers, stubs, typing marker."""
    names = set()
    for pattern in ("*.c", "*.h", "*.pyi", "py.typed"):
        for p in CORE_SRC.rglob(pattern):
            if "__pycache__" not in p.parts:
                names.add(p.relative_to(CORE_SRC.parent.parent).as_posix())  # "src/dlbind/..."
    return names


def check_contents(dist_dir: Path, f: Failures) -> None:
    print("contents", flush=True)
    core_sdist, core_wheels = _one(dist_dir, "dlbind-*.tar.gz"), _core_wheels(dist_dir)
    gen_sdist, gen_wheel = _one(dist_dir, "dlbind_generator-*.tar.gz"), _one(dist_dir, "dlbind_generator-*.whl")

    for sdist in (core_sdist, gen_sdist):
        f.check("LICENSE" in _sdist_names(sdist), f"{sdist.name} carries LICENSE")
    for wheel in (*core_wheels, gen_wheel):
        f.check(
            any(n.endswith(".dist-info/licenses/LICENSE") for n in _wheel_names(wheel)),
            f"{wheel.name} carries LICENSE",
        )

    inputs = _core_build_inputs()
    missing = sorted(inputs - _sdist_names(core_sdist))
    f.check(
        bool(inputs) and not missing, f"{core_sdist.name} carries all {len(inputs)} C/header/stub files {missing or ''}"
    )
    stubs = {n.removeprefix("src/") for n in inputs if n.endswith(".pyi")}
    for core_wheel in core_wheels:
        wheel = _wheel_names(core_wheel)
        f.check("dlbind/py.typed" in wheel, f"{core_wheel.name} carries py.typed")
        f.check(stubs <= wheel, f"{core_wheel.name} carries the {len(stubs)} .pyi stubs {sorted(stubs - wheel) or ''}")
        c_files = sorted(n for n in wheel if n.endswith((".c", ".h")))
        f.check(not c_files, f"{core_wheel.name} carries no C sources {c_files or ''}")
        compiled = sorted(n for n in wheel if n.endswith(".so"))
        f.check(len(compiled) == 2, f"{core_wheel.name} carries the two compiled modules {compiled}")

    wheel = _wheel_names(gen_wheel)
    templates = {f"dlbind_generator/templates/{p.name}" for p in (GENERATOR / "templates").glob("*.j2")}
    f.check(bool(templates) and templates <= wheel, f"{gen_wheel.name} carries the {len(templates)} templates")
    stub_headers = {f"dlbind_generator/stubs/{p.name}" for p in (GENERATOR / "src/dlbind_generator/stubs").glob("*.h")}
    f.check(bool(stub_headers) and stub_headers <= wheel, f"{gen_wheel.name} carries the C stub headers")


def _venv(path: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / ("Scripts" if os.name == "nt" else "bin") / "python"


def _run(
    f: Failures, what: str, args: list[str], *, cwd: Path = ROOT, env: dict[str, str] | None = None, expect: str = ""
) -> str:
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    out = proc.stdout + proc.stderr
    ok = proc.returncode == 0 and expect in out
    f.check(ok, f"{what} ({time.perf_counter() - start:.1f} s)")
    if not ok:
        print("    " + "\n    ".join(out.strip().splitlines()[-25:]), flush=True)
    return proc.stdout


def check_wheels(dist_dir: Path, tmp: Path, f: Failures) -> None:
    print("wheels in a fresh venv", flush=True)
    py = str(_venv(tmp / "wheels"))
    core = _core_wheel(dist_dir, f"{sys.version_info[0]}.{sys.version_info[1]}")
    if core is None:
        f.check(False, f"a core wheel for this Python ({sys.version.split()[0]}) in {dist_dir}")
        return
    wheels = [str(core), str(_one(dist_dir, "dlbind_generator-*.whl"))]
    _run(f, "pip install both wheels", [py, "-m", "pip", "install", "--quiet", *wheels])
    # Run outside the checkout so that the installed packages, not the source tree, are imported.
    _run(f, "import dlbind: compiled build", [py, "-c", "import dlbind; print(dlbind.ffi_build())"],
         cwd=tmp, expect="compiled")  # fmt: skip
    _run(f, "python -m dlbind_generator --help", [py, "-m", "dlbind_generator", "--help"], cwd=tmp, expect="generate")
    _run(f, "installed generator: generate --check from the repository root",
         [py, "-m", "dlbind_generator", "generate", "--check"], expect="up to date")  # fmt: skip


def readme_tour() -> str:
    """The README's tour: the first python block under "## Using it", run as it stands."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    after = text[text.index("## Using it") :]
    block = after[after.index("```python\n") + len("```python\n") : after.index("\n```", after.index("```python"))]
    return block + "\n"


def tour_with_numpy() -> str:
    """The tour for a Python without torch: numpy where the README has torch (the same exchanges)."""
    code = readme_tour()
    for old, new in (("import numpy as np, torch, dlbind", "import numpy as np, dlbind"),
                     ("torch.arange(6.0)", "np.arange(6.0)"), ("torch.from_dlpack(t)", "np.from_dlpack(t)"),
                     ('to="torch"', 'to="numpy"')):  # fmt: skip
        code = code.replace(old, new)
    if "torch" in code:
        raise SystemExit("check_dist: the README tour uses torch in a way tour_with_numpy() does not replace")
    return code


def check_manylinux(dist_dir: Path, f: Failures) -> None:
    """One core wheel per CPython, tagged manylinux_2_N_x86_64, and `auditwheel show` agrees with its tag."""
    print("the core's binary wheels: manylinux tags (auditwheel show)", flush=True)
    for version in WHEEL_PYTHONS:
        wheel = _core_wheel(dist_dir, version)
        if wheel is None:
            f.check(False, f"one core wheel for CPython {version} in {dist_dir.name}/")
            continue
        platforms = wheel.name.removesuffix(".whl").split("-")[4].split(".")
        manylinux = [p for p in platforms if re.fullmatch(r"manylinux_2_\d+_x86_64", p)]
        f.check(bool(manylinux) and all(p.startswith("manylinux") for p in platforms),
                f"{wheel.name}: a manylinux_2_N_x86_64 tag {platforms}")  # fmt: skip
        out = _run(f, f"auditwheel show {wheel.name}", [sys.executable, "-m", "auditwheel", "show", str(wheel)])
        shown = re.search(r'consistent with the\s+following platform tag:\s+"([^"]+)"', out)
        f.check(bool(shown) and shown.group(1) in manylinux,  # type: ignore[union-attr]
                f"auditwheel: {wheel.name} is consistent with {shown.group(1) if shown else '?'}")  # fmt: skip


def _python(version: str, hosts: dict[str, str]) -> tuple[list[str], bool]:
    """How to run Python ``version``: (the command prefix, whether it runs inside sidroot's root)."""
    if version in sidroot.PYTHONS:
        return [f"python{version}"], True
    return [hosts.get(version, f"python{version}")], False


def check_tours(dist_dir: Path, tmp: Path, f: Failures, hosts: dict[str, str]) -> None:
    """The README's tour in a fresh venv of every CPython with a core wheel: ``dlbind[all]`` from dist/ (its
    manylinux wheel and every backend) and numpy, torch where it has a CPU wheel (3.11); the tour's
    ``dlbind.backends()`` lists every backend."""
    names = sorted(_backends())
    for version in WHEEL_PYTHONS:
        print(f"the README tour on Python {version} (dlbind[all] from dist/)", flush=True)
        wheel = _core_wheel(dist_dir, version)
        if wheel is None:
            f.check(False, f"a core wheel for Python {version}")
            continue
        prefix, inside = _python(version, hosts)
        if not inside and not shutil.which(prefix[0]):
            f.check(False, f"Python {version} ({prefix[0]}) for its README tour")
            continue
        if inside:
            sidroot.ensure(log=print)

        def run(what: str, args: list[str], expect: str = "", cwd: Path = tmp, inside: bool = inside) -> str:
            if inside:
                return _run(f, what, sidroot.command(args, cwd=cwd, env={"DLBIND_PURE": "0"}), cwd=cwd, expect=expect)
            return _run(f, what, args, cwd=cwd, expect=expect)

        where = tmp / f"tour-{version}"
        py = str(where / "bin" / "python")
        run(f"Python {version}: a fresh venv", [*prefix, "-m", "venv", str(where)])
        extra = [TORCH] if version == TORCH_PYTHON else []
        run(f'Python {version}: pip install --find-links dist "dlbind[all]" numpy {" ".join(extra)}',
            [py, "-m", "pip", "install", "--quiet", "--find-links", str(dist_dir), "dlbind[all]", "numpy", *extra])
        installed = run(f"Python {version}: the installed core is {wheel.name}",
                        [py, "-c", "import importlib.metadata as m; "
                         "print(m.distribution('dlbind').read_text('WHEEL'))"])  # fmt: skip
        tags = {line.split(":", 1)[1].strip() for line in installed.splitlines() if line.startswith("Tag:")}
        py_tag, abi_tag, platforms = wheel.name.removesuffix(".whl").split("-")[2:5]
        expected = {f"{py_tag}-{abi_tag}-{p}" for p in platforms.split(".")}
        f.check(tags == expected, f"Python {version}: installed from the manylinux wheel ({sorted(tags)})")
        tour = readme_tour() if extra else tour_with_numpy()
        if not extra:
            print(f"  (Python {version}: no CPU build of torch here; the tour runs with numpy in its place)")
        listed = f"assert sorted(dlbind.backends()) == {names!r}, dlbind.backends()\n"
        code = tour + listed + "print('README tour: ok', dlbind.ffi_build())\n"
        # the compiled build (the wheel's); the README says what memoryview(t) needs of the pure one
        run(f"Python {version}: the README tour (compiled build)", [py, "-c", code], expect="README tour: ok compiled")


def check_pure_sdist(dist_dir: Path, tmp: Path, f: Failures) -> None:
    print("core sdist without a C compiler (CC=/bin/false)", flush=True)
    py = str(_venv(tmp / "pure"))
    env = {**os.environ, "CC": "/bin/false", "DLBIND_PURE": "0"}
    sdist = str(_one(dist_dir, "dlbind-*.tar.gz"))
    _run(f, "pip install the core sdist", [py, "-m", "pip", "install", "--quiet", "--no-cache-dir", sdist], env=env)
    _run(f, "import dlbind: pure build", [py, "-c", "import dlbind; print(dlbind.ffi_build())"],
         cwd=tmp, env=env, expect="pure")  # fmt: skip


# What a backend's vendor library is called in /proc/self/maps, where it is not lib<name>.
VENDOR_LIBRARIES = {"metal": "libobjc"}


def _backends() -> list[str]:
    return sorted(p.parent.name for p in (ROOT / "packages").glob("*/pyproject.toml") if p.parent.name != "core")


def check_backends(dist_dir: Path, tmp: Path, f: Failures) -> None:
    core_version = _core_wheels(dist_dir)[0].name.split("-")[1]
    for name in _backends():
        print(f"backend {name}", flush=True)
        module = f"dlbind_{name}"
        sdist, wheel = _one(dist_dir, f"dlbind_{name}-*.tar.gz"), _one(dist_dir, f"dlbind_{name}-*.whl")
        src = ROOT / "packages" / name / "src" / module
        generated = {p.relative_to(src.parent).as_posix() for p in (src / "_generated").glob("*.py*")}
        f.check("LICENSE" in _sdist_names(sdist), f"{sdist.name} carries LICENSE")
        names = _wheel_names(wheel)
        f.check(any(n.endswith(".dist-info/licenses/LICENSE") for n in names), f"{wheel.name} carries LICENSE")
        f.check(f"{module}/py.typed" in names, f"{wheel.name} carries py.typed")
        f.check(bool(generated) and generated <= names, f"{wheel.name} carries its {len(generated)} generated files")
        with zipfile.ZipFile(wheel) as zf:
            info = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
            metadata = zf.read(info).decode()
            eps = zf.read(info.replace("METADATA", "entry_points.txt")).decode()
        f.check(f"Requires-Dist: dlbind=={core_version}" in metadata, f"{wheel.name} pins dlbind=={core_version}")
        f.check(f"[dlbind.backends]\n{name} = " in eps, f"{wheel.name} registers under dlbind.backends")
        py = str(_venv(tmp / f"extra-{name}"))
        _run(f, f'pip install --find-links dist "dlbind[{name}]"',
             [py, "-m", "pip", "install", "--quiet", "--find-links", str(dist_dir), f"dlbind[{name}]"])  # fmt: skip
        listed = _run(f, "installed: the core and this backend only",
                      [py, "-m", "pip", "list", "--format", "freeze"], cwd=tmp)  # fmt: skip
        ours = sorted(line.split("==")[0] for line in listed.splitlines() if line.startswith("dlbind"))
        f.check(ours == ["dlbind", f"dlbind-{name}"], f"dlbind distributions installed: {ours}")
        vendor = VENDOR_LIBRARIES.get(name, f"lib{name}")
        probe = (
            f"import dlbind, {module}; maps = open('/proc/self/maps').read() if __import__('sys').platform == "
            f"'linux' else ''; print('vendor-free' if '{vendor}' not in maps else 'LOADED'); "
            f"print(dlbind.backends()['{name}'])"
        )
        _run(f, f"import {module}: no vendor library loaded; dlbind.backends() lists it", [py, "-c", probe],
             cwd=tmp, expect="vendor-free")  # fmt: skip

    py = str(_venv(tmp / "extra-all"))
    _run(f, 'pip install --find-links dist "dlbind[all]"',
         [py, "-m", "pip", "install", "--quiet", "--find-links", str(dist_dir), "dlbind[all]"])  # fmt: skip
    listed = _run(f, "installed: the core and every backend", [py, "-m", "pip", "list", "--format", "freeze"], cwd=tmp)
    ours = sorted(line.split("==")[0] for line in listed.splitlines() if line.startswith("dlbind"))
    f.check(ours == ["dlbind", *(f"dlbind-{n}" for n in _backends())], f"dlbind[all] installed: {ours}")


VULKAN_ACCEPTANCE = """
import numpy as np, dlbind, dlbind_vulkan
src = np.arange(12.0).reshape(3, 4)
t = dlbind_vulkan.asarray(src)
assert t.device == (dlbind.DeviceType.kDLVulkan, 0), t.device
back = np.from_dlpack(t, device="cpu", copy=True)
assert back.shape == src.shape and (back == src).all(), back
# numpy refuses a device it cannot read after taking the capsule (it passes dl_device=None, so no producer
# can tell it is CPU-only): numpy 2.5 raises BufferError, as the array API says; older numpy RuntimeError.
try:
    np.from_dlpack(t)
except (BufferError, RuntimeError) as e:
    refused = type(e).__name__
    print("np.from_dlpack(t):", refused, e)
else:
    raise AssertionError("np.from_dlpack(vulkan tensor) did not refuse")
numpy_version = tuple(int(p) for p in np.__version__.split(".")[:2])
assert refused == ("BufferError" if numpy_version >= (2, 5) else "RuntimeError"), (np.__version__, refused)
z = dlbind.from_dlpack(t)
assert z.device == t.device and z.data_ptr == t.data_ptr and z.byte_offset == t.byte_offset, (z, t)
print("numpy", np.__version__, "dlbind", dlbind.ffi_build(), "build: vulkan acceptance: ok")
"""

VULKAN_PROBE = "import dlbind_vulkan; p = dlbind_vulkan.probe(); print('vulkan device:', p.available, p.reason)"

GPU_ACCEPTANCE = """
import numpy as np, dlbind, dlbind_cuda, dlbind_rocm
status = dlbind.backends()
for name, module in (("cuda", dlbind_cuda), ("rocm", dlbind_rocm)):
    s = status[name]
    assert not s.available and s.reason and "\\n" not in s.reason, s
    print(name, "unavailable:", s.reason)
    try:
        module.asarray(np.zeros(3))
    except BufferError as e:
        assert f"dlbind-{name}" in str(e), e
    else:
        raise AssertionError(f"dlbind_{name}.asarray worked without a device")
print("cuda/rocm acceptance: ok")
"""


def check_acceptance(dist_dir: Path, tmp: Path, f: Failures, py312: str) -> None:
    print("issue 9 acceptance from the built files", flush=True)
    check_vulkan(dist_dir, tmp, f, py312)
    check_gpu_backends(dist_dir, tmp, f)


def check_vulkan(dist_dir: Path, tmp: Path, f: Failures, py312: str) -> None:
    """dlbind[vulkan] from the built files on Mesa's lavapipe, or skipped and named where no driver is found
    (``--only vulkan``: this part alone, e.g. with ``VK_ICD_FILENAMES`` pointed at nothing)."""
    # This Python's newest numpy (2.4 on 3.11), and numpy 2.5 (Python 3.12, where the core builds from its sdist).
    runs = [("this Python", str(_venv(tmp / "accept-vulkan")), "numpy")]
    if shutil.which(py312):
        subprocess.run([py312, "-m", "venv", str(tmp / "accept-vulkan-312")], check=True)
        runs.append(("Python 3.12", str(tmp / "accept-vulkan-312/bin/python"), "numpy==2.5.5"))
    else:
        f.check(False, f"Python 3.12 ({py312}) for the numpy 2.5 acceptance run")
    for where, py, numpy in runs:
        _run(f, f'{where}: pip install --find-links dist "dlbind[vulkan]" {numpy}',
             [py, "-m", "pip", "install", "-q", "--no-cache-dir", "--find-links", str(dist_dir), "dlbind[vulkan]",
              numpy])  # fmt: skip  # no cache: pip keeps wheels built from an sdist of the same version
        what = f"{where}: dlbind_vulkan.asarray on lavapipe: host copy, numpy refuses, zero-copy import"
        probe = _run(f, f"{where}: dlbind_vulkan.probe()", [py, "-c", VULKAN_PROBE], cwd=tmp, expect="vulkan device:")
        reason = probe.partition("vulkan device: False ")[2].strip()
        if reason and os.environ.get("DLBIND_EXPECT_VULKAN") != "1":  # no driver here: say so, do not fail
            f.skip(what, f"no Vulkan device ({reason}); DLBIND_EXPECT_VULKAN=1 makes this a failure")
            continue
        _run(f, what, [py, "-c", VULKAN_ACCEPTANCE], cwd=tmp, expect="vulkan acceptance: ok")


def check_gpu_backends(dist_dir: Path, tmp: Path, f: Failures) -> None:
    """dlbind[cuda,rocm] from the built files: unavailable with their reasons, their tests on recording runtimes."""
    py = str(_venv(tmp / "extra-cuda-rocm"))
    generator = str(_one(dist_dir, "dlbind_generator-*.whl"))  # dlbind-cuda's tests compare its selection
    _run(f, 'pip install --find-links dist "dlbind[cuda,rocm]" numpy pytest',
         [py, "-m", "pip", "install", "--quiet", "--find-links", str(dist_dir), "dlbind[cuda,rocm]", "numpy",
          "pytest>=8", generator])  # fmt: skip
    _run(f, "dlbind.backends(): cuda and rocm unavailable, one-line reasons; asarray refuses naming them",
         [py, "-c", GPU_ACCEPTANCE], cwd=tmp, expect="cuda/rocm acceptance: ok")  # fmt: skip
    tests = [str(ROOT / "packages" / name / "tests") for name in ("cuda", "rocm")]
    out = _run(f, "the cuda and rocm tests against the installed wheels (recording runtimes)",
               [py, "-m", "pytest", *tests, "-q", "-p", "no:cacheprovider", "-rs"],
               env={**os.environ, "DLBIND_PURE": "0"}, expect=" passed")  # fmt: skip
    for gpu_tests, reason in (("cuda/tests/test_cuda_gpu.py", "needs a CUDA GPU"),
                              ("rocm/tests/test_rocm_gpu.py", "needs an AMD GPU")):  # fmt: skip
        skipped = [line for line in out.splitlines() if line.startswith("SKIPPED") and gpu_tests in line]
        f.check(bool(skipped) and all(reason in line for line in skipped),
                f"{gpu_tests}: collected and skipped with the reason ({reason} ...)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dist_dir", nargs="?", type=Path, default=ROOT / "dist")
    parser.add_argument(
        "--python-3.12", dest="py312", default="python3.12",
        help="the Python 3.12 interpreter of the numpy 2.5 run (nox -s build passes pyenv's)",
    )  # fmt: skip
    parser.add_argument(
        "--python", action="append", default=[], type=lambda s: tuple(s.split("=", 1)), metavar="VERSION=PATH",
        help="the interpreter of a CPython (3.10-3.13) for its README tour (nox -s build passes pyenv's)",
    )  # fmt: skip
    parser.add_argument(
        "--only", choices=["vulkan"],
        help="run one part alone against a dist/ already checked: vulkan = dlbind[vulkan] on lavapipe (section 5)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    f = Failures()
    start = time.perf_counter()
    if args.only == "vulkan":
        with tempfile.TemporaryDirectory(prefix="dlbind-dist-") as tmp:
            check_vulkan(args.dist_dir.resolve(), Path(tmp), f, args.py312)
        return _report(f, start)
    check_contents(args.dist_dir.resolve(), f)
    with tempfile.TemporaryDirectory(prefix="dlbind-dist-") as tmp:
        check_wheels(args.dist_dir.resolve(), Path(tmp), f)
        check_pure_sdist(args.dist_dir.resolve(), Path(tmp), f)
        check_backends(args.dist_dir.resolve(), Path(tmp), f)
        check_acceptance(args.dist_dir.resolve(), Path(tmp), f, args.py312)
        check_manylinux(args.dist_dir.resolve(), f)
        check_tours(args.dist_dir.resolve(), Path(tmp), f, dict(args.python))
    return _report(f, start)


def _report(f: Failures, start: float) -> int:
    """Print what was skipped and what failed; the exit status."""
    for skipped in f.skipped:
        print(f"check_dist: skipped: {skipped}", flush=True)
    print(f"check_dist: {len(f.messages)} failed, {len(f.skipped)} skipped ({time.perf_counter() - start:.0f} s)",
          flush=True)  # fmt: skip
    for m in f.messages:
        print(f"  FAILED: {m}", file=sys.stderr)
    return 1 if f.messages else 0


if __name__ == "__main__":
    sys.exit(main())
