"""``nox -s interop_report``: docs/interop.md from spec/adapters.toml and the last run of the matrix.

Every system: how its arrays leave (export) and how it takes DLPack (import), as the planner acts on
them — zero-copy, or a copy and why, or refused and why — with each quirk's upstream reference; then
every cell of the matrix (system x version, both builds): the tests that ran and the gaps that remain.
Only facts and counts, no timings, so the page is the same for the same run and can be diffed in CI.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "docs" / "interop.md"
CACHE = ROOT / ".cache" / "interop"
GPU_RESULTS = ROOT / "benchmarks" / "results" / "gpu-h200"  # the last .ci/gpu run on a GPU (noxfile.py's too)
sys.path.insert(0, str(ROOT / "generator" / "src"))  # the generator's reader: the rows with their defaults

from dlbind_generator.adapters import AdapterSpec, load_adapters  # noqa: E402

# the rule a row's import.bool and import.copy add, by value (the others add none)
_BOOL_RULES = {
    "uint1": "bool handed over as its legacy `(kDLUInt, 1, 1)`, a byte per element (zero-copy)",
    "uint8": "bool handed over as uint8 from a producer whose `dtype.name` is `bool` (zero-copy)",
    "packed": "copy: bool, packed into bits by its importer (`copy=False` refused)",
}
_COPY_RULES = {
    "always": "always copies: `copy=False` refused (BufferError)",
    "ignored": "`copy=True`: dlbind copies (its own `copy=True` shares)",
}


def _import_rules(f: dict[str, Any], immutable: bool) -> list[str]:
    """How a system takes DLPack, rule by rule: what it asks for, the layouts, read-only data, ``copy=``, the dtypes
    and devices it lacks, bool, its setup and its ``device=``."""
    rules = [_takes(f), *_layout_rules(f), *_readonly_rules(f, immutable), *_copy_rules(f), *_dtype_rules(f)]
    if f["copy_from"]:
        rules.append(
            f"copy: {', '.join(f['copy_from'])} data (it holds no arrays there), by `{f['copy_with']}` onto its "
            f"{f['devices'][0]} device 0: `copy=False` refused"
        )  # fmt: skip
    if f["import_bool"] in _BOOL_RULES:
        rules.append(_BOOL_RULES[f["import_bool"]])
    if f["import_setup"]:
        rules.append(f"`{f['import_setup']}()` called once before its first import")
    device = f["device_form"]
    rules.append(
        "`device=`: none (only the source's device)" if device == "none"
        else "`device=`: its array API namespace's device object" if device == "namespace"
        else f"`device=` as `{device}`"
    )  # fmt: skip
    return rules


def _takes(f: dict[str, Any]) -> str:
    """What its ``from_dlpack`` takes, and how it calls a producer's ``__dlpack__``."""
    takes = {"producer": "takes a producer", "capsule": "takes a capsule only", "ndarray": "takes a numpy array"}
    called = ", ".join(f"{k}={v!r}" for k, v in f["function_keywords"])
    return takes[f["takes"]] + (f" (called with {called})" if called else "") + {
        "versioned": ", asks for versioned capsules", "legacy": ", never sends max_version (legacy capsules)",
        "bare": ", calls `__dlpack__()` with no keywords",
    }[f["asks"]]  # fmt: skip


def _layout_rules(f: dict[str, Any]) -> list[str]:
    """The shapes, strides and byte offsets it takes without a copy (and through its N-D importer)."""
    rules = []
    if f["from_dlpack_nd"]:
        rules.append(f"1-D data only; every other shape through `{f['from_dlpack_nd']}`")
    if f["layout"] == "compact":
        rules.append("copy: strides that are not compact row-major")
    elif f["layout"] == "nonnegative":
        rules.append("copy: negative strides")
    if f["from_dlpack_nd"] and f["layout_nd"] and f["layout_nd"] != f["layout"]:
        rules.append(f"`{f['from_dlpack_nd']}`: copy: " + {"compact": "strides that are not compact row-major",
                     "nonnegative": "negative strides", "any": "none"}[f["layout_nd"]])  # fmt: skip
    if f["ndims"]:
        rules.append(f"refused (BufferError): fewer than {f['ndims'][0]} or more than {f['ndims'][1]} dimensions")
    if not f["byte_offset"]:
        rules.append("copy: a nonzero `byte_offset` (it ignores or refuses it)")
    return rules


def _readonly_rules(f: dict[str, Any], immutable: bool) -> list[str]:
    """What becomes of read-only data: copied, or handed over as a legacy capsule where that is safe."""
    if f["readonly"] == "ignored":  # copied whatever it asks
        return ["copy: read-only data (it would import it writable)"]
    if f["asks"] == "versioned":
        return []
    # as dlbind.routes's legacy_safe and bridges.needs_copy decide
    if f["readonly"] == "always":
        return ["read-only data: a legacy capsule (it imports every capsule read-only)"]
    if immutable and f["export_capsules"] == "versioned":
        return ["read-only data: a legacy capsule (its arrays are immutable)"]
    if immutable:
        return ["copy: read-only data (its exports are unmarked legacy capsules, writable to every consumer)"]
    return ["copy: read-only data (a legacy capsule cannot say read-only)"]


def _copy_rules(f: dict[str, Any]) -> list[str]:
    """What its ``copy=`` does, and the alignment ``copy=False`` needs."""
    rules = [_COPY_RULES[f["copy"]]] if f["copy"] in _COPY_RULES else []
    if f["alignment"]:
        rules.append(f"`copy=False` refused for data not {f['alignment']}-byte aligned")
    return rules


def _dtype_rules(f: dict[str, Any]) -> list[str]:
    """The dtypes it lacks: viewed as others, or refused (by its N-D importer too)."""
    rules = []
    if f["by_dtype"]:
        types = ", ".join(f"{name} `{fn}`" for name, fn in f["by_dtype"])
        rules.append(f"an importer per dtype ({types}); every other dtype refused (BufferError naming it)")
    viewed = [name for name in f["lacks_dtypes"] if name not in f["view_lacks"]] if f["view_with"] else []
    refused = [name for name in f["lacks_dtypes"] if name not in viewed]
    refused += [name for name in f["view_lacks"] if name not in refused]  # a viewed pattern's exceptions
    if viewed:
        rules.append(f"through `{f['view_with']}`: {', '.join(viewed)}")
    if refused:
        rules.append(f"refused (BufferError naming the dtype): {', '.join(refused)}")
    if f["lacks_dtypes_nd"]:
        lacks = ", ".join(f["lacks_dtypes_nd"])
        rules.append(f"refused by `{f['from_dlpack_nd']}` (BufferError naming the dtype): {lacks}")
    if f["narrows"]:
        into = ", ".join(f"{ours} to {theirs}" for ours, theirs in f["narrows"])
        unless = f" while `{f['narrows_unless']}` is off" if f["narrows_unless"] else ""
        rules.append(f"copy: its importer narrows {into}{unless} (`copy=False` refused)")
    return rules


def _export_rules(f: dict[str, Any], immutable: bool) -> list[str]:
    via = f["export_via"]
    rules = ["`__dlpack__`" if via == "__dlpack__" else f"`{via}`" + (" (a method)" if via.endswith("()") else "")]
    if f["export_via_keywords"]:
        rules[0] += " with " + ", ".join(f"{k}={v!r}" for k, v in f["export_via_keywords"])
    if f["export_refuses_copy"]:
        rules.append("its `__dlpack__` refuses `copy=True`: asked without it, dlbind copies the import")
    if f["export_host"]:
        rules.append(f"a host copy by `{f['export_host']}` where that refuses")
    if f["export_guards"]:
        rules.append(f"refused by dlbind (BufferError) when {', '.join(f'`{g}`' for g in f['export_guards'])}")
    if f["export_refusal"] == "TypeError":
        rules.append("its refusals (TypeError) become BufferError")
    for words, what in f["export_refusal_help"]:
        rules.append(f"refused for {words!r}: the message says what to do ({what})")
    if f["export_bool"] == "uint1":
        rules.append("bool as a legacy `(kDLUInt, 1, 1)`: read as bool, a byte per element")
    elif f["export_bool"] == "uint8":
        rules.append(f"bool as uint8: read as bool when `{f['export_dtype']}` is `{f['export_bool_name']}`")
    if immutable:
        rules.append("imported read-only (its arrays are immutable)")
    return rules


# an upstream issue as the row cites it ("owner/repo#N"): a link to it on GitHub (.ci/links.py wants no bare one)
_UPSTREAM = re.compile(r"\b([\w.-]+/[\w.-]+)#(\d+)\b")


def _linked(ref: str) -> str:
    """A quirk's reference with each upstream issue it cites written as a link."""
    return _UPSTREAM.sub(r"[\1#\2](https://github.com/\1/issues/\2)", ref)


def render(cells: list[tuple[str, str, str]]) -> str:
    """docs/interop.md: every system's rules, the matrix's cells and the gaps that remain, the last GPU run."""
    rows = load_adapters(ROOT / "spec" / "adapters.toml")
    lines = [
        "# Interop: every system, every version the matrix runs",
        "",
        "Generated by `nox -s interop_report` from `spec/adapters.toml` and the last run of the interop",
        "matrix (`nox -t interop`); `.ci/interop` regenerates it and fails when it differs. Do not edit.",
        "",
        "Every cell runs `tests/interop/` (both directions between the system and dlbind, numpy and torch",
        "where it installs beside it) on the compiled and the pure build. Without `copy=True`, every route",
        "is zero-copy unless a rule below says copy; with `copy=False`, each of those copies is a",
        "`BufferError` naming why.",
        "",
        *_systems(rows),
    ]
    matrix, gaps = _matrix(cells)
    lines += matrix
    lines += _gaps(gaps)
    lines += [
        "",
        "Pairs that cannot be installed together are untested: mxnet (numpy 1.23), mindspore (numpy 1.26),",
        "numba, tinygrad and dpnp cells carry no torch; jax and numpy's newest (Python 3.12) neither.",
        "",
    ]
    lines += gpu_section()
    return "\n".join(lines)


def _systems(rows: list[AdapterSpec]) -> list[str]:
    """The table of systems: how each one's arrays leave, how it takes DLPack, whether it is verified, its quirks."""
    lines = [
        "## Systems",
        "",
        "| system | its arrays to DLPack | DLPack to its arrays | verified | quirks (upstream) |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        quirks = "; ".join(f"{q.text} ({_linked(q.ref)})" for q in row.quirks) or "none"
        when = "; ".join(
            f"{versions}: " + ", ".join(f"{key} = {value!r}" for key, value in overrides)
            for versions, overrides in row.when
        )
        imp = "<br>".join(_import_rules(row.facts, row.immutable))
        if when:
            imp += f"<br>releases {when}"
        lines.append(
            f"| {row.name} (`{row.import_name}`) | {'<br>'.join(_export_rules(row.facts, row.immutable))} | "
            f"`{row.facts['from_dlpack']}`: {imp} | {'yes' if row.verified else 'no'} | {quirks} |"
        )
    return lines


def _matrix(cells: list[tuple[str, str, str]]) -> tuple[list[str], dict[str, dict[str, str]]]:
    """The table of the matrix's cells with each build's counts, and the gaps by cell (test: why); exits naming the
    cells that have not run."""
    lines = [
        "",
        "## The matrix",
        "",
        "| system | version | pins | compiled build | pure build |",
        "|---|---|---|---|---|",
    ]
    gaps: dict[str, dict[str, str]] = {}
    missing = []
    for system, version, pins in cells:
        runs = []
        for pure in ("0", "1"):
            path = CACHE / f"{system}-{version}" / f"tests-pure{pure}.json"
            if not path.exists():
                missing.append(f"{system} {version}")
                runs.append("not run")
                continue
            data = json.loads(path.read_text())
            runs.append(f"{data['passed']} passed, {data['xfailed']} gaps, {data['skipped']} skipped"
                        + (f", **{data['failed']} failed**" if data.get("failed") else ""))  # fmt: skip
            for test, why in data.get("gaps", {}).items():
                gaps.setdefault(f"{system} {version}", {})[test] = why
        lines.append(f"| {system} | {version} | `{pins}` | {runs[0]} | {runs[1]} |")
    if missing:
        sys.exit(f"interop_report: no run of {', '.join(sorted(set(missing)))}: run `nox -t interop` first")
    return lines, gaps


def _gaps(gaps: dict[str, dict[str, str]]) -> list[str]:
    """The gaps that remain, by cell."""
    lines = ["", "## Gaps that remain (strict xfails: a fixed gap fails its cell until it is removed)", ""]
    if not gaps:
        lines.append("None.")
    for cell, tests in gaps.items():
        lines.append(f"- **{cell}**")
        for test, why in tests.items():
            lines.append(f"  - `{test}`: {why}")
    return lines


def _steps(summary: Path) -> dict[str, str]:
    """The lines of a .ci/gpu summary.txt by step name."""
    lines = [line.removeprefix("gpu: ").strip() for line in summary.read_text(encoding="utf-8").splitlines()]
    return {line.partition(":")[0]: line for line in lines if line}


def gpu_section() -> list[str]:
    """The last `.ci/gpu` run on a GPU, kept in benchmarks/results/: the card, each step's result, and torch's own
    test_dlpack.py with dlbind as consumer and as producer beside torch's native run."""
    bench = json.loads((GPU_RESULTS / "bench.json").read_text())
    steps = _steps(GPU_RESULTS / "summary.txt")
    rerun = GPU_RESULTS / "summary-rerun.txt"  # DLBIND_GPU_STEPS: the steps run again after a fix, on the same card
    if rerun.exists():
        again = {
            name: f"{line} (rerun)" for name, line in _steps(rerun).items() if "(not in DLBIND_GPU_STEPS)" not in line
        }
        steps = {name: again.get(name, line) for name, line in steps.items()}
    steps.pop("total", None)  # the run's own time and where it left its logs: not a step
    lines = [
        "## On a GPU",
        "",
        f"The last run of `.ci/gpu` on one **{bench['gpu']}** ({bench.get('date', 'an unrecorded day')}; "
        f"{bench['versions']}), kept in `{GPU_RESULTS.relative_to(ROOT)}` (docs/gpu.md: how to run it):",
        "",
    ]
    lines += [f"- {line}" for line in steps.values()]
    runs = sorted(GPU_RESULTS.glob("torch-dlpack-*.json"))
    if runs:
        records = [json.loads(p.read_text()) for p in runs]
        order = {"native": 0, "consumer": 1, "producer": 2}
        records.sort(key=lambda r: (order[r["role"]], r["build"]))
        native = next((r for r in records if r["role"] == "native"), None)
        lines += [
            "",
            f"torch's own `test/test_dlpack.py` (its CUDA tests, torch {records[0]['torch']}), run by "
            "`tests/gpu/torch_suite.py`: torch alone, then with `torch.from_dlpack(x)` made "
            "`torch.from_dlpack(dlbind.from_dlpack(x))` (dlbind the consumer) and "
            "`torch.from_dlpack(dlbind.asdlpack(x))` (dlbind the producer). *Through dlbind*: the tests that made "
            "at least one exchange through it; the others test torch's own `__dlpack__` checks.",
            "",
            "| role | build | passed | through dlbind | failed | listed differences | skipped |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in records:
            build = "" if r["role"] == "native" else r["build"]
            through = "" if r["role"] == "native" else str(r["through_dlbind"])
            lines.append(
                f"| {r['role'] if r['role'] != 'native' else 'torch alone'} | {build} | {r['passed']} | {through} | "
                f"{r['failed']} | {r['xfailed']} | {r['skipped']} |"
            )
        if native is not None:
            lines += ["", f"torch alone passed {native['passed']}; every difference from it is listed here:", ""]
        differences = {}
        for r in records:
            for test, why in r.get("differences", {}).items():
                differences.setdefault(test, (set(), why))[0].add(f"{r['role']} ({r['build']})")
        for test, (where, why) in sorted(differences.items()):
            lines.append(f"- `{test}` ({', '.join(sorted(where))}): {why}")
        if not differences:
            lines.append("- none")
    lines.append("")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cells", nargs="+", required=True, help="SYSTEM|VERSION|PINS of every matrix cell")
    parser.add_argument("rest", nargs="*")
    args = parser.parse_args(argv)
    check = "--check" in args.rest
    cells = [tuple(c.split("|", 2)) for c in args.cells]
    text = render(cells)  # type: ignore[arg-type]
    if check:
        old = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if old != text:
            import difflib

            sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), text.splitlines(True), str(OUT), "run"))
            print("docs/interop.md differs from the matrix run: run `nox -s interop_report` and commit it")
            return 1
        print("docs/interop.md matches the matrix run")
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
