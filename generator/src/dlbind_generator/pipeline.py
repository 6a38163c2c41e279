"""The whole run: fetch, parse every header, merge, check the ledger, render every target."""

from __future__ import annotations

import contextlib
import io
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import cffi

from . import __version__
from .adapters import closed_sets, load_adapters, load_keyword_refusals
from .backends import BackendSpec, HeaderUnavailable, load_backend_specs, oldest_runtime, select
from .emit import FileSet, banner, seal
from .errors import GeneratorError
from .fetch import fetch_all
from .merge import MergedModel, check_ledger, check_post_releases, load_history, merge, read_ledger, render_ledger
from .model import HeaderModel, dumps
from .parse import parse_header
from .policy import MAX_REFUSED, join
from .render import context, environment, ruff_format
from .sources import HeaderSource, Sources, format_version, load_sources

Progress = Callable[[str], None]

CORE_GENERATED = "packages/core/src/dlbind/_generated"
MODELS = "spec/models"
REPORT = "generator/REPORT.md"


@dataclass(frozen=True)
class Paths:
    root: Path

    @property
    def headers_toml(self) -> Path:
        return self.root / "spec" / "headers.toml"

    @property
    def history(self) -> Path:
        return self.root / "spec" / "history.toml"

    @property
    def adapters(self) -> Path:
        return self.root / "spec" / "adapters.toml"

    @property
    def devices(self) -> Path:
        return self.root / "spec" / "devices.toml"

    @property
    def dtypes(self) -> Path:
        return self.root / "spec" / "dtypes.toml"

    @property
    def backends(self) -> Path:
        return self.root / "spec" / "backends"

    @property
    def ledger(self) -> Path:
        return self.root / MODELS / "ledger.toml"

    @property
    def cache(self) -> Path:
        return self.root / ".cache" / "headers"


def stderr_progress(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def load_models(paths: Paths, progress: Progress, *, offline: bool = False) -> tuple[Sources, list[HeaderModel]]:
    """Every listed header, fetched, verified and parsed; a post-release's model carries its ``post``."""
    sources = load_sources(paths.headers_toml)
    files = fetch_all(sources, paths.cache, progress, offline=offline)
    models = []
    for src in sources.headers:
        model = parse_header(files[src.release])
        if model.version != src.version:
            raise GeneratorError(
                f"headers.toml lists this header as DLPack {format_version(src.release)}, "
                f"but its version macros say {format_version(model.version)}",
                file=str(files[src.release]),
            )
        models.append(replace(model, post=src.post))
    return sources, models


def abi_module(cdef: str, module: str = "dlbind._generated._abi") -> str:
    """cffi's out-of-line ABI-mode module ``module`` for ``cdef`` (no compiler involved): the core's pure
    build, a backend's binding, a vendored copy's pure build."""
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(module, None)
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "_abi.py"
        with contextlib.redirect_stdout(io.StringIO()):  # cffi announces the file it writes
            ffi.emit_python_code(str(target))
        return target.read_text(encoding="utf-8")


def _by_release(merged: MergedModel) -> list[dict[str, Any]]:
    """Per release: names introduced (a field or member only when its parent is older), removed, renamed."""
    since = {n.qualname: n.since for n in merged.names}
    rows = []
    for v in merged.releases:
        introduced = [
            n.qualname
            for n in merged.names
            if n.since == v and ("." not in n.qualname or since.get(n.qualname.rsplit(".", 1)[0]) != v)
        ]
        renamed = [
            f"{old} → {n.qualname.rsplit('.', 1)[-1]}"
            for n in merged.names
            for old, when in n.renamed_from[:1]
            if when == v
        ]
        rows.append(
            {
                "version": format_version(v),
                "introduced": introduced,
                "removed": [n.qualname for n in merged.names if n.removed == v],
                "renamed": renamed,
            }
        )
    return rows


def _flag_decisions(release: dict[str, Any]) -> list[str]:
    """Flag bits new in the canonical release: the runtime must decide whether it sets or honours them."""
    return [
        f"{q}: a new flag bit (does the runtime set or honour it?)"
        for q in release["introduced"]
        if q.startswith("DLPACK_FLAG_BITMASK_")
    ]


def post_release_view(canonical: HeaderModel, src: HeaderSource, models: list[HeaderModel]) -> dict[str, Any] | None:
    """What the report says of a canonical post-release: its release, date and source, the layout check."""
    if not canonical.post:
        return None
    base = next(m for m in models if m.release == canonical.version)
    return {
        "release": format_version(canonical.release),
        "base": format_version(base.release),
        "base_sha256": base.sha256,
        "date": src.date,
        "origin": src.url or src.local or f"{src.package} {src.package_version}: {src.path}",
        "layout": canonical.layout_hash(),
        "same_layout": canonical.layout_hash() == base.layout_hash(),
    }


def build(paths: Paths, progress: Progress = stderr_progress, *, offline: bool = False) -> FileSet:
    """Everything the generator owns, in memory."""
    sources, models = load_models(paths, progress, offline=offline)
    history = load_history(paths.history)
    merged = merge(models, history, sources.canonical, history_file=str(paths.history))
    check_post_releases(models)
    ledger = check_ledger(read_ledger(paths.ledger), models, str(paths.ledger))
    canonical = next(m for m in models if m.release == sources.canonical)
    labels = {format_version(s.release): s.origin for s in sources.headers}
    files = FileSet(owned_dirs=[CORE_GENERATED, MODELS])
    out = _Writer(environment(), context(canonical, merged, labels), files, canonical)
    targets, policy = _tables(out, merged, paths)
    targets += _api(out, policy, paths)
    for m in models:
        files.add(f"{MODELS}/dlpack-{format_version(m.release)}.json", dumps(m.to_json()))
    files.add(f"{MODELS}/merged.json", dumps(merged.to_json()))
    files.add(f"{MODELS}/ledger.toml", render_ledger(ledger))
    targets.append(
        (f"{MODELS}/", f"{len(models)} header models, merged.json, ledger.toml ({len(ledger.abi)} releases)")
    )
    by_release = _by_release(merged)
    new = next(r for r in by_release if r["version"] == out.version)
    report = out.env.get_template("REPORT.md.j2").render(
        post=post_release_view(canonical, sources.by_release(canonical.release), models),
        waiting=policy.waiting,
        waiting_names=policy.waiting_names,
        decisions=policy.decisions,
        summary_decisions=[*policy.decisions, *_flag_decisions(new)],
        models=models,
        targets=targets,
        by_release=by_release,
        new=new,
        generator_version=__version__,
        **out.ctx,
    )
    files.add(REPORT, report)
    for spec in load_backend_specs(paths.backends):
        backend_files(spec, files, progress)
    return files


class _Writer:
    """Renders the core's generated files from the templates, each with its banner and seal."""

    def __init__(self, env: Any, ctx: dict[str, Any], files: FileSet, canonical: HeaderModel) -> None:
        self.env, self.ctx, self.files = env, ctx, files
        self.version, self.sha256 = format_version(canonical.release), canonical.sha256
        self.canonical = canonical

    def python(self, name: str, what: str, template: str | None = None) -> None:
        text = self.env.get_template(template or f"{name}.j2").render(
            banner=banner(self.version, self.sha256, what), **self.ctx
        )
        self.files.add(f"{CORE_GENERATED}/{name}", seal(ruff_format(text, name)))

    def c_header(self, name: str, what: str) -> None:
        text = self.env.get_template(f"{name}.j2").render(
            banner=banner(self.version, self.sha256, what, comment="//"), **self.ctx
        )
        self.files.add(f"{CORE_GENERATED}/{name}", seal(text, comment="//"))


def _tables(out: _Writer, merged: MergedModel, paths: Paths) -> tuple[list[tuple[str, str]], Any]:
    """The package, its enums, the per-release tables and the policy tables (Python and C), with what each
    holds; and the policy joined with the header."""
    ctx = out.ctx
    enum_summary = ", ".join(
        f"{e.py_name} ({len(e.members)} members" + (f", {len(e.aliases)} aliases)" if e.aliases else ")")
        for e in ctx["enums"]
    )
    out.python("__init__.py", "The generated part of the dlbind core.")
    out.python("enums.py", "Enumerations, flags and constants.")
    out.python("spec_tables.py", "Per-release tables: since, removed, renamed.")
    policy = join(out.canonical, paths.devices, paths.dtypes)
    ctx["policy"] = policy
    ctx["max_refused"] = MAX_REFUSED
    out.python("tables.py", "Device and dtype tables (spec/devices.toml, spec/dtypes.toml joined with the enums).")
    out.c_header("tables.h", "Device and dtype tables for C (the same join as tables.py).")
    out.c_header("dlpack_types.h", "The header's declarations as C (the cdef), for the C fast path.")
    removed, renamed = len(ctx["removed"]), len(ctx["renamed"])
    targets = [
        (f"{CORE_GENERATED}/enums.py", f"{enum_summary}; {len(ctx['constants'])} integer constants"),
        (
            f"{CORE_GENERATED}/spec_tables.py",
            f"{len(merged.names)} names with since, {removed} removed, {renamed} renamed",
        ),
        (
            f"{CORE_GENERATED}/tables.py, tables.h",
            f"{len(policy.devices)} device types ({sum(d.derived for d in policy.devices)} derived), "
            f"{len(policy.stream_rules)} stream rules, {len(policy.codes)} dtype codes "
            f"({sum(c.derived for c in policy.codes)} derived), {len(policy.dtypes)} named dtypes, "
            f"{sum(len(t.formats) for t in policy.dtypes)} buffer formats; waiting for the header: "
            f"{len(policy.pending_devices)} device type(s), {len(policy.pending_codes)} dtype code(s)",
        ),
        (f"{CORE_GENERATED}/dlpack_types.h", "the cdef as an includable C header"),
    ]
    return targets, policy


def _api(out: _Writer, policy: Any, paths: Paths) -> list[tuple[str, str]]:
    """The cffi modules of both builds and the adapters' table, with what each holds."""
    out.python("build_api.py", "cffi builder of the compiled module dlbind._api.")
    cdef_decls = sum(1 for _ in out.canonical.declarations)
    abi = abi_module(out.ctx["cdef"])
    what = f"cffi {cffi.__version__} ABI-mode module (the pure build)."
    out.files.add(f"{CORE_GENERATED}/_abi.py", seal(banner(out.version, out.sha256, what) + "\n\n" + abi))
    out.python("_abi.pyi", "Type stubs of _abi.py.")
    adapters = load_adapters(paths.adapters, {d.name for d in policy.devices})
    out.ctx["adapters"] = adapters
    out.ctx["keyword_refusals"] = load_keyword_refusals(paths.adapters)
    out.ctx["closed"], out.ctx["closed_sets"] = closed_sets()
    out.python("adapters.py", "Array libraries and their DLPack quirks (from spec/adapters.toml).")
    return [
        (f"{CORE_GENERATED}/build_api.py", f"cdef of {cdef_decls} declarations; API-mode module `dlbind._api`"),
        (
            f"{CORE_GENERATED}/adapters.py",
            f"{len(adapters)} libraries, {sum(len(a.quirks) for a in adapters)} quirks "
            f"({sum(a.verified for a in adapters)} libraries verified by tests)",
        ),
        (f"{CORE_GENERATED}/_abi.py(i)", "cffi out-of-line ABI-mode module `dlbind._generated._abi` (pure build)"),
    ]


def backend_files(spec: BackendSpec, files: FileSet, progress: Progress) -> None:
    """A backend's declarations selected from its vendor header, sealed under its ``_generated/``.

    When the header is not on this machine (or is not the pinned one) nothing is generated and the
    backend's folder is not owned by this run: the committed output stays authoritative, unchecked.
    """
    try:
        sel = select(spec)
    except HeaderUnavailable as exc:
        progress(f"{spec.name}: skipped, the committed output stays authoritative: {exc}")
        return
    files.owned_dirs = (*files.owned_dirs, spec.generated_dir)
    env = environment()
    if spec.declarations:  # a declaration file: no header, the provenance is in the file
        source = (
            f"the declaration file {sel.header_path}, {sel.header_version} (sha256 of its cdef {sel.header_sha256})\n"
            "written from the vendor's documentation where no header can be had; [provenance] there names it."
        )
    else:
        source = (
            f"{sel.header_path} {sel.header_version} (sha256 {sel.header_sha256})\n"
            f"selected by spec/backends/{spec.file.name}, preprocessed with "
            f"`cpp -undef -nostdinc {' '.join(f'-D{k}={v}' for k, v in spec.defines)}` and the generator's stubs."
        )

    def head(what: str) -> str:
        return banner(sel.header_version, sel.header_sha256, what, source=source)

    library = {
        "env": spec.library.get("env", f"DLBIND_{spec.name.upper()}_LIBRARY"),
        "wheels": {k: tuple(v) for k, v in sorted(spec.library.get("wheels", {}).items())},
        "names": {p: tuple(spec.library.get(p, ())) for p in ("linux", "darwin", "win32")},
        "oldest": oldest_runtime(spec),
    }
    ctx = {"sel": sel, "defines": dict(spec.defines), "library": library}
    for name, template, what in (
        ("__init__.py", "backend_init.py.j2", f"The generated part of dlbind-{spec.name}."),
        ("declarations.py", "backend_declarations.py.j2", "The selected declarations, library names, macros."),
        ("_abi.pyi", "backend_abi.pyi.j2", "Type stubs of _abi.py."),
    ):
        text = env.get_template(template).render(banner=head(what), **ctx)
        files.add(f"{spec.generated_dir}/{name}", seal(ruff_format(text, name)))
    module = f"{spec.package}._generated._abi"
    abi = abi_module(sel.cdef + "".join(f"#define {k} {v}\n" for k, v in sel.macros.items()), module)
    what = f"cffi {cffi.__version__} ABI-mode module of the selected declarations."
    files.add(f"{spec.generated_dir}/_abi.py", seal(head(what) + "\n\n" + abi))
    counts = ", ".join(f"{v} {k}" for k, v in sel.counts.items())
    verb = "declared in" if spec.declarations else "selected from"
    progress(f"{spec.name}: {counts} {verb} {sel.header_path} {sel.header_version}")
