"""The generator's Jinja templates, one per output (``enums.py.j2`` -> ``enums.py``).

This folder stays at ``generator/templates`` in the checkout; ``generator/pyproject.toml`` maps it to the
package ``dlbind_generator.templates`` so that an installed generator finds the templates as package data
(``importlib.resources``). It holds no code.
"""
