"""The DLPack releases spec/headers.toml lists, for the generator's tests (a module of its own: the tests import it
by name, which a ``conftest`` cannot be when the repository's other test folders have one too)."""

from __future__ import annotations

from pathlib import Path

from dlbind_generator.sources import load_sources

ROOT = Path(__file__).resolve().parents[2]
_SOURCES = load_sources(ROOT / "spec" / "headers.toml")
# Every DLPack release spec/headers.toml lists ((1, 3); a post-release (1, 3, 1)), and the canonical one:
# tests parametrised over the headers follow a bump without an edit.
LISTED = [h.release for h in _SOURCES.headers]
CANONICAL = _SOURCES.canonical
