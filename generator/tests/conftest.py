from __future__ import annotations

import sys
from pathlib import Path

import pytest

from dlbind_generator.fetch import fetch_all
from dlbind_generator.pipeline import Paths
from dlbind_generator.sources import load_sources

ROOT = Path(__file__).resolve().parents[2]
_SOURCES = load_sources(ROOT / "spec" / "headers.toml")
# Every DLPack release spec/headers.toml lists ((1, 3); a post-release (1, 3, 1)), and the canonical one:
# tests parametrised over the headers follow a bump without an edit.
LISTED = [h.release for h in _SOURCES.headers]
CANONICAL = _SOURCES.canonical


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def headers() -> dict[tuple[int, ...], Path]:
    """Every header of spec/headers.toml by release, fetched and verified (downloads once, then cached)."""
    paths = Paths(ROOT)
    return fetch_all(load_sources(paths.headers_toml), paths.cache, lambda m: print(m, file=sys.stderr))
