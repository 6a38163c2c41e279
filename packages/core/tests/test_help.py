"""help() and inspect on the public callables, in both builds (issue 28, item 1).

The compiled build answers ``dlbind.convert``, ``from_dlpack`` and ``asdlpack`` with C functions; their
docstrings and ``__text_signature__`` are set when the runtime loads from the Python implementations
(``dlbind._wiring``), so that ``help()``, Jupyter's ``?``, IDE hovers and ``inspect.signature`` say what the
Python functions say.
"""

from __future__ import annotations

import inspect
import pydoc
from typing import Any

import pytest

import dlbind
import dlbind.testing
from dlbind import consumer, conversion, producer
from dlbind._wiring import text_signature

# the public names the compiled build answers in C, and the Python implementation each stands for
IMPLEMENTATIONS = {"asdlpack": producer.asdlpack, "from_dlpack": consumer.from_dlpack, "convert": conversion.convert}


def _public() -> list[tuple[str, Any]]:
    found = []
    for module in (dlbind, dlbind.testing):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and not (isinstance(obj, type) and issubclass(obj, int)):  # not the header's enums
                found.append((f"{module.__name__}.{name}", obj))
    return found


def _plain(sig: inspect.Signature) -> list[tuple[str, Any, Any]]:
    """A signature's parameters as (name, kind, default): what a C function's text signature can say."""
    return [(p.name, p.kind, p.default) for p in sig.parameters.values()]


@pytest.mark.parametrize(("name", "obj"), _public(), ids=[n for n, _ in _public()])
def test_every_public_callable_has_a_signature_and_a_doc(name: str, obj: Any) -> None:
    inspect.signature(obj)  # raises ValueError for a builtin without a text signature
    assert inspect.getdoc(obj), f"{name} has no docstring"
    assert name.rpartition(".")[2] in pydoc.plain(pydoc.render_doc(obj))


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_the_public_function_says_what_its_python_implementation_says(name: str) -> None:
    public, python = getattr(dlbind, name), IMPLEMENTATIONS[name]
    assert _plain(inspect.signature(public)) == _plain(inspect.signature(python))
    assert inspect.getdoc(public) == inspect.getdoc(python)
    shown = pydoc.plain(pydoc.render_doc(public))  # without the overstruck bold of Python 3.13's pydoc
    assert f"{name}(" in shown and inspect.getdoc(python).partition("\n")[0] in shown
    assert all(parameter in shown for parameter in inspect.signature(python).parameters)


def _sample(a: Any, /, b: Any, c: int = 1, *, d: Any, e: bool = False) -> None:
    """A signature with every kind of parameter."""


def test_text_signature_reads_every_kind_of_parameter() -> None:
    assert text_signature("f", _sample) == "f($module, a, /, b, c=1, *, d, e=False)"
    assert text_signature("g", conversion.convert) == "g($module, /, x, to, *, device=None, copy=None, stream=None)"
