"""spec/headers.toml's and spec/history.toml's loaders: every key is known and every value of its type, so a typo
(``[[headers]]``, ``[sinse]``) or an unquoted version (``version = 1.10``, release 1.1 as a float) is an error
naming the file, the entry and the key, never an entry silently dropped or a value silently converted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dlbind_generator.errors import GeneratorError
from dlbind_generator.merge import load_history
from dlbind_generator.sources import load_sources

SHA = "0" * 64
HEADERS = f"""\
canonical = "1.3"

[[header]]
version = "1.3"
package = "pkg"
package_version = "1.0"
file = "pkg-1.0.tar.gz"
path = "pkg-1.0/dlpack.h"
sha256 = "{SHA}"
"""

HISTORY = """\
releases = ["0.1", "1.3"]

[since]
"DLTensor" = "0.1"

[removed]
"DLContext" = "0.5"

[renamed]
"DLDevice" = { from = "DLContext", in = "0.4" }
"""


def _written(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sources(tmp_path: Path, text: str) -> Path:
    return _written(tmp_path, "headers.toml", text)


def _changed(text: str, old: str, new: str) -> str:
    assert old in text  # the case still edits what it means to
    return text.replace(old, new, 1)


def _refused(load: Callable[[], object], message: str) -> None:
    with pytest.raises(GeneratorError, match=message):
        load()


def test_a_well_formed_headers_toml_loads(tmp_path: Path) -> None:
    sources = load_sources(_sources(tmp_path, HEADERS))
    assert sources.canonical == (1, 3) and sources.headers[0].path == "pkg-1.0/dlpack.h"


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("[[header]]", "[[headers]]", r"headers.toml: unknown key\(s\) headers; known: `canonical` and the \[\[header"),
        ('canonical = "1.3"', 'canonical = "1.3"\ncanonnical = "1.3"', r"unknown key\(s\) canonnical"),
        ('canonical = "1.3"', "canonical = 1.30", r"headers.toml: canonical must be a string \(in quotes\), not 1.3"),
        ('version = "1.3"', "version = 1.3", r"headers.toml \[\[header\]\] #1: version must be a string .*not 1.3$"),
        ('path = "pkg-1.0/dlpack.h"', "path = 7", r"headers.toml \[\[header\]\] #1: path must be a string .*not 7$"),
        ('file = "pkg-1.0.tar.gz"', "file = ['a']", r"#1: file must be a string"),
        (f'sha256 = "{SHA}"', "sha256 = 12", r"#1: sha256 must be a string .*not 12$"),
    ],
)  # fmt: skip
def test_bad_headers_toml_is_an_error(tmp_path: Path, old: str, new: str, message: str) -> None:
    _refused(lambda: load_sources(_sources(tmp_path, _changed(HEADERS, old, new))), message)


def test_a_header_key_that_is_no_array_of_tables_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match=r"headers.toml: `header` must be an array of tables"):
        load_sources(_sources(tmp_path, 'canonical = "1.3"\nheader = "x"\n'))


def test_a_post_release_date_is_a_date_or_its_iso_string(tmp_path: Path) -> None:
    post = HEADERS + HEADERS.split("\n\n", 1)[1].replace('"1.3"', '"1.3.post1"').replace("0" * 64, "1" * 64)
    assert load_sources(_sources(tmp_path, post + "date = 2025-01-02\n")).headers[1].date == "2025-01-02"
    assert load_sources(_sources(tmp_path, post + 'date = "2025-01-02"\n')).headers[1].date == "2025-01-02"
    with pytest.raises(GeneratorError, match=r"#2: date must be a date \(YYYY-MM-DD\), not 20250102"):
        load_sources(_sources(tmp_path, post + "date = 20250102\n"))


def _history(tmp_path: Path, text: str) -> Path:
    return _written(tmp_path, "history.toml", text)


def test_a_well_formed_history_toml_loads(tmp_path: Path) -> None:
    history = load_history(_history(tmp_path, HISTORY))
    assert history.releases == ((0, 1), (1, 3)) and history.since == {"DLTensor": (0, 1)}
    assert history.removed == {"DLContext": (0, 5)} and history.renamed == {"DLDevice": ("DLContext", (0, 4))}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("[since]", "[sinse]", r"^history.toml: unknown key\(s\) or table\(s\) sinse; known: releases, since"),
        ('"DLTensor" = "0.1"', '"DLTensor" = 0.1',
         r"^history.toml \[since\] DLTensor: expected a version string .*not 0.1$"),
        ('"DLContext" = "0.5"', '"DLContext" = 5', r"^history.toml \[removed\] DLContext: expected a version string"),
        ('["0.1", "1.3"]', '["0.1", 1.3]', r"^history.toml releases: expected a version string .*not 1.3$"),
        ('["0.1", "1.3"]', '"0.1"', r"^history.toml: releases must be a list of versions"),
        ('in = "0.4"', "in = 0.4", r"^history.toml \[renamed\] DLDevice: expected a version string"),
        ('from = "DLContext"', "from = 1", r"^history.toml \[renamed\] DLDevice: each entry is \{ from = NAME"),
        ('in = "0.4" }', 'in = "0.4", by = "x" }', r"^history.toml \[renamed\] DLDevice: each entry is"),
        ("releases = ", "nothing = 1\nreleases = ", r"unknown key\(s\) or table\(s\) nothing"),
    ],
)  # fmt: skip
def test_bad_history_toml_is_an_error(tmp_path: Path, old: str, new: str, message: str) -> None:
    _refused(lambda: load_history(_history(tmp_path, _changed(HISTORY, old, new))), message)


def test_a_history_table_that_is_no_table_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(GeneratorError, match=r"^history.toml: \[removed\] must be a table, not 'x'$"):
        load_history(_history(tmp_path, 'removed = "x"\n'))
