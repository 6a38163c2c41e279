"""The release's files: build the five published distributions, check them, tour them (docs/releasing.md).

.github/workflows/release.yml runs these on a version tag; ``nox -s release_dry_run`` runs the same here, on
Linux, without publishing.

    python .ci/release.py version [--tag TAG]       # the one version; with --tag: fail unless TAG is v<version>
    python .ci/release.py build --outdir DIR        # the five sdists, each backend's wheel built from its sdist
    python .ci/release.py check DIR [--tag TAG] [--pythons 3.10,...] [--platforms manylinux_x86_64,...]
    python .ci/release.py tour DIR [--python PATH ...]   # the README tour in a fresh venv per interpreter

The version is written once, as ``__version__`` in packages/core/src/dlbind/__init__.py: the core reads it
(setuptools' ``attr``), its extras pin the backends at it, and each backend's setup.py reads it (from an
sdist: from the sdist's PKG-INFO) for its own version and its ``dlbind==`` pin. The core's binary wheels are
cibuildwheel's in the release (every platform) and ``nox -s build``'s here (manylinux x86-64, each built from
the core's sdist); ``check`` takes them from DIR wherever they were made.

``check`` holds DIR to what PyPI is given: exactly the five distributions (``dlbind``, ``dlbind-cuda``,
``dlbind-rocm``, ``dlbind-metal``, ``dlbind-vulkan``; never the generator), one sdist each, one pure wheel per
backend, the core's binary wheels (a pure core wheel, or one tagged ``linux_*``, is refused), every file of the
one version by its name and by its metadata, each backend pinning ``dlbind==<version>``, the core's extras
pinning ``dlbind-<backend>==<version>``, and ``twine check --strict`` over all of them.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from email.message import Message
from email.parser import HeaderParser
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_dist import readme_tour, tour_with_numpy

ROOT = Path(__file__).resolve().parents[1]
CORE_INIT = ROOT / "packages" / "core" / "src" / "dlbind" / "__init__.py"
BACKENDS = ("cuda", "metal", "rocm", "vulkan")
PUBLISHED = {"dlbind": "packages/core", **{f"dlbind_{b}": f"packages/{b}" for b in BACKENDS}}  # file name -> source
# a wheel's platform tag by the name the options use (the release's runners; manylinux_x86_64 alone here)
PLATFORMS = {
    "manylinux_x86_64": "manylinux_*_x86_64",
    "manylinux_aarch64": "manylinux_*_aarch64",
    "macosx_arm64": "macosx_*_arm64",
    "macosx_x86_64": "macosx_*_x86_64",
    "win_amd64": "win_amd64",
    "win_arm64": "win_arm64",
}


def version() -> str:
    """The literal of ``__version__ = "..."`` in the core's ``__init__.py``, read without importing it."""
    return re.search(r'^__version__ = "([^"]+)"', CORE_INIT.read_text(encoding="utf-8"), re.M)[1]


def check_tag(tag: str, expected: str) -> None:
    """A tag's name (``v0.1.0``, or a full ``refs/tags/v0.1.0``) names the version the files carry."""
    name = tag.removeprefix("refs/tags/")
    if name != f"v{expected}":
        raise SystemExit(f"release: the tag {name} is not v{expected}, the version the distributions carry")


def build(outdir: Path) -> None:
    """The five sdists, and each backend's wheel built from its sdist (``python -m build`` makes the sdist, then
    the wheel from it), from a copy of packages/ without build outputs. The core's wheels are made elsewhere
    (cibuildwheel; ``nox -s build``) and join DIR before ``check``."""
    outdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dlbind-release-") as tmp:
        ignore = shutil.ignore_patterns("build", "dist", "*.egg-info", "*.so", "*.pyd", "__pycache__", "PKG-INFO")
        packages = shutil.copytree(ROOT / "packages", Path(tmp) / "packages", ignore=ignore)
        for name, source in PUBLISHED.items():
            only = ["--sdist"] if name == "dlbind" else []
            command = [sys.executable, "-m", "build", *only, "--outdir", str(outdir), str(packages.parent / source)]
            print("release:", " ".join(command[1:]), flush=True)
            subprocess.run(command, check=True)


def _metadata(path: Path) -> Message:
    """An sdist's PKG-INFO or a wheel's METADATA."""
    if path.name.endswith(".tar.gz"):
        with tarfile.open(path) as tf:
            member = next(m for m in tf.getmembers() if m.name.count("/") == 1 and m.name.endswith("/PKG-INFO"))
            text = tf.extractfile(member).read().decode()  # type: ignore[union-attr]
    else:
        with zipfile.ZipFile(path) as zf:
            text = zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    return HeaderParser().parsestr(text)


def _parts(path: Path) -> tuple[str, str, list[str]]:
    """(distribution, version, wheel tags: [python, abi, platform] or [] for an sdist) from a file's name."""
    if path.name.endswith(".tar.gz"):
        name, _, ver = path.name.removesuffix(".tar.gz").rpartition("-")
        return name, ver, []
    name, ver, *tags = path.name.removesuffix(".whl").split("-")
    return name, ver, tags


def _file_problems(path: Path, expected: str) -> list[str]:
    """What is wrong with one file of the release (its name, version, metadata, pins)."""
    name, ver, tags = _parts(path)
    if name not in PUBLISHED or not (path.name.endswith((".tar.gz", ".whl"))):
        return [f"{path.name}: not a file of the five published distributions"]
    meta = _metadata(path)
    problems = [f"{path.name}: version {v}, not {expected}" for v in {ver, meta["Version"]} if v != expected]
    requires = meta.get_all("Requires-Dist") or []
    if name == "dlbind":
        if tags and (tags[1] == "none" or tags[2].startswith("linux_")):
            problems.append(f"{path.name}: the core's wheel must be a binary wheel with a platform tag PyPI takes")
        pins = [f'dlbind-{b}=={expected}; extra == "{extra}"' for b in BACKENDS for extra in (b, "all")]
        problems += [f"{path.name}: no Requires-Dist {pin}" for pin in pins if pin not in requires]
    else:
        if tags and tags != ["py3", "none", "any"]:
            problems.append(f"{path.name}: a backend's wheel is pure (py3-none-any)")
        if f"dlbind=={expected}" not in requires:
            problems.append(f"{path.name}: no Requires-Dist dlbind=={expected} ({requires})")
    return problems


def _set_problems(files: list[Path], pythons: list[str], platforms: list[str]) -> list[str]:
    """What the set lacks: an sdist per distribution, a wheel per backend, a core wheel per Python and platform."""
    problems = []
    for name in PUBLISHED:
        sdists = [p for p in files if p.name.endswith(".tar.gz") and _parts(p)[0] == name]
        wheels = [p for p in files if p.name.endswith(".whl") and _parts(p)[0] == name]
        if len(sdists) != 1:
            problems.append(f"{name}: {len(sdists)} sdists, not 1")
        if name != "dlbind" and len(wheels) != 1:
            problems.append(f"{name}: {len(wheels)} wheels, not 1")
    core = [_parts(p)[2] for p in files if p.name.endswith(".whl") and _parts(p)[0] == "dlbind"]
    if not core:
        problems.append("dlbind: no binary wheel")
    for python in pythons:
        tag = "cp" + python.replace(".", "")
        for platform in platforms:
            pattern = PLATFORMS[platform]
            found = [t for t in core if t[0] == tag and any(fnmatch.fnmatch(p, pattern) for p in t[2].split("."))]
            if len(found) != 1:
                problems.append(f"dlbind: {len(found)} wheels for {tag} on {pattern}, not 1")
    return problems


def check(dist: Path, pythons: list[str], platforms: list[str]) -> int:
    expected = version()
    files = sorted(p for p in dist.iterdir() if p.is_file())
    problems = _set_problems(files, pythons, platforms)
    for path in files:
        problems += _file_problems(path, expected)
    twine = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)], check=False)
    if twine.returncode != 0:
        problems.append(f"twine check --strict failed (exit {twine.returncode})")
    for problem in problems:
        print(f"  FAIL {problem}", flush=True)
    names = ", ".join(sorted({_parts(p)[0] for p in files}))
    print(f"release: {len(files)} files of {names}, version {expected}: "
          f"{'ok' if not problems else f'{len(problems)} problem(s)'}", flush=True)  # fmt: skip
    return 1 if problems else 0


def tour(dist: Path, python: str, expected: str) -> None:
    """The README tour (numpy where it has torch) in a fresh venv of ``python``: the core from its binary wheel
    in ``dist`` (``dlbind[all]``: every backend too, only from ``dist``), its compiled build, every backend
    listed by ``dlbind.backends()``."""
    with tempfile.TemporaryDirectory(prefix="dlbind-tour-") as tmp:
        subprocess.run([python, "-m", "venv", f"{tmp}/venv"], check=True)
        py = str(Path(tmp) / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))
        pip = [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run([*pip, "numpy", "cffi>=1.17"], check=True)  # from the index: dlbind's own come from dist
        subprocess.run([*pip, "--no-index", "--only-binary", ":all:", "--find-links", str(dist),
                        f"dlbind[all]=={expected}"], check=True)  # fmt: skip
        listed = f"assert sorted(dlbind.backends()) == {sorted(BACKENDS)!r}, dlbind.backends()\n"
        compiled = "assert dlbind.ffi_build() == 'compiled', dlbind.ffi_build()\n"
        code = tour_with_numpy() + listed + compiled + "print('README tour: ok', sys.version.split()[0])\n"
        subprocess.run([py, "-c", "import sys\n" + code], check=True, cwd=tmp, env={**os.environ, "DLBIND_PURE": "0"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("version").add_argument("--tag")
    sub.add_parser("build").add_argument("--outdir", type=Path, required=True)
    checking = sub.add_parser("check")
    checking.add_argument("dist", type=Path)
    checking.add_argument("--tag")
    checking.add_argument("--pythons", default="", help="CPythons with a core wheel each, e.g. 3.10,3.11")
    checking.add_argument("--platforms", default="", help=f"of {', '.join(PLATFORMS)}")
    touring = sub.add_parser("tour")
    touring.add_argument("dist", type=Path)
    touring.add_argument("--python", action="append", default=[], help="an interpreter (default: this one)")
    args = parser.parse_args(argv)
    if getattr(args, "tag", None):
        check_tag(args.tag, version())
    if args.command == "version":
        print(version())
    elif args.command == "build":
        build(args.outdir.resolve())
    elif args.command == "check":
        split = [[s for s in text.split(",") if s] for text in (args.pythons, args.platforms)]
        return check(args.dist.resolve(), *split)
    else:
        readme_tour()  # the README still has its tour
        for python in args.python or [sys.executable]:
            tour(args.dist.resolve(), python, version())
    return 0


if __name__ == "__main__":
    sys.exit(main())
