"""spec/adapters.toml's loader: every key and value is checked, so a typo is an error naming the entry."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dlbind_generator.adapters import load_adapters, load_keyword_refusals
from dlbind_generator.errors import GeneratorError

ROW = """\
[lib]
module = "lib"
array_types = ["lib.Array"]
immutable = false
verified = false

[lib.export]
via = "__dlpack__"

[lib.import]
function = "lib.from_dlpack"
asks = "legacy"
"""


def _load(tmp_path: Path, text: str) -> dict[str, Any]:
    path = tmp_path / "adapters.toml"
    path.write_text(text)
    (spec,) = load_adapters(path, {"cpu"})
    return spec.facts


def test_the_repository_table_loads(root: Path) -> None:
    specs = load_adapters(root / "spec/adapters.toml")
    assert {"numpy", "torch", "jax", "onnxruntime", "mxnet"} <= {s.name for s in specs}


def test_bool_encodings_and_check_setup(tmp_path: Path) -> None:
    facts = _load(
        tmp_path,
        ROW.replace('via = "__dlpack__"', 'via = "__dlpack__"\nbool = "uint8"\ndtype = "kind()"\nbool_name = "b"')
        + 'bool = "uint1"\n[lib.check]\nsetup = "lib.config.set"\nsetup_args = ["wide", true, 3]\n',
    )
    assert (facts["export_bool"], facts["export_dtype"], facts["export_bool_name"]) == ("uint8", "kind()", "b")
    assert facts["import_bool"] == "uint1"
    assert (facts["check_setup"], facts["check_setup_args"]) == ("lib.config.set", ("wide", True, 3))
    assert _load(tmp_path, ROW)["export_bool"] == "bool"


def test_dtype_objects_are_read_from_their_table(tmp_path: Path) -> None:
    text = ROW + '[lib.dtypes]\nform = "attribute"\nmodule = "lib.dtypes"\nnames = { bool = "bool_", bfloat16 = "" }\n'
    facts = _load(tmp_path, text)
    assert (facts["dtype_form"], facts["dtype_module"]) == ("attribute", "lib.dtypes")
    assert facts["dtype_names"] == (("bfloat16", ""), ("bool", "bool_"))
    facts = _load(tmp_path, ROW + '[lib.dtypes]\nform = "spelling"\nspelling = "tensor({name})"\n')
    assert facts["dtype_spelling"] == "tensor({name})"


def test_complex_guards_are_some_of_the_guards(tmp_path: Path) -> None:
    guards = 'via = "__dlpack__"\nguards = ["flag", "conj()"]\ncomplex_guards = ["conj()"]'
    text = ROW.replace('via = "__dlpack__"', guards)
    facts = _load(tmp_path, text)
    assert (facts["export_guards"], facts["export_complex_guards"]) == (("flag", "conj()"), ("conj()",))


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace('via = "__dlpack__"', 'via = "__dlpack__"\nbool = "uint8"'),
         r"export.bool = 'uint8' goes with export.dtype and export.bool_name"),
        (lambda t: t.replace('via = "__dlpack__"', 'via = "__dlpack__"\nbool = "int8"'), r"'int8' is not one of"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "versioned"\nbool = "uint1"'),
         r"import.bool = 'uint1' .* legacy"),
        (lambda t: t + '[lib.check]\nsetup_args = ["x"]\n', r"check.setup_args needs check.setup"),
        (lambda t: t + '[lib.check]\nsetup = "configure"\n', r"check.setup is a dotted function"),
        (lambda t: t + '[lib.check]\nsetup = "lib.f"\nsetup_args = [1.5]\n', r"strings, booleans and integers"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\ncolour = "red"'), r"unknown key import.colour"),
        (lambda t: t.replace('via = "__dlpack__"', 'via = "__dlpack__"\nguards = ["a()"]\ncomplex_guards = ["b()"]'),
         r"export.complex_guards names guards of export.guards only"),
        (lambda t: t + '[lib.dtypes]\nform = "names"\n', r"'names' is not one of"),
        (lambda t: t + '[lib.dtypes]\nform = "spelling"\n', r"dtypes.form = 'spelling' goes with dtypes.spelling"),
        (lambda t: t + '[lib.dtypes]\nspelling = "t({name})"\n', r"dtypes.form = 'spelling' goes with"),
        (lambda t: t + '[lib.dtypes]\nmodule = "lib.dtypes"\n', r"dtypes.module and dtypes.names need dtypes.form"),
        (lambda t: t + '[lib.dtypes]\nform = "numpy"\nmodule = "lib"\n', r"takes no dtypes.module"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nby_dtype = { float32 = "lib.F" }'),
         r"import.function among them"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nby_dtype = { float32 = "lib.from_dlpack" }\n'
                             'lacks_dtypes = ["int8"]'), r"by_dtype .* goes with neither"),
        (lambda t: t.replace('via = "__dlpack__"', 'via = "__dlpack__"\nvia_keywords = { a = 1 }'),
         r"via_keywords are the keywords of a dotted export.via"),
        (lambda t: t.replace('via = "__dlpack__"', 'via = "lib.out"\nvia_keywords = { a = 1.5 }'),
         r"strings, booleans and integers"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nlacks_dtypes = ["int8"]\nview_lacks = ["int8"]'),
         r"import.view_lacks says what its view_with lacks: it needs view_with"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nview_with = "lib.view"'),
         r"view_with views the dtypes of lacks_dtypes: it needs them"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nlacks_dtypes = ["bfloat16", "complex*"]\n'
                             'view_with = "lib.view"\nview_lacks = ["complex32", "int8"]'),
         r"import.view_lacks \['int8'\] are not among the dtypes of import.lacks_dtypes"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nlanes = ["float32x4", "float4_e2m1fn"]'),
         r"import.lanes \['float4_e2m1fn'\] must name vector dtypes with their lanes"),
        (lambda t: t.replace('asks = "legacy"', 'asks = "legacy"\nlanes = true'), r"lanes"),
    ],
)  # fmt: skip
def test_bad_rows_are_errors(tmp_path: Path, edit: Callable[[str], str], message: str) -> None:
    with pytest.raises(GeneratorError, match=message):
        _load(tmp_path, edit(ROW))


def test_every_closed_field_is_typed_and_named_by_constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field with allowed values renders as a ``Literal`` of exactly those values, and each value as a constant
    of its set's class (what code outside _generated/ compares with); a closed field without a set name fails."""
    from dlbind_generator import adapters

    annotations, sets = adapters.closed_sets()
    allowed = {f: a for (f, _, a, _) in adapters._FIELDS.values() if a is not None}
    assert set(annotations) == set(allowed)
    for field, values in allowed.items():
        assert annotations[field] == "Literal[" + ", ".join(map(repr, sorted(values))) + "]"
        (closed,) = [s for s in sets if field in s.fields]
        assert values <= {value for _, value in closed.members}
    takes = next(s for s in sets if s.name == "Takes")
    assert dict(takes.members) == {"CAPSULE": "capsule", "NDARRAY": "ndarray", "PRODUCER": "producer"}
    refusal = next(s for s in sets if s.name == "Refusal")
    assert dict(refusal.members) == {"BUFFER_ERROR": "BufferError", "TYPE_ERROR": "TypeError"}
    monkeypatch.delitem(adapters.SET_NAMES, "takes")
    with pytest.raises(GeneratorError, match="SET_NAMES must name exactly the closed fields: \\['takes'\\]"):
        adapters.closed_sets()


def test_negated_guards_copy_refusals_and_importer_keywords(tmp_path: Path) -> None:
    export = 'via = "__dlpack__"\nguards = ["not is_contiguous", "is_conj()"]\nrefuses_copy = true'
    text = ROW.replace('via = "__dlpack__"', export)
    text = text.replace('asks = "legacy"', 'asks = "legacy"\nfunction_keywords = { stream_ptr = -1 }')
    facts = _load(tmp_path, text)
    assert facts["export_guards"] == ("not is_contiguous", "is_conj()") and facts["export_refuses_copy"] is True
    assert facts["function_keywords"] == (("stream_ptr", -1),)
    with pytest.raises(GeneratorError, match=r"each maybe 'not \.\.\.'"):
        _load(tmp_path, ROW.replace('via = "__dlpack__"', 'via = "__dlpack__"\nguards = ["not not x"]'))


def test_per_dtype_importers_and_export_keywords(tmp_path: Path) -> None:
    text = ROW.replace('via = "__dlpack__"', 'via = "lib.to_numpy"\nvia_keywords = { allow_missing = false }')
    by_dtype = 'by_dtype = { float32 = "lib.from_dlpack", int8 = "lib.I8" }'
    text = text.replace('asks = "legacy"', f'asks = "legacy"\n{by_dtype}')
    facts = _load(tmp_path, text)
    assert facts["export_via_keywords"] == (("allow_missing", False),)
    assert facts["by_dtype"] == (("float32", "lib.from_dlpack"), ("int8", "lib.I8"))


DEVICES = '[lib.devices]\nclasses = ["lib.Device"]\ntype = "api"\n'


def test_a_device_index_is_a_dotted_path_or_several(tmp_path: Path) -> None:
    """``devices.index`` (and ``type``): attributes and ``method()`` calls, dotted, several joined by ``" or "``
    (dpctl's SyclDevice has ``get_device_id()``, its queues a ``sycl_device``)."""
    spec = "get_device_id() or sycl_device.get_device_id()"
    assert _load(tmp_path, ROW + DEVICES + f'index = "{spec}"\n')["device_index_of"] == spec


def test_device_objects_made_by_the_class_of_their_kind(tmp_path: Path) -> None:
    """``devices.make_by``: a function per device kind (MAX's CPU and Accelerator), called with ``make_args``."""
    facts = _load(tmp_path, ROW + DEVICES + 'make_by = { cpu = "lib.CPU" }\nmake_args = ["{index}"]\n')
    made = (facts["device_make_by"], facts["device_make"], facts["device_make_args"])
    assert made == ((("cpu", "lib.CPU"),), "", ("{index}",))


@pytest.mark.parametrize(
    ("devices", "message"),
    [
        ('make = "lib.device"\nmake_by = { cpu = "lib.CPU" }\nmake_args = ["{index}"]\n', "not both"),
        ('make_by = { cpu = "CPU" }\nmake_args = ["{index}"]\n', "dotted functions, not 'CPU'"),
        ('make_by = { cpu = "lib.CPU" }\n', "make_by's functions are called with devices.make_args"),
        ('make_by = { gpu = "lib.GPU" }\nmake_args = ["{index}"]\n', r"devices \['gpu'\] are not in"),
        ('index = "sycl device.id()"\n', "dotted .*'sycl device.id\\(\\)'"),
        ('index = "id() or "\n', "joined by ' or '"),
        ('index = "a..b"\n', "not 'a..b'"),
        ('make = "lib.device"\nmake_args = ["@{name}"]\n', "name a dotted object, not '@{name}'"),
        ('make_args = ["@lib.{name}"]\n', "are arguments of devices.make"),
    ],
)
def test_bad_device_makers_are_errors(tmp_path: Path, devices: str, message: str) -> None:
    with pytest.raises(GeneratorError, match=message):
        _load(tmp_path, ROW + DEVICES + devices)


REFUSAL = '[[keyword_refusal]]\nbinding = "b"\ntext = "{text}"\nref = "r"\n'


def test_keyword_refusals_are_no_system(tmp_path: Path, root: Path) -> None:
    path = tmp_path / "adapters.toml"
    path.write_text(REFUSAL.format(text="no such keyword") + ROW)
    assert load_keyword_refusals(path) == ("no such keyword",)
    assert [s.name for s in load_adapters(path, {"cpu"})] == ["lib"]
    assert "incompatible function arguments" in load_keyword_refusals(root / "spec/adapters.toml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (ROW, r"\[\[keyword_refusal\]\] entries are required"),
        (REFUSAL.format(text="x") + REFUSAL.format(text="x") + ROW, "listed twice"),
        (REFUSAL.format(text="") + ROW, "non-empty strings"),
        ('[[keyword_refusal]]\ntext = "x"\n' + ROW, r"needs exactly \['binding', 'ref', 'text'\]"),
    ],
)
def test_bad_keyword_refusals_are_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "adapters.toml"
    path.write_text(text)
    with pytest.raises(GeneratorError, match=message):
        load_keyword_refusals(path)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("immutable = false", 'immutable = "no"', r"\[lib\] immutable: expected a boolean \(true or false\), not 'no'"),
        ("verified = false", "verified = 0", r"\[lib\] verified: expected a boolean \(true or false\), not 0"),
        ('module = "lib"', "module = 3", r"\[lib\] module: expected a string, not 3"),
        ('module = "lib"', 'module = ""', r"\[lib\] module: expected the module's dotted name, not ''"),
        ('array_types = ["lib.Array"]', 'array_types = "lib.Array"',
         r"\[lib\] array_types: expected a list of strings, not 'lib.Array'"),
        ('array_types = ["lib.Array"]', "array_types = [1]", r"\[lib\] array_types: expected a list of strings"),
        ("verified = false", 'verified = false\nquirk = "odd"', r"\[lib\] quirk: expected an array of tables"),
        ("verified = false", "verified = false\nwhen = { versions = '<2' }",
         r"\[lib\] when: expected an array of tables \(\[\[lib.when\]\]\)"),
        ("verified = false", 'verified = false\n[[lib.quirk]]\nid = 1\ntext = "t"\nref = "r"',
         r"\[lib\] quirk\[0\] id: expected a string, not 1"),
        ("verified = false", "verified = false\n[[lib.when]]\nversions = '<2'\nimmutable = 'yes'",
         r"\[lib\] when\[0\] immutable: expected a boolean"),
    ],
)  # fmt: skip
def test_top_level_values_of_the_wrong_type_are_errors(tmp_path: Path, old: str, new: str, message: str) -> None:
    """A row's own facts are checked as its tables' are: ``immutable = "no"`` is no True, ``module = 3`` no "3"."""
    assert old in ROW
    with pytest.raises(GeneratorError, match=r"^adapters\.toml " + message):
        _load(tmp_path, ROW.replace(old, new))
