"""The Playground page through AppTest, against a real tritonserver: random, text and JSON
inputs, refusals before sending, top-k with labels, the snippets it shows, Triton down."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.ops.infer.inputs import SourceKind
from geadmin.ops.infer.snippets import curl_command, python_snippet
from geadmin.ops.infer.spec import MAX_UPLOAD_BYTES
from geadmin.ops.probe import probe_model
from geadmin.stack.processes import free_triton_ports
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.history import watch
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.markdown_render import render
from tests.support.processes import quick_stopping_triton
from tests.support.samples import copy_samples

DIGIT_NAMES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
MODELS = ["digits_classifier", "digits_labelled", "text_normalize"]
pytestmark = pytest.mark.integration


def add_labelled_copy(repository: Path) -> None:
    """digits_classifier again, as digits_labelled, with a labels file on its output."""
    labelled = repository / "digits_labelled"
    shutil.copytree(repository / "digits_classifier", labelled)
    config = (labelled / "config.pbtxt").read_text()
    config = config.replace('name: "digits_classifier"', 'name: "digits_labelled"')
    config = config.replace("dims: [ 10 ] }", 'dims: [ 10 ] label_filename: "digit_names.txt" }')
    assert "label_filename" in config
    (labelled / "config.pbtxt").write_text(config)
    (labelled / "digit_names.txt").write_text("\n".join(DIGIT_NAMES) + "\n")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("playground")
    repository = copy_samples(root / "model_repository")
    add_labelled_copy(repository)
    triton = quick_stopping_triton(repository, models=MODELS, log_path=root / "tritonserver.log")
    triton.start()
    yield triton
    triton.stop()


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def pointed(server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> TritonProcess:
    point_at(monkeypatch, server)
    return server


def playground(model: str | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("playground.py")
    run(at)
    if model is not None:
        at.selectbox(key="playground.model").set_value(model)
        run(at)
    return at


def field(model: str, name: str, part: str) -> str:
    return f"playground.input.{model}.{name}.{part}"


def send(at: AppTest) -> AppTest:
    at.button(key="playground.send").click()
    return run(at)


def markdown(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def success_count(server: TritonProcess, model: str) -> tuple[int, int]:
    with TritonClient(server.http_url) as client:
        stats = client.model_statistics(model)[0].inference_stats
    return int(stats.success.count), int(stats.fail.count)


def test_random_input_to_the_classifier_shows_its_output_and_the_breakdown(pointed: TritonProcess) -> None:
    at = playground("digits_classifier")
    assert at.selectbox(key=field("digits_classifier", "features", "source")).value is SourceKind.RANDOM
    at = send(at)
    assert not at.error, [e.value for e in at.error]
    assert "**probabilities** · FP32 [1, 10]" in markdown(at)
    table = at.dataframe[0].value
    assert table.shape == (1, 10) and table.iloc[0].sum() == pytest.approx(1.0, abs=1e-5)
    shown = metrics(at)
    assert set(shown) == {"End to end", "Queue", "Compute input", "Compute infer", "Compute output"}
    assert all(v.endswith(" ms") for v in shown.values())
    assert float(shown["Compute infer"].removesuffix(" ms")) > 0


def test_text_to_text_normalize_shows_the_normalised_text(pointed: TritonProcess) -> None:
    at = playground("text_normalize")
    at.selectbox(key=field("text_normalize", "TEXT", "source")).set_value(SourceKind.TEXT)
    run(at)
    at.text_input(key=field("text_normalize", "TEXT", "text")).set_value("  Ｈello   WORLD ")
    at = send(at)
    assert not at.error, [e.value for e in at.error]
    assert "**NORMALIZED** · BYTES [1, 1]" in markdown(at)
    tables = [d.value for d in at.dataframe]
    assert tables[0].iloc[0, 0] == "hello world"  # NORMALIZED comes first, as Triton answers
    assert int(tables[1].iloc[0, 0]) == 2  # TOKEN_COUNT


def test_a_json_of_the_wrong_shape_is_refused_and_nothing_is_sent(pointed: TritonProcess) -> None:
    at = playground("digits_classifier")
    at.selectbox(key=field("digits_classifier", "features", "source")).set_value(SourceKind.JSON)
    run(at)
    at.text_area(key=field("digits_classifier", "features", "json")).set_value("[[1, 2, 3]]")
    before = success_count(pointed, "digits_classifier")
    at = send(at)
    (error,) = [e.value for e in at.error]
    assert "input features expects FP32 [-1, 64]; got float32 [1, 3]" in render(error).words  # as text
    assert "**Fix:**" in error and "Nothing was sent" in error
    assert not at.metric and "playground.sent" not in at.session_state
    assert success_count(pointed, "digits_classifier") == before


def test_top_k_ranks_with_the_labels_file_from_the_repository(pointed: TritonProcess) -> None:
    at = playground("digits_labelled")
    at.number_input(key="playground.top_k").set_value(3)
    at = send(at)
    assert not at.error, [e.value for e in at.error]
    ranked = next(d.value for d in at.dataframe if "label" in d.value.columns)
    assert ranked["rank"].tolist() == [1, 2, 3]
    assert ranked["label"].tolist() == [DIGIT_NAMES[c] for c in ranked["class"]]
    assert ranked["score"].is_monotonic_decreasing
    sent = at.session_state["playground.sent"]
    assert sent.request.class_count == 0  # read from the repository, not Triton's extension


def test_the_snippets_shown_are_those_of_the_request_sent(pointed: TritonProcess) -> None:
    at = playground("digits_classifier")
    at.number_input(key="playground.batch_size.digits_classifier").set_value(32)  # large: files
    at = send(at)
    sent = at.session_state["playground.sent"]
    with TritonClient(pointed.http_url) as client:
        outputs = {o.name: o.datatype for o in [*client.model_metadata("digits_classifier").outputs]}
    curl = curl_command(pointed.http_url, sent.request, output_types=outputs)
    python = python_snippet(pointed.http_url, sent.request)
    assert curl.files and python.files
    # st.code drops the script's final newline; nothing else may differ.
    assert [c.value for c in at.code] == [curl.text, python.text.removesuffix("\n")]
    assert sent.request.input("features").shape == (32, 64)
    downloads = list(at.get("download_button"))
    assert len(downloads) == len(curl.files) + len(python.files)
    at.selectbox(key="playground.model").set_value("text_normalize")  # max_batch_size 16
    run(at)
    assert at.number_input(key="playground.batch_size.text_normalize").value == 1


def test_grpc_sends_over_the_servers_grpc_endpoint_and_a_version_can_be_chosen(
        pointed: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_GRPC_PORT", str(pointed.ports.grpc))  # where this server's gRPC listens
    at = playground("digits_classifier")
    at.radio(key="playground.protocol").set_value("gRPC")
    run(at)
    assert not [t.key for t in at.text_input if "endpoint" in str(t.key)]  # no free-text address
    assert any(f"grpc://{pointed.grpc_url}" in c.value for c in at.caption)
    at.selectbox(key="playground.version.digits_classifier").set_value("1")
    at = send(at)
    assert not at.error, [e.value for e in at.error]
    sent = at.session_state["playground.sent"]
    assert (sent.result.protocol, sent.result.version, sent.request.version) == ("grpc", "1", "1")
    assert "digits_classifier version 1 over grpc" in "\n".join(c.value for c in at.caption)
    curl = curl_command(pointed.http_url, sent.request, output_types={"probabilities": "FP32"})
    assert at.code[0].value == curl.text  # curl speaks HTTP: the server's HTTP URL


def test_an_upload_over_the_limit_is_refused_before_sending(pointed: TritonProcess) -> None:
    at = playground("digits_classifier")
    at.selectbox(key=field("digits_classifier", "features", "source")).set_value(SourceKind.NPY)
    run(at)
    at.file_uploader(key=field("digits_classifier", "features", "npy")).set_value(
        ("huge.npy", b"\0" * (MAX_UPLOAD_BYTES + 1), "application/octet-stream"))
    run(at)
    before = success_count(pointed, "digits_classifier")
    at = send(at)
    (error,) = [e.value for e in at.error]
    assert ".npy file for input features is 33.6 MB, over the limit of 33.6 MB" in render(error).words
    assert "use a smaller file" in error and "Nothing was sent" in error
    assert success_count(pointed, "digits_classifier") == before


def test_triton_down_shows_the_url_and_next_step_and_recovers(
    monkeypatch: pytest.MonkeyPatch, triton_factory: Callable[..., TritonProcess]
) -> None:
    ports = free_triton_ports()
    url = f"http://127.0.0.1:{ports.http}"
    monkeypatch.setenv("GEADMIN_TRITON_URL", url)
    at = playground()
    (error,) = [e.value for e in at.error]
    assert url in error and "unreachable" in error and "**Next step:** start Triton" in error
    triton_factory(ports=ports, models=["digits_classifier"])
    run(at)  # the next interaction
    assert not at.error
    assert at.selectbox(key="playground.model").options == ["digits_classifier"]


def test_the_request_on_screen_becomes_the_probes_input(pointed: TritonProcess, tmp_path: Path) -> None:
    at = playground("text_normalize")
    at.selectbox(key=field("text_normalize", "TEXT", "source")).set_value(SourceKind.TEXT)
    run(at)
    at.text_input(key=field("text_normalize", "TEXT", "text")).set_value("probe me")
    run(at)
    at.button(key="playground.probe_input").click()
    run(at)
    saved = "Saved: the probe of text_normalize now sends this request (audited)."
    assert [s.value for s in at.success] == [saved]
    home = tmp_path / "home"
    assert watch.saved_input("text_normalize", home=home) == {"TEXT": {"kind": "text", "payload": "probe me"}}
    with TritonClient(pointed.http_url) as client:
        probe = probe_model(client, client.url, "text_normalize", home)
    assert probe.ok and probe.input == "saved", probe
    assert [r.action for r in audit.query(model="text_normalize", home=home)] == ["probe_input"]
