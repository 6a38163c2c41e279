"""Command line of the generator; the only code that writes files.

python -m dlbind_generator parse HEADER.h        # the model of one header as JSON on stdout
python -m dlbind_generator fetch                 # download + verify the headers of spec/headers.toml
python -m dlbind_generator generate [--check]    # every target; --check: diff, exit 1 if stale
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .errors import GeneratorError
from .model import dumps


def _root(arg: str | None) -> Path:
    if arg:
        return Path(arg).resolve()
    here = Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "spec" / "headers.toml").exists():
            return d
    raise GeneratorError("cannot find the repository root (a folder with spec/headers.toml): pass --root")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dlbind_generator", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_parse = sub.add_parser("parse", help="print the model of one header as JSON")
    p_parse.add_argument("header", type=Path)
    p_fetch = sub.add_parser("fetch", help="download and verify every header of spec/headers.toml")
    p_fetch.add_argument("--root")
    p_gen = sub.add_parser("generate", help="regenerate every target")
    p_gen.add_argument(
        "--check", action="store_true", help="write nothing; print a diff and exit 1 if anything is stale"
    )
    p_gen.add_argument("--offline", action="store_true", help="use only headers already in .cache/headers")
    p_gen.add_argument("--root", help="repository root (default: found from the current folder)")
    args = parser.parse_args(argv)

    try:
        if args.command == "parse":
            from .parse import parse_header

            sys.stdout.write(dumps(parse_header(args.header).to_json()))
            return 0
        from .pipeline import Paths, build, load_models, stderr_progress

        paths = Paths(_root(args.root))
        if args.command == "fetch":
            _, models = load_models(paths, stderr_progress)
            for m in models:
                print(f"dlpack {m.version[0]}.{m.version[1]}: ok (sha256 {m.sha256})")
            return 0
        start = time.perf_counter()
        files = build(paths, offline=args.offline)
        elapsed = time.perf_counter() - start
        if args.check:
            diffs = files.diff(paths.root)
            if diffs:
                sys.stdout.write("".join(diffs))
                print(f"generated files are stale ({len(diffs)} differ): run `nox -s generate`", file=sys.stderr)
                return 1
            print(f"generated files are up to date ({len(files.files)} files, {elapsed:.2f} s)", file=sys.stderr)
            return 0
        touched = files.write(paths.root)
        for rel in touched:
            print(f"wrote {rel}", file=sys.stderr)
        print(f"{len(touched)} of {len(files.files)} files changed ({elapsed:.2f} s)", file=sys.stderr)
        return 0
    except GeneratorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
