"""What a markdown string shows, read by a real CommonMark parser (markdown-it-py, which
Streamlit's dependency `rich` brings): its text, and every construct that is more than text
(links, autolinks, images, raw HTML, emphasis, code, headings, lists). Streamlit's own
renderer (react-markdown with GFM) is in the browser; CommonMark is the part they share, and
`gfm_autolinks` applies GFM's literal-autolink patterns to the parsed text as GFM's mdast
transform (mdast-util-gfm-autolink-literal) does — after the escapes are gone."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from markdown_it import MarkdownIt
from markdown_it.token import Token

_PARSER = MarkdownIt("commonmark")
_TEXT_BLOCKS = {"paragraph_open", "paragraph_close", "inline"}
_GFM_URL = re.compile(r"(https?://|www(?=\.))([-.\w]+)([^ \t\r\n]*)", re.IGNORECASE)
_GFM_EMAIL = re.compile(r"([-.\w+]+)@([-\w]+(?:\.[-\w]+)+)")


@dataclass
class Rendered:
    text: str
    links: list[str] = field(default_factory=list)  # hrefs of links, autolinks and images
    constructs: list[str] = field(default_factory=list)  # every token type beyond plain text

    @property
    def words(self) -> str:
        """The visible text, whitespace collapsed (WORD JOINERs are invisible)."""
        return " ".join(self.text.replace("\u2060", "").split())

    @property
    def gfm_autolinks(self) -> list[str]:
        """What GFM would turn into links in the text: URLs (http, https, www.) and emails."""
        return [m.group(0) for pattern in (_GFM_URL, _GFM_EMAIL) for m in pattern.finditer(self.text)]


def render(markdown: str) -> Rendered:
    shown = Rendered("")
    parts: list[str] = []
    for token in _PARSER.parse(markdown):
        if token.type not in _TEXT_BLOCKS:
            shown.constructs.append(token.type)
        if token.type == "paragraph_close":
            parts.append("\n")
        for child in token.children or []:
            _inline(child, shown, parts)
    shown.text = "".join(parts)
    return shown


def _inline(token: Token, shown: Rendered, parts: list[str]) -> None:
    if token.type == "text":
        parts.append(token.content)
    elif token.type in ("softbreak", "hardbreak"):
        parts.append("\n")
    else:
        shown.constructs.append(token.type)
        href = token.attrGet("href") or token.attrGet("src")
        if href:
            shown.links.append(str(href))
        if token.content and token.type != "image":
            parts.append(token.content)
