"""Test-inference values numpy or UTF-8 cannot take, through both faces against a real
tritonserver: the Playground shows `st.error` naming the input and the value (no exception
escapes the page), and `geadmin infer` exits with the usage code and the same message
(not 70, "internal error")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.ops.infer.inputs import SourceKind
from geadmin.stack.tritonserver import TritonProcess
from tests.support.apptest import APP, page_pointed_at, run
from tests.support.markdown_render import render
from tests.support.samples import samples_triton

pytestmark = pytest.mark.integration
HUGE = "9" * 400
CASES = [("digits_classifier", "features", f"[{HUGE}]", "(400 digits) is over FP32's range"),
         ("text_normalize", "TEXT", '[["\\ud800"]]', "'\\ud800' is not valid Unicode text")]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    yield from samples_triton(tmp_path_factory.mktemp("bad_values"),
                              models=["digits_classifier", "text_normalize"])


@pytest.fixture(autouse=True)
def _env(server: TritonProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    yield from page_pointed_at(monkeypatch, server, tmp_path / "home")


@pytest.mark.parametrize(("model", "name", "payload", "said"), CASES, ids=["huge_int", "surrogate"])
def test_the_playground_shows_a_value_it_cannot_send_as_an_error_naming_the_input(
        model: str, name: str, payload: str, said: str) -> None:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("playground.py")
    run(at)
    at.selectbox(key="playground.model").set_value(model)
    run(at)
    at.selectbox(key=f"playground.input.{model}.{name}.source").set_value(SourceKind.JSON)
    run(at)
    at.text_area(key=f"playground.input.{model}.{name}.json").set_value(payload)
    at.button(key="playground.send").click()
    run(at)
    assert not at.exception, [e.value for e in at.exception]
    (error,) = [render(e.value).words for e in at.error]  # as the reader sees it
    assert f"input {name}" in error and said in error, error


@pytest.mark.parametrize(("model", "name", "payload", "said"),
                         [*CASES, ("text_normalize", "TEXT", "text:a\udcffb",
                                   "'a\\udcffb' is not valid Unicode")],
                         ids=["huge_int", "surrogate", "argv_not_utf8"])
def test_geadmin_infer_refuses_a_value_it_cannot_send_with_the_usage_code(
        server: TritonProcess, capsys: pytest.CaptureFixture[str], model: str, name: str, payload: str,
        said: str) -> None:
    source = payload if payload.startswith("text:") else f"json:{payload}"
    code = main(["infer", model, "--url", server.http_url, "--input", f"{name}={source}"])
    err = capsys.readouterr().err
    assert code == ExitCode.USAGE, err
    assert f"input {name}" in err.splitlines()[0] and said in err, err
