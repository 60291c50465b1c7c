"""The docs' links resolve: every relative link and image in README.md, docs/ and bench/*.md
points at a file of the repository, and every `#anchor` at a heading of its target (GitHub's
anchors); every Markdown page named in the docs or the code exists, and so does every
repository path the docs name (`bench/state_sqlite.py`, `tests/unit/...`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *(ROOT / "bench").glob("*.md")])
CODE_DIRS = ("streams_core", "api", "app", "bench", "tests", "docker")
_MD = MarkdownIt("commonmark").enable("table")
_NOT_IN_SLUG = re.compile(r"[^\w\- ]", re.UNICODE)
_PAGE_NAME = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.md)\b")
_REPO_PATH = re.compile(r"(?<![\w./-])((?:streams_core|api|app|bench|tests|docs|docker|deps)/[\w./-]*\w)(?![-<{\w])")


def _walk(tokens: list[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def _plain(inline: Token) -> str:
    """A heading's text as GitHub slugs it: code spans and link texts without their markup."""
    return "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))


def github_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces to
    hyphens, a repeated anchor suffixed -1, -2, ..."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    tokens = _MD.parse(text)
    for i, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        slug = _NOT_IN_SLUG.sub("", _plain(tokens[i + 1]).strip().lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


@cache
def _anchors_of(page: Path) -> frozenset[str]:
    """`github_anchors` of a page, parsed once per run (bench/README.md alone links into bench/LOG.md
    dozens of times)."""
    return frozenset(github_anchors(page.read_text(encoding="utf-8")))


def relative_links(text: str) -> list[str]:
    """The targets of a page's links and images that are not URLs (code blocks are not links)."""
    targets = []
    for token in _walk(_MD.parse(text)):
        target = token.attrs.get("href") if token.type == "link_open" else token.attrs.get("src") if token.type == "image" else None
        if isinstance(target, str) and not urlsplit(target).scheme:
            targets.append(target)
    return targets


def test_anchors_follow_github() -> None:
    text = "# Runtime throughput (`runtime_throughput.py`)\n\n## A fresh machine's run (2026-11-26)\n\n## Flow\n\n## Flow\n"
    assert github_anchors(text) == {"runtime-throughput-runtime_throughputpy", "a-fresh-machines-run-2026-11-26", "flow", "flow-1"}


def test_links_in_code_are_not_links() -> None:
    assert relative_links("[a](x.md#y) and `[b](no.md)`\n\n```\n[c](no.md)\n```\n![d](p.png)\n[e](https://example.org)\n") == ["x.md#y", "p.png"]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in relative_links(page.read_text(encoding="utf-8")):
        path, _, anchor = target.partition("#")
        resolved = (page.parent / unquote(path)).resolve() if path else page
        if not resolved.exists():
            broken.append(f"{target}: no {resolved.relative_to(ROOT) if resolved.is_relative_to(ROOT) else resolved}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors_of(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_named_pages_exist() -> None:
    """A Markdown page named in the docs or in the code (`docs/state.md`, `bench/LOG.md`) is one
    of the repository's: no pointer to a page that lives elsewhere."""
    pages = {str(path.relative_to(ROOT)) for path in ROOT.rglob("*.md") if not {".venv", ".cache", ".git"} & set(path.parts)}
    code = (path for folder in CODE_DIRS for path in (ROOT / folder).rglob("*.py") if path != Path(__file__).resolve())
    sources = [*PAGES, *code]
    missing = []
    for source in sources:
        for name in set(_PAGE_NAME.findall(source.read_text(encoding="utf-8"))):
            bare = name.removeprefix("./").removeprefix("../")
            if not any(page == bare or page.endswith("/" + bare) for page in pages):
                missing.append(f"{source.relative_to(ROOT)}: {name}")
    assert not missing, "pages named but not in the repository: " + ", ".join(sorted(missing))


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_named_repository_paths_exist(page: Path) -> None:
    named = set(_REPO_PATH.findall(page.read_text(encoding="utf-8")))
    missing = sorted(path for path in named if not (ROOT / path).exists())
    assert not missing, f"{page.relative_to(ROOT)} names paths that are not in the repository: {missing}"
