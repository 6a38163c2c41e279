"""Sphinx configuration of the dlbind docs (``nox -s docs``; warnings are errors)."""

import doctest

project = "dlbind"
author = "the dlbind developers"
copyright = "2026, the dlbind developers"
release = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "sphinx.ext.doctest"]
# an example's exception is checked whole (Sphinx ignores the message after the type by default, so a page could show
# a message the code no longer gives); "..." stands for what may vary
doctest_default_flags = doctest.ELLIPSIS | doctest.DONT_ACCEPT_TRUE_FOR_1
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build"]
autodoc_member_order = "bysource"
# numpy's and CuPy's theme (JAX's book theme is built on it): wide code blocks scroll instead of being cut
html_theme = "pydata_sphinx_theme"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_title = "dlbind"
myst_heading_anchors = 3

# In the compiled build the public functions are the C fast path's: their docstrings and text signatures are
# the Python code's (dlbind._wiring), without its annotations. The docs document the public names with that
# code itself, annotations included (both builders read the API page: the doctests run that code too, which
# the parity tests hold to the C path's behaviour).
_SPECIFIED_BY = {
    "asdlpack": ("dlbind.producer", "asdlpack"),
    "from_pointer": ("dlbind.producer", "from_pointer"),
    "from_dlpack": ("dlbind.consumer", "from_dlpack"),
    "convert": ("dlbind.conversion", "convert"),
    "compat": ("dlbind.conversion", "compat"),
}


def _document_the_specifications(app):
    import importlib

    import dlbind

    assert dlbind.__all__  # loads the runtime now: loading later would publish the C functions over these
    for public, (module, attribute) in _SPECIFIED_BY.items():
        setattr(dlbind, public, getattr(importlib.import_module(module), attribute))


def setup(app):
    app.connect("builder-inited", _document_the_specifications)
