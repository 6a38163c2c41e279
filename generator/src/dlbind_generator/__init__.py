"""dlbind-generator: turns the canonical ``dlpack.h`` into the generated part of dlbind.

Stages (one module each): :mod:`.fetch` -> :mod:`.preprocess` -> :mod:`.parse` -> :mod:`.model`
(+ :mod:`.merge`) -> :mod:`.render` -> :mod:`.emit`.  :mod:`.__main__` is the only writer.
"""

__version__ = "0.1.0"
