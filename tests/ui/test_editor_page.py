"""The config editor through AppTest, against a real tritonserver: findings, knobs, diffs,
apply, the automatic rollback of a config Triton rejects, conflicts, history and rollback."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest
from tritonclient.grpc import model_config_pb2

from geadmin import audit
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, button, isolate, point_at, run
from tests.support.samples import add_slow_start_model, slow_start_parameter

MODEL = "digits_classifier"
pytestmark = pytest.mark.integration


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    triton = triton_factory(models=[MODEL])
    point_at(monkeypatch, triton)
    return triton


def editor(model: str = MODEL) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("editor.py")
    run(at)
    at.selectbox(key="editor.model").set_value(model)
    return run(at)


def edit(at: AppTest, text: str) -> AppTest:
    at.text_area(key="editor.text").set_value(text)
    return run(at)


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def config_file(server: TritonProcess) -> Path:
    return server.repository / MODEL / "config.pbtxt"


def test_opens_the_file_as_it_is_on_disk_with_no_findings(server: TritonProcess) -> None:
    at = editor()
    assert at.text_area(key="editor.text").value == config_file(server).read_text()
    assert "0 errors, 0 warnings" in markdown(at)
    assert "every field set **on disk** is live in Triton" in markdown(at)
    assert button(at, "Apply").disabled  # type: ignore[attr-defined]


def test_a_typo_is_shown_with_its_line_and_apply_is_disabled(server: TritonProcess) -> None:
    at = editor()
    text = config_file(server).read_text().replace("TYPE_FP32", "TYPE_FP23", 1)
    at = edit(at, text)
    assert "1 error, 0 warnings" in markdown(at)
    shown = markdown(at)
    assert "line 6 ·" in shown and "TYPE_FP23" in shown and "did you mean TYPE_FP32" in shown
    assert button(at, "Apply").disabled  # type: ignore[attr-defined]
    assert "Fix the parse error to use the knobs." in [c.value for c in at.caption]


def test_knobs_write_into_the_text_keeping_comments_and_apply_makes_it_live(server: TritonProcess) -> None:
    at = editor()
    prefix = next(k for k in at.session_state.filtered_state
                  if k.startswith("editor.knob.") and k.endswith(".mbs"))
    prefix = prefix.removesuffix("mbs")
    at.number_input(key=prefix + "mbs").set_value(64)  # not below digits_pipeline's 32: the validator refuses
    at.text_input(key=prefix + "sizes").set_value("4, 8")
    at.number_input(key=prefix + "count").set_value(2)
    at.button[[b.label for b in at.button].index("Write knobs into the text")].click()
    run(at)
    text = at.text_area(key="editor.text").value
    assert "max_batch_size: 64" in text and "preferred_batch_size: [ 4, 8 ]" in text and "count: 2" in text
    assert text.startswith("# MLP")  # the file's comment survived
    assert "+max_batch_size: 64" in "\n".join(c.value for c in at.code)  # edited vs on disk
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    assert any("applied the new config" in s.value for s in at.success), [e.value for e in at.error]
    assert config_file(server).read_text() == text
    with TritonClient(server.http_url) as client:
        live = client.model_config(MODEL)
    assert live.max_batch_size == 64 and live.instance_group[0].count == 2
    (row,) = [r for r in audit.query(model=MODEL) if r.result != "started"]  # "started": before the write
    assert (row.action, row.result, row.origin) == ("apply", "ok", "dashboard")
    assert at.dataframe[0].value["revision"].tolist()  # the history lists the kept revisions


def test_a_config_triton_rejects_is_rolled_back_and_the_edit_stays_to_fix(server: TritonProcess) -> None:
    original = config_file(server).read_bytes()
    at = editor()
    rejected = original.decode().replace("kind: KIND_CPU", "kind: KIND_GPU")  # no GPU here
    at = edit(at, rejected)
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    errors = "\n".join(e.value for e in at.error)
    assert "no GPUs are available" in errors and "restored, byte for byte" in errors
    assert config_file(server).read_bytes() == original
    assert at.text_area(key="editor.text").value == rejected  # still there, to fix
    with TritonClient(server.http_url) as client:
        assert client.model_ready(MODEL)
        kind = client.model_config(MODEL).instance_group[0].kind
        assert kind == model_config_pb2.ModelInstanceGroup.KIND_CPU


def test_a_change_on_disk_since_opening_is_never_overwritten(server: TritonProcess) -> None:
    at = editor()
    at = edit(at, config_file(server).read_text().replace("max_queue_delay_microseconds: 1000",
                                                          "max_queue_delay_microseconds: 3000"))
    colleague = config_file(server).read_text().replace("preferred_batch_size: [ 8, 16 ]",
                                                        "preferred_batch_size: [ 8 ]")
    config_file(server).write_text(colleague)
    run(at)
    assert any("changed on disk since you opened it" in w.value for w in at.warning)
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    assert any("changed" in e.value for e in at.error), [e.value for e in at.error]
    assert config_file(server).read_text() == colleague
    button(at, "Reopen from disk").click()  # type: ignore[attr-defined]
    run(at)
    assert at.text_area(key="editor.text").value == colleague


def test_history_rolls_back_to_an_earlier_revision_in_one_click(server: TritonProcess) -> None:
    original = config_file(server).read_text()
    at = editor()
    at = edit(at, original.replace("max_queue_delay_microseconds: 1000",
                                   "max_queue_delay_microseconds: 2500"))
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    assert "2500" in config_file(server).read_text()
    history = at.dataframe[0].value
    first = int(history.loc[history["note"] == "before apply", "revision"].iloc[0])
    at.selectbox(key="editor.revision").set_value(first)
    run(at)
    button(at, f"Roll back to revision {first}").click()  # type: ignore[attr-defined]
    run(at)
    assert any(f"back to revision {first}?" in w.value for w in at.warning), "a rollback asks first"
    assert config_file(server).read_text() != original
    button(at, "Confirm rollback").click()  # type: ignore[attr-defined]
    run(at)
    assert any("applied" in s.value for s in at.success), [e.value for e in at.error]
    assert config_file(server).read_text() == original
    assert at.text_area(key="editor.text").value == original
    assert [r.action for r in audit.query(model=MODEL) if r.result != "started"] == ["rollback", "apply"]


def test_a_rollback_refused_while_planning_is_said_once_and_audited_once(
        server: TritonProcess, tmp_path: Path) -> None:
    """The model's config became a link after the editor opened it: the rollback the button asked
    for is refused while planning, one `refused` row is written (not one per rerun), and the page
    says why."""
    original = config_file(server).read_text()
    at = editor()
    at = edit(at, original.replace("max_queue_delay_microseconds: 1000",
                                   "max_queue_delay_microseconds: 2500"))
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    history = at.dataframe[0].value
    first = int(history.loc[history["note"] == "before apply", "revision"].iloc[0])
    at.selectbox(key="editor.revision").set_value(first)
    run(at)
    outside = tmp_path / "elsewhere.pbtxt"
    outside.write_text(original)
    config_file(server).unlink()
    config_file(server).symlink_to(outside)
    button(at, f"Roll back to revision {first}").click()  # type: ignore[attr-defined]
    run(at)
    run(at)  # a rerun (the page refreshes): no second row
    refused = [(r.action, r.message) for r in audit.query(model=MODEL) if r.result == "refused"]
    assert len(refused) == 1 and refused[0][0] == "rollback", refused
    assert "it is a symbolic link, and geadmin never writes through one" in refused[0][1]
    assert any("it is a symbolic link" in e.value for e in at.error)
    assert outside.read_text() == original


def test_a_config_that_loads_but_cannot_answer_is_put_back_by_the_test_request(server: TritonProcess) -> None:
    shutil.rmtree(server.repository / "digits_pipeline")  # else the validator refuses 65: it feeds 64
    original = config_file(server).read_text()
    at = editor()
    assert at.checkbox(key="editor.smoke").value  # on by default
    at = edit(at, original.replace("dims: [ 64 ]", "dims: [ 65 ]"))
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    errors = "\n".join(e.value for e in at.error)
    assert "loaded, but a test request failed" in errors and "and reloaded" in errors
    assert config_file(server).read_text() == original
    with TritonClient(server.http_url) as client:
        assert list(client.model_config(MODEL).input[0].dims) == [64]


def test_an_apply_whose_load_outlasts_the_load_timeout_keeps_the_file_and_says_it_did_not_finish(
    server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load goes on in Triton with the new file: the page says so as a warning (not a
    rollback, not a success), the file stays what Triton loads, and the editor reopens it."""
    add_slow_start_model(server.repository, "slow_start")
    with TritonClient(server.http_url, load_timeout_s=60) as client:
        client.load("slow_start")
    monkeypatch.setenv("GEADMIN_LOAD_TIMEOUT_S", "2")
    path = server.repository / "slow_start" / "config.pbtxt"
    slow = path.read_text() + slow_start_parameter(12).decode()
    at = edit(editor("slow_start"), slow)
    button(at, "Apply").click()  # type: ignore[attr-defined]
    run(at)
    (warning,) = [w.value for w in at.warning if "did not finish" in w.value]
    assert warning.startswith("**Apply did not finish:** load of 'slow_start' did not finish in "), warning
    assert "the new config.pbtxt stays on disk: Triton is loading it" in warning
    assert not at.error and not at.success
    assert path.read_text() == slow and at.text_area(key="editor.text").value == slow
