"""The one exception type the generator raises for bad input."""

from __future__ import annotations


class GeneratorError(Exception):
    """A problem with the input (a header, a spec file) that the user must fix.

    The message is one line: ``FILE:LINE: what is wrong (construct)`` where a location is known.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None) -> None:
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        super().__init__(where + message)
