"""Sphinx configuration of the dlbind docs (``nox -s docs``; warnings are errors)."""

project = "dlbind"
author = "the dlbind developers"
copyright = "2026, the dlbind developers"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.doctest"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
autodoc_member_order = "bysource"
html_theme = "alabaster"
myst_heading_anchors = 3
