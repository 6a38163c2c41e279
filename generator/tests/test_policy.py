"""The policy tables (spec/devices.toml, spec/dtypes.toml) joined with a header's enums.

A member without an entry gets a derived default and is listed as a decision; an entry for a value
the header lacks, an unknown key or a wrong type is an error naming the file and the entry.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

from dlbind_generator.errors import GeneratorError
from dlbind_generator.model import HeaderModel
from dlbind_generator.parse import parse_header
from dlbind_generator.policy import Policy, derived_name, join

DEVICES = """\
[stream_rules.none]
none_only = true
[stream_rules.cuda]
refused = [0]
allowed = "None, -1, 1, 2 or a handle"
default = 1
[devices.kDLCPU]
name = "cpu"
host = true
stream = "none"
[devices.kDLCUDA]
name = "cuda"
host = false
stream = "cuda"
backend = "cuda"
"""
DTYPES = """\
[codes.kDLInt]
name = "int{bits}"
bits = [8, 32]
[codes.kDLFloat]
name = "float{bits}"
bits = [32]
[formats]
int32 = ["i"]
float32 = ["f"]
"""
LEGACY = """\
[[legacy]]
code = "kDLUInt"
bits = 1
reads_as = "int8"
ref = "a test"
"""


@pytest.fixture(scope="module")
def canonical(root: Path, headers: dict) -> HeaderModel:
    text = (root / "spec/headers.toml").read_text()
    version = tuple(int(p) for p in tomllib.loads(text)["canonical"].split("."))
    return parse_header(headers[version])


def _join(tmp_path: Path, model: HeaderModel, devices: str = DEVICES, dtypes: str = DTYPES) -> Policy:
    (tmp_path / "devices.toml").write_text(devices)
    (tmp_path / "dtypes.toml").write_text(dtypes)
    return join(model, tmp_path / "devices.toml", tmp_path / "dtypes.toml")


def test_entries_become_rows(tmp_path: Path, canonical: HeaderModel) -> None:
    policy = _join(tmp_path, canonical)
    cuda = next(d for d in policy.devices if d.member == "kDLCUDA")
    assert (cuda.value, cuda.name, cuda.host, cuda.stream, cuda.backend, cuda.derived) == (2, "cuda", False, "cuda",
                                                                                           "cuda", False)  # fmt: skip
    assert [(t.name, t.code, t.bits, t.formats) for t in policy.dtypes] == [
        ("int8", 0, 8, ()),
        ("int32", 0, 32, ("i",)),
        ("float32", 2, 32, ("f",)),
    ]
    devices = canonical.enum("DLDeviceType").members
    assert policy.device_limit == max(v for _, v in devices) + 1
    assert [d.value for d in policy.devices] == [v for _, v in devices]


def test_accepted_widths(tmp_path: Path, canonical: HeaderModel) -> None:
    policy = _join(tmp_path, canonical, dtypes=DTYPES.replace("bits = [8, 32]", "bits = [8, 32]\naccepts = [32, 4, 8]"))
    codes = {c.member: c for c in policy.codes}
    assert codes["kDLInt"].accepts == (4, 8, 32)  # sorted; the named widths stay the named ones
    assert [t.name for t in policy.dtypes if t.code == 0] == ["int8", "int32"]
    assert codes["kDLFloat"].accepts == (32,)  # default: the named widths
    assert codes["kDLBfloat"].accepts is None  # no entry: any width
    words = [int(w.removesuffix("ULL"), 16) for w in codes["kDLInt"].accept_words]
    assert [b for b in range(256) if words[b >> 6] >> (b & 63) & 1] == [4, 8, 32]


def test_members_without_entry_get_derived_defaults_and_a_decision(tmp_path: Path, canonical: HeaderModel) -> None:
    policy = _join(tmp_path, canonical)
    rocm = next(d for d in policy.devices if d.member == "kDLROCM")
    assert (rocm.name, rocm.host, rocm.stream, rocm.backend, rocm.derived) == ("rocm", False, "none", None, True)
    bfloat = next(c for c in policy.codes if c.member == "kDLBfloat")
    assert (bfloat.pattern, bfloat.bits, bfloat.derived) == ("bfloat{bits}", None, True)
    n_devices = len(canonical.enum("DLDeviceType").members) - 2
    n_codes = len(canonical.enum("DLDataTypeCode").members) - 2
    assert len(policy.decisions) == n_devices + n_codes
    assert any("kDLROCM" in d and "'rocm'" in d for d in policy.decisions)
    assert any("kDLBfloat" in d for d in policy.decisions)
    assert derived_name("kDLOneAPI") == "oneapi"


def test_legacy_readings_become_rows(tmp_path: Path, canonical: HeaderModel) -> None:
    (row,) = _join(tmp_path, canonical, dtypes=DTYPES + LEGACY).legacy
    codes = dict(canonical.enum("DLDataTypeCode").members)
    assert (row.code, row.bits, row.as_code, row.as_bits) == (codes["kDLUInt"], 1, codes["kDLInt"], 8)
    assert _join(tmp_path, canonical).legacy == ()


@pytest.mark.parametrize(
    ("devices", "dtypes", "message"),
    [
        (DEVICES + '[devices.kDLNope]\nname = "nope"\nhost = false\nstream = "none"\n', DTYPES,
         r"devices.toml: \[devices.kDLNope\] names no member of DLDeviceType"),
        (DEVICES, DTYPES + '[codes.kDLNope]\nname = "nope{bits}"\n', r"dtypes.toml: \[codes.kDLNope\] names no member"),
        (DEVICES.replace('backend = "cuda"', 'colour = "green"'), DTYPES,
         r"\[devices.kDLCUDA\]: unknown key\(s\) colour"),
        (DEVICES.replace('host = true', 'host = "yes"'), DTYPES, r"\[devices.kDLCPU\].host must be a bool"),
        (DEVICES.replace('stream = "cuda"', 'stream = "hip"'), DTYPES, r"stream = 'hip' is not a rule"),
        (DEVICES.replace('name = "cuda"', 'name = "cpu"'), DTYPES, r"device name\(s\) used twice: cpu"),
        (DEVICES, DTYPES.replace('float32 = ["f"]', 'float32 = ["i"]'), r"format 'i' is listed for int32 and float32"),
        (DEVICES, DTYPES + "float64 = ['d']\n", r"\[formats\].float64 is not a dtype named by \[codes\]"),
        (DEVICES.replace("[stream_rules.none]\nnone_only = true\n", ""), DTYPES, r"\[stream_rules.none\].*missing"),
        (DEVICES.replace("default = 1\n", ""), DTYPES, r"\[stream_rules.cuda\].default: a rule with streams names"),
        (DEVICES.replace("default = 1\n", "default = 0\n"), DTYPES, r"\[stream_rules.cuda\].default"),
        ("devices = [", DTYPES, r"devices.toml: invalid TOML"),
        (DEVICES, DTYPES.replace("bits = [8, 32]", "bits = [8, 32]\naccepts = [4, 8]"),
         r"\[codes.kDLInt\]: accepts must list every named width \(missing \[32\]\)"),
        (DEVICES, DTYPES.replace("bits = [8, 32]", "bits = [8, 32]\naccepts = [4, 8, 32, 256]"),
         r"\[codes.kDLInt\]: widths \[256\] do not fit"),
        (DEVICES, DTYPES + '[codes.kDLOpaqueHandle]\nname = "h{bits}"\naccepts = [64]\n',
         r"\[codes.kDLOpaqueHandle\]: accepts needs bits"),
        (DEVICES, DTYPES + LEGACY.replace('"int8"', '"float32"'), r"entry 1.reads_as must name an 8-bit"),
        (DEVICES, DTYPES + LEGACY.replace("bits = 1", "bits = 8"), r"entry 1.bits = 8: only sub-byte widths"),
        (DEVICES, DTYPES + LEGACY.replace('code = "kDLUInt"', 'code = "kDLNope"'), r"code = 'kDLNope' is no member"),
        (DEVICES, DTYPES + LEGACY.replace('ref = "a test"\n', ""), r"entry 1: missing ref"),
        (DEVICES, DTYPES + LEGACY + LEGACY, r"entry 2: kDLUInt 1 bits is listed twice"),
    ],
)  # fmt: skip
def test_bad_tables_are_errors_naming_the_entry(
    tmp_path: Path, canonical: HeaderModel, devices: str, dtypes: str, message: str
) -> None:
    with pytest.raises(GeneratorError, match=message):
        _join(tmp_path, canonical, devices, dtypes)


def test_the_repository_tables_cover_the_canonical_header(root: Path, canonical: HeaderModel, headers: dict) -> None:
    """Every device type and dtype code of the canonical header has a reviewed entry (no derived defaults),
    except members new in the canonical release itself: right after a header bump they run on derived
    defaults, listed in the report, until someone decides (a bump ends green with no hand edit)."""
    policy = join(canonical, root / "spec/devices.toml", root / "spec/dtypes.toml")
    older = [v for v in headers if v < canonical.version]
    previous = parse_header(headers[max(older)]) if older else None

    def members(model: HeaderModel | None, enum: str) -> set[str]:
        return {m for m, _ in model.enum(enum).members} if model else set()

    derived = {r.member for r in policy.devices if r.derived} | {r.member for r in policy.codes if r.derived}
    old = members(previous, "DLDeviceType") | members(previous, "DLDataTypeCode")
    assert not derived & old, f"members of DLPack {max(older)} without a reviewed policy entry: {derived & old}"
    assert len(policy.decisions) == len(derived)
