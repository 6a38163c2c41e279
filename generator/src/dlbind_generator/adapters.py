"""Reads ``spec/adapters.toml`` (the array systems, their export and import capabilities, per release).

Each system is a table with ``export`` and ``import`` sub-tables, ``[[when]]`` entries that override
facts for a range of releases and ``[[quirk]]`` entries for the docs. The loader checks every key and
value against :data:`_FIELDS` (so a typo is an error, never a silently ignored fact) and flattens a
system into one :class:`AdapterSpec`, rendered as ``dlbind._generated.adapters.Adapter``.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .errors import GeneratorError

_TOP = {"module", "array_types", "immutable", "verified", "import"}
_OPTIONAL_TOP = {"export", "check", "dtypes", "devices", "when", "quirk"}
_QUIRK_KEYS = {"id", "text", "ref"}
#: the top-level array of tables that is no system: how a binding refuses a keyword (load_keyword_refusals)
KEYWORD_REFUSAL = "keyword_refusal"
_REFUSAL_KEYS = {"binding", "text", "ref"}
_KEYWORDS = {"device", "copy"}

# (section, key) -> (field, kind, allowed values or None, default)
_FIELDS: dict[tuple[str, str], tuple[str, Any, frozenset[str] | None, Any]] = {
    ("export", "via"): ("export_via", str, None, "__dlpack__"),
    ("export", "via_keywords"): ("export_via_keywords", "keywords", None, ()),
    ("export", "guards"): ("export_guards", list, None, ()),
    ("export", "complex_guards"): ("export_complex_guards", list, None, ()),
    ("export", "host"): ("export_host", str, None, ""),
    ("export", "refusal"): ("export_refusal", str, frozenset({"BufferError", "TypeError"}), "BufferError"),
    ("export", "refusal_help"): ("export_refusal_help", dict, None, ()),
    ("export", "bool"): ("export_bool", str, frozenset({"bool", "uint1", "uint8"}), "bool"),
    ("export", "dtype"): ("export_dtype", str, None, ""),
    ("export", "bool_name"): ("export_bool_name", str, None, ""),
    ("export", "devices"): ("export_devices", list, None, ()),
    ("export", "layout"): ("export_layout", str, frozenset({"any", "nonnegative", "compact"}), "any"),
    ("export", "readonly"): ("export_readonly", bool, None, True),
    ("export", "negative_strides"): ("export_negative_strides", str, frozenset({"signed", "unsigned"}), "signed"),
    ("export", "interface"): ("export_interface", str, frozenset({"", "__cuda_array_interface__"}), ""),
    ("export", "capsules"): ("export_capsules", str, frozenset({"versioned", "legacy"}), "versioned"),
    ("export", "streams_refused"): ("export_streams_refused", list, None, ()),
    ("export", "copies"): ("export_copies", bool, None, False),
    ("export", "refuses_copy"): ("export_refuses_copy", bool, None, False),
    ("export", "bits"): ("bits", dict, None, ()),
    ("export", "bits_of"): ("bits_of", str, None, ""),
    ("export", "bits_via"): ("export_bits_via", str, None, ""),
    ("import", "function"): ("from_dlpack", str, None, None),
    ("import", "function_nd"): ("from_dlpack_nd", str, None, ""),
    ("import", "by_dtype"): ("by_dtype", dict, None, ()),
    ("import", "function_keywords"): ("function_keywords", "keywords", None, ()),
    ("import", "setup"): ("import_setup", str, None, ""),
    ("import", "layout_nd"): ("layout_nd", str, frozenset({"", "any", "nonnegative", "compact"}), ""),
    ("import", "lacks_dtypes_nd"): ("lacks_dtypes_nd", list, None, ()),
    ("import", "ndims"): ("ndims", "args", None, ()),
    ("import", "takes"): ("takes", str, frozenset({"producer", "capsule", "ndarray"}), "producer"),
    ("import", "asks"): ("asks", str, frozenset({"versioned", "legacy", "bare"}), "versioned"),
    ("import", "keywords"): ("keywords", list, None, ()),
    ("import", "exchange_api"): ("exchange_api", bool, None, False),
    ("import", "devices"): ("devices", list, None, ("cpu",)),
    ("import", "device"): ("device_form", str, None, "none"),
    ("import", "device_names"): ("device_names", dict, None, ()),
    ("import", "namespace"): ("namespace", str, None, ""),
    ("import", "layout"): ("layout", str, frozenset({"any", "nonnegative", "compact"}), "any"),
    ("import", "byte_offset"): ("byte_offset", bool, None, True),
    ("import", "byte_offset_items"): ("byte_offset_items", bool, None, False),
    ("import", "packed"): ("packed", bool, None, False),
    ("import", "readonly"): ("readonly", str, frozenset({"honoured", "ignored", "always"}), "honoured"),
    ("import", "copy"): ("copy", str, frozenset({"honoured", "always", "ignored"}), "honoured"),
    ("import", "alignment"): ("alignment", int, None, 0),
    ("import", "lacks_dtypes"): ("lacks_dtypes", list, None, ()),
    ("import", "narrows"): ("narrows", dict, None, ()),
    ("import", "narrows_unless"): ("narrows_unless", str, None, ""),
    ("import", "view_with"): ("view_with", str, None, ""),
    ("import", "view_takes"): ("view_takes", str, frozenset({"tensor", "ndarray"}), "tensor"),
    ("import", "view_copies"): ("view_copies", bool, None, False),
    ("import", "view_lacks"): ("view_lacks", list, None, ()),
    ("import", "lands_on"): ("lands_on", str, None, ""),
    ("import", "bool"): ("import_bool", str, frozenset({"bool", "uint1", "uint8", "packed"}), "bool"),
    ("import", "lanes"): ("import_lanes", list, None, ()),
    ("import", "stream"): ("stream_call", str, None, ""),
    ("import", "stream_attribute"): ("stream_attribute", str, None, ""),
    ("import", "device_count"): ("device_count", str, None, ""),
    ("import", "interface"): ("interface_function", str, None, ""),
    ("import", "interface_devices"): ("interface_devices", list, None, ()),
    ("import", "bits_via"): ("import_bits_via", str, None, ""),
    ("import", "copy_from"): ("copy_from", list, None, ()),
    ("import", "copy_with"): ("copy_with", str, None, ""),
    ("import", "copy_takes"): ("copy_takes", str, frozenset({"tensor", "ndarray"}), "tensor"),
    ("check", "setup"): ("check_setup", str, None, ""),
    ("dtypes", "form"): (
        "dtype_form",
        str,
        frozenset({"", "numpy", "attribute", "call", "constructor", "spelling"}),
        "",
    ),
    ("dtypes", "module"): ("dtype_module", str, None, ""),
    ("dtypes", "names"): ("dtype_names", dict, None, ()),
    ("dtypes", "spelling"): ("dtype_spelling", str, None, ""),
    ("devices", "classes"): ("device_classes", list, None, ()),
    ("devices", "kind"): ("device_kind", str, None, ""),
    ("devices", "type"): ("device_type_of", str, None, ""),
    ("devices", "index"): ("device_index_of", str, None, ""),
    ("devices", "names"): ("device_kind_names", dict, None, ()),
    ("devices", "make"): ("device_make", str, None, ""),
    ("devices", "make_by"): ("device_make_by", dict, None, ()),
    ("devices", "make_args"): ("device_make_args", list, None, ()),
    ("devices", "pick"): ("device_pick", bool, None, False),
    ("check", "setup_args"): ("check_setup_args", "args", None, ()),
}
#: The closed sets among the row's fields (those with allowed values above), by the name of the class of
#: constants ``dlbind._generated.adapters`` renders for each: the code names a constant, never a literal
#: (``.ci/closed_sets.py`` fails on a comparison of such a field with a string literal outside _generated/).
SET_NAMES: dict[str, str] = {
    "export_refusal": "Refusal",
    "export_bool": "ExportBool",
    "export_layout": "Layout",
    "layout": "Layout",
    "layout_nd": "Layout",
    "export_negative_strides": "NegativeStrides",
    "export_interface": "Interface",
    "export_capsules": "Capsules",
    "takes": "Takes",
    "asks": "Asks",
    "readonly": "Readonly",
    "copy": "Copy",
    "view_takes": "Given",
    "copy_takes": "Given",
    "import_bool": "ImportBool",
    "dtype_form": "DtypeForm",
}


def _sub_record(section: str) -> dict[str, str]:
    """The facts of a row's ``[section]`` table, rendered as a sub-record of ``Adapter``: flat field -> its name
    there, the table's key (``bool`` is ``bool_as``: a field named ``bool`` would hide the type in the record)."""
    return {flat: ("bool_as" if key == "bool" else key) for (s, key), (flat, *_) in _FIELDS.items() if s == section}


#: ``Adapter.export`` (``Export``) and ``Adapter.import_`` (``Import``: ``import`` is a keyword): flat field -> its
#: name there.
EXPORT_FIELDS: dict[str, str] = _sub_record("export")
IMPORT_FIELDS: dict[str, str] = _sub_record("import")


def shown(flat: str) -> str:
    """A flat field's path on ``Adapter``: ``export_layout`` -> ``export.layout``, ``takes`` -> ``import_.takes``;
    others as they are."""
    if flat in EXPORT_FIELDS:
        return f"export.{EXPORT_FIELDS[flat]}"
    return f"import_.{IMPORT_FIELDS[flat]}" if flat in IMPORT_FIELDS else flat


@dataclass(frozen=True)
class ClosedSet:
    """One class of constants: ``name``, its ``(CONSTANT, value)`` members and the fields that take them."""

    name: str
    members: tuple[tuple[str, str], ...]
    fields: tuple[str, ...]

    @property
    def shown(self) -> tuple[str, ...]:
        """Its fields by their paths on ``Adapter`` (``export.layout``)."""
        return tuple(shown(f) for f in self.fields)


def _constant(value: str) -> str:
    """A value's constant name: ``"BufferError"`` -> ``BUFFER_ERROR``, ``"__cuda_array_interface__"`` ->
    ``CUDA_ARRAY_INTERFACE``, ``""`` -> ``NONE``."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", value.strip("_"))
    return re.sub(r"\W+", "_", words).upper() or "NONE"


def closed_sets() -> tuple[dict[str, str], tuple[ClosedSet, ...]]:
    """The closed fields' annotations (field -> ``Literal[...]``) and the classes of their constants."""
    allowed_of = {f: allowed for (f, _, allowed, _) in _FIELDS.values() if allowed is not None}
    if set(allowed_of) != set(SET_NAMES):
        raise GeneratorError(
            f"SET_NAMES must name exactly the closed fields: {sorted(set(allowed_of) ^ set(SET_NAMES))}"
        )
    annotations = {
        f: "Literal[" + ", ".join(repr(v) for v in sorted(allowed)) + "]" for f, allowed in allowed_of.items()
    }
    sets = []
    for name in sorted(set(SET_NAMES.values())):
        fields = tuple(sorted(f for f, n in SET_NAMES.items() if n == name))
        values = sorted(set().union(*(allowed_of[f] for f in fields)))
        sets.append(ClosedSet(name, tuple((_constant(v), v) for v in values), fields))
    return annotations, tuple(sets)


_TOP_FIELDS = {"immutable": ("immutable", bool)}  # top-level facts a [[when]] may override
_VERSIONS = re.compile(r"^(<=|>=|<|>|==)\d+(\.\d+)*$")


@dataclass(frozen=True)
class Quirk:
    id: str
    text: str
    ref: str


@dataclass(frozen=True)
class AdapterSpec:
    name: str
    import_name: str
    array_types: tuple[str, ...]
    immutable: bool
    verified: bool
    quirks: tuple[Quirk, ...]
    facts: dict[str, Any] = field(default_factory=dict)  # field -> value (every _FIELDS field)
    when: tuple[tuple[str, tuple[tuple[str, Any], ...]], ...] = ()  # (versions, ((field, value), ...))

    @property
    def row_facts(self) -> dict[str, Any]:
        """The facts that are ``Adapter``'s own fields (the ``[export]`` and ``[import]`` ones are sub-records)."""
        return {f: v for f, v in self.facts.items() if f not in EXPORT_FIELDS and f not in IMPORT_FIELDS}

    @property
    def export_facts(self) -> dict[str, Any]:
        """The ``[export]`` facts, by their names in ``Export``."""
        return {EXPORT_FIELDS[f]: v for f, v in self.facts.items() if f in EXPORT_FIELDS}

    @property
    def import_facts(self) -> dict[str, Any]:
        """The ``[import]`` facts, by their names in ``Import``."""
        return {IMPORT_FIELDS[f]: v for f, v in self.facts.items() if f in IMPORT_FIELDS}

    @property
    def when_shown(self) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
        """``when`` with each field by its path on ``Adapter`` (``export.capsules``, ``import_.keywords``)."""
        return tuple((versions, tuple((shown(f), v) for f, v in over)) for versions, over in self.when)


_KIND_NAMES = {bool: "a boolean (true or false)", str: "a string"}


def _value(raw: Any, kind: Any, allowed: frozenset[str] | None, where: str) -> Any:
    if kind == "keywords":
        if not isinstance(raw, dict) or not all(isinstance(v, str | bool | int) for v in raw.values()):
            raise GeneratorError(f"{where}: expected a table of strings, booleans and integers, not {raw!r}")
        return tuple(sorted(raw.items()))
    if kind == "args":
        if not isinstance(raw, list) or not all(isinstance(v, str | bool | int) for v in raw):
            raise GeneratorError(f"{where}: expected a list of strings, booleans and integers, not {raw!r}")
        return tuple(raw)
    if kind is list:
        if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
            raise GeneratorError(f"{where}: expected a list of strings, not {raw!r}")
        return tuple(raw)
    if kind is dict:
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise GeneratorError(f"{where}: expected a table of strings, not {raw!r}")
        return tuple(sorted(raw.items()))
    if kind is int and (isinstance(raw, bool) or not isinstance(raw, int) or raw < 0):
        raise GeneratorError(f"{where}: expected a non-negative integer, not {raw!r}")
    if kind is not int and not isinstance(raw, kind):
        raise GeneratorError(f"{where}: expected {_KIND_NAMES.get(kind, kind.__name__)}, not {raw!r}")
    if allowed is not None and raw not in allowed:
        raise GeneratorError(f"{where}: {raw!r} is not one of {sorted(allowed)}")
    return raw


def _fact(section: str, key: str, raw: Any, where: str) -> tuple[str, Any]:
    if section == "" and key in _TOP_FIELDS:
        name, kind = _TOP_FIELDS[key]
        return name, _value(raw, kind, None, where)
    spec = _FIELDS.get((section, key))
    if spec is None:
        raise GeneratorError(f"{where}: unknown key {section + '.' if section else ''}{key}")
    name, kind, allowed, _ = spec
    return name, _value(raw, kind, allowed, where)


def _check(name: str, facts: dict[str, Any], where: str, device_names: set[str] | None) -> None:
    """The facts of one row that go together, and the forms of its names: its import, its export, its checker."""
    _check_import(facts, where, device_names)
    _check_export(facts, where, device_names)
    _check_dtypes(facts, where)
    _check_devices(facts, where, device_names)
    if bool(facts["check_setup_args"]) and not facts["check_setup"]:
        raise GeneratorError(f"{where}: check.setup_args needs check.setup")
    if facts["check_setup"] and "." not in facts["check_setup"]:
        raise GeneratorError(f"{where}: check.setup is a dotted function, not {facts['check_setup']!r}")


def _check_dtypes(facts: dict[str, Any], where: str) -> None:
    """The row's ``[dtypes]`` facts: how its dtype objects are made from dlbind's names."""
    form = facts["dtype_form"]
    if (form == "spelling") != ("{name}" in facts["dtype_spelling"]):
        raise GeneratorError(f"{where}: dtypes.form = 'spelling' goes with dtypes.spelling, a pattern with {{name}}")
    if not form and (facts["dtype_module"] or facts["dtype_names"]):
        raise GeneratorError(f"{where}: dtypes.module and dtypes.names need dtypes.form")
    if form == "numpy" and facts["dtype_module"]:
        raise GeneratorError(f"{where}: dtypes.form = 'numpy' makes numpy's dtypes: it takes no dtypes.module")


def _check_devices(facts: dict[str, Any], where: str, device_names: set[str] | None) -> None:
    """The row's ``[devices]`` facts: how its device objects are read and made."""
    if bool(facts["device_kind"]) == bool(facts["device_type_of"]) and facts["device_classes"]:
        raise GeneratorError(
            f"{where}: devices.classes are read by devices.type (an attribute) or devices.kind (one name)"
        )
    if (facts["device_kind"] or facts["device_type_of"] or facts["device_index_of"]) and not facts["device_classes"]:
        raise GeneratorError(
            f"{where}: devices.type, devices.kind and devices.index read the objects of devices.classes"
        )
    if facts["device_pick"] and not facts["device_make"]:
        raise GeneratorError(f"{where}: devices.pick indexes what devices.make returns: it needs devices.make")
    if facts["device_make"] and facts["device_make_by"]:
        raise GeneratorError(f"{where}: devices.make (one function) or devices.make_by (one per kind), not both")
    for made in [facts["device_make"]] + [f for _, f in facts["device_make_by"]]:
        if made and "." not in made:
            raise GeneratorError(f"{where}: devices.make and make_by name dotted functions, not {made!r}")
    if facts["device_make_by"] and not facts["device_make_args"]:
        raise GeneratorError(f"{where}: devices.make_by's functions are called with devices.make_args")
    if not (facts["device_make"] or facts["device_make_by"]) and len(facts["device_make_args"]) > 1:
        raise GeneratorError(f"{where}: devices.make_args without devices.make is one pattern (a string device)")
    for pattern in facts["device_make_args"]:
        if pattern.startswith("@") and "." not in pattern:
            raise GeneratorError(f"{where}: devices.make_args' '@' patterns name a dotted object, not {pattern!r}")
        if pattern.startswith("@") and not (facts["device_make"] or facts["device_make_by"]):
            raise GeneratorError(f"{where}: devices.make_args' '@' patterns are arguments of devices.make")
    for attr in (facts["device_type_of"], facts["device_index_of"]):
        steps = [step for path in attr.split(" or ") for step in path.split(".")] if attr else []
        if not all(step.removesuffix("()").isidentifier() for step in steps):
            raise GeneratorError(
                f"{where}: devices.type and devices.index are attributes and 'method()' calls, dotted ('a.b()'), "
                f"or several such paths joined by ' or ', not {attr!r}"
            )
    if device_names is not None:
        named = {k for k, _ in facts["device_kind_names"]} | {k for k, _ in facts["device_make_by"]}
        unknown = (named | ({facts["device_kind"]} - {""})) - device_names
        if unknown:
            raise GeneratorError(f"{where}: devices {sorted(unknown)} are not in spec/devices.toml")


def _check_view(facts: dict[str, Any], where: str) -> None:
    """The row's ``view_with`` and what goes with it: the dtypes it views (``lacks_dtypes``), what it does."""
    if facts["view_with"] and not facts["lacks_dtypes"]:
        raise GeneratorError(f"{where}: view_with views the dtypes of lacks_dtypes: it needs them")
    if facts["view_copies"] and not facts["view_with"]:
        raise GeneratorError(f"{where}: import.view_copies says what its view_with does: it needs view_with")
    if facts["view_lacks"] and not facts["view_with"]:
        raise GeneratorError(f"{where}: import.view_lacks says what its view_with lacks: it needs view_with")
    beyond = [n for n in facts["view_lacks"] if not any(fnmatch.fnmatchcase(n, p) for p in facts["lacks_dtypes"])]
    if beyond:
        raise GeneratorError(f"{where}: import.view_lacks {beyond} are not among the dtypes of import.lacks_dtypes")


def _check_lanes(facts: dict[str, Any], where: str) -> None:
    """The row's ``import.lanes``: names of vector dtypes, each with its lanes."""
    scalars = [p for p in facts["import_lanes"] if not re.search(r"x(\d+|\*)$", p)]
    if scalars:
        raise GeneratorError(
            f"{where}: import.lanes {scalars} must name vector dtypes with their lanes (float4_e2m1fnx2, float32x*)"
        )


def _check_import(facts: dict[str, Any], where: str, device_names: set[str] | None) -> None:
    """The row's ``[import]`` facts: what goes together, the forms of its names, its devices."""
    _check_view(facts, where)
    _check_lanes(facts, where)
    if bool(facts["copy_from"]) != bool(facts["copy_with"]):
        raise GeneratorError(
            f"{where}: import.copy_from (devices) and import.copy_with (the target's constructor) go together"
        )
    if set(facts["keywords"]) - _KEYWORDS:
        raise GeneratorError(f"{where}: import.keywords may only be {sorted(_KEYWORDS)}")
    if (facts["layout_nd"] or facts["lacks_dtypes_nd"]) and not facts["from_dlpack_nd"]:
        raise GeneratorError(f"{where}: import.layout_nd and import.lacks_dtypes_nd go with import.function_nd")
    by_dtype = dict(facts["by_dtype"])
    if by_dtype and (facts["from_dlpack_nd"] or facts["view_with"] or facts["lacks_dtypes"]):
        raise GeneratorError(
            f"{where}: import.by_dtype (an importer per dtype, every other dtype lacked) goes with neither "
            "function_nd, view_with nor lacks_dtypes"
        )
    if any("." not in fn for fn in by_dtype.values()) or (by_dtype and facts["from_dlpack"] not in by_dtype.values()):
        raise GeneratorError(f"{where}: import.by_dtype names dotted importers, import.function among them")
    if facts["import_bool"] == "packed" and facts["takes"] != "ndarray":
        raise GeneratorError(
            f"{where}: import.bool = 'packed' (its importer packs numpy's bool bytes into bits) needs takes = 'ndarray'"
        )
    if facts["import_setup"] and "." not in facts["import_setup"]:
        raise GeneratorError(f"{where}: import.setup is a dotted function, not {facts['import_setup']!r}")
    ndims = facts["ndims"]
    if ndims and not (len(ndims) == 2 and all(type(n) is int for n in ndims) and 0 <= ndims[0] <= ndims[1]):
        raise GeneratorError(f"{where}: import.ndims is [fewest, most] dimensions, not {ndims!r}")
    if facts["import_bool"] == "uint1" and facts["asks"] != "legacy":
        raise GeneratorError(f"{where}: import.bool = 'uint1' is a legacy capsule's encoding: it needs asks = 'legacy'")
    form = facts["device_form"]
    if form not in ("none", "namespace") and "{name}" not in form:
        raise GeneratorError(f"{where}: import.device is 'none', 'namespace' or a template with {{name}}, not {form!r}")
    if (form == "namespace") != bool(facts["namespace"]):
        raise GeneratorError(f"{where}: import.device = 'namespace' and import.namespace go together")
    if device_names is not None:
        unknown = (set(facts["devices"]) | {k for k, _ in facts["device_names"]}) - device_names
        if unknown:
            raise GeneratorError(f"{where}: devices {sorted(unknown)} are not in spec/devices.toml")
    if not facts["devices"]:
        raise GeneratorError(f"{where}: import.devices is empty")
    if bool(facts["stream_call"]) != bool(facts["stream_attribute"]) or "." in facts["stream_attribute"]:
        raise GeneratorError(
            f"{where}: import.stream (a dotted function of the device index) goes with "
            "import.stream_attribute (the attribute of what it returns: the stream's handle)"
        )
    if facts["lands_on"] and facts["lands_on"] not in facts["devices"]:
        raise GeneratorError(f"{where}: import.lands_on names one of its import.devices, not {facts['lands_on']!r}")
    if facts["narrows_unless"] and not (facts["narrows"] and "." in facts["narrows_unless"]):
        raise GeneratorError(f"{where}: import.narrows_unless is the dotted setting that turns import.narrows off")
    if facts["device_count"] and facts["devices"] == ("cpu",):
        raise GeneratorError(
            f"{where}: import.device_count counts devices beyond the host, and it imports from cpu only"
        )
    if bool(facts["interface_function"]) != bool(facts["interface_devices"]):
        raise GeneratorError(f"{where}: import.interface and import.interface_devices go together")


def _check_export(facts: dict[str, Any], where: str, device_names: set[str] | None) -> None:
    """The row's ``[export]`` facts: what goes together, the forms of its names, its devices."""
    via = facts["export_via"]
    if facts["export_via_keywords"] and (via == "__dlpack__" or via.endswith("()")):
        raise GeneratorError(f"{where}: export.via_keywords are the keywords of a dotted export.via function")
    via = facts["export_bits_via"] or facts["import_bits_via"]
    if bool(facts["bits"]) != bool(facts["bits_of"]) or (via and not facts["bits"]):
        raise GeneratorError(
            f"{where}: export.bits (its dtype names -> dlbind's) goes with export.bits_of (the module "
            "naming its dtypes), and bits_via needs them"
        )
    for via in (facts["export_bits_via"], facts["import_bits_via"]):
        if via and not (via.endswith("()") and via[:-2].isidentifier()):
            raise GeneratorError(f"{where}: bits_via is a method 'name()', not {via!r}")
    for guard in facts["export_guards"]:
        if not guard.removeprefix("not ").removesuffix("()").isidentifier():
            raise GeneratorError(
                f"{where}: export.guards holds attribute names or 'method()', each maybe 'not ...', not {guard!r}"
            )
    if not all(isinstance(k, str) and isinstance(v, str) and k and v for k, v in facts["export_refusal_help"]):
        raise GeneratorError(f"{where}: export.refusal_help maps words of a refusal to what to do instead")
    if set(facts["export_complex_guards"]) - set(facts["export_guards"]):
        raise GeneratorError(f"{where}: export.complex_guards names guards of export.guards only")
    host = facts["export_host"]
    if host and not (host.endswith("()") and host[:-2].isidentifier()):
        raise GeneratorError(f"{where}: export.host is a method 'name()', not {host!r}")
    dtype = facts["export_dtype"]
    if (facts["export_bool"] == "uint8") != bool(dtype and facts["export_bool_name"]):
        raise GeneratorError(f"{where}: export.bool = 'uint8' goes with export.dtype and export.bool_name")
    if dtype and not (dtype.endswith("()") and dtype[:-2].isidentifier()):
        raise GeneratorError(f"{where}: export.dtype is a method 'name()', not {dtype!r}")
    via = facts["export_via"]
    if via != "__dlpack__" and not (via.endswith("()") and via[:-2].isidentifier()) and "." not in via:
        raise GeneratorError(f"{where}: export.via is '__dlpack__', 'method()' or a dotted function, not {via!r}")
    if facts["export_negative_strides"] == "unsigned" and not facts["export_interface"]:
        raise GeneratorError(f"{where}: export.negative_strides = 'unsigned' needs export.interface (the bridge)")
    refused = [entry.partition(":") for entry in facts["export_streams_refused"]]
    if not all(sep and stream.lstrip("-").isdigit() for _, sep, stream in refused):
        raise GeneratorError(
            f"{where}: export.streams_refused holds 'device:stream' entries ('cuda:2'), not "
            f"{list(facts['export_streams_refused'])!r}"
        )
    if device_names is not None:
        unknown = set(facts["export_devices"]) | set(facts["interface_devices"]) | {d for d, _, _ in refused}
        unknown -= device_names
        if unknown:
            raise GeneratorError(f"{where}: devices {sorted(unknown)} are not in spec/devices.toml")


def load_adapters(path: Path, device_names: set[str] | None = None) -> list[AdapterSpec]:
    """The systems of ``path``; ``device_names`` (spec/devices.toml's names) checks ``import.devices``."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    out = []
    for name, raw in data.items():
        if name == KEYWORD_REFUSAL:
            continue
        where = f"{path.name} [{name}]"
        if not isinstance(raw, dict):
            raise GeneratorError(f"{where}: expected a table")
        unknown = set(raw) - _TOP - _OPTIONAL_TOP
        missing = _TOP - set(raw)
        if unknown or missing:
            raise GeneratorError(f"{where}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
        facts = {f: default for (f, _, _, default) in _FIELDS.values()}
        for section in ("export", "import", "check", "dtypes", "devices"):
            table = raw.get(section, {})
            if not isinstance(table, dict):
                raise GeneratorError(f"{where}: [{name}.{section}] must be a table")
            for key, value in table.items():
                f, v = _fact(section, key, value, f"{where} {section}.{key}")
                facts[f] = v
        out.append(_finish(name, raw, facts, where, device_names))
    return out


def load_keyword_refusals(path: Path) -> tuple[str, ...]:
    """The texts of ``path``'s ``[[keyword_refusal]]`` entries: words of a TypeError by which a binding says that
    a function takes no such keyword (each entry names its ``binding`` and a ``ref`` to its message)."""
    try:
        entries = tomllib.loads(path.read_text(encoding="utf-8")).get(KEYWORD_REFUSAL, [])
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    if not isinstance(entries, list) or not entries:
        raise GeneratorError(f"{path.name}: [[{KEYWORD_REFUSAL}]] entries are required")
    texts = []
    for i, entry in enumerate(entries):
        where = f"{path.name} {KEYWORD_REFUSAL}[{i}]"
        if not isinstance(entry, dict) or set(entry) != _REFUSAL_KEYS:
            raise GeneratorError(f"{where}: needs exactly {sorted(_REFUSAL_KEYS)}")
        if not all(isinstance(entry[k], str) and entry[k].strip() for k in _REFUSAL_KEYS):
            raise GeneratorError(f"{where}: {sorted(_REFUSAL_KEYS)} are non-empty strings")
        texts.append(entry["text"])
    if len(set(texts)) != len(texts):
        raise GeneratorError(f"{path.name}: a {KEYWORD_REFUSAL} text is listed twice")
    return tuple(texts)


def _finish(
    name: str, raw: dict[str, Any], facts: dict[str, Any], where: str, device_names: set[str] | None
) -> AdapterSpec:
    if facts["from_dlpack"] is None:
        raise GeneratorError(f"{where}: import.function is required")
    _check(name, facts, where, device_names)
    module = _value(raw["module"], str, None, f"{where} module")
    if not module.strip():
        raise GeneratorError(f"{where} module: expected the module's dotted name, not {module!r}")
    return AdapterSpec(
        name=name,
        import_name=module,
        array_types=_value(raw["array_types"], list, None, f"{where} array_types"),
        immutable=_value(raw["immutable"], bool, None, f"{where} immutable"),
        verified=_value(raw["verified"], bool, None, f"{where} verified"),
        quirks=_quirks(name, raw, where),
        facts=facts,
        when=_when(name, raw, facts, where, device_names),
    )


def _entries(name: str, raw: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
    """The ``[[name.key]]`` entries of a row (none if it has none): an array of tables, else an error."""
    entries = raw.get(key, [])
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise GeneratorError(f"{where} {key}: expected an array of tables ([[{name}.{key}]]), not {entries!r}")
    return entries


def _quirks(name: str, raw: dict[str, Any], where: str) -> tuple[Quirk, ...]:
    """The row's ``[[quirk]]`` entries: exactly ``id``, ``text`` and ``ref``, each a string."""
    quirks = []
    for i, q in enumerate(_entries(name, raw, "quirk", where)):
        w = f"{where} quirk[{i}]"
        if set(q) != _QUIRK_KEYS:
            raise GeneratorError(f"{w}: needs exactly {sorted(_QUIRK_KEYS)}")
        for key in sorted(_QUIRK_KEYS):
            _value(q[key], str, None, f"{w} {key}")
        quirks.append(Quirk(q["id"], q["text"], q["ref"]))
    return tuple(quirks)


def _when(
    name: str, raw: dict[str, Any], facts: dict[str, Any], where: str, device_names: set[str] | None
) -> tuple[tuple[str, tuple[tuple[str, Any], ...]], ...]:
    """The row's ``[[when]]`` entries: a range of releases and the facts it overrides, each checked with the rest."""
    when = []
    for i, entry in enumerate(_entries(name, raw, "when", where)):
        w = f"{where} when[{i}]"
        versions = entry.get("versions")
        if not isinstance(versions, str) or not all(_VERSIONS.match(p.strip()) for p in versions.split(",")):
            raise GeneratorError(f"{w}: versions is like '<2.1' or '>=1.2,<2', not {versions!r}")
        overrides: list[tuple[str, Any]] = []
        for key, value in entry.items():
            if key == "versions":
                continue
            if key in ("export", "import") and isinstance(value, dict):  # import.keywords = [] (dotted keys)
                overrides.extend(_fact(key, leaf, v, f"{w} {key}.{leaf}") for leaf, v in value.items())
            else:
                overrides.append(_fact("", key, value, f"{w} {key}"))
        if not overrides:
            raise GeneratorError(f"{w}: overrides nothing")
        merged = dict(facts, **dict(overrides))
        _check(name, merged, w, device_names)
        when.append((versions, tuple(overrides)))
    return tuple(when)
