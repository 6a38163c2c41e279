"""What a name that does not resolve was probably meant to be: the suggestion every "unknown ..." error ends with."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["suggestion"]


def suggestion(name: str, known: Iterable[str]) -> str:
    """``" (did you mean 'torch'?)"`` for a ``name`` close to some of ``known`` (``"pytorch"``, ``"bfloat"``,
    ``"cuda1"``), else ``""``: said right after the name in an error. The known names it holds, or that begin with
    it, come first (at most three: ``"float"`` is float16, float32 or float64), else the closest
    spelling; a name of three letters or fewer is only matched that way (``"gpu"`` is not ``"cpu"``)."""
    names = list(dict.fromkeys(known))
    text = name.strip().lower()
    found = [k for k in names if len(k) > 2 and len(text) > 2 and (k in text or k.startswith(text))]
    found.sort(key=lambda k: abs(len(k) - len(text)))
    if not found and len(text) > 3:
        found = difflib.get_close_matches(text, names, 1, cutoff=0.75)
    if not found:
        return ""
    quoted = [repr(k) for k in found[:3]]
    said = quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"
    return f" (did you mean {said}?)"
