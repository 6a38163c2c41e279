"""help() and inspect on the public callables, in both builds (issue 28, item 1).

The compiled build answers ``dlbind.convert``, ``from_dlpack`` and ``asdlpack`` in C, through functions of its own
type (``dlbind._fastpath.Function``) whose ``__wrapped__`` is the Python implementation, so that ``help()``,
Jupyter's ``?``, IDE hovers and ``inspect.signature`` say what the Python functions say, annotations included
(issue 45).
"""

from __future__ import annotations

import inspect
import pydoc
import re
from typing import Any

import pytest

import dlbind
import dlbind.testing
from dlbind import consumer, conversion, producer

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


@pytest.mark.parametrize(("name", "obj"), _public(), ids=[n for n, _ in _public()])
def test_every_public_callable_has_a_signature_and_a_doc(name: str, obj: Any) -> None:
    inspect.signature(obj)  # raises ValueError for a builtin without a text signature
    assert inspect.getdoc(obj), f"{name} has no docstring"
    assert name.rpartition(".")[2] in pydoc.plain(pydoc.render_doc(obj))


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_the_public_function_says_what_its_python_implementation_says(name: str) -> None:
    public, python = getattr(dlbind, name), IMPLEMENTATIONS[name]
    assert inspect.signature(public) == inspect.signature(python)  # annotations and return annotation included
    assert inspect.getdoc(public) == inspect.getdoc(python)
    assert (public.__name__, public.__qualname__, public.__module__) == (name, name, python.__module__)
    shown = pydoc.plain(pydoc.render_doc(public))  # without the overstruck bold of Python 3.13's pydoc
    assert f"{name}(" in shown and inspect.getdoc(python).partition("\n")[0] in shown
    # the parameters with their annotations as help() shows them: on one line, or one a line from Python 3.13;
    # quoted, or bare from 3.14
    assert re.sub(r"[\s']+", "", str(inspect.signature(python))) in re.sub(r"[\s']+", "", shown)


def test_the_compiled_functions_are_the_c_functions_read_as_python() -> None:
    """What the compiled build publishes calls its C function (the same results and errors) and is not a method:
    on a class it stays itself, as a builtin does."""
    from dlbind._ffi import native

    if native is None:
        pytest.skip("the compiled build is not loaded (the pure build publishes the Python functions)")
    np = pytest.importorskip("numpy")
    assert type(dlbind.convert).__name__ == "Function" and inspect.isroutine(dlbind.convert)
    a = np.arange(6.0)
    assert np.shares_memory(np.asarray(dlbind.from_dlpack(a)), a)
    assert np.asarray(dlbind.convert(a, "numpy")) is a or np.shares_memory(dlbind.convert(a, "numpy"), a)
    with pytest.raises(TypeError, match="copy must be None, True or False"):
        dlbind.from_dlpack(a, copy="yes")

    class Holder:
        convert = dlbind.convert

    assert Holder().convert is dlbind.convert and "compiled" in repr(dlbind.convert)


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_the_docstrings_name_the_errors_and_convert_names_every_system(name: str) -> None:
    """Each public function says which exceptions it raises; ``convert`` lists the ``to=`` names from the table."""
    from dlbind._generated.adapters import ADAPTERS

    doc = inspect.getdoc(getattr(dlbind, name)) or ""
    assert "Raises ``" in doc and "``TypeError``" in doc and "``BufferError``" in doc
    assert "{systems}" not in doc
    if name == "convert":
        listed = doc.partition("The names: ")[2].partition(".\n")[0].replace("\n", " ")
        assert [n.strip().strip("'") for n in listed.split(",")] == list(ADAPTERS)
