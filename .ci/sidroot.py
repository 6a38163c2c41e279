"""Python 3.14 and 3.15 from Debian unstable, in a root of their own (issue 23).

No interpreter of either version is on this machine (pyenv has 3.10 to 3.13 and no source archive can be
fetched), and none can run on its libc: Debian's unstable suite builds both against glibc 2.43. So the
interpreters live in a Debian unstable root that ``debootstrap`` makes from the mirror apt already uses,
and every command that needs them runs inside it with ``chroot``, in a mount namespace of its own
(``unshare --mount``: the mounts vanish with the command). Inside, the repository, ``/tmp`` and pip's
cache sit at the same paths as outside, so paths need no translation either way.

The root is cached under ``.nox/_debian-sid/root`` (git-ignored; ``DLBIND_SID_ROOT`` names another place)
with a stamp of the recipe that made it; a fresh machine builds it on first use (about 4 minutes, 1.2 GB).
The ``.deb`` files debootstrap downloads are kept in ``~/.cache/dlbind/debootstrap``, so a new clone on the
same machine builds its root without downloading them again.

    python3 .ci/sidroot.py ensure                 # build the root when missing or stale; print its path
    python3 .ci/sidroot.py run -- python3.14 -V   # a command inside it (cwd: the current directory)
    python3 .ci/sidroot.py exec [--cwd D] [--env K=V] -- ARGV   # the same without the check (what nox runs)

Needs root (chroot, mounts), ``debootstrap`` (installed with apt-get when missing) and ``unshare`` (util-linux).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SUITE = "sid"
PYTHONS = ("3.14", "3.15")
PACKAGES = [
    *(f"python{v}{suffix}" for v in PYTHONS for suffix in ("", "-dev", "-venv")),
    "gcc",
    "libc6-dev",
    "libffi-dev",  # cffi has no wheel for 3.15: pip builds it from its sdist
    "clang",  # tinygrad's CPU device compiles with it (its interop tests)
    "patchelf",  # auditwheel's (bookworm's 0.14.3 is older than the 0.14.5 auditwheel 6 requires)
]
# Changes to what the root holds or how it is set up bump this: a root made by another recipe is rebuilt.
RECIPE = 1
STAMP = ".dlbind-root.json"
DEFAULT_MIRROR = "http://deb.debian.org/debian"
DEB_CACHE = Path.home() / ".cache" / "dlbind" / "debootstrap"
CA_INSIDE = "/etc/dlbind/ca-bundle.crt"


def location() -> Path:
    """Where the root lives: ``DLBIND_SID_ROOT`` or ``.nox/_debian-sid/root`` of this checkout."""
    return Path(os.environ.get("DLBIND_SID_ROOT") or REPO / ".nox" / "_debian-sid" / "root").resolve()


def mirror() -> str:
    """The Debian mirror apt uses here (its sources list), so the root comes from the same place."""
    candidates: list[str] = []
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for stanza in path.read_text(errors="replace").split("\n\n"):
            fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
            if fields.get("Enabled", "yes") == "no" or "deb" not in fields.get("Types", "").split():
                continue
            suites = fields.get("Suites", "").split()
            if any("security" in s for s in suites):
                continue
            candidates += fields.get("URIs", "").split()
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt").glob("sources.list.d/*.list"))]:
        if path.exists():
            for line in path.read_text(errors="replace").splitlines():
                m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and "security" not in m.group(2):
                    candidates.append(m.group(1))
    for uri in candidates:
        if uri.rstrip("/").endswith("/debian"):
            return uri.rstrip("/")
    return DEFAULT_MIRROR


def ca_bundle() -> Path:
    """The CA bundle the host's pip is configured with (``pip config list``: cert), else the system's."""
    named = os.environ.get("PIP_CERT")
    if not named:
        out = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, check=False
        ).stdout
        m = re.search(r"^(?:global|:env:|install)\.cert='([^']+)'", out, re.M)
        named = m.group(1) if m else None
    for candidate in (named, "/etc/ssl/certs/ca-certificates.crt"):
        if candidate and Path(candidate).is_file():
            return Path(candidate)
    raise SystemExit("sidroot: no CA bundle found for pip (pip config list names no cert)")


def _wanted() -> dict[str, object]:
    return {"recipe": RECIPE, "suite": SUITE, "packages": PACKAGES}


def _stamp(root: Path) -> dict[str, object] | None:
    try:
        return json.loads((root / STAMP).read_text())  # type: ignore[no-any-return]
    except (OSError, ValueError):
        return None


def ready(root: Path | None = None) -> bool:
    root = root or location()
    stamp = _stamp(root)
    return stamp is not None and all(stamp.get(k) == v for k, v in _wanted().items())


def _need_tools(log: Callable[[str], None]) -> None:
    if os.geteuid() != 0:
        raise SystemExit("sidroot: needs root (debootstrap, chroot and mounts)")
    missing = [tool for tool in ("debootstrap", "unshare") if shutil.which(tool) is None]
    if missing:
        log(f"sidroot: apt-get install {' '.join(missing)}")
        packages = ["util-linux" if t == "unshare" else t for t in missing]
        subprocess.run(["apt-get", "update", "-qq"], check=True)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"},
        )  # fmt: skip


def _configure(root: Path) -> None:
    """What pip and apt need inside: the host's CA bundle (named by pip.conf), DNS, and an apt that accepts
    the mirror's unstable Release file past its Valid-Until date."""
    ca = root / CA_INSIDE.lstrip("/")
    ca.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ca_bundle(), ca)
    (root / "etc/pip.conf").write_text(f"[global]\ncert = {CA_INSIDE}\ndisable-pip-version-check = true\n")
    (root / "etc/apt/apt.conf.d/99dlbind").write_text('Acquire::Check-Valid-Until "false";\n')
    for name in ("resolv.conf", "hosts"):
        if Path("/etc", name).is_file():
            (root / "etc" / name).unlink(missing_ok=True)
            shutil.copyfile(Path("/etc", name), root / "etc" / name)


def ensure(log: Callable[[str], None] = print) -> Path:
    """The root, built first when missing or made by another recipe. Returns its path.

    Holds a lock beside the root meanwhile: callers in parallel (.ci/run runs two lanes) wait for the one
    that builds it instead of building it again over it."""
    import fcntl

    root = location()
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.with_name(root.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready(root):
            _configure(root)  # DNS and CA may differ on this machine
            return root
        return _build(root, log)


def _build(root: Path, log: Callable[[str], None]) -> Path:
    _need_tools(log)
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(root, ignore_errors=True)
    partial.parent.mkdir(parents=True, exist_ok=True)
    DEB_CACHE.mkdir(parents=True, exist_ok=True)
    source = mirror()
    start = time.monotonic()
    log(f"sidroot: debootstrap {SUITE} from {source} into {root} (about 4 minutes and 1.2 GB, once)")
    cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", f"--cache-dir={DEB_CACHE}",
           SUITE, str(partial), source]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        debootstrap_log = partial / "debootstrap" / "debootstrap.log"
        if debootstrap_log.exists():
            tail += "\n" + "\n".join(debootstrap_log.read_text(errors="replace").splitlines()[-20:])
        raise SystemExit(f"sidroot: debootstrap failed (exit {proc.returncode}):\n{tail}")
    _configure(partial)
    partial.rename(root)
    versions = [
        subprocess.run(_unshare([f"python{v}", "-V"], {}, "/", root, REPO), capture_output=True, text=True,
                       check=True).stdout.strip()
        for v in PYTHONS
    ]  # fmt: skip
    (root / STAMP).write_text(json.dumps({**_wanted(), "mirror": source, "pythons": versions}, indent=1) + "\n")
    log(f"sidroot: {', '.join(versions)} ready in {time.monotonic() - start:.0f} s")
    return root


# Run inside a new mount namespace: mount what the command needs, then chroot. $1 the root, $2 the
# repository, $3 pip's cache; the rest is the command (already wrapped in env -i and a cd).
_MOUNTS = r"""
root=$1 repo=$2 cache=$3; shift 3
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
mkdir -p "$root/tmp" "$root$repo" "$root/root/.cache/pip" "$cache"
mount --rbind /tmp "$root/tmp"
mount --bind "$repo" "$root$repo"
mount --bind "$cache" "$root/root/.cache/pip"
exec chroot "$root" "$@"
"""

# Variables passed through from the caller's environment (everything else is dropped: the host's pip
# settings name files that do not exist inside; PIP_COMPILE, --no-compile, names none).
PASS_THROUGH = ("CI", "TERM", "COLUMNS", "PYTEST_ADDOPTS", "SOURCE_DATE_EPOCH", "PIP_COMPILE")


def pip_cache() -> Path:
    return Path(os.environ.get("PIP_CACHE_DIR") or Path.home() / ".cache" / "pip")


def _unshare(argv: Sequence[str], env: Mapping[str, str], cwd: str, root: Path, repo: Path) -> list[str]:
    variables = {"HOME": "/root", "PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8"}
    variables.update({k: os.environ[k] for k in PASS_THROUGH if k in os.environ})
    variables.update(env)
    inner = ["/usr/bin/env", "-i", *(f"{k}={v}" for k, v in variables.items()),
             "/bin/sh", "-c", 'cd "$0" && exec "$@"', cwd, *argv]  # fmt: skip
    return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-euc", _MOUNTS, "sidroot",
            str(root), str(repo.resolve()), str(pip_cache()), *inner]  # fmt: skip


def command(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | os.PathLike[str] | None = None,
) -> list[str]:  # fmt: skip
    """The argv that runs ``argv`` inside the root (call :func:`ensure` first), in ``cwd`` (default: the
    current directory, which must lie in the repository or /tmp), with ``env`` added to a clean environment:
    ``python3 .ci/sidroot.py exec [--cwd DIR] [--env K=V ...] -- ARGV`` (short in logs)."""
    options = ["--cwd", str(cwd or os.getcwd())]
    for k, v in (env or {}).items():
        options += ["--env", f"{k}={v}"]
    return [sys.executable, str(Path(__file__).resolve()), "exec", *options, "--", *argv]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="verb", required=True)
    sub.add_parser("ensure", help="build the root when missing or stale; print its path")
    for verb, text in (("run", "build the root if needed, then run ARGV inside it"),
                       ("exec", "run ARGV inside the root as it is (command() uses this)")):  # fmt: skip
        p = sub.add_parser(verb, help=text)
        p.add_argument("--cwd", default=os.getcwd(), help="where ARGV runs (in the repository or /tmp)")
        p.add_argument("--env", action="append", default=[], metavar="K=V", help="a variable for ARGV")
        p.add_argument("argv", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    if args.verb == "ensure":
        print(ensure(log=say))
        return 0
    rest = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not rest:
        parser.error("a command to run is missing (sidroot.py run -- COMMAND ...)")
    root = ensure(log=say) if args.verb == "run" else location()
    if not ready(root):
        raise SystemExit(f"sidroot: no root at {root} (run `python3 .ci/sidroot.py ensure` first)")
    env = dict(item.split("=", 1) for item in args.env)
    argv_ = _unshare(rest, env, args.cwd, root, REPO)
    sys.stdout.flush()
    os.execvp(argv_[0], argv_)


if __name__ == "__main__":
    sys.exit(main())
