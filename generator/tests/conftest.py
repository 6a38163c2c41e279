from __future__ import annotations

import sys
from pathlib import Path

import pytest
from listed_headers import ROOT

from dlbind_generator.fetch import fetch_all
from dlbind_generator.pipeline import Paths
from dlbind_generator.sources import load_sources


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


@pytest.fixture(scope="session")
def headers() -> dict[tuple[int, ...], Path]:
    """Every header of spec/headers.toml by release, fetched and verified (downloads once, then cached)."""
    paths = Paths(ROOT)
    return fetch_all(load_sources(paths.headers_toml), paths.cache, lambda m: print(m, file=sys.stderr))
