"""Policy the header does not state (``spec/devices.toml``, ``spec/dtypes.toml``), joined with its enums.

DLPack's header defines the values of ``DLDeviceType`` and ``DLDataTypeCode``; what a runtime also
needs — a device's user-facing name, whether the host reads its memory, its stream rule and the backend
that serves it; a dtype's name and buffer format — lives in the two tables. :func:`join` checks them
against the canonical header: every enum member gets a row (a member without an entry gets a derived
default, recorded in :attr:`Policy.decisions` for the report). An entry for a member the header does
not declare *yet* (upstream added it after this header) names its value (``value = 19``): it is
checked like any other entry, kept as *pending* (:attr:`Policy.pending_devices`, ``pending_codes``:
rendered as the tables of names waiting for the header, and listed in the report), and applied as
soon as a header that declares the member is canonical. An unknown key, a wrong type, a pending entry
without ``value`` or whose value the header gives another member is a :class:`GeneratorError` naming
the file and the entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomllib

from .errors import GeneratorError
from .model import HeaderModel

DEVICE_ENUM = "DLDeviceType"
DTYPE_ENUM = "DLDataTypeCode"
_DEVICE_KEYS = {"name", "host", "stream", "backend", "value"}
_RULE_KEYS = {"none_only", "refused", "allowed", "default"}
_CODE_KEYS = {"name", "bits", "accepts", "value"}
#: The widest value each enum's members may take where the header stores them (DLDevice.device_type is
#: the enum, an int; DLDataType.code is a uint8_t).
_VALUE_LIMIT = {"DLDeviceType": 2**31 - 1, "DLDataTypeCode": 255}
_LEGACY_KEYS = {"code", "bits", "reads_as", "ref"}
MAX_REFUSED = 4  # the C table's fixed array size


@dataclass(frozen=True)
class StreamRule:
    name: str
    none_only: bool
    refused: tuple[int, ...]
    allowed: str
    default: int | None = None  # the stream a consumer's None names (None: a rule without streams)


@dataclass(frozen=True)
class DeviceRow:
    member: str
    value: int
    name: str
    host: bool
    stream: str
    backend: str | None
    derived: bool


@dataclass(frozen=True)
class CodeRow:
    member: str
    value: int
    pattern: str  # "int{bits}"
    bits: tuple[int, ...] | None  # None: every width has a name
    derived: bool
    accepts: tuple[int, ...] | None = None  # widths a tensor may have; None: any width

    @property
    def accepted(self) -> tuple[int, ...]:
        """The accepted widths, () for any (what the C table stores)."""
        return self.accepts or ()

    @property
    def accept_words(self) -> tuple[str, ...]:
        """The accepted widths as a 256-bit set in four 64-bit words (C hex literals); all ones: any."""
        if self.accepts is None:
            return ("0xffffffffffffffffULL",) * 4
        words = [0, 0, 0, 0]
        for b in self.accepts:
            words[b >> 6] |= 1 << (b & 63)
        return tuple(f"{w:#018x}ULL" for w in words)


@dataclass(frozen=True)
class DTypeRow:
    code: int
    bits: int
    name: str
    formats: tuple[str, ...]  # the first is the canonical export format


@dataclass(frozen=True)
class LegacyRow:
    """A dtype of legacy capsules read as another, one element per byte (``[[legacy]]``)."""

    code: int
    bits: int
    as_code: int
    as_bits: int
    member: str
    reads_as: str
    ref: str


@dataclass(frozen=True)
class Policy:
    stream_rules: tuple[StreamRule, ...]
    devices: tuple[DeviceRow, ...]
    codes: tuple[CodeRow, ...]
    dtypes: tuple[DTypeRow, ...]  # every named (code, bits)
    legacy: tuple[LegacyRow, ...]  # dtypes of legacy capsules read one element per byte
    decisions: tuple[str, ...]  # derived defaults a maintainer should confirm
    # entries for members this header does not declare yet (value from the entry), in value order
    pending_devices: tuple[DeviceRow, ...] = ()
    pending_codes: tuple[CodeRow, ...] = ()
    pending_dtypes: tuple[DTypeRow, ...] = ()  # the named dtypes of pending_codes

    @property
    def waiting_names(self) -> tuple[str, ...]:
        """``DLDeviceType.kDLTPU = 19``, ... for every pending entry."""
        return tuple(
            [f"{DEVICE_ENUM}.{d.member} = {d.value}" for d in self.pending_devices]
            + [f"{DTYPE_ENUM}.{c.member} = {c.value}" for c in self.pending_codes]
        )

    @property
    def waiting(self) -> tuple[str, ...]:
        """One line per pending entry, for the report ("waiting for the header")."""
        lines = [
            f"{DEVICE_ENUM}.{d.member} = {d.value}: {d.name!r}, "
            f"{'host memory' if d.host else 'not host-accessible'}, stream rule {d.stream!r}, "
            f"{'backend ' + repr(d.backend) if d.backend else 'no backend'}"
            for d in self.pending_devices
        ]
        for c in self.pending_codes:
            named = [t.name + (f" (buffer format {t.formats[0]!r})" if t.formats else "")
                     for t in self.pending_dtypes if t.code == c.value]  # fmt: skip
            lines.append(
                f"{DTYPE_ENUM}.{c.member} = {c.value}: {', '.join(named) or repr(c.pattern)}"
                + (f"; widths accepted {', '.join(map(str, c.accepts))}" if c.accepts is not None else "")
                + ("" if any(t.formats for t in self.pending_dtypes if t.code == c.value) else "; no buffer format")
            )
        return tuple(lines)

    @property
    def device_limit(self) -> int:
        return max(d.value for d in self.devices) + 1

    @property
    def code_limit(self) -> int:
        return max(c.value for c in self.codes) + 1

    def rule_index(self, name: str) -> int:
        return next(i for i, r in enumerate(self.stream_rules) if r.name == name)


def derived_name(member: str) -> str:
    """``kDLTPU`` -> ``tpu``: the default user-facing name of a member without a policy entry."""
    return (member[3:] if member.startswith("kDL") else member).lower()


def _load(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise GeneratorError(f"cannot read the policy table: {exc.strerror}", file=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"invalid TOML: {exc}", file=str(path)) from None


def _check_keys(entry: Any, allowed: set[str], where: str, path: Path) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise GeneratorError(f"{where} must be a table", file=str(path))
    unknown = sorted(set(entry) - allowed)
    if unknown:
        known = ", ".join(sorted(allowed))
        raise GeneratorError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {known}", file=str(path))
    return entry


def _typed(value: Any, kind: type, where: str, path: Path) -> Any:
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise GeneratorError(f"{where} must be a {kind.__name__}, not {value!r}", file=str(path))
    return value


def _members(model: HeaderModel, enum: str) -> tuple[tuple[str, int], ...]:
    try:
        return model.enum(enum).members
    except StopIteration:
        raise GeneratorError(f"the canonical header declares no {enum}: the policy tables cannot be joined") from None


def _entries(
    data: dict[str, Any],
    table: str,
    members: tuple[tuple[str, int], ...],
    enum: str,
    path: Path,
    subset: bool,
    earlier: dict[str, str] | None = None,
) -> tuple[dict[str, Any], dict[str, tuple[int, Any]]]:
    """The ``[table.<member>]`` entries: (entries of members the header declares, by member; pending
    entries of members it does not declare yet, by member, with the value their ``value`` key gives).

    ``subset``: ``members`` are an older header's, checked against the canonical one already: entries
    for newer members without a ``value`` drop, and an entry of a member this header knows under an
    earlier name (``earlier``: canonical name -> this header's name for the same value, kDLCUDA ->
    kDLGPU in DLPack 0.4) is keyed by that name.
    """
    entries = data.get(table, {})
    if not isinstance(entries, dict):
        raise GeneratorError(f"[{table}] must be a table", file=str(path))
    values = dict(members)
    by_value = {v: m for m, v in members}
    renamed: dict[str, str] = (earlier or {}) if subset else {}
    declared: dict[str, Any] = {}
    pending: dict[str, tuple[int, Any]] = {}
    for key, raw in entries.items():
        where = f"[{table}.{key}]"
        if not isinstance(raw, dict):
            raise GeneratorError(f"{where} must be a table", file=str(path))
        member = renamed.get(str(key), str(key))
        value = raw.get("value")
        if value is not None:
            _typed(value, int, f"{where}.value", path)
            if not 0 <= value <= _VALUE_LIMIT[enum]:
                raise GeneratorError(f"{where}.value = {value} does not fit {enum}", file=str(path))
        if member in values:
            if value is not None and value != values[member]:
                raise GeneratorError(
                    f"{where}.value = {value}, but the header declares {member} = {values[member]}", file=str(path)
                )
            declared[member] = raw
        elif value is None:
            if subset:  # a member of the canonical header that this older header lacks
                continue
            raise GeneratorError(
                f"{where} names no member of {enum} in the canonical header; an entry for a member that a newer "
                "header declares needs `value =` (the value that header gives it): it waits for the header",
                file=str(path),
            )
        elif value in by_value:
            if subset:  # an older header gave the value to a member since removed: not this one
                continue
            raise GeneratorError(
                f"{where}.value = {value} is {by_value[value]} in the canonical header (remove or rename the entry)",
                file=str(path),
            )
        else:
            pending[member] = (value, raw)
    return declared, _by_value(pending, path)


def _by_value(pending: dict[str, tuple[int, Any]], path: Path) -> dict[str, tuple[int, Any]]:
    """The pending entries in the order of their values, no value given twice."""
    taken: dict[int, str] = {}
    for member, (value, _) in pending.items():
        if value in taken:
            raise GeneratorError(f"value {value} is given to both {taken[value]} and {member}", file=str(path))
        taken[value] = member
    return dict(sorted(pending.items(), key=lambda kv: kv[1][0]))


_Row = TypeVar("_Row", DeviceRow, CodeRow)


def _rows(
    model: HeaderModel,
    data: dict[str, Any],
    table: str,
    enum: str,
    path: Path,
    decisions: list[str],
    subset: bool,
    earlier: dict[str, str] | None,
    *,
    row: Callable[[str, int, Any], _Row],
    derived: Callable[[str, int], tuple[_Row, str]],
) -> tuple[list[_Row], list[_Row]]:
    """The rows of ``enum``'s members, in the header's order, and of the pending entries (see
    :func:`_entries`): ``row`` reads an entry of ``[table]``; a member without one gets ``derived``'s row,
    and its decision (what ``derived`` says of the row) goes into ``decisions``."""
    members = _members(model, enum)
    entries, waiting = _entries(data, table, members, enum, path, subset, earlier)
    rows = []
    for member, value in members:
        raw = entries.get(member)
        if raw is None:
            made, decision = derived(member, value)
            decisions.append(f"{enum}.{member} ({value}) has no entry in {path.name}: {decision}")
            rows.append(made)
            continue
        rows.append(row(member, value, raw))
    return rows, [row(member, value, raw) for member, (value, raw) in waiting.items()]


def _stream_rules(data: dict[str, Any], path: Path) -> tuple[StreamRule, ...]:
    rules = []
    table = data.get("stream_rules", {})
    if not isinstance(table, dict):
        raise GeneratorError("[stream_rules] must be a table", file=str(path))
    for name, raw in table.items():
        entry = _check_keys(raw, _RULE_KEYS, f"[stream_rules.{name}]", path)
        refused = tuple(_typed(v, int, f"[stream_rules.{name}].refused", path) for v in entry.get("refused", []))
        if len(refused) > MAX_REFUSED:
            raise GeneratorError(f"[stream_rules.{name}] refuses more than {MAX_REFUSED} values", file=str(path))
        none_only = bool(_typed(entry.get("none_only", False), bool, f"[stream_rules.{name}].none_only", path))
        default = entry.get("default")
        if default is not None:
            default = _typed(default, int, f"[stream_rules.{name}].default", path)
        if none_only != (default is None) or (default is not None and (default < 0 or default in refused)):
            raise GeneratorError(
                f"[stream_rules.{name}].default: a rule with streams names the stream a consumer's None means "
                "(a stream it accepts, >= 0); a none_only rule has none",
                file=str(path),
            )
        rules.append(
            StreamRule(
                name,
                bool(_typed(entry.get("none_only", False), bool, f"[stream_rules.{name}].none_only", path)),
                refused,
                _typed(entry.get("allowed", "None"), str, f"[stream_rules.{name}].allowed", path),
                default,
            )
        )
    if "none" not in {r.name for r in rules}:
        raise GeneratorError("[stream_rules.none] (the rule of devices without streams) is missing", file=str(path))
    return tuple(rules)


def _device_row(member: str, value: int, raw: Any, rule_names: set[str], path: Path) -> DeviceRow:
    where = f"[devices.{member}]"
    entry = _check_keys(raw, _DEVICE_KEYS, where, path)
    missing = sorted({"name", "host", "stream"} - set(entry))
    if missing:
        raise GeneratorError(f"{where}: missing {', '.join(missing)}", file=str(path))
    stream = _typed(entry["stream"], str, f"{where}.stream", path)
    if stream not in rule_names:
        raise GeneratorError(f"{where}.stream = {stream!r} is not a rule of [stream_rules]", file=str(path))
    backend = entry.get("backend")
    return DeviceRow(
        member,
        value,
        _typed(entry["name"], str, f"{where}.name", path),
        _typed(entry["host"], bool, f"{where}.host", path),
        stream,
        None if backend is None else _typed(backend, str, f"{where}.backend", path),
        False,
    )


def _devices(
    model: HeaderModel, path: Path, decisions: list[str], subset: bool, earlier: dict[str, str] | None = None
) -> tuple[tuple[StreamRule, ...], tuple[DeviceRow, ...], tuple[DeviceRow, ...]]:
    data = _load(path)
    _check_keys(data, {"stream_rules", "devices"}, "the top level", path)
    rules = _stream_rules(data, path)
    rule_names = {r.name for r in rules}

    def derived(member: str, value: int) -> tuple[DeviceRow, str]:
        name = derived_name(member)
        row = DeviceRow(member, value, name, False, "none", None, True)
        return row, f"derived name {name!r}, not host-accessible, stream None only, no backend"

    rows, pending = _rows(
        model, data, "devices", DEVICE_ENUM, path, decisions, subset, earlier,
        row=lambda member, value, raw: _device_row(member, value, raw, rule_names, path), derived=derived,
    )  # fmt: skip
    names = [r.name for r in (*rows, *pending)]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise GeneratorError(f"device name(s) used twice: {', '.join(dupes)}", file=str(path))
    return rules, tuple(rows), tuple(pending)


def _code_row(member: str, value: int, raw: Any, path: Path) -> CodeRow:
    where = f"[codes.{member}]"
    entry = _check_keys(raw, _CODE_KEYS, where, path)
    if "name" not in entry:
        raise GeneratorError(f"{where}: missing name", file=str(path))
    bits = entry.get("bits")
    widths = None if bits is None else tuple(_typed(b, int, f"{where}.bits", path) for b in bits)
    pattern = _typed(entry["name"], str, f"{where}.name", path)
    if "{bits}" not in pattern and (widths is None or len(widths) != 1):
        raise GeneratorError(f"{where}: a name without {{bits}} needs exactly one width in bits", file=str(path))
    accepts = widths
    if "accepts" in entry:
        accepts = tuple(_typed(b, int, f"{where}.accepts", path) for b in entry["accepts"])
        missing = sorted(set(widths or ()) - set(accepts))
        if widths is None or missing:
            raise GeneratorError(
                f"{where}: accepts must list every named width (missing {missing})"
                if missing
                else f"{where}: accepts needs bits (without bits every width is accepted)",
                file=str(path),
            )
    if accepts is not None:
        bad = [b for b in accepts if not 1 <= b <= 255]
        if bad:
            raise GeneratorError(f"{where}: widths {bad} do not fit DLDataType.bits (1..255)", file=str(path))
        accepts = tuple(sorted(set(accepts)))
    return CodeRow(member, value, pattern, widths, False, accepts)


def _named(codes: list[CodeRow], dtypes: dict[str, DTypeRow], path: Path) -> None:
    """Add the named dtypes of ``codes`` to ``dtypes`` (a name produced twice is an error)."""
    for c in codes:
        for b in c.bits or ():
            name = c.pattern.replace("{bits}", str(b))
            if name in dtypes:
                raise GeneratorError(f"dtype name {name!r} is produced twice", file=str(path))
            dtypes[name] = DTypeRow(c.value, b, name, ())


def _dtypes(
    model: HeaderModel, path: Path, decisions: list[str], subset: bool, earlier: dict[str, str] | None = None
) -> tuple[tuple[CodeRow, ...], tuple[DTypeRow, ...], tuple[CodeRow, ...], tuple[DTypeRow, ...]]:
    data = _load(path)
    _check_keys(data, {"codes", "formats", "legacy"}, "the top level", path)

    def derived(member: str, value: int) -> tuple[CodeRow, str]:
        pattern = derived_name(member) + "{bits}"
        return CodeRow(member, value, pattern, None, True), f"derived name {pattern!r}, no buffer format"

    codes, pending = _rows(
        model, data, "codes", DTYPE_ENUM, path, decisions, subset, earlier,
        row=lambda member, value, raw: _code_row(member, value, raw, path), derived=derived,
    )  # fmt: skip
    dtypes: dict[str, DTypeRow] = {}
    _named(codes, dtypes, path)
    declared_names = set(dtypes)
    _named(pending, dtypes, path)
    formats = data.get("formats", {})
    seen: dict[str, str] = {}
    for name, chars in formats.items():
        if name not in dtypes:
            if subset:  # a dtype of a code the older header lacks
                continue
            raise GeneratorError(f"[formats].{name} is not a dtype named by [codes]", file=str(path))
        chars = tuple(_typed(ch, str, f"[formats].{name}", path) for ch in chars)
        for ch in chars:
            if ch in seen:
                raise GeneratorError(f"format {ch!r} is listed for {seen[ch]} and {name}", file=str(path))
            seen[ch] = name
        row = dtypes[name]
        dtypes[name] = DTypeRow(row.code, row.bits, row.name, chars)

    def ordered(rows: list[DTypeRow]) -> tuple[DTypeRow, ...]:
        return tuple(sorted(rows, key=lambda r: (r.code, r.bits)))

    return (
        tuple(codes),
        ordered([t for n, t in dtypes.items() if n in declared_names]),
        tuple(pending),
        ordered([t for n, t in dtypes.items() if n not in declared_names]),
    )


def _legacy(
    path: Path,
    members: tuple[tuple[str, int], ...],
    dtypes: tuple[DTypeRow, ...],
    subset: bool,
    pending: frozenset[str] = frozenset(),
) -> tuple[LegacyRow, ...]:
    entries = _load(path).get("legacy", [])
    if not isinstance(entries, list):
        raise GeneratorError("[[legacy]] must be an array of tables", file=str(path))
    values = dict(members)
    by_name = {t.name: t for t in dtypes}
    rows: list[LegacyRow] = []
    for i, raw in enumerate(entries):
        where = f"[[legacy]] entry {i + 1}"
        entry = _check_keys(raw, _LEGACY_KEYS, where, path)
        missing = sorted(_LEGACY_KEYS - set(entry))
        if missing:
            raise GeneratorError(f"{where}: missing {', '.join(missing)}", file=str(path))
        member = _typed(entry["code"], str, f"{where}.code", path)
        if member in pending or (subset and (member not in values or entry["reads_as"] not in by_name)):
            continue  # waits for a header that declares the code
        if member not in values:
            raise GeneratorError(f"{where}.code = {member!r} is no member of {DTYPE_ENUM}", file=str(path))
        bits = _typed(entry["bits"], int, f"{where}.bits", path)
        if not 1 <= bits < 8:
            raise GeneratorError(f"{where}.bits = {bits}: only sub-byte widths have a legacy reading", file=str(path))
        target = by_name.get(_typed(entry["reads_as"], str, f"{where}.reads_as", path))
        if target is None or target.bits != 8:
            raise GeneratorError(f"{where}.reads_as must name an 8-bit dtype of [codes]", file=str(path))
        if any(r.code == values[member] and r.bits == bits for r in rows):
            raise GeneratorError(f"{where}: {member} {bits} bits is listed twice", file=str(path))
        ref = _typed(entry["ref"], str, f"{where}.ref", path)
        rows.append(LegacyRow(values[member], bits, target.code, target.bits, member, target.name, ref))
    return tuple(rows)


def _earlier_names(model: HeaderModel, canonical: HeaderModel) -> dict[str, dict[str, str]]:
    """Per enum: canonical member -> ``model``'s name for the same value, where the older header spells
    it differently (DLPack 0.4's kDLGPU is kDLCUDA: renames keep the value, the ABI is unchanged)."""
    out: dict[str, dict[str, str]] = {}
    for enum in (DEVICE_ENUM, DTYPE_ENUM):
        old = {v: m for m, v in _members(model, enum)}
        current = dict(_members(canonical, enum))
        out[enum] = {m: old[v] for m, v in current.items() if v in old and old[v] != m and old[v] not in current}
    return out


def join(model: HeaderModel, devices_toml: Path, dtypes_toml: Path, *, canonical: HeaderModel | None = None) -> Policy:
    """The policy tables joined with ``model``'s enums (the canonical header).

    ``canonical``: ``model`` is an older header (a vendored copy's): the tables are checked against
    ``canonical`` first, then joined with ``model``'s members only (entries for newer ones drop).
    """
    subset = canonical is not None and canonical is not model
    if canonical is not None and subset:
        join(canonical, devices_toml, dtypes_toml)
    decisions: list[str] = []
    earlier = _earlier_names(model, canonical) if canonical is not None and subset else {}
    rules, devices, pending_devices = _devices(model, devices_toml, decisions, subset, earlier.get(DEVICE_ENUM))
    codes, dtypes, pending_codes, pending_dtypes = _dtypes(
        model, dtypes_toml, decisions, subset, earlier.get(DTYPE_ENUM)
    )
    waiting = frozenset(c.member for c in pending_codes)
    legacy = _legacy(dtypes_toml, _members(model, DTYPE_ENUM), dtypes, subset, waiting)
    return Policy(
        rules, devices, codes, dtypes, legacy, tuple(decisions), pending_devices, pending_codes, pending_dtypes
    )
