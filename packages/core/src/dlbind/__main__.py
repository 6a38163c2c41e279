"""``python -m dlbind``: the command line of the core.

python -m dlbind info [--json]      # DLPack version, build, device/dtype/flag tables with `since`
python -m dlbind backends [--json]  # every known device backend: installed and available, or why not
python -m dlbind check [--libs ...] # the conformance matrix of the installed array libraries
python -m dlbind explain numpy torch --reversed   # what dlbind.convert would do, and why
"""

from __future__ import annotations

import argparse
import enum
import json
import math
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

import dlbind
from dlbind import spec


def _fmt(v: tuple[int, int] | None) -> str:
    return "" if v is None else f"{v[0]}.{v[1]}"


def _table(cls: type[enum.IntEnum] | type[enum.IntFlag], c_enum: str | None) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for member in cls:
        c_name = f"{c_enum}.{member.name}" if c_enum else f"DLPACK_FLAG_BITMASK_{member.name}"
        rows.append(
            {
                "name": member.name,
                "value": int(member),
                "since": _fmt(spec.since(c_name)),
                "earlier names": ", ".join(f"{old} (until {_fmt(v)})" for old, v in spec.renamed_from(c_name)),
            }
        )
    return rows


def _print_table(title: str, rows: list[dict[str, object]]) -> None:
    print(f"\n{title}")
    cols = list(rows[0])
    widths = [max(len(c), *(len(str(r[c])) for r in rows)) for c in cols]
    print("  " + "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
    print("  " + "  ".join("-" * w for w in widths))
    for r in rows:
        print("  " + "  ".join(str(r[c]).ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())


def info(as_json: bool) -> int:
    tables = {
        "device types (DLDeviceType)": _table(dlbind.DeviceType, "DLDeviceType"),
        "dtype codes (DLDataTypeCode)": _table(dlbind.DataTypeCode, "DLDataTypeCode"),
        "flags (DLManagedTensorVersioned.flags)": _table(dlbind.Flags, None),
    }
    head = {
        "dlbind": dlbind.__version__,
        "dlpack": _fmt(spec.CANONICAL),  # the header's version; a post-release (1.3.post1) of a drifted header
        "build": dlbind.ffi_build(),
        "releases": [_fmt(v) for v in spec.RELEASES],
        "fetched": [_fmt(v) for v in spec.FETCHED],
    }
    if as_json:
        json.dump({**head, "tables": tables}, sys.stdout, indent=2)
        print()
        return 0
    print(f"dlbind {head['dlbind']}: generated from dlpack.h {head['dlpack']}, {head['build']} cffi build")
    print(f"DLPack releases known: {', '.join(head['releases'])}; headers parsed: {', '.join(head['fetched'])}")
    for title, rows in tables.items():
        _print_table(title, rows)
    return 0


def backends(as_json: bool) -> int:
    found = dlbind.backends(known=True)  # installed or not: the same data as the API's
    if as_json:
        json.dump({name: s._asdict() for name, s in found.items()}, sys.stdout, indent=2)
        print()
        return 0
    if not any(s.installed for s in found.values()):
        print("no device backend is installed; each known one and what to install:")
    for status in found.values():
        print(f"{status}  [{status.distribution} {status.version}]" if status.installed else str(status))
    return 0


def check(args: argparse.Namespace) -> int:
    from dlbind import check as matrix_check

    names = [n for item in args.libs or () for n in item] or None  # each item checked by _libraries
    device = None if args.device in (None, "cpu") else args.device
    if device is not None:
        from dlbind.testing._devices import PLACES

        reason = PLACES[device].unavailable()
        if reason is not None:
            print(f"--device {device}: cannot run here: {reason}", file=sys.stderr)
            return 2
        libs, without = matrix_check.on_device(device, names)
        if without:
            print(f"not checked on {device} (dlbind.testing knows no constructor of their {device} arrays): "
                  f"{', '.join(without)}", file=sys.stderr)  # fmt: skip
    else:
        libs = matrix_check.installed(names)
    missing = [n for n in names or () if n not in libs and (device is None or n not in without)]
    if missing:
        print(f"not installed here: {', '.join(missing)}", file=sys.stderr)
        return 2
    if not libs:
        print("no array library dlbind knows is installed (numpy, torch, jax, ...)", file=sys.stderr)
        return 2
    matrix = matrix_check.run(libs, device=device)
    sys.stdout.write(matrix_check.render(matrix, details=args.details))
    if args.json and not _write(args.json, json.dumps(matrix_check.as_json(matrix), indent=2)):
        return 2
    if args.markdown and not _write(args.markdown, matrix_check.render(matrix, markdown=True)):
        return 2
    return 0


def _write(path: str, text: str) -> bool:
    """Write ``text`` to ``path`` (checked by argparse before the run: ``_output``), or say in one line why not
    (the disk can still fill up)."""
    try:
        with open(path, "w") as f:
            f.write(text)
    except OSError as exc:
        print(f"cannot write {path}: {exc.strerror}", file=sys.stderr)
        return False
    return True


def explain(args: argparse.Namespace) -> int:
    """An array of library ``args.source`` made as the options say, and what ``dlbind.convert`` does with it."""
    try:
        import numpy as np
    except ImportError:
        print("cannot explain: explain makes its array with numpy, which is not installed", file=sys.stderr)
        return 2
    from dlbind.conversion import ExplanationKind
    from dlbind.routes import KINDS

    dtype, shape = args.dtype, args.shape  # checked by argparse (_dtype, _shape)
    base = np.arange(math.prod(shape) + 1).astype(dtype)
    a = base[1:] if args.offset else base[:-1]
    a = a.reshape(shape)
    if args.reversed:
        a = a[::-1]
    if args.transposed:
        a = a.T
    if args.readonly:
        a.flags.writeable = False
    copy = {"none": None, "true": True, "false": False}[args.copy]
    try:
        x = a if args.source == "numpy" else dlbind.convert(a, to=args.source)
    except ImportError:
        print(f"cannot make a {args.source} array: {args.source} is not installed", file=sys.stderr)
        return 2
    except (ValueError, TypeError, BufferError) as exc:
        print(f"cannot make a {args.source} array of {a.dtype}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    try:
        found = dlbind.explain(x, args.target, device=args.device, copy=copy, stream=args.stream)
    except (ImportError, ValueError, TypeError, BufferError) as exc:
        print(f"cannot explain: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    source = f"{type(x).__module__}.{type(x).__qualname__} {a.dtype} {a.shape}"
    if args.json:
        decision = found.decision
        payload = None if decision.payload is None else decision.payload._asdict()  # what its kind alone says
        json.dump(
            {"source": source, "target": args.target, "kind": found.kind, "text": found.text,
             "decision": {**decision._asdict(), "kind": KINDS[decision.kind], "payload": payload}},
            sys.stdout, indent=2,
        )  # fmt: skip
        print()
        return 1 if found.kind == ExplanationKind.REFUSED else 0
    shown = ", ".join(
        f"{k}={v}" for k, v in (("device", args.device), ("copy", copy), ("stream", args.stream)) if v is not None
    )
    print(f"dlbind.convert({source}, to={args.target!r}{', ' + shown if shown else ''})")
    print(f"  {found.text}")
    return 1 if found.kind == ExplanationKind.REFUSED else 0  # convert would raise: a script can tell


# -- the arguments, checked as argparse parses them: a wrong one is a usage error (exit 2), never a traceback --

#: The most elements ``explain --shape`` makes (it shows a decision, not a benchmark).
MAX_ELEMENTS = 1 << 20


def _shape(text: str) -> tuple[int, ...]:
    """``--shape``: comma-separated sizes, each a whole number >= 0 (``2,3``; empty: a 0-d array)."""
    sizes = text.split(",") if text.strip() else []
    if any(not n.strip() for n in sizes):
        raise argparse.ArgumentTypeError(f"{text!r}: an empty size (sizes are separated by one comma, such as 2,3)")
    try:
        shape = tuple(int(n) for n in sizes)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of sizes, such as 2,3") from None
    if any(n < 0 for n in shape):
        raise argparse.ArgumentTypeError(f"{text!r}: a size cannot be negative")
    if math.prod(shape) > MAX_ELEMENTS:
        raise argparse.ArgumentTypeError(
            f"{text!r}: {math.prod(shape)} elements, more than explain makes ({MAX_ELEMENTS})"
        )
    return shape


def _output(text: str) -> str:
    """``check --json`` / ``--markdown``: a file that can be written, checked before the suite runs (a folder,
    or one whose folder is missing or read-only, is refused then, not after the whole run)."""
    folder = os.path.dirname(os.path.abspath(text))
    if os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, not a file")
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"{text!r}: no such folder {folder!r}")
    if not os.access(text if os.path.exists(text) else folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r}: cannot be written here (permission denied)")
    return text


def _dtype(text: str) -> object:
    """``--dtype``: one of dlbind's dtype names (spec/dtypes.toml: ``float32``, ``bfloat16``), as the numpy dtype the
    array is made of (``dlbind.dtype(text, to="numpy")``: ml_dtypes gives bfloat16 and the float8 types)."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        return text  # explain says that it needs numpy (the default dtype is read too)
    from dlbind.crossing import dtype

    try:
        return dtype(text, to="numpy")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _library(text: str) -> str:
    """A library name of spec/adapters.toml (``torch``), or its module (``mlx.core``)."""
    from dlbind._libraries import named

    try:
        named(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _libraries(text: str) -> list[str]:
    """``check --libs``: one or more systems of spec/adapters.toml, comma-separated, each by its name or its module
    (``cuda.core``); their names."""
    from dlbind._libraries import named

    try:
        return [named(n).name for n in text.split(",") if n]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _version_line() -> str:
    """``python -m dlbind --version``: the package, the header it was generated from, the build."""
    import dlbind

    return f"dlbind {dlbind.__version__} (DLPack {_fmt(spec.CANONICAL)}, {dlbind.ffi_build()} build)"


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage error is one line (what is wrong, and where the help is), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m dlbind", description="dlbind command line")
    parser.add_argument("--version", action="version", version=_version_line())
    sub = parser.add_subparsers(dest="command")
    p_info = sub.add_parser("info", help="print the DLPack version and the generated tables")
    p_info.add_argument("--json", action="store_true", help="machine-readable output")
    p_backends = sub.add_parser("backends", help="list the installed device backends and why one is unavailable")
    p_backends.add_argument("--json", action="store_true", help="machine-readable output")
    p_check = sub.add_parser("check", help="run the conformance suite on the installed array libraries")
    p_check.add_argument(
        "--libs", nargs="+", metavar="NAME", type=_libraries,
        help="library names, space- or comma-separated (default: every installed one dlbind knows)",
    )  # fmt: skip
    p_check.add_argument("--json", type=_output, metavar="FILE", help="also write the results as JSON")
    p_check.add_argument("--markdown", type=_output, metavar="FILE", help="also write the matrix as a Markdown page")
    p_check.add_argument("--details", action="store_true", help="list every finding with its reason")
    p_check.add_argument(
        "--device", choices=["cpu", "cuda"], default=None,
        help="where the libraries make their arrays: cpu (default), or cuda (each library's own CUDA arrays, "
        "with stream checks; needs dlbind-cuda and a GPU)",
    )  # fmt: skip
    p_explain = sub.add_parser(
        "explain", help="say what dlbind.convert does with an array of one library for another, and why",
        description="Make a small array of SOURCE (numpy's, converted), then print dlbind.explain(x, TARGET, ...): "
        "zero-copy or a copy, where, and why (the target's known deviations, with their references).",
    )  # fmt: skip
    p_explain.add_argument("source", type=_library, help="the producer's library (numpy, torch, jax, ...)")
    p_explain.add_argument("target", type=_library, help="the target library")
    p_explain.add_argument(
        "--dtype", default="float32", type=_dtype, help="dtype of the array, one of dlbind's names (default float32)"
    )
    p_explain.add_argument("--shape", default="2,3", type=_shape, help="comma-separated shape (default 2,3)")
    p_explain.add_argument("--reversed", action="store_true", help="negative strides (a[::-1])")
    p_explain.add_argument("--transposed", action="store_true", help="strides that are not row-major (a.T)")
    p_explain.add_argument("--readonly", action="store_true", help="a read-only array")
    p_explain.add_argument("--offset", action="store_true", help="data that starts one element into its buffer")
    p_explain.add_argument("--device", default=None, help="convert's device= (cpu, cuda:0, ...)")
    p_explain.add_argument("--copy", choices=["none", "true", "false"], default="none", help="convert's copy=")
    p_explain.add_argument("--stream", type=int, default=None, help="convert's stream=")
    p_explain.add_argument("--json", action="store_true", help="machine-readable output (with the Decision)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit status: 2 for a usage error, which argparse has printed (a wrong
    argument is refused as argparse parses it: no traceback)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error, or --help / --version done
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "explain":
        return explain(args)
    if args.command == "check":
        return check(args)
    if args.command == "backends":
        return backends(args.json)
    if args.command in (None, "info"):
        return info(getattr(args, "json", False))
    parser.error(f"unknown command {args.command}")  # argparse refuses unknown commands first


def _run() -> int:
    """``main`` for the console: a reader that closes the pipe early (``| head``) ends the command quietly."""
    try:
        code = main()
        sys.stdout.flush()
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at devnull so that flush cannot fail a second time.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 128 + 13  # SIGPIPE's status, as a shell reports a command killed by it
    return code


if __name__ == "__main__":
    sys.exit(_run())
