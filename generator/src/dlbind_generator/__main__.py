"""Command line of the generator; the only code that writes files.

python -m dlbind_generator parse HEADER.h        # the model of one header as JSON on stdout
python -m dlbind_generator fetch                 # download + verify the headers of spec/headers.toml
python -m dlbind_generator generate [--check]    # every target; --check: diff, exit 1 if stale
python -m dlbind_generator bump SOURCE           # record a new dlpack.h in spec/headers.toml, regenerate
                                                 # (a listed version with other bytes: a post-release M.m.postN)
python -m dlbind_generator canonical M.m[.postN] # back to a listed header: drop what came after it, regenerate
python -m dlbind_generator rehearsal-header OUT [--kind drift|minor] [--policy]
                                                 # the canonical header + names it lacks (upstream's first)
python -m dlbind_generator vendor --into DIR --package NAME [--header-version M.m[.postN]] [--pure] [--force]
                                                 # a self-contained copy of the core inside a host library
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import GeneratorError
from .model import dumps

if TYPE_CHECKING:
    from .emit import Written
    from .pipeline import Paths


def _root(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "spec" / "headers.toml").exists():
            return d
    raise GeneratorError("cannot find the repository root (a folder with spec/headers.toml): pass --root")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "parse":
            from .parse import parse_header

            sys.stdout.write(dumps(parse_header(args.header).to_json()))
            return 0
        from .pipeline import Paths, load_models, stderr_progress

        paths = Paths(_root(args.root))
        if args.command == "fetch":
            _, models = load_models(paths, stderr_progress)
            from .sources import format_version

            for m in models:
                print(f"dlpack {format_version(m.release)}: ok (sha256 {m.sha256})")
            return 0
        if args.command == "bump":
            return _bump(paths, args.source)
        if args.command == "canonical":
            return _canonical(paths, args.release)
        if args.command == "rehearsal-header":
            return _rehearsal_header(paths, args.out, args.kind, policy=args.policy)
        if args.command == "vendor":
            from .vendor import run

            return run(
                paths.root, args.into, args.package, args.header_version, pure=args.pure, force=args.force,
                argv=list(sys.argv[1:] if argv is None else argv)[1:], offline=args.offline,
            )  # fmt: skip
        return _generate(paths, check=args.check, offline=args.offline)
    except GeneratorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


def _generate(paths: Paths, *, check: bool, offline: bool) -> int:
    """``generate``: every target written (``check``: compared, the diff printed and 1 where one is stale)."""
    from .pipeline import build

    start = time.perf_counter()
    files = build(paths, offline=offline)
    elapsed = time.perf_counter() - start
    if check:
        diffs = files.diff(paths.root)
        if diffs:
            sys.stdout.write("".join(diffs))
            print(f"generated files are stale ({len(diffs)} differ): run `nox -s generate`", file=sys.stderr)
            return 1
        print(f"generated files are up to date ({len(files.files)} files, {elapsed:.2f} s)", file=sys.stderr)
        return 0
    *lines, count = files.write(paths.root).report(len(files.files))
    for line in lines:
        print(line, file=sys.stderr)
    print(f"{count} ({elapsed:.2f} s)", file=sys.stderr)
    return 0


_ROOT_HELP = "repository root (default: found from the current folder)"
#: The commands that take one argument (its metavar; its dest the metavar in lower case) and --root:
#: name -> (metavar, help, description).
_ONE_ARGUMENT = {
    "bump": (
        "SOURCE",
        "record a new dlpack.h in spec/headers.toml, regenerate everything, print the report's summary",
        "SOURCE is a path to a dlpack.h (a rehearsal: recorded with `local =`, never to be committed), "
        "a URL of one (e.g. the raw dlpack.h of an upstream commit) or PACKAGE==VERSION:PATH/IN/ARCHIVE (a "
        "registry archive). A header whose version macros name a listed version but whose bytes differ is "
        "recorded as a post-release of that version (M.m.postN, dated); `canonical M.m` goes back.",
    ),
    "canonical": (
        "RELEASE",
        "make a listed header canonical again (the way back from a bump) and regenerate",
        "Sets `canonical` in spec/headers.toml to RELEASE (e.g. 1.3: the released header, or 1.3.post1) "
        "and removes the post-releases of that version after it and any rehearsal (`local =`) after it (printed: "
        "bump the header again to return), then "
        "regenerates everything like `generate` and prints the report's summary.",
    ),
}


def _parser() -> argparse.ArgumentParser:
    """The command line: parse, fetch, generate, bump, canonical, rehearsal-header, vendor."""
    parser = argparse.ArgumentParser(prog="python -m dlbind_generator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_parse = sub.add_parser("parse", help="print the model of one header as JSON")
    p_parse.add_argument("header", type=Path, help="the dlpack.h to parse (any file: it need not be listed)")
    p_fetch = sub.add_parser("fetch", help="download and verify every header of spec/headers.toml")
    p_fetch.add_argument("--root", help=_ROOT_HELP)
    p_gen = sub.add_parser("generate", help="regenerate every target")
    p_gen.add_argument(
        "--check", action="store_true", help="write nothing; print a diff and exit 1 if anything is stale"
    )
    p_gen.add_argument("--offline", action="store_true", help="use only headers already in .cache/headers")
    p_gen.add_argument("--root", help=_ROOT_HELP)
    for name, (metavar, summary, description) in _ONE_ARGUMENT.items():
        p_one = sub.add_parser(name, help=summary, description=description)
        p_one.add_argument(metavar.lower(), metavar=metavar)
        p_one.add_argument("--root", help=_ROOT_HELP)
    p_next = sub.add_parser(
        "rehearsal-header",
        help="write the canonical header plus names it does not declare yet (to rehearse a bump)",
        description="Adds to the canonical header (a release or a post-release) upstream's additions after v1.3 "
        "that it lacks (kDLTPU = 19, kDLTPUHost = 20, kDLAscend = 21, kDLBcomplex = 18U); where it has them all, "
        "and always for --kind minor, one device type and one dtype code of the rehearsal's own at the next free "
        "values. --kind drift (default) keeps the version macros, as upstream's main branch does (a bump records "
        "the next post-release); --kind minor raises DLPACK_MINOR_VERSION (a bump records M.(m+1)). --policy "
        "also writes the policy rows of the rehearsal's own names into spec/devices.toml and spec/dtypes.toml "
        "(what a maintainer writes for a new name before bumping).",
    )
    p_next.add_argument("out", type=Path)
    p_next.add_argument(
        "--kind", choices=("drift", "minor"), default="drift",
        help="drift (default): the version macros kept; minor: DLPACK_MINOR_VERSION raised",
    )  # fmt: skip
    p_next.add_argument("--policy", action="store_true", help="write the policy rows of the rehearsal's own names")
    p_next.add_argument("--root", help=_ROOT_HELP)
    _add_vendor(sub)
    return parser


def _add_vendor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """The ``vendor`` command's arguments."""
    p_vendor = sub.add_parser(
        "vendor",
        help="write a self-contained copy of the core into a host library's package",
        description="Writes the package NAME (a dotted import path) into the folder DIR: the runtime with its "
        "imports re-rooted to NAME, the generated tables of one header version, the C fast path and _build.py "
        "(unless --pure) and VENDORED.toml. Re-vendoring refuses to overwrite edited files unless --force.",
    )
    p_vendor.add_argument("--into", required=True, type=Path, metavar="DIR", help="the package folder to write")
    p_vendor.add_argument("--package", required=True, metavar="NAME", help="its dotted import path")
    p_vendor.add_argument("--header-version", metavar="M.m[.postN]", help="DLPack header release (default: canonical)")
    p_vendor.add_argument("--pure", action="store_true", help="no C: cffi ABI mode only (needs no compiler)")
    p_vendor.add_argument("--force", action="store_true", help="overwrite edited files, remove unlisted ones")
    p_vendor.add_argument("--offline", action="store_true", help="use only headers already in .cache/headers")
    p_vendor.add_argument("--root", help=_ROOT_HELP)


def _rehearsal_header(paths: Paths, out: Path, kind: str, *, policy: bool = False) -> int:
    from .fetch import fetch_one
    from .parse import parse_header
    from .pipeline import stderr_progress
    from .rehearsal import derive, policy_rows
    from .sources import format_version, load_sources

    sources = load_sources(paths.headers_toml)
    canonical = sources.by_release(sources.canonical)
    header = fetch_one(canonical, paths.cache, stderr_progress)
    model = parse_header(header)
    if canonical.post:
        from dataclasses import replace

        model = replace(model, post=canonical.post)
    made = derive(header.read_text(encoding="utf-8"), model, kind)
    try:
        out.write_text(made.text, encoding="utf-8")
    except OSError as exc:
        raise GeneratorError(f"cannot write the rehearsal header: {exc.strerror}", file=str(out)) from None
    added = [f"DLDeviceType.{n} = {v}" for n, v in made.devices] + [f"DLDataTypeCode.{n} = {v}" for n, v in made.dtypes]
    what = "version macros kept: a bump records a post-release" if kind == "drift" else "DLPACK_MINOR_VERSION raised"
    whose = "upstream's additions after v1.3" if made.upstream else f"of the rehearsal's own: {', '.join(made.own)}"
    print(
        f"wrote {out}: dlpack.h {format_version(sources.canonical)} + {', '.join(added)} "
        f"({whose}); DLPack {format_version(made.version)}, {what}",
        file=sys.stderr,
    )
    rows = policy_rows(made)
    if policy:
        for table, path in (("devices", paths.devices), ("dtypes", paths.dtypes)):
            if rows[table]:
                path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + rows[table], encoding="utf-8")
                print(f"wrote the policy of the rehearsal's own names into {path} (never commit it)", file=sys.stderr)
    elif made.own:
        print("the rehearsal's own names have no policy rows yet: pass --policy to write them (else the bump's "
              "report lists them as needing a decision)", file=sys.stderr)  # fmt: skip
    return 0


def _regenerate(paths: Paths, text: str, before: str) -> tuple[Written, int, str]:
    """Write headers.toml's new ``text``, regenerate everything; on any failure put ``before`` back.
    Returns (files written and removed, files generated, the report)."""
    from .pipeline import REPORT, build

    paths.headers_toml.write_text(text, encoding="utf-8")
    try:
        files = build(paths)  # what `generate` makes; nothing is written if it fails
    except BaseException:
        paths.headers_toml.write_text(before, encoding="utf-8")
        raise
    return files.write(paths.root), len(files.files), files.files[REPORT]


def _print_summary(touched: Written, total: int, report: str) -> None:
    from .bump import report_summary
    from .pipeline import REPORT

    for line in touched.report(total, "generated files"):
        print(line, file=sys.stderr)
    print(f"Summary of {REPORT}:\n")
    print(report_summary(report))


def _bump(paths: Paths, source: str) -> int:
    from .bump import cache, model_of, record, resolve_source
    from .merge import read_ledger
    from .pipeline import stderr_progress
    from .sources import format_version

    src, data = resolve_source(source, stderr_progress)
    before = paths.headers_toml.read_text(encoding="utf-8")
    abi = read_ledger(paths.ledger).abi
    text, done = record(paths.headers_toml, src, ledger=abi, abi_hash=model_of(data).abi_hash())
    src = done.source
    cache(src, data, paths.cache)
    v = format_version(src.release)
    touched, total, report = _regenerate(paths, text, before)
    if done.added and done.released is not None:
        print(
            f"recorded DLPack {v} in spec/headers.toml: a post-release of {format_version(src.version)} (its version "
            f"macros say {format_version(src.version)}, its bytes differ from the released header's: sha256 "
            f"{src.sha256}, not {done.released.sha256}); {src.label}, {src.date}",
            file=sys.stderr,
        )
    elif done.added:
        print(f"recorded DLPack {v} in spec/headers.toml (sha256 {src.sha256}, {src.label})", file=sys.stderr)
    else:
        print(f"DLPack {v} is listed already with this sha256: nothing to record", file=sys.stderr)
    if done.canonical_after != done.canonical_before:
        print(
            f"canonical: {format_version(done.canonical_before)} -> {format_version(done.canonical_after)}",
            file=sys.stderr,
        )
    if done.added and done.canonical_after != done.canonical_before:
        print(
            "back to the header canonical before: python -m dlbind_generator canonical "
            f"{format_version(done.canonical_before)}",
            file=sys.stderr,
        )
    if src.local:
        print("this entry names a file on this machine: a rehearsal, do not commit it", file=sys.stderr)
    _print_summary(touched, total, report)
    return 0


def _canonical(paths: Paths, release: str) -> int:
    from .bump import set_canonical
    from .sources import format_version

    before = paths.headers_toml.read_text(encoding="utf-8")
    text, old, removed = set_canonical(paths.headers_toml, release)
    touched, total, report = _regenerate(paths, text, before)
    for src in removed:
        print(f"removed DLPack {format_version(src.release)} from spec/headers.toml ({src.label}, sha256 {src.sha256})",
              file=sys.stderr)  # fmt: skip
    print(f"canonical: {format_version(old)} -> {release}", file=sys.stderr)
    _print_summary(touched, total, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
