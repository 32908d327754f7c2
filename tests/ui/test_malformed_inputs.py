"""Every page's text and number inputs, driven with malformed values through AppTest: no
exception escapes a page (pages/app.py turns any GeAdminError a page leaves unhandled into
`st.error` with the cause and the next step). Against a private real tritonserver; no button
that changes the server is pressed, but the Load test's Run is (bad loads are refused before
anything runs)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.errors import (
    ConfigError,
    GeAdminError,
    InferInputError,
    PerfAnalyzerError,
    TritonUnreachableError,
)
from geadmin.ops.bench.results import list_runs
from geadmin.ops.infer.inputs import SourceKind
from geadmin.stack.tritonserver import TritonProcess
from pages.ui.errors import fix_for
from tests.support.apptest import APP, page_pointed_at
from tests.support.samples import samples_triton

pytestmark = pytest.mark.integration

PAGES = ("overview.py", "metrics.py", "npu.py", "models.py", "new_model.py", "editor.py", "stack.py",
         "audit.py", "settings.py", "playground.py", "load_test.py")
MALFORMED_TEXT = ("", ",", "0", "-1", "1.5", " , ,", "nan", "inf", "1e309", "../../../etc/passwd",
                  "[" * 5000, '{"data": [[[[', "\x00\x01", "名前 ✓", "x" * 20_000, "1,0,-3", "999999999999")
MALFORMED_NUMBERS = (-1e18, 1e18, 0, -1)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    yield from samples_triton(tmp_path_factory.mktemp("malformed"))


@pytest.fixture(autouse=True)
def _env(server: TritonProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from page_pointed_at(monkeypatch, server, tmp_path / "home")


def escaped(at: AppTest) -> list[str]:
    return [e.value for e in at.exception]


def fill(at: AppTest, text: str, number: float) -> list[str]:
    """Every text input and text area set to `text`, every number input to `number` (the
    widget may clamp it); the keys that were set."""
    touched = []
    for widget in [*at.text_input, *at.text_area]:
        if not widget.disabled:
            widget.set_value(text)
            touched.append(str(widget.key or widget.label))
    for number_widget in at.number_input:
        if not number_widget.disabled:
            low = number_widget.min if number_widget.min is not None else -math.inf
            high = number_widget.max if number_widget.max is not None else math.inf
            value = min(max(number, low), high)  # the browser keeps values in bounds
            number_widget.set_value(int(value) if isinstance(number_widget.step, int) else value)
            touched.append(str(number_widget.key or number_widget.label))
    return touched


@pytest.mark.parametrize("page", PAGES)
def test_malformed_text_and_numbers_never_raise_out_of_a_page(page: str, server: TritonProcess) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    at.run()
    assert not escaped(at), (page, escaped(at))
    for index, text in enumerate(MALFORMED_TEXT):
        touched = fill(at, text, MALFORMED_NUMBERS[index % len(MALFORMED_NUMBERS)])
        at.run()
        assert not escaped(at), (page, text[:40], touched, escaped(at))


@pytest.mark.parametrize("loads", ["0", ",", "1.5", "-2", "1,x", "5000", ",".join(["1"] * 40)])
def test_load_test_run_with_bad_concurrencies_is_a_message_and_nothing_runs(loads: str,
                                                                            tmp_path: Path) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("load_test.py")
    at.run()
    at.text_input(key="load_test.loads").set_value(loads)
    at.button(key="load_test.run").click()
    at.run()
    assert not escaped(at), escaped(at)
    errors = " ".join(e.value for e in at.error)
    assert "**Next step:** change the loads (e.g. 1,4,16) or the window, then Run again." in errors, errors
    assert list_runs(tmp_path / "home") == []


@pytest.mark.parametrize("error", [
    ConfigError("GEADMIN_SERVERS_FILE: line 3"), InferInputError("bad"), PerfAnalyzerError("no"),
    TritonUnreachableError("refused"), GeAdminError("anything")])
def test_every_error_family_gets_a_next_step(error: GeAdminError) -> None:
    assert fix_for(error) and not fix_for(error).endswith(".")


def test_a_geadmin_error_a_page_leaves_unhandled_is_shown_with_its_fix(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted page that raises: pages/app.py shows the cause and the next step, no traceback."""
    import pages.audit

    def broken() -> None:
        raise ConfigError("GEADMIN_SERVERS_FILE /etc/servers.toml: server #2 needs a url")

    monkeypatch.setattr(pages.audit, "render", broken)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("audit.py")
    at.run()
    assert not escaped(at), escaped(at)
    (message,) = [e.value for e in at.error]
    assert "server #2 needs a url" in message and "**Next step:** fix the setting" in message


def test_a_bug_in_a_page_is_not_hidden(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only GeAdminError is turned into a message: a bug stays visible to the tests."""
    import pages.audit

    def broken() -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(pages.audit, "render", broken)
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("audit.py")
    at.run()
    assert escaped(at)


PLAYGROUND_MODELS = ("digits_classifier", "text_normalize", "digits_pipeline")
MALFORMED_JSON = ("[" * 5000 + "]" * 5000, "[[1, 2], [3]]", '{"shape": [2], "data": [1]}', "[1e999]",
                  '["a", 1]', "{", "null", '{"data": {"data": []}}', "[" + "1," * 100_000 + "1]")


@pytest.mark.parametrize("model", PLAYGROUND_MODELS)
def test_playground_sends_malformed_json_inputs_as_messages_not_tracebacks(model: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("playground.py")
    at.run()
    at.selectbox(key="playground.model").set_value(model)
    at.run()
    sources = [s for s in at.selectbox if str(s.key).startswith("playground.input.")
               and str(s.key).endswith(".source")]
    assert sources, "no input source pickers"
    for picker in sources:
        picker.set_value(SourceKind.JSON)
    at.run()
    assert not escaped(at), escaped(at)
    for payload in MALFORMED_JSON:
        fill(at, payload, 1)
        at.button(key="playground.send").click()
        at.run()
        assert not escaped(at), (model, payload[:40], escaped(at))
        assert at.error, (model, payload[:40], "no message for malformed JSON")
