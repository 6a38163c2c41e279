"""Reads ``spec/adapters.toml`` (array libraries and their DLPack quirks) for the adapters target."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import tomllib

from .errors import GeneratorError

_KEYS = {"import", "array_types", "from_dlpack", "keywords", "exchange_api", "immutable", "verified", "quirk"}
_OPTIONAL = {"quirk", "lacks_dtypes", "view_with", "export_guards"}
_QUIRK_KEYS = {"id", "text", "ref"}
_KEYWORDS = {"device", "copy"}


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
    from_dlpack: str
    keywords: tuple[str, ...]
    exchange_api: bool
    immutable: bool
    verified: bool
    quirks: tuple[Quirk, ...]
    lacks_dtypes: tuple[str, ...] = ()
    view_with: str = ""
    export_guards: tuple[str, ...] = ()


def load_adapters(path: Path) -> list[AdapterSpec]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise GeneratorError(f"cannot read: {exc}", file=str(path)) from None
    out = []
    for name, raw in data.items():
        where = f"{path.name} [{name}]"
        if not isinstance(raw, dict):
            raise GeneratorError(f"{where}: expected a table")
        unknown = set(raw) - _KEYS - _OPTIONAL
        missing = _KEYS - _OPTIONAL - set(raw)
        if unknown or missing:
            raise GeneratorError(f"{where}: unknown keys {sorted(unknown)}, missing {sorted(missing)}")
        if set(raw["keywords"]) - _KEYWORDS:
            raise GeneratorError(f"{where}: keywords may only be {sorted(_KEYWORDS)}")
        quirks = []
        for q in raw.get("quirk", []):
            if set(q) != _QUIRK_KEYS:
                raise GeneratorError(f"{where} quirk: needs exactly {sorted(_QUIRK_KEYS)}")
            quirks.append(Quirk(str(q["id"]), str(q["text"]), str(q["ref"])))
        out.append(
            AdapterSpec(
                name=name,
                import_name=str(raw["import"]),
                array_types=tuple(str(t) for t in raw["array_types"]),
                from_dlpack=str(raw["from_dlpack"]),
                keywords=tuple(str(k) for k in raw["keywords"]),
                exchange_api=bool(raw["exchange_api"]),
                immutable=bool(raw["immutable"]),
                verified=bool(raw["verified"]),
                quirks=tuple(quirks),
                lacks_dtypes=tuple(str(p) for p in raw.get("lacks_dtypes", ())),
                view_with=str(raw.get("view_with", "")),
                export_guards=tuple(str(g) for g in raw.get("export_guards", ())),
            )
        )
        if bool(out[-1].lacks_dtypes) != bool(out[-1].view_with):
            raise GeneratorError(f"{where}: lacks_dtypes and view_with go together")
        for guard in out[-1].export_guards:
            if not guard.removesuffix("()").isidentifier():
                raise GeneratorError(f"{where}: export_guards holds attribute names or 'method()', not {guard!r}")
    return out
