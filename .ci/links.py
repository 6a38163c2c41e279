"""Every link of the docs goes somewhere, and every upstream citation is a link (no network: only the tree is read).

    python .ci/links.py [ROOT]      (nox -s docs runs it first; exit status 1 lists each finding where it stands)

The pages are README.md and every ``*.md`` under docs/ (docs/_build and the changelog, which records what was,
left out). In their prose (code blocks and inline code are not prose):

- a relative link (``[x](page.md)``, ``[x](page.md#anchor)``, ``[x](#anchor)``, a reference definition
  ``[x]: page.md``) names a file of the tree, and its anchor a heading of that page as MyST makes its anchors
  (``myst_heading_anchors``: headings down to ``###``, GitHub-style slugs, ``-1``, ``-2`` for repeats);
- an upstream issue or pull request is a link: ``owner/repo#NNN`` (or a short ``repo#NNN``) outside a link is
  plain text, and a link whose text is ``owner/repo#NNN`` points at that issue
  (``https://github.com/owner/repo/issues/NNN`` or ``.../pull/NNN``);
- the specifications are linked at their official homes: the DLPack specification at :data:`DLPACK_SPEC` and
  the Python array API standard at :data:`ARRAY_API`, over https, whatever page of them a link opens (a link
  whose text names one of them, or whose address is on one of their sites, is such a link).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from _checks import Finding, main_of, tracked

# what the check prints when it finds something (its count formatted in), and when it does not
FOUND = "{count} link finding(s): fix each link where it stands (the rules: .ci/links.py)"
PASSED = "links: every relative link resolves, every upstream reference is a link"

DLPACK_SPEC = "https://dmlc.github.io/dlpack/latest/"
ARRAY_API = "https://data-apis.org/array-api/latest/"
HEADING_LEVELS = 3  # docs/conf.py: myst_heading_anchors

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CODE_SPAN = re.compile(r"(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
# [text](target) and ![alt](target), the text possibly holding brackets one level deep
_LINK = re.compile(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'(][^)]*)?\)")
_DEFINITION = re.compile(r"^ {0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s.*)?$", re.M)
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>|(?<![(\w])(https?://[^\s)>\]]+)")
_HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXPLICIT_ID = re.compile(r"\{#([\w-]+)\}\s*$")
# owner/repo#NNN, and repo#NNN on its own (pytorch#188023): an upstream issue or pull request
_UPSTREAM = re.compile(r"(?<![\w/.#-])((?:[A-Za-z0-9][\w.-]*/)?[A-Za-z][\w.-]*#\d+)\b")
_ISSUE_URL = re.compile(r"https://github\.com/([\w.-]+)/([\w.-]+)/(?:issues|pull)/(\d+)/?")
_SCHEME = re.compile(r"^[A-Za-z][\w+.-]*:")
_GITHUB_SLUG_CLEAN = re.compile(r"[^\w\u4e00-\u9fff\- ]")

SPECS = (
    # (what, its official address, link texts that name it, addresses on its sites)
    ("the DLPack specification", DLPACK_SPEC,
     re.compile(r"\bdlpack\b.*\bspec", re.I | re.S), re.compile(r"^https?://dmlc\.github\.io/dlpack\b", re.I)),
    ("the Python array API standard", ARRAY_API,
     re.compile(r"\barray[ -]api\b", re.I), re.compile(r"^https?://data-apis\.(?:org|github\.io)/array-api\b", re.I)),
)  # fmt: skip


def pages(root: Path) -> list[str]:
    """The pages checked: README.md and docs/**/*.md, less the build and the changelog."""
    return sorted(
        p for p in tracked(root)
        if p == "README.md"
        or (p.startswith("docs/") and p.endswith(".md") and not p.startswith("docs/_build/")
            and p != "docs/changelog.md")
    )  # fmt: skip


def prose(text: str) -> str:
    """``text`` with its fenced code blocks and inline code blanked (lines and columns kept)."""
    return _CODE_SPAN.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), unfenced(text))


def unfenced(text: str) -> str:
    """``text`` with its fenced code blocks blanked (lines kept)."""
    lines, fence = text.split("\n"), ""
    for i, line in enumerate(lines):
        opened = _FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence) \
                    and not line.strip()[len(opened.group(1)):].strip():  # fmt: skip
                fence = ""
            lines[i] = ""
        elif opened:
            fence, lines[i] = opened.group(1), ""
    return "\n".join(lines)


def slug(title: str) -> str:
    """The anchor MyST gives a heading ``title`` (its text and inline code; markup and link targets dropped)."""
    title = re.sub(r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)", r"\1", title)  # a link: its text
    title = re.sub(r"(`+)(.+?)\1", r"\2", title)  # inline code: its content
    title = re.sub(r"(\*{1,3})(.+?)\1", r"\2", title)  # emphasis
    return _GITHUB_SLUG_CLEAN.sub("", title.lower().replace(" ", "-"))


def anchors(text: str) -> set[str]:
    """The anchors of a page's headings (down to :data:`HEADING_LEVELS`; an explicit ``{#id}`` at any level)."""
    found: set[str] = set()
    for line in unfenced(text).split("\n"):
        heading = _HEADING.match(line)
        if heading is None:
            continue
        title = heading.group(2)
        explicit = _EXPLICIT_ID.search(title)
        if explicit:
            found.add(explicit.group(1))
            title = title[: explicit.start()].rstrip()
        if len(heading.group(1)) <= HEADING_LEVELS:
            base, i, name = slug(title), 1, slug(title)
            while name in found:
                name, i = f"{base}-{i}", i + 1
            if name:
                found.add(name)
    return found


def _line(text: str, at: int) -> int:
    return text.count("\n", 0, at) + 1


def _relative(root: Path, page: str, target: str, text: str, cache: dict[Path, set[str]]) -> str | None:
    """Why relative link ``target`` of ``page`` goes nowhere (None: it resolves)."""
    path, _, anchor = target.partition("#")
    here = root / page
    if path:
        if path.startswith("/"):
            return f"{target}: an absolute path (write it relative to the page)"
        file = (here.parent / path).resolve()
        if not file.is_relative_to(root) or not file.exists():
            return f"{target}: no file {path} beside {page}"
    else:
        file = here.resolve()
    if not anchor or file.suffix != ".md" or not file.is_file():
        return None
    if file not in cache:
        cache[file] = anchors(text if file == here.resolve() else file.read_text(encoding="utf-8"))
    if anchor not in cache[file]:
        return f"{target}: no heading #{anchor} in {file.relative_to(root).as_posix()}"
    return None


def _spec(text: str, url: str) -> str | None:
    """Why a link with ``text`` to ``url`` cites a specification elsewhere than its official home (None: it does
    not, or it is there). A text citing an upstream issue (``data-apis/array-api#749``, the standard's own
    repository) cites that issue, not the specification: :func:`_upstream` checks it."""
    cited = _UPSTREAM.search(text)
    if cited is not None and "/" in cited.group(1):
        return None
    for what, home, named, site in SPECS:
        if (named.search(text) or site.match(url)) and not url.startswith(home):
            return f"{url}: {what} lives at {home}"
    return None


def _upstream(text: str, url: str) -> str | None:
    """Why a link with ``text`` to ``url`` does not open the issue its text cites (None: it does, or it cites
    none)."""
    cited = _UPSTREAM.search(text)
    if cited is None or "/" not in cited.group(1):
        return None
    owner_repo, _, number = cited.group(1).partition("#")
    opened = _ISSUE_URL.fullmatch(url)
    if opened is None or f"{opened.group(1)}/{opened.group(2)}".lower() != owner_repo.lower() \
            or opened.group(3) != number:  # fmt: skip
        issue = f"https://github.com/{owner_repo}/issues/{number}"
        return f"[{cited.group(1)}]({url}): the link does not open {cited.group(1)} ({issue})"
    return None


def check_page(root: Path, page: str, cache: dict[Path, set[str]]) -> list[Finding]:
    text = (root / page).read_text(encoding="utf-8")
    body = prose(text)
    found: list[Finding] = []
    links = [(m.start(), m.group(1), m.group(2)) for m in _LINK.finditer(body)]
    links += [(m.start(), m.group(1), m.group(2)) for m in _DEFINITION.finditer(body)]
    for at, label, target in links:
        line = _line(body, at)
        if not target:
            found.append(Finding(page, line, "", f"[{label}](): a link without a target"))
            continue
        if _SCHEME.match(target):
            why = _spec(label, target) or _upstream(label, target)
        else:
            why = _relative(root, page, target, text, cache)
        if why:
            found.append(Finding(page, line, "", why))
    blanked = _LINK.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), body)
    blanked = _DEFINITION.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), blanked)
    for m in _AUTOLINK.finditer(blanked):
        url = m.group(1) or m.group(2)
        why = _spec("", url)
        if why:
            found.append(Finding(page, _line(blanked, m.start()), "", why))
    blanked = _AUTOLINK.sub(lambda m: " " * len(m.group(0)), blanked)
    for m in _UPSTREAM.finditer(blanked):
        cited = m.group(1)
        if "/" in cited:
            owner_repo, _, number = cited.partition("#")
            how = f"[{cited}](https://github.com/{owner_repo}/issues/{number})"
        else:
            how = "owner/repo#NNN, linked to its issue"
        why = f"{cited}: an upstream reference as plain text (write {how})"
        found.append(Finding(page, _line(blanked, m.start()), "", why))
    return found


def check(root: Path) -> list[Finding]:
    """Every finding of the pages of the tree at ``root``."""
    cache: dict[Path, set[str]] = {}
    return sorted(finding for page in pages(root) for finding in check_page(root, page, cache))


main = main_of(check, FOUND, PASSED)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
