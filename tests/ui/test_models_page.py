"""The Models page through Streamlit's AppTest, against real tritonservers."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin.domain import ModelState
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.samples import SAMPLE_MODELS

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    st.cache_data.clear()  # AppTest runs in this process: no rows cached by an earlier test
    yield
    st.cache_data.clear()


def use_server(monkeypatch: pytest.MonkeyPatch, server: TritonProcess, url: str | None = None) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", url or server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(server.log_path))
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(server.repository))


def open_models_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("models.py")
    return run(at)


def run(at: AppTest) -> AppTest:
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def table(at: AppTest) -> dict[str, str]:
    """name -> state, from the model table."""
    frame = at.dataframe[0].value
    return dict(zip(frame["name"], frame["state"], strict=True))


def button(at: AppTest, label: str) -> object:
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r}; have {[b.label for b in at.button]}"
    return matches[0]


def ask(at: AppTest, action: str, names: list[str], dependents: bool = False) -> AppTest:
    """Pick models and an action, press its button: the page must ask for confirmation."""
    at.multiselect(key="models.selected").set_value(names)
    at.selectbox(key="models.action").set_value(action)
    if dependents:
        at.checkbox(key="models.dependents").check()
    run(at)
    button(at, f"{action.capitalize()}…").click()  # type: ignore[attr-defined]
    run(at)
    assert any(names[0] in w.value for w in at.warning), "a confirmation is asked first"
    return at


def do_action(at: AppTest, action: str, names: list[str], dependents: bool = False) -> AppTest:
    ask(at, action, names, dependents)
    button(at, f"Confirm {action}").click()  # type: ignore[attr-defined]
    return run(at)


def server_states(server: TritonProcess) -> dict[str, ModelState]:
    return {e.name: e.state for e in TritonClient(server.http_url).repository_index()}


def test_models_page_lists_every_model_with_config_facts(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_server(monkeypatch, triton_server)
    at = open_models_page()
    assert at.title[0].value == "Models"
    states = table(at)
    assert set(SAMPLE_MODELS) <= set(states)
    frame = at.dataframe[0].value.set_index("name")
    assert frame.loc["digits_classifier", "backend/platform"] == "python"
    assert frame.loc["digits_classifier", "max batch size"] == "32"
    assert frame.loc["digits_pipeline", "backend/platform"] == "ensemble"
    assert frame.loc["digits_pipeline", "instances"] == "— (its members')"  # not "0"
    assert frame.loc["text_normalize", "dynamic batching"] == "yes"
    assert list(frame.columns)[-1] == "reason"  # the long column last: batching and last inference in view
    assert "None" not in frame.to_string()


def test_search_and_state_filter(triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    use_server(monkeypatch, triton_server)
    at = open_models_page()
    at.text_input(key="models.search").input("digits_p")
    run(at)
    assert set(table(at)) == {"digits_pipeline", "digits_postprocess", "digits_preprocess"}
    at.text_input(key="models.search").input("")
    at.multiselect(key="models.states").set_value(["UNAVAILABLE"])
    run(at)
    assert any("No model matches" in i.value for i in at.info)
    assert all("state" not in d.value.columns for d in at.dataframe)  # only the detail view's


def test_detail_shows_io_config_and_ensemble_graph(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_server(monkeypatch, triton_server, url="grpc://" + triton_server.grpc_url)
    at = open_models_page()
    at.selectbox(key="models.detail").set_value("digits_pipeline")
    run(at)
    io = at.dataframe[1].value
    assert list(io["name"]) == ["IMAGE", "LABEL", "SCORE", "LABEL_NAME"]
    assert io.iloc[0]["dtype"] == "UINT8" and io.iloc[0]["dims"] == "[-1, 8, 8]"
    pbtxt = "\n".join(c.value for c in at.code)
    assert 'platform: "ensemble"' in pbtxt and 'model_name: "digits_classifier"' in pbtxt
    assert at.json[0].value and "digits_pipeline" in at.json[0].value
    charts = at.get("graphviz_chart")
    assert charts and '"step0" -> "step1" [label="features"]' in charts[0].proto.spec
    assert any("digits_preprocess → digits_classifier → digits_postprocess" in c.value for c in at.caption)


def test_unload_then_load_through_the_page_changes_the_server(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = triton_factory(models=["digits_pipeline", "text_normalize"])
    use_server(monkeypatch, server)
    at = open_models_page()
    assert table(at)["digits_pipeline"] == "READY"

    at = do_action(at, "unload", ["digits_pipeline"], dependents=True)
    assert any("unloaded 'digits_pipeline'" in s.value for s in at.success)
    states = server_states(server)
    assert states["digits_pipeline"] is ModelState.UNAVAILABLE
    assert states["digits_classifier"] is ModelState.UNAVAILABLE  # a dependent, gone too
    assert states["text_normalize"] is ModelState.READY
    assert table(at)["digits_pipeline"] == "UNAVAILABLE"  # the table was refreshed

    at = do_action(at, "load", ["digits_pipeline", "text_normalize"])
    assert sum("loaded" in s.value for s in at.success) == 2
    states = server_states(server)
    assert states["digits_pipeline"] is ModelState.READY and states["digits_classifier"] is ModelState.READY
    assert table(at)["digits_pipeline"] == "READY"


def test_failed_load_shows_the_explainers_reason(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = triton_factory(models=["digits_classifier"])
    config = server.repository / "digits_classifier" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'platform: "graph_executor"'))
    use_server(monkeypatch, server)
    at = open_models_page()
    at = do_action(at, "reload", ["digits_classifier"])
    errors = "\n".join(e.value for e in at.error)
    # The headline is the fix; Triton's own (generic) line is in the details.
    assert 'failed:** platform \'graph_executor\' is not a Triton platform' in errors
    assert 'replace it with backend: "npu_ge"' in errors
    assert "Next step" in errors
    assert "still serving" in errors  # what serves, in the message; Triton's lines in the expander
    log = "\n".join(c.value for x in at.expander if x.label.startswith("Triton's log") for c in x.code)
    assert "unexpected platform type 'graph_executor'" in log
    assert server_states(server)["digits_classifier"] is ModelState.READY


def test_cancel_does_nothing(triton_factory: Callable[..., TritonProcess],
                             monkeypatch: pytest.MonkeyPatch) -> None:
    server = triton_factory(models=["text_normalize"])
    use_server(monkeypatch, server)
    at = ask(open_models_page(), "unload", ["text_normalize"])
    button(at, "Cancel").click()  # type: ignore[attr-defined]
    run(at)
    time.sleep(0.5)
    assert server_states(server)["text_normalize"] is ModelState.READY
    assert not [b for b in at.button if b.label.startswith("Confirm")]


def test_models_page_with_triton_down_shows_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")
    at = open_models_page()
    errors = "\n".join(e.value for e in at.error)
    assert "unreachable" in errors and "Next step" in errors and "geadmin up" in errors
    assert "timeout" not in errors.lower()
    assert not at.dataframe


def test_a_config_triton_cannot_parse_shows_the_log_reason_in_the_table(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = sample_repository / "bad_dtype"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (broken / "config.pbtxt").write_text(
        'name: "bad_dtype"\nbackend: "python"\ninput [{ name: "x" data_type: TYPE_FOO dims: [1] }]\n'
    )
    server = triton_factory(repository=sample_repository)
    use_server(monkeypatch, server)
    at = open_models_page()
    frame = at.dataframe[0].value.set_index("name")
    assert frame.loc["bad_dtype", "state"] == "NOT_LOADED"
    reason = frame.loc["bad_dtype", "reason"]
    assert "bad_dtype/config.pbtxt does not parse: line 3, column 31:" in reason  # the parser's own
    assert 'has no value named TYPE_FOO' in reason and "failed to read text proto" not in reason
    assert frame.loc["digits_pipeline", "reason"] in ("", None)
    assert reason in [c.value for c in at.code]  # read in full under "Reasons in full"


def test_a_confirmation_asked_on_one_server_is_dropped_when_switching(
    triton_server: TritonProcess,
    triton_factory: Callable[..., TritonProcess],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    other = triton_factory()
    monkeypatch.setenv("GEADMIN_TRITON_URLS", f"first={triton_server.http_url},second={other.http_url}")
    at = ask(open_models_page(), "unload", ["text_normalize"])

    at.sidebar.selectbox[0].set_value("second")
    run(at)
    assert not [b for b in at.button if b.label == "Confirm unload"], "the confirmation must not follow"
    assert server_states(other)["text_normalize"] is ModelState.READY
    assert server_states(triton_server)["text_normalize"] is ModelState.READY
