"""The policy tables (spec/devices.toml, spec/dtypes.toml) joined with a header's enums.

A member without an entry gets a derived default and is listed as a decision; an entry for a member
the header does not declare yet names its value and waits for the header (pending), applied once a
header declares it; such an entry without a value, an unknown key or a wrong type is an error naming
the file and the entry.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from dlbind_generator.errors import GeneratorError
from dlbind_generator.model import HeaderModel
from dlbind_generator.parse import parse_header
from dlbind_generator.policy import Policy, derived_name, join
from dlbind_generator.sources import load_sources

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
    release = load_sources(root / "spec/headers.toml").canonical
    return replace(parse_header(headers[release]), post=release[2] if len(release) > 2 else 0)


@pytest.fixture(scope="module")
def unnamed(root: Path, canonical: HeaderModel) -> tuple[int, int]:
    """A DLDeviceType value and a DLDataTypeCode value that no header declares (above every value of the
    canonical header, and absent from the merged model of every release): for entries waiting for a
    header that does not exist, never a plausible future name."""
    merged = json.loads((root / "spec/models/merged.json").read_text())["names"]
    out = []
    for enum in ("DLDeviceType", "DLDataTypeCode"):
        value = max(v for _, v in canonical.enum(enum).members) + 1
        values = {n.get("value") for q, n in merged.items() if q.startswith(enum + ".")}
        assert value not in values and f"{enum}.kDLNoSuchMember" not in merged
        out.append(value)
    return out[0], out[1]


def _declaring(model: HeaderModel, enum: str, member: str, value: int) -> HeaderModel:
    """``model`` as a newer header would be: ``enum`` declares ``member = value`` too."""
    enums = tuple(replace(e, members=(*e.members, (member, value))) if e.name == enum else e for e in model.enums)
    return replace(model, enums=enums)


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


def _waiting(device: int, code: int) -> tuple[str, str]:
    devices = DEVICES + f'[devices.kDLNoSuchMember]\nvalue = {device}\nname = "nosuch"\nhost = true\nstream = "none"\n'
    dtypes = DTYPES.replace("[formats]", f'[codes.kDLNoSuchMember]\nvalue = {code}\nname = "nosuch{{bits}}"\n'
                            'bits = [16]\naccepts = [8, 16]\n[formats]')  # fmt: skip
    return devices, dtypes + 'nosuch16 = ["x"]\n' + LEGACY.replace("kDLUInt", "kDLNoSuchMember")


def test_entries_waiting_for_the_header(tmp_path: Path, canonical: HeaderModel, unnamed: tuple[int, int]) -> None:
    """An entry for a member the header does not declare yet is checked, kept pending, and not applied."""
    device, code = unnamed
    policy = _join(tmp_path, canonical, *_waiting(device, code))
    (d,) = policy.pending_devices
    assert (d.member, d.value, d.name, d.host, d.stream, d.backend) == ("kDLNoSuchMember", device, "nosuch", True,
                                                                         "none", None)  # fmt: skip
    assert device not in {r.value for r in policy.devices} and policy.device_limit == device
    (c,) = policy.pending_codes
    assert (c.member, c.value, c.pattern, c.bits, c.accepts) == (
        "kDLNoSuchMember",
        code,
        "nosuch{bits}",
        (16,),
        (8, 16),
    )
    assert [(t.code, t.bits, t.name, t.formats) for t in policy.pending_dtypes] == [(code, 16, "nosuch16", ("x",))]
    assert "nosuch16" not in {t.name for t in policy.dtypes} and policy.legacy == ()  # legacy rule waits too
    assert policy.waiting_names == (
        f"DLDeviceType.kDLNoSuchMember = {device}",
        f"DLDataTypeCode.kDLNoSuchMember = {code}",
    )
    assert (
        policy.waiting[0]
        == f"DLDeviceType.kDLNoSuchMember = {device}: 'nosuch', host memory, stream rule 'none', no backend"
    )
    assert (
        policy.waiting[1]
        == f"DLDataTypeCode.kDLNoSuchMember = {code}: nosuch16 (buffer format 'x'); widths accepted 8, 16"
    )
    assert not any("kDLNoSuchMember" in line for line in policy.decisions)


def test_waiting_entries_apply_once_the_header_declares_them(
    tmp_path: Path, canonical: HeaderModel, unnamed: tuple[int, int]
) -> None:
    """The same tables with a header that declares the members: the entries are rows like any other."""
    device, code = unnamed
    newer = _declaring(_declaring(canonical, "DLDeviceType", "kDLNoSuchMember", device),
                       "DLDataTypeCode", "kDLNoSuchMember", code)  # fmt: skip
    policy = _join(tmp_path, newer, *_waiting(device, code))
    assert policy.pending_devices == policy.pending_codes == policy.pending_dtypes == policy.waiting == ()
    d = next(r for r in policy.devices if r.member == "kDLNoSuchMember")
    assert (d.value, d.name, d.host, d.derived) == (device, "nosuch", True, False)
    assert (code, 16, "nosuch16", ("x",)) in [(t.code, t.bits, t.name, t.formats) for t in policy.dtypes]
    (legacy,) = policy.legacy
    assert (legacy.code, legacy.bits, legacy.reads_as) == (code, 1, "int8")
    assert policy.device_limit == device + 1


def test_legacy_readings_become_rows(tmp_path: Path, canonical: HeaderModel) -> None:
    (row,) = _join(tmp_path, canonical, dtypes=DTYPES + LEGACY).legacy
    codes = dict(canonical.enum("DLDataTypeCode").members)
    assert (row.code, row.bits, row.as_code, row.as_bits) == (codes["kDLUInt"], 1, codes["kDLInt"], 8)
    assert _join(tmp_path, canonical).legacy == ()


@pytest.mark.parametrize(
    ("devices", "dtypes", "message"),
    [
        (DEVICES + '[devices.kDLNope]\nname = "nope"\nhost = false\nstream = "none"\n', DTYPES,
         r"devices.toml: \[devices.kDLNope\] names no member of DLDeviceType in the canonical header; an entry "
         r"for a member that a newer header declares needs `value =`"),
        (DEVICES + '[devices.kDLNope]\nvalue = 1\nname = "nope"\nhost = false\nstream = "none"\n', DTYPES,
         r"\[devices.kDLNope\].value = 1 is kDLCPU in the canonical header"),
        (DEVICES.replace("[devices.kDLCPU]\n", "[devices.kDLCPU]\nvalue = 7\n"), DTYPES,
         r"\[devices.kDLCPU\].value = 7, but the header declares kDLCPU = 1"),
        (DEVICES + '[devices.kDLNope]\nvalue = 1000\nname = "cpu"\nhost = false\nstream = "none"\n', DTYPES,
         r"device name\(s\) used twice: cpu"),
        (DEVICES + '[devices.kDLNope]\nvalue = 1000\nname = "nope"\nhost = false\nstream = "hip"\n', DTYPES,
         r"\[devices.kDLNope\].stream = 'hip' is not a rule"),
        (DEVICES + '[devices.kDLNope]\nvalue = "19"\nname = "nope"\nhost = false\nstream = "none"\n', DTYPES,
         r"\[devices.kDLNope\].value must be a int"),
        (DEVICES + '[devices.kDLNope]\nvalue = 1000\nname = "n1"\nhost = false\nstream = "none"\n'
                   '[devices.kDLNope2]\nvalue = 1000\nname = "n2"\nhost = false\nstream = "none"\n', DTYPES,
         r"value 1000 is given to both kDLNope and kDLNope2"),
        (DEVICES, DTYPES + '[codes.kDLNope]\nvalue = 256\nname = "nope{bits}"\n',
         r"\[codes.kDLNope\].value = 256 does not fit DLDataTypeCode"),
        (DEVICES, DTYPES + '[codes.kDLNope]\nvalue = 200\nname = "int{bits}"\nbits = [8]\n',
         r"dtype name 'int8' is produced twice"),
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
    older = [v for v in headers if v < canonical.release]
    previous = parse_header(headers[max(older)]) if older else None

    def members(model: HeaderModel | None, enum: str) -> set[str]:
        return {m for m, _ in model.enum(enum).members} if model else set()

    derived = {r.member for r in policy.devices if r.derived} | {r.member for r in policy.codes if r.derived}
    old = members(previous, "DLDeviceType") | members(previous, "DLDataTypeCode")
    assert not derived & old, f"members of DLPack {max(older)} without a reviewed policy entry: {derived & old}"
    assert len(policy.decisions) == len(derived)


def test_the_repository_policy_of_upstreams_post_13_names(root: Path, canonical: HeaderModel) -> None:
    """DLPack main after v1.3 (kDLTPU, kDLTPUHost, kDLAscend, kDLBcomplex): policy decided before a header
    declares them (pending), the same rows once one does (a bump needs no hand edit)."""
    policy = join(canonical, root / "spec/devices.toml", root / "spec/dtypes.toml")
    devices = {d.member: d for d in (*policy.devices, *policy.pending_devices)}
    facts = {d: (devices[d].value, devices[d].name, devices[d].host, devices[d].stream, devices[d].backend)
             for d in ("kDLTPU", "kDLTPUHost", "kDLAscend")}  # fmt: skip
    assert facts == {
        "kDLTPU": (19, "tpu", False, "none", None),  # device memory, no backend here
        "kDLTPUHost": (20, "tpu_host", True, "none", None),  # host memory: the CPU reads it, no stream
        "kDLAscend": (21, "ascend", False, "none", None),
    }
    codes = {c.member: c for c in (*policy.codes, *policy.pending_codes)}
    bcomplex = codes["kDLBcomplex"]
    assert (bcomplex.value, bcomplex.pattern, bcomplex.bits, bcomplex.accepts) == (18, "bcomplex{bits}", (32,), (32,))
    named = [(t.code, t.bits, t.name, t.formats) for t in (*policy.dtypes, *policy.pending_dtypes) if t.code == 18]
    assert named == [(18, 32, "bcomplex32", ())]  # no buffer-protocol format: numpy has no such dtype
    declared = {m for m, _ in canonical.enum("DLDeviceType").members} | {
        m for m, _ in canonical.enum("DLDataTypeCode").members
    }
    pending = {d.member for d in policy.pending_devices} | {c.member for c in policy.pending_codes}
    assert pending == {"kDLTPU", "kDLTPUHost", "kDLAscend", "kDLBcomplex"} - declared
