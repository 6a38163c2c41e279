"""Check the built docs site in headless Chromium: pages render, navigation links resolve, screenshots.

``python docs/screenshots.py [--html docs/_build/html] [--out docs/_build/screenshots]`` (``nox -s
docs_screenshots`` builds the site afresh first, unless ``-- --built``, and installs Debian's ``chromium`` when it
is missing). The site is
served on localhost; for the index, the quickstart and the API reference it checks that

* the page's HTML has its title, the sidebar's navigation (a link to every top-level page of the toctree)
  and no broken local link (every ``href`` to a page of the site names a file that exists),
* headless Chromium renders it (``--dump-dom`` holds the page's heading, so the page was parsed and laid
  out by the browser, not only served), and writes a screenshot that is not blank (more than one colour);

and on every page of the site, at 1366 px wide, that no code block is cut: each ``pre`` shows all of its text
or scrolls (a probe script in the page reports it; it is first shown a cut block and a scrolling one).

Exit status 0 when every check passes, 1 otherwise, after printing each failure.
"""

from __future__ import annotations

import argparse
import functools
import html
import html.parser
import http.server
import json
import re
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


#: the width the pages are checked at (a 1366 x 768 laptop, the most common small screen)
WIDTH = 1366

# Run at the end of a page's body (the stylesheets have loaded: they block scripts): every `pre` must show all
# of its text or scroll (its overflow-x auto or scroll); one that is wider than its box and does not scroll,
# or that runs past an ancestor that clips it, is cut. The verdict goes into the DOM that --dump-dom prints.
PROBE = """<script>(function () {
  var pres = Array.prototype.slice.call(document.querySelectorAll("pre")), cut = [];
  pres.forEach(function (p) {
    var style = getComputedStyle(p), scrolls = style.overflowX === "auto" || style.overflowX === "scroll";
    var clipped = p.scrollWidth > p.clientWidth + 1 && !scrolls;
    for (var a = p.parentElement; a && !clipped; a = a.parentElement) {
      var o = getComputedStyle(a).overflowX;
      if ((o === "hidden" || o === "clip") && p.getBoundingClientRect().right > a.getBoundingClientRect().right + 1)
        clipped = true;
    }
    if (clipped) cut.push((p.textContent || "").trim().split("\\n")[0].slice(0, 60));
  });
  document.documentElement.setAttribute("data-pre-probe", pres.length + " pre; cut: " + JSON.stringify(cut));
})();</script>"""
# two pages of the probe's own, served beside the site: one cut code block, one that scrolls
PROBE_PAGES = {
    "__probe_cut.html": "<pre style='width:200px;overflow:hidden'>" + "x" * 400 + "</pre>",
    "__probe_scrolls.html": "<pre style='width:200px;overflow-x:auto'>" + "x" * 400 + "</pre>",
}


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        """The site's files; a page asked for with ``?probe`` has :data:`PROBE` before its ``</body>``."""
        path, _, query = self.path.partition("?")
        name = path.lstrip("/")
        if query != "probe" or not name.endswith(".html"):
            super().do_GET()
            return
        if name in PROBE_PAGES:
            text = f"<html><body>{PROBE_PAGES[name]}</body></html>"
        else:
            file = Path(self.directory) / name
            if not file.is_file():
                self.send_error(404)
                return
            text = file.read_text(encoding="utf-8")
        body = text.replace("</body>", PROBE + "</body>", 1).encode("utf-8")
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def cut_code(browser: str, url: str) -> tuple[int, list[str]] | None:
    """(code blocks, the first line of each that is cut) on the page at ``url`` in Chromium at :data:`WIDTH` px,
    or None when the probe did not run."""
    with tempfile.TemporaryDirectory() as profile:
        flags = [browser, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--window-size={WIDTH},900"]
        dom = subprocess.run(
            [*flags, "--dump-dom", url + "?probe"], capture_output=True, text=True, timeout=120, check=False
        ).stdout
    found = re.search(r'data-pre-probe="(\d+) pre; cut: ([^"]*)"', dom)
    if found is None:
        return None
    return int(found.group(1)), json.loads(html.unescape(found.group(2)))


def check_code_blocks(site: Path, base: str, browser: str) -> list[str]:
    """Every page of the site at :data:`WIDTH` px: no code block cut. The probe is first shown to tell a cut
    block from one that scrolls (else the check could not fail)."""
    failures = []
    if cut_code(browser, base + "__probe_cut.html") != (1, ["x" * 60]) or cut_code(
        browser, base + "__probe_scrolls.html"
    ) != (1, []):
        return ["the code-block probe cannot tell a cut block from one that scrolls"]
    pages = sorted(p.relative_to(site).as_posix() for p in site.rglob("*.html") if not p.name.startswith("_"))
    blocks = 0
    for page in pages:
        if page.startswith(("_", "genindex", "search", "py-modindex")):
            continue
        found = cut_code(browser, base + page)
        if found is None:
            failures.append(f"{page}: the code-block probe did not run")
            continue
        blocks += found[0]
        failures += [f"{page}: a code block is cut at {WIDTH} px: {line!r}" for line in found[1]]
    print(f"  code blocks: {blocks} on {len(pages)} pages at {WIDTH} px, {len(failures)} cut")
    return failures


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
                    [*flags, f"--window-size={WIDTH},900", f"--screenshot={shot}", base + page],
                    capture_output=True, timeout=120, check=False,
                )  # fmt: skip
            if heading.lower() not in dom.lower() or "</html>" not in dom:
                failures.append(f"{page}: Chromium's DOM lacks the page ({len(dom)} characters)")
            rows = _png_colours(shot) if shot.is_file() else 0
            if rows < 10:
                failures.append(f"{page}: the screenshot {shot} is blank or missing ({rows} distinct rows)")
            print(f"  {page}: {len(local)} local links, {len(dom)} characters of DOM, screenshot {shot} ({rows} rows)")
        failures += check_code_blocks(site, base, browser)
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
