"""geadmin.outside: answers from outside bounded in size and depth, texts made plain, links
only under a configured base."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geadmin import outside
from geadmin.errors import GeAdminError
from tests.support.hypothesis_profiles import examples


class RefusedDouble(GeAdminError):
    """A TEST DOUBLE of a reader's own error (PrometheusError, AlertmanagerError, ...)."""


def loads(data: bytes | str, **bounds: int) -> object:
    return outside.loads(data, what="the answer", error=RefusedDouble, **bounds)


def test_a_hundred_thousand_brackets_are_a_clear_error_not_a_recursion_error() -> None:
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(RecursionError):
        json.loads(deep)  # what the readers did before: a traceback
    with pytest.raises(RefusedDouble, match="nested deeper than 64 levels"):
        loads(deep)
    with pytest.raises(RefusedDouble):
        loads("[" * 100_000)  # unbalanced counts too
    with pytest.raises(RefusedDouble):
        loads('{"a":' * 50_000 + "1" + "}" * 50_000)


def test_depth_is_counted_exactly_and_brackets_inside_strings_do_not_count() -> None:
    assert loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(RefusedDouble):
        loads("[" * 65 + "]" * 65)
    assert loads('[{"a":' * 32 + "1" + "}]" * 32) is not None  # 64 levels, alternating
    with pytest.raises(RefusedDouble):
        loads('[{"a":' * 33 + "1" + "}]" * 33)
    text = '{"s": "' + "[" * 1000 + '\\"{{{", "t": ["]]]", 1]}'
    assert loads(text) == {"s": "[" * 1000 + '"{{{', "t": ["]]]", 1]}
    assert outside.nesting(b'{"data": {"result": [{"metric": {}, "values": [[1, "2"]]}]}}') == 6


def test_an_answer_over_the_size_bound_is_refused_before_parsing() -> None:
    with pytest.raises(RefusedDouble, match="larger than 100 bytes"):
        loads(json.dumps(["x" * 200]), max_bytes=100)
    with pytest.raises(ValueError):
        loads(b"not json")  # not JSON stays json's error, for the caller to word


def test_reading_stops_at_the_bound_without_reading_the_rest() -> None:
    taken = []

    def chunks() -> Iterator[bytes]:
        for i in range(1000):
            taken.append(i)
            yield b"x" * 1024

    with pytest.raises(RefusedDouble, match="larger than 10240 bytes"):
        outside.read_limited(chunks(), what="the answer", error=RefusedDouble, max_bytes=10 * 1024)
    assert len(taken) == 11
    assert outside.read_limited(iter([b"ab", b"c"]), what="x", error=RefusedDouble, max_bytes=3) == b"abc"


def test_plain_drops_terminal_escapes_and_bidi_overrides_and_cuts() -> None:
    assert outside.plain("ok\x1b[31m red\x1b]8;;http://evil.example\x07link\x1b]8;;\x07") == \
        "ok[31m red]8;;http://evil.examplelink]8;;"
    assert outside.plain("a\u202eb\u200bc\td\ne") == "abc d\ne"
    assert outside.plain("x" * 50, 10) == "x" * 9 + "…"


BASES = ("https://geadmin.example", "https://wiki.example/runbooks")


@pytest.mark.parametrize("url", [
    "https://geadmin.example/models?server=a&model=b", "https://geadmin.example", "https://geadmin.example/",
    "https://wiki.example/runbooks/stuck-load", "https://wiki.example/runbooks", "https://GEADMIN.example/x",
    "https://geadmin.example:443/overview",
])
def test_links_under_a_configured_base_are_links(url: str) -> None:
    assert outside.under_base(url, BASES)


@pytest.mark.parametrize("url", [
    "http://evil.example/", "https://wiki.example/runbooks-evil/x", "https://wiki.example/other",
    "http://geadmin.example/overview", "https://geadmin.example:8443/", "https://geadmin.example@evil.example/",
    "https://geadmin.example.evil.example/", "javascript:alert(1)", "https://wiki.example/runbooks/../uploads/x",
    "https://wiki.example/runbooks/%2e%2e/uploads/x", "https://geadmin.example/a b", "//evil.example/",
    "https://geadmin.example/\nx", "https://geadmin.example\\@evil.example/", "", "https://geadmin.example:x/",
    "data:text/html,<b>hi</b>",
])
def test_anything_else_is_not_a_link(url: str) -> None:
    assert not outside.under_base(url, BASES)


@settings(max_examples=examples(500))
@given(st.text())
def test_plain_never_leaves_a_control_character(text: str) -> None:
    import unicodedata
    assert all(c == "\n" or unicodedata.category(c)[0] != "C" for c in outside.plain(text))


@settings(max_examples=examples(300))
@given(st.recursive(st.none() | st.integers() | st.text(), lambda inner: st.lists(inner) |
                    st.dictionaries(st.text(), inner), max_leaves=30))
def test_any_json_within_the_bounds_reads_as_json_does(document: object) -> None:
    text = json.dumps(document, ensure_ascii=False)
    assert outside.nesting(text.encode()) == depth(document)
    assert loads(text) == json.loads(text)


def depth(document: object) -> int:
    if isinstance(document, list):
        return 1 + max((depth(item) for item in document), default=0)
    if isinstance(document, dict):
        return 1 + max((depth(item) for item in document.values()), default=0)
    return 0


def test_the_depth_scan_is_linear_even_on_escaped_quotes_without_an_end() -> None:
    """A regular expression for JSON strings backtracks quadratically on `"\\"\\"...` with no
    closing quote (10,000 of them took 10 s); the scan must stay linear."""
    started = time.monotonic()
    assert outside.nesting(b'"' + b'\\"' * 1_000_000 + b"[[[") == 0  # all inside one string
    assert outside.nesting(b'"\\\\"' + b"[[[") == 3  # an escaped backslash, then the string ends
    assert time.monotonic() - started < 30
