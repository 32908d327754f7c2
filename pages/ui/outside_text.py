"""The one way a page shows text it did not write: alert summaries and labels (anyone can post
an alert to Alertmanager), a deep link's parameters, names a server or discovery reports.

Streamlit renders markdown in st.markdown, st.caption, st.error and st.warning: a summary
`[Session expired](https://evil.example)` would be a link, `:red[...]` colour, `$...$` a
formula, `<b>` raw HTML. `text` escapes every ASCII punctuation character with a backslash —
CommonMark guarantees a backslash before ASCII punctuation is that character, so nothing in
the text can start a link, emphasis, code, a directive, a formula or HTML — and keeps line
breaks as breaks. GFM's autolinks (`https://...`, `www.x`, `a@b.c`) are found later, in the
parsed text where the escapes are gone (seen in Chromium): an invisible WORD JOINER (U+2060)
before every `.`, `:` and `@` breaks each of their patterns (and emoji shortcodes), so a URL
in outside text is shown, never linked. Copied from the page, it carries those joiners. `link` makes a
markdown link only of a URL the core has accepted (`geadmin.outside.under_base`).
"""

from __future__ import annotations

import re
import string

from geadmin import outside

_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
JOINER = "\u2060"  # WORD JOINER: invisible, and breaks GFM's autolink patterns


def text(value: object, limit: int = outside.MAX_TEXT_CHARS) -> str:
    """`value` as markdown that renders exactly as the text, cut to `limit` characters."""
    lines = outside.plain(value, limit).split("\n")
    # Leading spaces would make an indented code block; a line break needs two trailing spaces.
    return "  \n".join(_PUNCTUATION.sub(_escaped, line.strip()) for line in lines)


def _escaped(match: re.Match[str]) -> str:
    mark = match.group(1)
    return (JOINER if mark in ".:@" else "") + "\\" + mark


_CONSTRUCTS = re.compile(r"([\\\[\]<>!$&])")  # starts a link, image, HTML, entity, formula, :x[..]


def defused(value: str) -> str:
    """Text that mixes geadmin's own markdown with words from outside (the verdict: Triton's
    error lines in geadmin's sentences): every character that starts a link, an image, raw
    HTML, an entity, a formula or a Streamlit directive (`:green[...]`) is escaped, so no
    outside word can become one; geadmin's code spans stay, and addresses and times keep no
    invisible joiners, as operators copy them. A bare URL may still show as a link to itself
    (GFM's autolink): never a label over another target."""
    return _CONSTRUCTS.sub(r"\\\1", value)


def quoted(value: object, limit: int = 200) -> str:
    """`value` in quotes, as the notices say what a link or an answer named."""
    return f"“{text(value, limit)}”"


def link(label: str, url: str) -> str:
    """A markdown link to `url`, which the caller has checked is under a configured base
    (`geadmin.outside.under_base`); the label is escaped, the URL's parentheses and spaces encoded."""
    destination = url.replace("(", "%28").replace(")", "%29").replace(" ", "%20").replace("<", "%3C") \
        .replace(">", "%3E")
    return f"[{text(label)}]({destination})"
