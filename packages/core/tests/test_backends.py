"""The backend registry of the core: entry points found lazily, failures reported, never raised.

Each test runs a fresh interpreter whose ``sys.path`` holds a made-up distribution registering backends
under ``dlbind.backends`` (a real ``.dist-info`` folder, read by ``importlib.metadata`` as any installed
distribution is): one that cannot be imported, one that is not a backend, one whose runtime is missing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

_BACKEND = '''
from dlbind._backends import Probe

class Missing:
    name = "rocm"
    device_types = (10,)  # kDLROCM
    def probe(self):
        return Probe(False, "runtime library not found: tried libamdhip64.so.6 (set DLBIND_ROCM_LIBRARY to its path)")
    def wait(self, producer_stream, consumer_stream, device): raise AssertionError
    def copy_to_host(self, memory): raise AssertionError
    def copy_on_device(self, memory, stream): raise AssertionError
    def device_of(self, pointer): raise AssertionError
    def empty(self, shape, dtype, *, device_id=0): raise AssertionError
    def asarray(self, host_array, *, device_id=0): raise AssertionError

missing = Missing()
not_a_backend = object()
'''


def _site(tmp: Path) -> Path:
    site = tmp / "site"
    (site / "fakebackends").mkdir(parents=True)
    (site / "fakebackends" / "__init__.py").write_text(_BACKEND)
    info = site / "dlbind_fake-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: dlbind-fake\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[dlbind.backends]\n"
        "rocm = fakebackends:missing\n"
        "cuda = fakebackends.nowhere:backend\n"
        "metal = fakebackends:not_a_backend\n"
    )
    return site


def _run(tmp: Path, code: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_site(tmp)), *sys.path])}
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_broken_and_unavailable_backends_are_reported(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import json, dlbind
        print(json.dumps({n: [s.available, s.reason, s.version, str(s)] for n, s in dlbind.backends().items()}))
        """,
    )
    listing = json.loads(out)
    assert listing["rocm"][:3] == [
        False, "runtime library not found: tried libamdhip64.so.6 (set DLBIND_ROCM_LIBRARY to its path)", "1.0"
    ]  # fmt: skip
    assert listing["rocm"][3].startswith("rocm: unavailable: runtime library not found")
    assert listing["cuda"][0] is False
    assert listing["cuda"][1].startswith("the backend failed to load: ModuleNotFoundError: No module named")
    assert listing["metal"][1].startswith("the backend failed to load: TypeError: fakebackends:not_a_backend is not")


def test_routing_to_an_unusable_backend_names_why(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import dlbind
        for kind in (10, 2, 7):  # rocm (runtime missing), cuda (broken), vulkan (not installed in this test)
            e = dlbind.from_pointer(4096, (4,), "float32", device=(kind, 0))
            try:
                e.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=True)
            except BufferError as exc:
                print(exc)
        """,
    )
    rocm, cuda, vulkan = out.strip().splitlines()
    assert rocm == (
        "copying rocm memory to the host needs dlbind-rocm, which is installed but unavailable: runtime library "
        "not found: tried libamdhip64.so.6 (set DLBIND_ROCM_LIBRARY to its path)"
    )
    assert cuda.startswith("copying cuda memory to the host needs dlbind-cuda, which is installed but the backend "
                           "failed to load: ModuleNotFoundError")  # fmt: skip
    if "vulkan" not in vulkan:  # dlbind-vulkan installed: it answers for itself
        pytest.fail(vulkan)


def test_import_scans_no_entry_point_and_loads_no_vendor_library(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        import sys, dlbind
        maps = open("/proc/self/maps").read() if sys.platform.startswith("linux") else ""
        vendor = [n for n in ("libcudart", "libamdhip64", "libvulkan", "Metal") if n in maps]
        print(vendor, dlbind._backends._SCANNED, "fakebackends" in sys.modules)
        """,
    )
    assert out.strip() == "[] False False"


def test_cli_lists_the_backends(tmp_path: Path) -> None:
    out = _run(tmp_path, "import dlbind.__main__ as m; m.main(['backends']); m.main(['backends', '--json'])")
    text, _, data = out.partition("{")
    assert "rocm: unavailable: runtime library not found: tried libamdhip64.so.6" in text
    assert "[dlbind-fake 1.0]" in text
    listing = json.loads("{" + data)
    assert listing["rocm"]["available"] is False and listing["rocm"]["device_types"] == ["rocm"]


def test_known_backends_include_the_ones_not_installed(tmp_path: Path) -> None:
    """`backends(known=True)`: every backend the device policy names, installed or not, with what to install;
    the CLI prints that same data. The made-up distribution registers rocm, cuda and metal; vulkan is known
    (spec/devices.toml names it for kDLVulkan) and, in this interpreter, not installed unless dlbind-vulkan is."""
    out = _run(
        tmp_path,
        """
        import json, dlbind
        plain, known = dlbind.backends(), dlbind.backends(known=True)
        print(json.dumps([sorted(plain), {n: [s.installed, s.reason, str(s), list(s.device_types)]
                                          for n, s in known.items()}]))
        """,
    )
    plain, known = json.loads(out)
    from dlbind._backends import install_hint
    from dlbind._generated.tables import DEVICE_BACKENDS

    assert set(known) == set(plain) | set(DEVICE_BACKENDS.values())
    assert all(known[n][0] for n in plain)  # installed ones are reported as before
    for name in set(known) - set(plain):
        installed, reason, text, types = known[name]
        assert not installed and reason.startswith(f"{install_hint(name)}, for ") and types
        assert text == f"{name}: not installed ({reason})"
    cli = _run(tmp_path / "cli", "import dlbind.__main__ as m; m.main(['backends']); m.main(['backends', '--json'])")
    text, _, data = cli.partition("{")
    assert set(json.loads("{" + data)) == set(known)
    for name in set(known) - set(plain):
        assert f"{name}: not installed ({install_hint(name)}" in text


@pytest.mark.parametrize("published", [False, True], ids=["unpublished", "published"])
def test_every_install_hint_follows_the_one_switch(monkeypatch: pytest.MonkeyPatch, published: bool) -> None:
    """``dlbind._backends.PUBLISHED`` decides every install hint dlbind prints: the repository path until the
    backends are on the index (``pip install 'dlbind[cuda]'`` finds nothing before), the extra after."""
    import dlbind
    from dlbind import _backends
    from dlbind.testing._devices import PLACES

    if "cuda" in dlbind.backends():
        pytest.skip("dlbind-cuda is installed here: no hint to print")
    monkeypatch.setattr(_backends, "PUBLISHED", published)
    clone = "pip install ./packages/cuda in a clone of dlbind's repository"
    want = "pip install 'dlbind[cuda]'" if published else clone
    assert _backends.install_hint("cuda") == want
    with pytest.raises(BufferError) as raised:
        _backends.for_device(int(dlbind.DeviceType.kDLCUDA), "copying cuda memory to the host")
    said = [
        dlbind.backends(known=True)["cuda"].reason,
        str(raised.value),
        _backends.device_count(int(dlbind.DeviceType.kDLCUDA))[1],
        PLACES["cuda"].unavailable() or "",
    ]
    assert all(want in text for text in said), said
    assert all(("dlbind[cuda]" in text) is published for text in said), said


def test_a_library_passed_over_is_named_and_the_search_goes_on(tmp_path: Path) -> None:
    """find_library's search past a library its opener passes over (an older runtime than the binding serves, found
    first by its bare name), to the next candidate; each passed over is named, with why, where none is taken."""
    from dlbind._backends import PassedOver, find_library

    old, new = tmp_path / "libold.so.11", tmp_path / "libnew.so.12"
    opened: list[str] = []

    def opener(path: str) -> str:
        opened.append(path)
        if path == str(old):
            raise PassedOver("runtime 11.8, older than 12.0")
        if path == str(new):
            return "handle"
        raise OSError(f"cannot open {path}")

    names = dict.fromkeys(("linux", "darwin", "win32"), (str(old), str(new)))
    env = "DLBIND_TEST_PASSED_OVER_LIBRARY"
    assert find_library(env, {}, names, opener) == ("handle", str(new)) and opened[0] == str(old)
    with pytest.raises(OSError, match=r"^runtime library not found: tried .*libold\.so\.11 \(runtime 11\.8, older "):
        find_library(env, {}, {k: v[:1] for k, v in names.items()}, opener)
