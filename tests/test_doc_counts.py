"""The counts and install hints the README and the docs state, held to the tables they come from.

A count written in prose goes stale when a table grows: "the 15 array systems" beside a
spec/adapters.toml of 17, "all six" after the demo gained a seventh library. Each count below is found
in README.md and docs/**/*.md (digits or words, any case) and compared with the table it counts:

- "N array systems", "N systems": the rows of spec/adapters.toml;
- "N cells", "N interop cells", "the matrix's N cells": noxfile.py's INTEROP_SYSTEMS, and "M of the
  matrix's N cells": M of them on Python 3.11;
- the demo's "matrix of all N" and the libraries it says `nox -s demo` installs: noxfile.py's DEMO_LIBS;
- "N DLPack headers": spec/headers.toml; "N producer and M consumer checks": dlbind.testing's lists.

And every `pip install` of a backend the docs show follows ``dlbind._backends.PUBLISHED``, the one switch
of the hints dlbind prints: until the backends are published, an extra (`pip install "dlbind[cuda]"`)
appears only beside "once published"; after, "once published" is gone.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty", "twenty-one",
         "twenty-two", "twenty-three", "twenty-four", "twenty-five"]  # fmt: skip
NUMBER = r"(\d+|" + "|".join(sorted(WORDS, key=len, reverse=True)) + r")"


def _number(text: str) -> int:
    return int(text) if text.isdigit() else WORDS.index(text.lower())


def _pages() -> dict[str, str]:
    """README.md and docs/**/*.md (not the built site; not the changelog, which is history), by path."""
    paths = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {
        str(p.relative_to(ROOT)): p.read_text(encoding="utf-8")
        for p in paths
        if "_build" not in p.parts and p.name != "changelog.md"
    }


def _noxfile() -> dict[str, ast.expr]:
    """The module-level assignments of noxfile.py, as expressions (read, never imported: nox is not needed)."""
    tree = ast.parse((ROOT / "noxfile.py").read_text(encoding="utf-8"))
    out: dict[str, ast.expr] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            out[node.targets[0].id] = node.value
    return out


def _adapters() -> dict[str, dict[str, object]]:
    rows = tomllib.loads((ROOT / "spec/adapters.toml").read_text(encoding="utf-8"))
    return {name: row for name, row in rows.items() if isinstance(row, dict) and "module" in row}


def _cells() -> list[tuple[str, str]]:
    """(system, Python) of each cell of the interop matrix (noxfile.py's INTEROP_SYSTEMS)."""
    cells = []
    for call in _noxfile()["INTEROP_SYSTEMS"].elts:  # type: ignore[attr-defined]
        assert isinstance(call, ast.Call), ast.dump(call)
        python = next((ast.literal_eval(k.value) for k in call.keywords if k.arg == "python"), "3.11")
        cells.append((ast.literal_eval(call.args[0]), python))
    return cells


def _demo_systems() -> list[str]:
    """The array systems `nox -s demo` installs (noxfile.py's DEMO_LIBS), as spec/adapters.toml names them: a
    distribution's name, its extras and pin dropped, is the system's or ends with it (apache-tvm-ffi: tvm_ffi);
    ml_dtypes is no array system (it adds dtypes to numpy)."""
    systems = []
    for pin in ast.literal_eval(_noxfile()["DEMO_LIBS"]):
        dist = re.split(r"[\[=<>!~ ]", pin, maxsplit=1)[0].replace("-", "_")
        found = [name for name in _adapters() if dist == name or dist.endswith("_" + name)]
        assert found or dist == "ml_dtypes", f"DEMO_LIBS installs {pin}, no system of spec/adapters.toml"
        systems += found
    return systems


def _flat(text: str) -> tuple[str, list[int]]:
    """``text`` with each run of white space one space (a phrase may wrap), and the line of each character."""
    chars: list[str] = []
    lines: list[int] = []
    line = 1
    for ch in text:
        if ch.isspace() and chars and chars[-1] == " ":
            line += ch == "\n"
            continue
        chars.append(" " if ch.isspace() else ch)
        lines.append(line)
        line += ch == "\n"
    return "".join(chars), lines


def _stated(pattern: str) -> list[tuple[str, int, re.Match[str]]]:
    """(page, line, match) of every place ``pattern`` matches, across line breaks."""
    found = []
    for page, text in _pages().items():
        flat, lines = _flat(text)
        found += [(page, lines[m.start()], m) for m in re.finditer(pattern, flat, flags=re.IGNORECASE)]
    return found


def test_the_tables_are_read() -> None:
    assert len(_adapters()) >= 17 and "numpy" in _adapters()
    assert len(_cells()) >= 21 and ("numpy", "3.12") in _cells()
    assert {"numpy", "torch", "pyarrow"} <= set(_demo_systems())


def test_counts_of_systems_are_the_rows_of_spec_adapters() -> None:
    want = len(_adapters())
    found = _stated(rf"\b{NUMBER} (?:array )?systems\b")
    assert found, "no count of systems found: the pattern is stale"
    wrong = [f"{page}:{line}: {m.group(0)!r}" for page, line, m in found if _number(m.group(1)) != want]
    assert not wrong, f"spec/adapters.toml has {want} systems; these say otherwise: {wrong}"


def test_the_interop_matrix_is_every_verified_system() -> None:
    """README: the matrix runs "every verified system of spec/adapters.toml at each of its pinned versions", and
    systems of device arrays only (no host imports: CuPy) whose library installs without their device."""
    rows = _adapters()
    verified = {name for name, row in rows.items() if row.get("verified")}
    cells = {system for system, _ in _cells()}
    assert verified <= cells
    device_only = {name for name in cells - verified if "cpu" not in rows[name].get("import", {}).get("devices", [])}
    assert cells - verified == device_only, "an unverified system in the matrix that holds host arrays"


def test_counts_of_cells_are_the_interop_matrix() -> None:
    cells = _cells()
    on_311 = sum(1 for _, python in cells if python == "3.11")
    found = _stated(rf"\b{NUMBER} (?:interop )?cells\b")
    assert found, "no count of cells found: the pattern is stale"
    wrong = [f"{page}:{line}: {m.group(0)!r}" for page, line, m in found if _number(m.group(1)) != len(cells)]
    for page, line, m in _stated(rf"\b{NUMBER} of the matrix's {NUMBER} cells"):
        if _number(m.group(1)) != on_311:
            wrong.append(f"{page}:{line}: {m.group(0)!r} (Python 3.11 has {on_311})")
    assert not wrong, f"noxfile.py's INTEROP_SYSTEMS has {len(cells)} cells; these say otherwise: {wrong}"


def test_what_the_demo_installs_and_prints() -> None:
    demo = _demo_systems()
    found = _stated(rf"\bmatrix of all {NUMBER}\b")
    assert found, "the quickstart no longer counts the demo's libraries: update this test"
    wrong = [f"{page}:{line}: {m.group(0)!r}" for page, line, m in found if _number(m.group(1)) != len(demo)]
    assert not wrong, f"the demo installs {len(demo)} systems ({', '.join(demo)}); these say otherwise: {wrong}"
    listed = _stated(r"nox -s demo`?\s*(?:#\s*)?installs ([^;]*?)(?:;| and prints)")
    assert len(listed) >= 2, "README and the quickstart say what the demo installs"
    for page, line, m in listed:
        missing = [name for name in demo if name.replace("_", "-") not in m.group(1)]
        assert not missing, f"{page}:{line}: the demo also installs {', '.join(missing)}: {m.group(0)!r}"


def test_counts_of_headers_and_checks() -> None:
    """The DLPack headers the tests fetch ("the six DLPack headers"): spec/headers.toml's entries; the checks
    ("33 producer and 31 consumer checks"): dlbind.testing's lists."""
    from dlbind.testing import CONSUMER_CHECKS, PRODUCER_CHECKS

    headers = tomllib.loads((ROOT / "spec/headers.toml").read_text(encoding="utf-8"))["header"]
    wrong = [
        f"{page}:{line}: {m.group(0)!r} (spec/headers.toml lists {len(headers)})"
        for page, line, m in _stated(rf"\b{NUMBER} DLPack headers\b")
        if _number(m.group(1)) != len(headers)
    ]
    checks = _stated(rf"\b{NUMBER} producer and {NUMBER} consumer checks\b")
    assert checks, "no count of the checks found: the pattern is stale"
    wrong += [
        f"{page}:{line}: {m.group(0)!r} ({len(PRODUCER_CHECKS)} and {len(CONSUMER_CHECKS)})"
        for page, line, m in checks
        if (_number(m.group(1)), _number(m.group(2))) != (len(PRODUCER_CHECKS), len(CONSUMER_CHECKS))
    ]
    assert not wrong, wrong


def test_where_memoryview_is_shown_the_way_out_is_too() -> None:
    """The pure build's ``memoryview(t)`` needs Python 3.12 (before, CPython itself refuses: "a bytes-like object
    is required"): every page that shows it names ``asarray(t)`` (numpy's) beside it, the way out everywhere."""
    wrong = []
    for page, text in _pages().items():
        flat, lines = _flat(text)
        for m in re.finditer(r"memoryview\(t\)", flat):
            if "asarray(t)" not in flat[max(0, m.start() - 300) : m.end() + 400]:
                wrong.append(f"{page}:{lines[m.start()]}")
    assert not wrong, f"memoryview(t) shown without numpy.asarray(t) as the way out before Python 3.12: {wrong}"


def test_install_hints_follow_the_one_switch() -> None:
    from dlbind._backends import PUBLISHED, install_hint

    assert ("dlbind[cuda]" in install_hint("cuda")) is PUBLISHED
    pages = {
        **_pages(),
        **{str(p.relative_to(ROOT)): p.read_text(encoding="utf-8") for p in ROOT.glob("packages/*/README.md")},
    }
    wrong = []
    for page, text in pages.items():
        flat, lines = _flat(text)
        for m in re.finditer(r"pip install [\"']dlbind\[(\w+)\][\"']", flat):
            beside = flat[max(0, m.start() - 160) : m.end() + 20]
            if not PUBLISHED and "once published" not in beside:
                wrong.append(f"{page}:{lines[m.start()]}: {m.group(0)} (not published: say the path in a clone)")
        if PUBLISHED and "once published" in flat:
            wrong.append(f"{page}: says 'once published', and dlbind._backends.PUBLISHED says they are")
    assert not wrong, wrong


def _targets(listed: str) -> set[str]:
    """The systems a list in a page names (``jax, tvm-ffi and numba``; ``Dr.Jit (drjit)``), by their rows' names;
    a word that names no row fails, so a list cannot hide a name the rows do not know."""
    from dlbind._generated.adapters import ADAPTERS

    names = set()
    for word in re.split(r",\s*|\s+and\s+|\s+or\s+", listed.strip()):
        name = re.sub(r"^.*\((\w+)\)$", r"\1", word.strip()).replace("-", "_")
        assert name in ADAPTERS, f"{word!r} (in {listed!r}) is no system of spec/adapters.toml"
        names.add(name)
    return names


def test_lists_of_targets_are_the_rows_that_say_so() -> None:
    """Where a page lists the targets a rule of their rows applies to (those that drop ``byte_offset``, ignore the
    read-only flag, take compact strides only), the list is every row that says so: a row changed or added in
    spec/adapters.toml makes the page wrong, and this test says which list and which systems."""
    from dlbind._generated.adapters import ADAPTERS, Layout, Readonly

    def having(test: Any) -> set[str]:
        return {name for name, row in ADAPTERS.items() if test(row.import_)}

    compact = having(lambda i: i.layout == Layout.COMPACT)
    nonnegative = having(lambda i: i.layout == Layout.NONNEGATIVE)
    writable = having(lambda i: i.readonly == Readonly.IGNORED)
    no_offset = having(lambda i: not i.byte_offset)
    viewed = having(lambda i: bool(i.lacks_dtypes and i.view_with))
    lacking = having(lambda i: bool(i.lacks_dtypes and not i.view_with))
    narrowing = having(lambda i: bool(i.narrows))
    rules = [  # a pattern whose groups are lists, and the rows each must name
        (r"anything but compact row-major strides \(([^)]*)\)", [compact]),
        (r"the target would import it writable \(([^)]*)\)", [writable]),
        (r"`byte_offset` that the target drops \(([^)]*)\)", [no_offset]),
        (r"\| ([^|]*) / ([^|]*) \| strides other than compact / negative strides", [compact, nonnegative]),
        (r"\| ([^|]*) \| a nonzero `byte_offset`", [no_offset]),
        (r"\| ([^|]*) \| read-only data, imported writable", [writable]),
        (r"in the target's row of `spec/adapters.toml`: ([^)]*)\)", [writable]),
        (r"\| ([^|]*) / ([^|]*) \| some dtypes \(`lacks_dtypes`", [viewed, lacking]),
        (r"\| ([^|]*) \| 64-bit dtypes, narrowed", [narrowing]),
    ]
    wrong = []
    for pattern, wants in rules:
        found = _stated(pattern)
        assert found, f"no page says {pattern!r} any more: update this test"
        for page, line, m in found:
            for listed, want in zip(m.groups(), wants, strict=True):
                named = _targets(listed)
                if named != want:
                    says = [f"lacks {', '.join(sorted(want - named))}"] if want - named else []
                    says += [f"wrongly names {', '.join(sorted(named - want))}"] if named - want else []
                    wrong.append(f"{page}:{line}: {listed!r} {' and '.join(says)}")
    assert not wrong, wrong
