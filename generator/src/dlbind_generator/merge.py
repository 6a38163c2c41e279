"""Stage 4b: one model over all releases — for every name, the release that introduced it, the one
that removed it, and the names it had before.

Fetched headers give the facts they can; ``spec/history.toml`` fills in the releases no registry
archive carries (each entry checked against the fetched headers, so it can narrow a range the
headers leave open but never contradict them). A name that only releases before the first fetched
header had, before a rename (``DLDeviceType.kCPU``, ``DLTensor.ctx``), is a name of its own, made from
the ``[renamed]`` facts (:func:`_former_names`). A ledger of per-version ABI hashes catches a header
that changed without a version bump; a header recorded as a post-release of its version (``M.m.postN``)
is a release of its own here, ordered after ``M.m``, and must keep ``M.m``'s layout.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from .errors import GeneratorError
from .model import HeaderModel
from .sources import Release, format_version, parse_release, parse_version

Version = Release  # (major, minor), or (major, minor, post) for a post-release


@dataclass(frozen=True)
class Name:
    qualname: str
    kind: str  # struct | field | enum | member | macro | typedef | function
    since: Version
    removed: Version | None
    renamed_from: tuple[tuple[str, Version], ...]
    value: int | None  # enum members and macros: the newest value


@dataclass(frozen=True)
class MergedModel:
    releases: tuple[Version, ...]
    fetched: tuple[Version, ...]
    canonical: Version
    names: tuple[Name, ...] = field(default=())

    def get(self, qualname: str) -> Name:
        return next(n for n in self.names if n.qualname == qualname)

    def until(self, last: Version, models: list[HeaderModel]) -> MergedModel:
        """This model as release ``last`` saw it, ``last`` canonical: the releases after it left out, and the
        names they introduced; a removal after it undone. Kinds and values are those of the headers up to
        ``last`` (``models``: the fetched headers). A vendored copy's tables describe the releases up to its
        own header, never after."""
        kinds: dict[str, set[str]] = {}
        values: dict[str, int | None] = {}
        for m in sorted(models, key=lambda m: m.release):
            if m.release <= last:
                for q, (kind, value) in names_of(m).items():
                    kinds.setdefault(q, set()).add(kind)
                    values[q] = value
        names = tuple(
            Name(
                n.qualname,
                sorted(kinds[n.qualname])[-1] if n.qualname in kinds else n.kind,  # as merge() picks it
                n.since,
                n.removed if n.removed is not None and n.removed <= last else None,
                tuple((old, when) for old, when in n.renamed_from if when <= last),
                values.get(n.qualname, n.value),
            )
            for n in self.names
            if n.since <= last
        )
        return MergedModel(
            releases=tuple(v for v in self.releases if v <= last),
            fetched=tuple(v for v in self.fetched if v <= last),
            canonical=last,
            names=names,
        )

    def to_json(self) -> dict[str, Any]:
        def ver(v: Version | None) -> str | None:
            return None if v is None else format_version(v)

        return {
            "releases": [ver(v) for v in self.releases],
            "fetched": [ver(v) for v in self.fetched],
            "canonical": ver(self.canonical),
            "names": {
                n.qualname: {
                    "kind": n.kind,
                    "since": ver(n.since),
                    "removed": ver(n.removed),
                    "renamed_from": [[old, ver(v)] for old, v in n.renamed_from],
                    **({"value": n.value} if n.value is not None else {}),
                }
                for n in sorted(self.names, key=lambda n: n.qualname)
            },
        }


def names_of(model: HeaderModel) -> dict[str, tuple[str, int | None]]:
    """Every qualified name a header declares -> (kind, value)."""
    out: dict[str, tuple[str, int | None]] = {}
    for s in model.structs:
        out[s.name] = ("struct", None)
        for f in s.fields:
            out[f"{s.name}.{f.name}"] = ("field", None)
    for e in model.enums:
        out[e.name] = ("enum", None)
        for member, value in e.members:
            out[f"{e.name}.{member}"] = ("member", value)
    for name, value in model.macros:
        out[name] = ("macro", value)
    for name, _ in model.typedefs:
        out[name] = ("typedef", None)
    for name, _ in model.functions:
        out[name] = ("function", None)
    return out


@dataclass(frozen=True)
class History:
    """spec/history.toml: facts of DLPack releases (never of post-releases, which are headers listed here)."""

    releases: tuple[tuple[int, int], ...]
    since: dict[str, tuple[int, int]]
    removed: dict[str, tuple[int, int]]
    renamed: dict[str, tuple[str, tuple[int, int]]]


_HISTORY_KEYS = ("releases", "since", "removed", "renamed")


def _version(value: object, where: str) -> tuple[int, int]:
    """A ``"M.m"`` string of history.toml: ``0.1`` unquoted (a float) is an error, never release 0.1."""
    if not isinstance(value, str):
        raise GeneratorError(f'{where}: expected a version string such as "0.4" (in quotes), not {value!r}')
    return parse_version(value, where=where)


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    table = data.get(key, {})
    if not isinstance(table, dict):
        raise GeneratorError(f"{where}: [{key}] must be a table, not {table!r}")
    return table


def _renamed(data: dict[str, Any], where: str) -> dict[str, tuple[str, tuple[int, int]]]:
    """``[renamed]``: new name -> ``{ from = NAME, in = VERSION }``, both strings."""
    renamed = {}
    for k, v in _table(data, "renamed", where).items():
        if not isinstance(v, dict) or set(v) != {"from", "in"} or not isinstance(v["from"], str):
            raise GeneratorError(f"{where} [renamed] {k}: each entry is {{ from = NAME, in = VERSION }}, not {v!r}")
        renamed[k] = (v["from"], _version(v["in"], f"{where} [renamed] {k}"))
    return renamed


def load_history(path: Path) -> History:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    where = path.name
    unknown = sorted(set(data) - set(_HISTORY_KEYS))
    if unknown:
        raise GeneratorError(
            f"{where}: unknown key(s) or table(s) {', '.join(unknown)}; known: {', '.join(_HISTORY_KEYS)}"
        )
    releases = data.get("releases", [])
    if not isinstance(releases, list):
        raise GeneratorError(f"{where}: releases must be a list of versions, not {releases!r}")
    return History(
        releases=tuple(_version(v, f"{where} releases") for v in releases),
        since={k: _version(v, f"{where} [since] {k}") for k, v in _table(data, "since", where).items()},
        removed={k: _version(v, f"{where} [removed] {k}") for k, v in _table(data, "removed", where).items()},
        renamed=_renamed(data, where),
    )


def _qual_parent(qualname: str) -> str:
    return qualname.rsplit(".", 1)[0] + "." if "." in qualname else ""


def merge(
    models: list[HeaderModel], history: History, canonical: Version, history_file: str = "history.toml"
) -> MergedModel:
    models = sorted(models, key=lambda m: m.release)
    fetched = tuple(m.release for m in models)
    present = [names_of(m) for m in models]
    every = sorted(set().union(*present))
    fv = format_version

    def fail(msg: str) -> GeneratorError:
        return GeneratorError(msg, file=history_file)

    for key in [*history.removed, *history.renamed]:
        if key not in every:
            raise fail(f"{key!r} is in no fetched header")

    names: list[Name] = []
    for q in every:
        seen = [v for v, p in zip(fetched, present, strict=True) if q in p]
        kinds = {p[q][0] for p in present if q in p}
        values = [p[q][1] for p in present if q in p]
        kind = sorted(kinds)[-1]  # a name that became an alias (DLContext: struct -> typedef) keeps the newest kind
        if kind == "member" and len(set(values)) > 1:
            changes = ", ".join(f"{fv(v)}: {p[q][1]}" for v, p in zip(fetched, present, strict=True) if q in p)
            raise GeneratorError(f"{q} changed value across releases ({changes}): an ABI break")
        first = seen[0]
        lacking_before = [v for v in fetched if v < first]
        since = first
        if q in history.since:
            s = history.since[q]
            if s > first or (lacking_before and s <= lacking_before[-1]):
                bound = f"after {fv(lacking_before[-1])} and " if lacking_before else ""
                raise fail(
                    f"since {q} = {fv(s)} contradicts the fetched headers (must be {bound}no later than {fv(first)})"
                )
            since = s
        last = seen[-1]
        after = [v for v in fetched if v > last]
        removed = after[0] if after else None
        if q in history.removed:
            r = history.removed[q]
            if r <= last or (removed is not None and r > removed):
                raise fail(f"removed {q} = {fv(r)} contradicts the fetched headers (present in {fv(last)})")
            removed = r
        names.append(Name(q, kind, since, removed, (), values[-1]))

    renamed = _renames(present, fetched, history)
    for q, (_, when) in renamed.items():
        earlier = [v for v, p in zip(fetched, present, strict=True) if q in p and v < when]
        if earlier:
            raise fail(f"renamed {q} in {fv(when)} contradicts the fetched headers (present in {fv(earlier[0])})")
    names = [Name(n.qualname, n.kind, n.since, n.removed, _chain(n.qualname, renamed), n.value) for n in names]
    former = _former_names(names, renamed, history, fail)
    for key in history.since:
        if key not in every and key not in former:
            raise fail(f"{key!r} is in no fetched header, nor an earlier name of one ([renamed])")
    releases = tuple(sorted(set(history.releases) | set(fetched)))
    names = sorted([*names, *former.values()], key=lambda n: n.qualname)
    return MergedModel(releases=releases, fetched=fetched, canonical=canonical, names=tuple(names))


def _former_names(
    names: list[Name],
    renamed: dict[str, tuple[str, Version]],
    history: History,
    fail: Callable[[str], GeneratorError],
) -> dict[str, Name]:
    """The names older releases declared before a rename, which no fetched header shows (DLPack 0.1's
    ``DLDeviceType.kCPU``, 0.1–0.3's ``DLTensor.ctx`` and ``DLContext.device_type``), each from its
    ``renamed_from`` chain: it came in with the rename before it (else with the declaration it belongs to,
    else ``[since]`` of history.toml) and was removed by the rename. A renamed struct's or enum's fields or
    members had the old name as their parent until the rename (an alias of the old name that a header keeps,
    0.4's ``typedef DLDevice DLContext``, is a name of its own, with fields of none)."""
    known = {n.qualname: n for n in names}
    former: dict[str, Name] = {}

    def add(q: str, like: Name, since: Version | None, removed: Version) -> None:
        if q in known or q in former:
            return
        if q in history.since:
            if history.since[q] >= removed:
                raise fail(
                    f"since {q} = {format_version(history.since[q])} contradicts [renamed]: {like.qualname} "
                    f"had that name until {format_version(removed)}"
                )
            since = history.since[q]
        if since is None or since >= removed:
            raise fail(
                f"{q!r}, the name {like.qualname} had until {format_version(removed)}: when it came in is not "
                "known; give it under [since]"
            )
        former[q] = Name(q, like.kind, since, removed, _chain(q, renamed), like.value)

    def enclosing_since(q: str) -> Version | None:
        parent = q.rsplit(".", 1)[0] if "." in q else None
        found = (known.get(parent) or former.get(parent)) if parent else None
        return found.since if found else None

    top = [n for n in names if "." not in n.qualname]
    for n in [*top, *(n for n in names if "." in n.qualname)]:  # parents first: their fields need their since
        for i, (old, when) in enumerate(n.renamed_from):
            q = _qual_parent(n.qualname) + old
            earlier = n.renamed_from[i + 1][1] if i + 1 < len(n.renamed_from) else enclosing_since(q)
            add(q, n, earlier, when)
    for n in top:  # the fields and members of a renamed declaration, under its earlier names
        for old, when in n.renamed_from:
            parent_since = (known.get(old) or former[old]).since
            for child in names:
                if not child.qualname.startswith(n.qualname + ".") or child.since > when:
                    continue  # not a field or member of the declaration at the rename
                leaf = child.qualname.rsplit(".", 1)[1]
                for older, w in child.renamed_from:  # the child's own name at the time
                    if w < when:
                        break
                    leaf = older
                add(f"{old}.{leaf}", child, parent_since, when)
    return former


def _renames(
    present: list[dict[str, tuple[str, Any]]], fetched: tuple[Version, ...], history: History
) -> dict[str, tuple[str, Version]]:
    """New name -> (old name, the release that renamed it): history's, and those between consecutive fetched
    headers, where a member vanishes and another with the same value appears in the same enum (history, where
    it has the entry, says when exactly)."""
    renamed: dict[str, tuple[str, Version]] = dict(history.renamed)
    for p0, (v1, p1) in zip(present, zip(fetched[1:], present[1:], strict=True), strict=False):
        gone = {q: p0[q][1] for q in p0 if q not in p1 and p0[q][0] == "member"}
        new = {q: p1[q][1] for q in p1 if q not in p0 and p1[q][0] == "member"}
        for nq, value in new.items():
            match = [g for g, gv in gone.items() if gv == value and _qual_parent(g) == _qual_parent(nq)]
            if len(match) == 1 and nq not in renamed:
                renamed[nq] = (match[0].rsplit(".", 1)[-1], v1)
    return renamed


def _chain(q: str, renamed: dict[str, tuple[str, Version]]) -> tuple[tuple[str, Version], ...]:
    """The names ``q`` had before, newest first, with the release that renamed each."""
    out: list[tuple[str, Version]] = []
    while q in renamed and len(out) < 16:
        old, when = renamed[q]
        out.append((old, when))
        q = _qual_parent(q) + old
    return tuple(out)


# -- the ledger -------------------------------------------------------------------------------

LEDGER_HEAD = """\
# DLPack release -> sha256 of its ABI model (what `python -m dlbind_generator parse` prints, less
# docs and the header digest). Append-only: `generate` adds a line for a new release; a fetched
# header whose model differs from its release's line changed without a version bump, and
# generation stops. Never edit a line; a genuinely new header gets a new version, or is recorded as
# a post-release of its version (M.m.postN, `nox -s bump`), which gets a line of its own.
"""
LAYOUT_HEAD = """
# Release -> sha256 of its layout alone: structs (fields, types, sizes, offsets), typedefs and
# function types; no enum values, no macros. A post-release must have exactly the layout of the
# release it follows (generation stops otherwise): equal digests here show that no layout changed.
[layout]
"""


@dataclass(frozen=True)
class Ledger:
    """Per release (``"1.3"``, ``"1.3.post1"``): the ABI model's digest and the layout's digest."""

    abi: dict[str, str]
    layout: dict[str, str]


def read_ledger(path: Path) -> Ledger:
    if not path.exists():
        return Ledger({}, {})
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    layout = data.pop("layout", {})
    if not isinstance(layout, dict):
        raise GeneratorError("[layout] must be a table", file=str(path))
    return Ledger({str(k): str(v) for k, v in data.items()}, {str(k): str(v) for k, v in layout.items()})


def _sorted(table: dict[str, str]) -> dict[str, str]:
    return dict(sorted(table.items(), key=lambda kv: parse_release(kv[0])))


def check_ledger(ledger: Ledger, models: list[HeaderModel], ledger_file: str) -> Ledger:
    """Return the ledger with new releases added; raise on a changed model for a known release."""
    abi, layout = dict(ledger.abi), dict(ledger.layout)
    for m in models:
        key, digest = format_version(m.release), m.abi_hash()
        if key in ledger.abi and ledger.abi[key] != digest:
            raise GeneratorError(
                f"the header for DLPack {key} (sha256 {m.sha256[:12]}...) has a different ABI model than the one "
                f"recorded ({ledger.abi[key][:12]}... -> {digest[:12]}...): it changed without a version bump "
                "(record it as a post-release with `nox -s bump -- SOURCE`)",
                file=ledger_file,
            )
        abi[key] = digest
        layout[key] = m.layout_hash()
    return Ledger(_sorted(abi), _sorted(layout))


def render_ledger(ledger: Ledger) -> str:
    return (
        LEDGER_HEAD
        + "".join(f'"{k}" = "{v}"\n' for k, v in ledger.abi.items())
        + LAYOUT_HEAD
        + "".join(f'"{k}" = "{v}"\n' for k, v in ledger.layout.items())
    )


def check_post_releases(models: list[HeaderModel]) -> None:
    """A post-release keeps its release's layout: every struct, typedef and function type of ``M.m`` is
    unchanged in ``M.m.postN`` (it may add enum values, and declarations of its own)."""
    by_release = {m.release: m for m in models}
    for m in models:
        if not m.post:
            continue
        base = by_release.get(m.version)
        if base is None:
            raise GeneratorError(
                f"DLPack {format_version(m.release)}: its release {format_version(m.version)} is not listed"
            )
        changed = sorted(
            [s.name for s in base.structs if s not in m.structs]
            + [n for n, t in base.typedefs if (n, t) not in m.typedefs]
            + [n for n, t in base.functions if (n, t) not in m.functions]
        )
        if changed:
            raise GeneratorError(
                f"DLPack {format_version(m.release)} changes the layout of {format_version(m.version)} "
                f"({', '.join(changed)}): a header with another layout is an ABI change and needs a new version, "
                "not a post-release"
            )
