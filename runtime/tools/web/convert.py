"""HTML to Markdown for web_fetch, with BeautifulSoup and markdownify.

``readability`` keeps the main content (the largest article, else the main element, else the
body) without navigation, asides and footers; ``raw`` keeps the whole body. Scripts, styles,
forms and hidden elements never show; links and images become absolute.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urljoin

from bs4 import BeautifulSoup, Tag
from markdownify import MarkdownConverter

SKIP = (
    "script", "style", "noscript", "template", "svg", "canvas", "iframe", "object", "head", "title", "button",
    "select", "textarea", "input", "math",
)
BOILERPLATE = ("nav", "aside", "footer")


class _Converter(MarkdownConverter):  # type: ignore[misc]
    def convert_br(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return "\n"

    # A pipe inside a cell would end it. (markdownify's stubs omit the table converters.)
    def convert_td(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return str(super().convert_td(el, text.replace("|", "\\|"), parent_tags))  # type: ignore[misc]

    def convert_th(self, el: Tag, text: str, parent_tags: set[str]) -> str:
        return str(super().convert_th(el, text.replace("|", "\\|"), parent_tags))  # type: ignore[misc]


def _code_language(el: Tag) -> str:
    code = el.find("code")
    classes: Any = (code if isinstance(code, Tag) else el).get("class") or []
    return next((c.split("-", 1)[1] for c in classes if c.startswith(("language-", "lang-"))), "")


_CONVERTER = _Converter(heading_style="ATX", bullets="-", code_language_callback=_code_language, escape_misc=False)


def _title(soup: BeautifulSoup) -> str:
    if soup.title is not None and soup.title.get_text().strip():
        return " ".join(soup.title.get_text().split())
    meta = soup.find("meta", attrs={"property": "og:title"})
    if isinstance(meta, Tag) and meta.get("content"):
        return str(meta["content"]).strip()
    h1 = soup.find("h1")
    return " ".join(h1.get_text().split()) if h1 is not None else ""


def _content_root(soup: BeautifulSoup, mode: str) -> Tag:
    body = soup.body or soup
    if mode == "raw":
        return body
    articles = body.find_all("article")
    if articles:
        return max(articles, key=lambda a: len(a.get_text()))
    main = body.find("main") or body.find(lambda t: t.get("role") == "main")
    return main if isinstance(main, Tag) else body


def _prepare(root: Tag, base_url: str, skip: tuple[str, ...]) -> None:
    for el in root.find_all(skip):
        el.decompose()
    for el in root.find_all(lambda t: t.get("hidden") is not None or t.get("aria-hidden") == "true"):
        el.decompose()
    for a in root.find_all("a"):
        href = str(a.get("href") or "").strip()
        if not href or href.startswith(("javascript:", "#")):
            a.unwrap()
        else:
            a["href"] = urljoin(base_url, href)
    for img in root.find_all("img"):
        src = str(img.get("src") or "")
        if not src or src.startswith("data:"):
            img.decompose()
        else:
            img["src"] = urljoin(base_url, src)


def clean(text: str) -> str:
    """Trim trailing spaces and squeeze runs of blank lines."""
    lines = [line.rstrip() for line in text.split("\n")]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")


def html_to_markdown(html: str, base_url: str = "", mode: str = "readability") -> tuple[str, str]:
    """(title, markdown) of an HTML document."""
    soup = BeautifulSoup(html, "html.parser")
    title = _title(soup)
    root = _content_root(soup, mode)
    _prepare(root, base_url, SKIP + BOILERPLATE if mode == "readability" else SKIP)
    try:
        markdown = _CONVERTER.convert_soup(root)
    except RecursionError:
        # Hostile nesting too deep to convert: its text, without structure.
        markdown = " ".join(root.get_text(" ").split())
    return title, clean(markdown)
