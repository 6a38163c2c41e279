"""Check the built docs site in headless Chromium: pages render, navigation links resolve, screenshots.

``python docs/screenshots.py [--html docs/_build/html] [--out docs/_build/screenshots]`` (``nox -s
docs_screenshots`` builds the site first and installs Debian's ``chromium`` when it is missing). The site is
served on localhost; for the index, the quickstart and the API reference it checks that

* the page's HTML has its title, the sidebar's navigation (a link to every top-level page of the toctree)
  and no broken local link (every ``href`` to a page of the site names a file that exists),
* headless Chromium renders it (``--dump-dom`` holds the page's heading, so the page was parsed and laid
  out by the browser, not only served), and writes a screenshot that is not blank (more than one colour).

Exit status 0 when every check passes, 1 otherwise, after printing each failure.
"""

from __future__ import annotations

import argparse
import functools
import html.parser
import http.server
import shutil
import subprocess
import sys
import tempfile
import threading
import zlib
from pathlib import Path
from urllib.parse import urldefrag, urljoin, urlparse

ROOT = Path(__file__).resolve().parents[1]
#: page -> text its main heading must contain
PAGES = {"index.html": "dlbind", "quickstart.html": "Getting started", "api.html": "API"}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)
        self._in_title = tag == "title"

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.title += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _png_colours(path: Path) -> int:
    """How many distinct pixel rows the PNG has (1 means a blank page): read with zlib, no image library."""
    data = path.read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        return 0
    pos, idat, width, height, depth, colour = 8, b"", 0, 0, 0, 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            depth, colour = body[8], body[9]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    channels = {2: 3, 6: 4}.get(colour, 1)
    stride = width * channels * depth // 8 + 1
    raw = zlib.decompress(idat)
    # rows differ when the page shows anything but a plain background (filter bytes aside)
    rows = {raw[i * stride + 1 : (i + 1) * stride] for i in range(height)}
    return len(rows)


def check(site: Path, out: Path, browser: str) -> list[str]:
    failures: list[str] = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    out.mkdir(parents=True, exist_ok=True)
    index = _Links()
    index.feed((site / "index.html").read_text(encoding="utf-8"))
    toc = sorted({urldefrag(h)[0] for h in index.hrefs if h.endswith(".html") and "://" not in h})
    try:
        for page, heading in PAGES.items():
            links = _Links()
            links.feed((site / page).read_text(encoding="utf-8"))
            if heading.lower() not in links.title.lower():
                failures.append(f"{page}: title {links.title!r} lacks {heading!r}")
            local = {urldefrag(urljoin(base + page, h))[0] for h in links.hrefs if not urlparse(h).scheme}
            broken = sorted(u for u in local if not (site / urlparse(u).path.lstrip("/")).is_file())
            if broken:
                failures.append(f"{page}: broken links {broken}")
            missing = [t for t in toc if urljoin(base, t) not in local]
            if missing:
                failures.append(f"{page}: the navigation lacks {missing}")
            with tempfile.TemporaryDirectory() as profile:
                flags = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}"]
                dom = subprocess.run(
                    [*flags, "--dump-dom", base + page], capture_output=True, text=True, timeout=120, check=False
                ).stdout
                shot = out / page.replace(".html", ".png")
                subprocess.run(
                    [*flags, "--window-size=1280,900", f"--screenshot={shot}", base + page],
                    capture_output=True, timeout=120, check=False,
                )  # fmt: skip
            if heading.lower() not in dom.lower() or "</html>" not in dom:
                failures.append(f"{page}: Chromium's DOM lacks the page ({len(dom)} characters)")
            rows = _png_colours(shot) if shot.is_file() else 0
            if rows < 10:
                failures.append(f"{page}: the screenshot {shot} is blank or missing ({rows} distinct rows)")
            print(f"  {page}: {len(local)} local links, {len(dom)} characters of DOM, screenshot {shot} ({rows} rows)")
    finally:
        server.shutdown()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html", type=Path, default=ROOT / "docs/_build/html")
    parser.add_argument("--out", type=Path, default=ROOT / "docs/_build/screenshots")
    args = parser.parse_args(argv)
    browser = chromium()
    if browser is None:
        print("no Chromium on PATH: apt-get install chromium", file=sys.stderr)
        return 1
    if not (args.html / "index.html").is_file():
        print(f"no built site in {args.html}: run nox -s docs first", file=sys.stderr)
        return 1
    failures = check(args.html, args.out, browser)
    for f in failures:
        print(f"FAILED: {f}", file=sys.stderr)
    print(f"docs screenshots: {len(PAGES)} pages, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
