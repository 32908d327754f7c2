"""pages.ui.outside_text: what a page shows of outside input renders as exactly that text,
read back by a real CommonMark parser — never a link, HTML, emphasis or code."""

from __future__ import annotations

import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geadmin import outside
from pages.ui import outside_text
from tests.support.hypothesis_profiles import examples
from tests.support.markdown_render import render

ATTACKS = [
    "[Session expired](https://evil.example/login)",
    "<https://evil.example/>", "<a href='https://evil.example'>sign in</a>", "![x](https://evil.example/p.png)",
    "**urgent** _now_ `code` # heading", "1. one\n- two\n> quote", "&lt;b&gt; &#x5b;x&#x5d;(y)",
    "[ref]\n\n[ref]: https://evil.example/", "    indented code",
    "```\nfence\n```", "a\\[b](https://evil.example)",
]


@pytest.mark.parametrize("attack", ATTACKS)
def test_markdown_in_outside_text_shows_as_its_characters(attack: str) -> None:
    before = render(attack)
    assert before.constructs or before.links or before.words != " ".join(attack.split())  # it was markup
    shown = render(outside_text.text(attack))
    assert shown.links == [] and shown.constructs == []
    assert shown.words == " ".join(attack.split())


def test_streamlits_own_markup_is_escaped_too() -> None:
    """Colour (`:red[...]`), icons and formulas are Streamlit's extensions, beyond CommonMark."""
    assert outside_text.text(":red[alarm] :material/warning: $x^2$").replace(outside_text.JOINER, "") == \
        r"\:red\[alarm\] \:material\/warning\: \$x\^2\$"


def test_bare_urls_cannot_become_gfm_autolinks() -> None:
    """GFM finds `https://...`, `www.` and emails in the parsed text, where escapes are gone
    (Chromium showed it): the invisible joiners break each pattern."""
    bait = "see http://evil.example/x, HTTPS://evil.example, www.evil.example or a@evil.example"
    assert len(render(bait).gfm_autolinks) == 4  # what the patterns find without the joiners
    shown = render(outside_text.text(bait))
    assert shown.gfm_autolinks == [] and shown.words == bait


def test_a_link_is_made_only_of_a_url_the_caller_checked_and_its_label_is_escaped() -> None:
    shown = render(outside_text.link("Open [me]", "https://geadmin.example/models?model=a(b)"))
    assert shown.links == ["https://geadmin.example/models?model=a%28b%29"]
    assert shown.words == "Open [me]"


@settings(max_examples=examples(1000))
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(string.punctuation)))
def test_any_text_renders_as_itself(text: str) -> None:
    escaped = outside_text.text(text)
    shown = render(escaped)
    assert shown.links == [] and shown.constructs == [] and shown.gfm_autolinks == [], (escaped, shown)
    assert shown.words == " ".join(outside.plain(text).split())
    assert not re.search(r"(?<!\\)[" + re.escape(string.punctuation.replace("\\", "")) + "]",
                         escaped.replace("\\\\", ""))  # every punctuation mark escaped
