"""The Overview page through Streamlit's AppTest, against real tritonservers."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from geadmin.domain import ModelState
from geadmin.ops.models import actions
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.bottleneck import MIN_WINDOW_S
from geadmin.triton.client import TritonClient
from tests.support.auth import admin_auth
from tests.support.markdown_render import render
from tests.support.processes import wait_for
from tests.support.samples import SAMPLE_MODELS, add_python_model, small_load

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SERVERS_FILE", "TRITON_URLS", "TRITON_URL", "ADMIN_KEY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def run_app(at: AppTest | None = None) -> AppTest:
    # "/" is a page that switches to /overview; AppTest reruns the page it was told, so tell it
    # Overview, or every rerun (a click) would land on "/" and lose the click in the switch.
    at = at or AppTest.from_file(APP, default_timeout=30).switch_page("overview.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def page_text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [e.value for e in at.error] + [w.value for w in at.warning]
    parts += [s.value for s in at.success] + [c.value for c in at.caption]
    parts += [f"{m.label}={m.value}" for m in at.metric]
    for frame in at.dataframe:
        parts.append(frame.value.to_csv())
    return "\n".join(str(p) for p in parts)


def test_overview_lists_every_sample_model_as_ready(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    at = run_app()
    text = page_text(at)
    for model in SAMPLE_MODELS:
        assert model in text
    assert "Server=READY" in text
    assert "ready=5" in text
    assert "Triton version=2.51.0" in text
    assert "OK: Triton serves; 5 model(s) READY, none failed" in text


def test_overview_over_grpc_shows_the_transport(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"grpc://{triton_server.grpc_url}")
    text = page_text(run_app())
    assert "Transport=GRPC" in text and "digits_pipeline" in text


def test_unreachable_triton_is_said_plainly_without_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")
    at = run_app()
    assert at.error and "unreachable" in at.error[0].value
    assert "Connection refused" in at.error[0].value
    assert "timed out" not in at.error[0].value


def test_outage_keeps_last_data_and_recovers_by_itself(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = triton_factory()
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    at = run_app()
    assert "ready=5" in page_text(at)

    server.stop()
    at = run_app(at)
    text = page_text(at)
    assert "unreachable" in text
    assert "are the last data received" in text
    assert "digits_pipeline" in text  # the last known table is still there

    restarted = triton_factory(repository=server.repository, ports=server.ports)
    assert restarted.http_url == server.http_url
    at = run_app(at)
    text = page_text(at)
    assert not at.error
    assert "ready=5" in text and "the last data received" not in text


def test_not_ready_models_come_first_with_their_reason(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_python_model(sample_repository, "broken_init",
                     "raise RuntimeError('weights file weights.bin is missing')")
    server = triton_factory(repository=sample_repository)
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    at = run_app()
    assert at.error, "a failed model must be shown as an error"
    first_error = at.error[0].value
    assert "broken_init" in first_error and "UNAVAILABLE" in first_error
    assert "weights file weights.bin is missing" in first_error
    assert "Server=LIVE, NOT READY" in page_text(at)  # strict readiness: a failed model


def test_several_servers_get_one_row_each(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("GEADMIN_TRITON_URLS", f"main={triton_server.http_url},spare={down}")
    at = run_app()
    table = at.dataframe[0].value
    assert list(table["server"]) == ["main", "spare"]
    assert list(table["status"]) == ["READY", "UNREACHABLE"]
    assert at.sidebar.selectbox[0].options == ["main", "spare"]

    at.sidebar.selectbox[0].set_value("spare")
    at = run_app(at)
    assert at.error and "unreachable" in at.error[0].value


def states(client: TritonClient) -> dict[str, ModelState]:
    return {m.name: m.state for m in client.repository_index()}


def test_config_triton_cannot_parse_is_explained_from_the_log(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_python_model(sample_repository, "legacy_ge", header='platform: "graph_executor"')
    server = triton_factory(repository=sample_repository)
    client = TritonClient(server.http_url)
    monkeypatch.setenv("GEADMIN_HOME", str(sample_repository.parent / "home"))
    # deliberately idle (an operator's unload, in the audit log): not an error
    unloaded = actions.run_action(client, actions.ModelAction.UNLOAD, ["text_normalize"], auth=admin_auth())
    assert unloaded[0].ok and states(client)["text_normalize"] == ModelState.UNAVAILABLE
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(server.log_path))
    at = run_app()
    errors = [e.value for e in at.error]
    assert len(errors) == 1, errors
    assert "legacy_ge" in errors[0] and "not loaded" in errors[0]
    assert "unexpected platform type 'graph_executor'" in errors[0]
    assert any("Not loaded: text_normalize" in c.value for c in at.caption)
    table = at.dataframe[0].value.set_index("model")
    assert "unexpected platform type 'graph_executor'" in table.loc["legacy_ge", "reason"]

    # Without the log, Triton's index alone cannot tell a failure from a model never loaded.
    monkeypatch.delenv("GEADMIN_TRITON_LOG")
    at = run_app()
    assert not at.error
    assert any("legacy_ge" in c.value and "text_normalize" in c.value for c in at.caption)


def test_retry_load_of_a_failed_model_after_fixing_it(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flaky = add_python_model(sample_repository, "needs_weights",
                             "if not Path(__file__).with_name('weights.bin').exists():\n"
                             "    raise RuntimeError('weights.bin is missing')")
    server = triton_factory(repository=sample_repository)
    client = TritonClient(server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    at = run_app()
    assert "weights.bin is missing" in at.error[0].value

    at.button(key="overview.retry.needs_weights.1").click()
    at = run_app(at)
    assert any("Retry of needs_weights failed" in e.value and "weights.bin is missing" in e.value
               for e in at.error)
    assert states(client)["needs_weights"] is ModelState.UNAVAILABLE

    (flaky / "1" / "weights.bin").write_bytes(b"\0")  # the operator fixes the cause
    at.button(key="overview.retry.needs_weights.1").click()
    at = run_app(at)
    assert states(client)["needs_weights"] is ModelState.READY
    assert any("loaded 'needs_weights'" in s.value for s in at.success)
    assert "ready=6" in page_text(at)


def test_a_retried_ensemble_lists_the_member_that_loaded_with_it(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_python_model(sample_repository, "needs_weights",
                     "if not Path(__file__).with_name('weights.bin').exists():\n"
                     "    raise RuntimeError('weights.bin is missing')")
    pipe = sample_repository / "weights_pipe"
    (pipe / "1").mkdir(parents=True)
    (pipe / "config.pbtxt").write_text(
        'name: "weights_pipe"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
        'ensemble_scheduling { step [{ model_name: "needs_weights" model_version: -1 '
        'input_map { key: "x" value: "x" } output_map { key: "y" value: "y" } }] }\n')
    server = triton_factory(repository=sample_repository)
    client = TritonClient(server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    monkeypatch.setenv("GEADMIN_HOME", str(sample_repository.parent / "home"))
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(server.log_path))  # tells a failure from never loaded
    at = run_app()
    assert states(client)["weights_pipe"] is not ModelState.READY
    (sample_repository / "needs_weights" / "1" / "weights.bin").write_bytes(b"\0")  # the cause, fixed
    at.button(key="overview.retry.weights_pipe.").click()  # never loaded: no version in the index
    at = run_app(at)
    now = states(client)
    assert now["weights_pipe"] is ModelState.READY and now["needs_weights"] is ModelState.READY
    assert any("loaded 'weights_pipe'" in s.value for s in at.success), [e.value for e in at.error]
    [also] = [w.value for w in at.warning if w.value.startswith("**Also changed state**")]
    assert "needs_weights" in also and "READY" in also


@pytest.mark.parametrize("url", ["ftp://triton:8000", "http://[triton:8000", "http://triton:port"])
def test_a_bad_triton_url_is_a_clear_error_on_every_page(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", url)
    for page in (None, "models.py"):
        at = AppTest.from_file(APP, default_timeout=30)
        if page:
            at.switch_page(page)
        at = run_app(at)
        assert at.error and "geadmin is misconfigured" in at.error[0].value
        shown = render(str(at.error[0].value))
        assert repr(url) in shown.words and not shown.links  # as text: "[" starts no link


# -- the triage card ------------------------------------------------------------------------------
SLOW_EXECUTE = """
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils
        time.sleep(0.02)
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
"""


def card_lines(at: AppTest) -> list[str]:
    return [m.value for m in at.markdown if "-badge[" in m.value]


def test_triage_card_gives_the_model_with_traffic_a_verdict_with_its_numbers(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A python model that takes 20 ms per request, asked one request at a time: no queue (no
    # batcher, nothing behind it), a few bytes copied: its time is compute infer, and no NPU is
    # known behind it, so its one right verdict is compute-bound.
    slow = add_python_model(sample_repository, "slow_answer")
    (slow / "1" / "model.py").write_text((slow / "1" / "model.py").read_text() + SLOW_EXECUTE)
    triton_server = triton_factory(repository=sample_repository)
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", triton_server.metrics_url)
    at = run_app()
    first_scrape = time.monotonic()
    assert any(c.value.startswith("Measuring") for c in at.caption)  # one scrape: no window yet
    with small_load(triton_server, workers=1, model="slow_answer", input_name="x", shape=(1,)) as sent:
        # The window the next refresh triages: at least MIN_WINDOW_S long, with requests in it.
        assert wait_for(lambda: sum(sent) >= 20 and time.monotonic() - first_scrape >= MIN_WINDOW_S, 30)
    at = run_app(at)  # the next refresh: the window spans the load
    (line,) = card_lines(at)  # the idle sample models get no line
    assert line.startswith("**slow_answer** v1 :")
    verdict = re.search(r"-badge\[([a-z-]+)\]", line)
    assert verdict and verdict.group(1) == "compute-bound", line
    rate = re.search(r"([\d.]+) req/s", line)
    assert rate and float(rate.group(1)) > 0
    queue = r"queue [\d.]+ ms(, up to [\d.]+ ms of it the batcher's max_queue_delay)? \(\d+%\)"
    assert re.search(queue, line) and re.search(r"compute infer [\d.]+ ms", line)
    assert any(c.value.startswith("fix: ") for c in at.caption)
    assert any(f"from Triton's metrics at `{triton_server.metrics_url}`" in c.value for c in at.caption)


def test_triage_card_without_traffic_is_one_calm_line(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch
) -> None:
    server = triton_factory()  # its own server: no other test's traffic in the window
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", server.metrics_url)
    at = run_app()
    first_scrape = time.monotonic()
    # The next refresh triages a window of at least MIN_WINDOW_S (else it says "Measuring").
    assert wait_for(lambda: time.monotonic() - first_scrape >= MIN_WINDOW_S, 5)
    at = run_app(at)
    assert not card_lines(at) and not at.error and not at.warning
    (line,) = [c.value for c in at.caption if "traffic" in c.value]
    assert line == ("No traffic in this window (under 1 request/s per model besides geadmin's probes): "
                    "nothing to triage.")
    headers = [m.value for m in at.markdown if m.value.startswith("**Bottlenecks**")]
    assert len(headers) == 1 and re.fullmatch(r"\*\*Bottlenecks\*\* · last \d+ s", headers[0])


def test_triage_card_with_unreadable_metrics_says_why_without_red(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    monkeypatch.setenv("GEADMIN_TRITON_METRICS_URL", f"http://127.0.0.1:{free_port()}/metrics")
    at = run_app()
    assert not at.error  # the server itself is fine: only the card lacks its figures
    assert any(c.value.startswith("No bottleneck figures: ") and "Connection refused" in c.value
               for c in at.caption)


def test_a_model_whose_directory_is_gone_is_drift_without_buttons_that_cannot_work(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """It still serves, the index no longer lists it: DEGRADED with the fix, and no Open in
    editor / Put back served (no file to open or write)."""
    server = triton_factory(models=["digits_classifier", "text_normalize"])
    (server.repository / "text_normalize").rename(tmp_path / "text_normalize")
    monkeypatch.setenv("GEADMIN_TRITON_URL", server.http_url)
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(server.repository))
    at = run_app()
    text = page_text(at)
    assert ("DEGRADED: model 'text_normalize' still serves, but its directory is gone from the repository"
            in text), text
    (card,) = [w.value for w in at.warning if w.value.startswith("**text_normalize** — ")]
    assert "*Fix:* put its directory back" in card
    labels = [b.label for b in at.button]
    assert "Put back served" not in labels and "Open in editor" not in labels, labels
