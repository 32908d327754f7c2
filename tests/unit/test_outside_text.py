"""pages.ui.outside_text: what a page shows of outside input renders as exactly that text,
read back by a real CommonMark parser — never a link, HTML, emphasis or code."""

from __future__ import annotations

import ast
import re
import string
from pathlib import Path

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


# -- the guard: no page puts an error's words into markdown as they came ----------------------
MARKDOWN_CALLS = {"error", "warning", "info", "success", "markdown", "caption", "toast", "write"}
ERROR_NAMES = {"exc", "error", "problem"}  # what pages call a caught error or its words
ESCAPES = {"defused", "text", "quoted", "show_error", "show_failure",
           "next_step", "input_fix"}  # the last two: geadmin's own next step, chosen by the error's type


def raw_error_words(source: str) -> list[int]:
    """Lines where an st.<markdown call>'s argument holds a caught error (`exc`, `error`,
    `problem`) outside one of the escapes: Triton's and a model's words rendered as markdown."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "st"
                and node.func.attr in MARKDOWN_CALLS):
            continue
        for name in (n for arg in node.args for n in ast.walk(arg)):
            if not (isinstance(name, ast.Name) and name.id in ERROR_NAMES):
                continue
            up = parents.get(name)
            while up is not None and up is not node:
                called = getattr(up, "func", None)
                if isinstance(up, ast.Call) and getattr(called, "id", getattr(called, "attr", "")) in ESCAPES:
                    break
                up = parents.get(up)
            else:
                found.append(name.lineno)
    return found


def test_no_page_renders_an_errors_words_as_markdown() -> None:
    pages = Path(__file__).resolve().parents[2] / "pages"
    raw = {f"{path.relative_to(pages)}:{line}" for path in pages.rglob("*.py")
           for line in raw_error_words(path.read_text())}
    assert not raw, f"wrap the error in outside_text.defused(...): {sorted(raw)}"


def test_the_guard_finds_a_planted_raw_error() -> None:
    assert raw_error_words('st.error(f"failed: {exc}")\n') == [1]
    assert raw_error_words('st.caption(str(problem))\n') == [1]
    assert raw_error_words('st.error(f"failed: {defused(str(exc))}")\n') == []
    assert raw_error_words('st.error(outside_text.defused(str(exc)))\n') == []


# -- and no page puts a name from outside into markdown as it came ---------------------------
# A model, tensor or version's name is a directory or a config's word, a user's an identity
# provider's: a directory named `:red[FAKE]` or `[x](https://evil)` rendered as markup.
# A finding's message and fix quote the config's own words; `names` are models' names.
NAME_WORDS = {"model", "name", "names", "message", "fix"}  # variables and attributes that hold one
OUR_NAMES = {"transport.name"}  # an enum's own member name


def _unescaped(node: ast.AST) -> list[ast.AST]:
    """`node` and what is under it, but nothing inside an escaping call (ESCAPES)."""
    if isinstance(node, ast.Call) and ast.unparse(node.func).split(".")[-1] in ESCAPES:
        return []
    return [node, *(n for child in ast.iter_child_nodes(node) for n in _unescaped(child))]


def _holds_a_name(shown: ast.expr) -> bool:
    """A name word itself, or `", ".join(...)` of anything that names one."""
    if isinstance(shown, ast.Call) and isinstance(shown.func, ast.Attribute) and shown.func.attr == "join":
        words = {n.id for n in ast.walk(shown) if isinstance(n, ast.Name)} | \
            {n.attr for n in ast.walk(shown) if isinstance(n, ast.Attribute)}
        return bool(words & NAME_WORDS)
    is_name = (isinstance(shown, ast.Attribute) and shown.attr in NAME_WORDS) or \
        (isinstance(shown, ast.Name) and shown.id in NAME_WORDS)
    return is_name and ast.unparse(shown) not in OUR_NAMES


def raw_names(source: str) -> list[int]:
    """Lines where an f-string in an st.<markdown call>'s argument shows a name outside the escapes."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in MARKDOWN_CALLS):
            continue
        for value in (n for arg in node.args for n in _unescaped(arg) if isinstance(n, ast.FormattedValue)):
            if _holds_a_name(value.value):
                found.append(value.lineno)
    return found


def test_no_page_renders_a_name_as_markdown() -> None:
    pages = Path(__file__).resolve().parents[2] / "pages"
    raw = {f"{path.relative_to(pages)}:{line}" for path in pages.rglob("*.py")
           for line in raw_names(path.read_text())}
    assert not raw, f"wrap the name in outside_text.text(...): {sorted(raw)}"


def test_the_name_guard_finds_a_planted_raw_name() -> None:
    assert raw_names('st.info(f"**{model.name}** is loading")\n') == [1]
    assert raw_names('st.sidebar.caption(f"{identity.name} signed in")\n') == [1]
    assert raw_names('st.success(f"{model}: saved")\n') == [1]
    assert raw_names('st.info(f"**{outside_text.text(model.name)}** is loading")\n') == []
    assert raw_names('st.caption(f"over {transport.name}")\n') == []
    assert raw_names('st.warning(f"Unload {len(names)} model(s): {\', \'.join(names)}?")\n') == [1]
    assert raw_names('st.markdown(f"`{finding.rule}`: {finding.message} fix: {finding.fix}")\n') == [1, 1]
    assert raw_names('st.info(defused(f"[{finding.rule}] {finding.message}"))\n') == []
