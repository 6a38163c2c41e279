"""``vendor``: a self-contained copy of the dlbind core inside a host library, under the host's name.

``python -m dlbind_generator vendor --into DIR --package NAME [--header-version M.m[.postN]] [--pure] [--force]``
writes the package ``NAME`` (a dotted import path) into the folder ``DIR``:

* the runtime of ``packages/core/src/dlbind`` (``asdlpack``, ``from_dlpack``, ``from_pointer``,
  ``Tensor``, ``convert``, negotiation, ``DLPACK_VERSION``), every import re-rooted to ``NAME``
  (:mod:`.vendor_reroot`); the CLI (``__main__``, ``check``), ``dlbind.testing`` and the device
  backends are left out (:data:`EXCLUDED`): they are dlbind's tools, and the backends import dlbind;
* ``_generated/`` rendered for the chosen header version (:mod:`.vendor_render`), default canonical;
* unless ``--pure``: the C sources of the fast path and ``_build.py`` (cffi ``ffibuilder`` of
  ``NAME._api`` and the ``Extension`` of ``NAME._fastpath``);
* ``VENDORED.toml``: dlbind's version, the header version and sha256, the command line and the sha256
  of every file written.

Re-vendoring replaces the copy exactly (files no longer written are removed) and refuses, naming them,
to overwrite files whose content differs from the recorded seal, or files the record does not list,
unless ``--force``. A non-empty folder without ``VENDORED.toml`` is never written into.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path

import tomllib

from . import __version__
from .errors import GeneratorError
from .merge import load_history, merge
from .pipeline import Paths, load_models
from .sources import format_version, parse_release
from .vendor_render import Target, render_generated
from .vendor_reroot import imports_of, reroot

CORE_SRC = "packages/core/src/dlbind"
RECORD = "VENDORED.toml"
#: Left out of every vendored copy, with the reason (the vendoring docs list the same).
EXCLUDED = {
    "__main__.py": "the CLI (`python -m dlbind`) is dlbind's",
    "check.py": "the interoperability matrix of installed libraries is dlbind's tool",
    "testing": "the conformance checks: run dlbind.testing against the copy instead",
    "_backends.py": "device backends import dlbind: replaced by a module that loads none",
    "_gpu_runtime.py": "the base of dlbind's GPU backends (dlbind-cuda, dlbind-rocm): no copy has backends",
    "_device_tensors.py": "the tensors of dlbind's backends (owned device memory, host copies): no copy has backends",
    "_generated": "rendered again for the chosen header version",
}
#: Copied for the compiled build only: the C sources of the fast path (not re-rooted: the package
#: name reaches them as the macro DLBIND_PACKAGE).
FASTPATH = "_fastpath"
#: The oldest header a copy can be generated from: the runtime reads ``DLTensor.device`` (a ``DLDevice``),
#: which DLPack 0.4 introduced (``DLContext ctx`` before).
OLDEST = (0, 4)
#: Files a build leaves in the package folder (in-place builds): removed on re-vendoring, never guarded.
_BUILD_OUTPUT_SUFFIXES = (".so", ".pyd", ".pyc")


@dataclass(frozen=True)
class Outcome:
    written: list[str]
    removed: list[str]
    unchanged: int


def check_package(name: str) -> str:
    parts = name.split(".")
    bad = [p for p in parts if not p.isidentifier() or keyword.iskeyword(p)]
    if not name or bad:
        raise GeneratorError(f"--package {name!r} is not a dotted import path (bad part: {bad[0] if bad else ''!r})")
    if parts[0] == "dlbind":
        raise GeneratorError(f"--package {name!r} would shadow dlbind itself: vendor under the host's own package")
    return name


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _dlbind_version(root: Path) -> str:
    """The core's ``__version__``, read without importing it (setuptools takes the distribution's version
    from the same assignment: the pyproject's version is ``dynamic``)."""
    init = (root / CORE_SRC / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"', init, re.M)
    if found is None:
        raise GeneratorError(f"{root / CORE_SRC / '__init__.py'} assigns no literal __version__")
    return found[1]


def runtime_files(root: Path, package: str, command: str, *, pure: bool) -> dict[str, str]:
    """The hand-written runtime of the core, re-rooted to ``package``, by path in the package folder."""
    src = root / CORE_SRC
    version = _dlbind_version(root)
    files: dict[str, str] = {}
    for path in sorted(src.iterdir()):
        rel = path.name
        if rel in EXCLUDED or rel == "__pycache__":
            continue
        if path.is_dir():
            if rel == FASTPATH:
                if not pure:
                    for c in sorted(path.iterdir()):
                        if c.suffix in (".c", ".h"):
                            files[f"{rel}/{c.name}"] = c.read_text(encoding="utf-8")
                continue
            raise GeneratorError(
                f"{path}: a folder the vendoring does not know; decide whether copies take it "
                "(dlbind_generator/vendor.py EXCLUDED)"
            )
        if rel == "py.typed":
            files[rel] = ""
        elif path.suffix in (".py", ".pyi"):  # .pyi: the stub of the fast path, which the runtime's typing reads
            head = (
                f"# Vendored from dlbind {version} (dlbind/{rel}) as {package}, imports re-rooted.\n"
                f"# Do not edit: re-vendor with `{command}`.\n"
            )
            files[rel] = head + reroot(path.read_text(encoding="utf-8"), package, str(path))
    return files


def _record_text(target: Target, dlbind_version: str, files: dict[str, str]) -> str:
    def q(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'

    lines = [
        "# Written by `python -m dlbind_generator vendor`: what this copy is and the sha256 of every file in it.",
        "# Re-vendoring refuses to overwrite a file whose sha256 differs (an edit) unless --force. Do not edit.",
        f"dlbind_version = {q(dlbind_version)}",
        f"generator_version = {q(__version__)}",
        f"package = {q(target.package)}",
        f"header_version = {q(target.header_version)}",
        f"header_sha256 = {q(target.model.sha256)}",
        f"build = {q('pure' if target.pure else 'compiled')}",
        f"command = {q(target.command)}",
        "",
        "[files]",
        *(f"{q(rel)} = {q(sha256(text.encode()))}" for rel, text in sorted(files.items())),
    ]
    return "\n".join(lines) + "\n"


def read_record(into: Path) -> dict[str, object] | None:
    path = into / RECORD
    if not path.exists():
        return None
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"not a vendoring record ({exc}): remove it to vendor afresh", file=str(path)) from None


def _on_disk(into: Path) -> tuple[list[str], list[str]]:
    """(files, build outputs) under ``into``, as posix paths relative to it."""
    files, built = [], []
    for p in sorted(into.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(into).as_posix()
        if "__pycache__" in p.parts or p.suffix in _BUILD_OUTPUT_SUFFIXES:
            built.append(rel)
        else:
            files.append(rel)
    return files, built


def write(into: Path, files: dict[str, str], *, force: bool) -> Outcome:
    """Replace the copy in ``into`` with ``files`` (VENDORED.toml among them), guarded by the old record."""
    if into.exists() and not into.is_dir():
        raise GeneratorError(f"--into {into} is a file, not a folder")
    present, built = _on_disk(into) if into.exists() else ([], [])
    record = read_record(into) if into.exists() else None
    if record is None and present:
        raise GeneratorError(
            f"{into} holds files but no {RECORD} ({', '.join(present[:5])}{', ...' if len(present) > 5 else ''}): "
            "it is not a vendored copy, and vendoring never writes into such a folder (not even with --force); "
            "pick a new or empty folder"
        )
    seals = record.get("files", {}) if record else {}
    if not isinstance(seals, dict):
        raise GeneratorError(f"[files] of {into / RECORD} must be a table")
    edited = [rel for rel in present if rel in seals and sha256((into / rel).read_bytes()) != seals[rel]]
    unlisted = [rel for rel in present if rel not in seals and rel != RECORD]
    if (edited or unlisted) and not force:
        problems = []
        if edited:
            problems.append(f"edited since they were vendored: {', '.join(edited)}")
        if unlisted:
            problems.append(f"not written by the vendoring: {', '.join(unlisted)}")
        raise GeneratorError(
            f"refusing to overwrite the vendored copy in {into}; files {'; '.join(problems)}. Move the changes "
            "out of the copy (or upstream into dlbind), then re-vendor; --force overwrites and removes them"
        )
    written, removed, unchanged = [], [], 0
    for rel in sorted(set(present) - set(files)) + built:
        (into / rel).unlink()
        removed.append(rel)
    for rel, text in sorted(files.items()):
        path = into / rel
        data = text.encode()
        if path.exists() and path.read_bytes() == data:
            unchanged += 1
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(rel)
    for d in sorted((p for p in into.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    return Outcome(written, removed, unchanged)


def build_copy(root: Path, package: str, header_version: str | None, *, pure: bool, command: str,
               offline: bool = False) -> tuple[Target, dict[str, str]]:  # fmt: skip
    """Every file of the copy (VENDORED.toml included), in memory."""
    paths = Paths(root)
    check_package(package)
    sources, models = load_models(paths, lambda msg: print(msg, file=sys.stderr, flush=True), offline=offline)
    want = sources.canonical if header_version is None else parse_release(header_version, where="--header-version")
    known = [m.release for m in models]
    model = next((m for m in models if m.release == want), None)
    if model is None:
        raise GeneratorError(
            f"--header-version {format_version(want)}: no such header in spec/headers.toml "
            f"(known: {', '.join(format_version(v) for v in known)})"
        )
    if want < OLDEST:
        raise GeneratorError(
            f"--header-version {format_version(want)}: a vendored copy needs DLPack {format_version(OLDEST)} or "
            f"newer (DLTensor.device, a DLDevice; DLContext ctx before)"
        )
    canonical = next(m for m in models if m.release == sources.canonical)
    # The copy's per-release tables describe DLPack's releases, and the post-releases the repository recorded
    # (upstream drift), up to its own header, never after it: a 0.4 copy's CANONICAL and last release are 0.4
    # and it knows no name of 0.5 or later; a copy of a released header is the same before and after a
    # post-release of it is bumped; a 1.4 made canonical after 1.3.post1 says kDLTPU came in 1.3.post1, as the
    # core does. Merged over every header (as `generate` checks them), then cut at the copy's.
    merged = merge(models, load_history(paths.history), want, history_file=str(paths.history)).until(want, models)
    labels = {format_version(s.release): s.origin for s in sources.headers}
    target = Target(package, model, canonical, merged, labels, pure, command)
    files = runtime_files(root, package, command, pure=pure)
    files.update(render_generated(target, paths.devices, paths.dtypes, paths.adapters))
    for rel, text in files.items():
        if rel.endswith(".py") and imports_of(text, "dlbind", rel):
            raise GeneratorError(f"the copy would import dlbind: {imports_of(text, 'dlbind', rel)}", file=rel)
    files[RECORD] = _record_text(target, _dlbind_version(root), files)
    return target, files


def command_line(argv: list[str]) -> str:
    """The command recorded in the copy (without --force: re-running it must not overwrite edits)."""
    return shlex.join(["python", "-m", "dlbind_generator", "vendor", *(a for a in argv if a != "--force")])


def run(root: Path, into: Path, package: str, header_version: str | None, *, pure: bool, force: bool,
        argv: list[str], offline: bool = False) -> int:  # fmt: skip
    target, files = build_copy(root, package, header_version, pure=pure, command=command_line(argv), offline=offline)
    outcome = write(into, files, force=force)
    build = "pure (cffi ABI mode)" if pure else "compiled (cffi API mode + fast path; pure without a compiler)"
    print(
        f"vendored {package} (DLPack {target.header_version}, {build}) into {into}: "
        f"{len(outcome.written)} written, {outcome.unchanged} unchanged, {len(outcome.removed)} removed",
        file=sys.stderr,
    )
    for rel in outcome.removed:
        print(f"removed {rel}", file=sys.stderr)
    return 0
