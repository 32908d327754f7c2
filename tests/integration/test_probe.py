"""Synthetic probes against a real tritonserver: a model that is READY but answers every
request with an error is caught by `geadmin probe`, the verdict (`geadmin status`) and
geadmin's own metrics; ensembles are probed end to end; a saved example request is used; a
model under a load test is skipped; the sampler probes on its schedule."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.audit import Actor, Origin
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import take_snapshot
from geadmin.ops.bench.params import load_test_running, server_lock
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.probe import Prober, source_record
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.telemetry.alerting.exporter import MetricsEndpoint
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.sampler import Sampler, SamplerOptions
from geadmin.triton.client import TritonClient
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.auth import admin_auth
from tests.support.processes import TEST_EXIT_TIMEOUT_S, wait_for
from tests.support.samples import add_answering_model, add_hung_model, copy_samples, set_answers
from tests.support.stack import in_process

pytestmark = pytest.mark.integration

BROKEN = "broken_answers"
ERROR = "the weights file is gone (probe test)"
HUNG = "hangs_in_execute"
MODELS = ["digits_classifier", "digits_preprocess", "digits_postprocess", "digits_pipeline", BROKEN]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("probe")
    repository = copy_samples(root / "repo")
    add_answering_model(repository, BROKEN, fails_with=ERROR)
    with TritonProcess(repository, models=MODELS, log_path=root / "triton.log",
                       exit_timeout_s=TEST_EXIT_TIMEOUT_S) as triton:
        yield triton


def metrics(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(url, timeout=5) as answer:
        text = answer.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_probe_once_names_the_ready_model_that_does_not_answer_first(server: TritonProcess,
                                                                       tmp_path: Path) -> None:
    result = in_process("probe", "--once", "--url", server.http_url, home=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert first.startswith(f"FAILED: {BROKEN} is READY but does not answer: ") and ERROR in first
    assert "digits_pipeline" in result.stdout and "Traceback" not in result.stderr
    answer = in_process("probe", "--once", "--json", "--url", server.http_url, home=tmp_path)
    assert answer.stdout, answer.stderr
    document = json.loads(answer.stdout)
    by_model = {p["model"]: p for p in document["probes"]}
    assert set(by_model) == set(MODELS)  # every READY model, the ensemble included
    assert not by_model[BROKEN]["ok"] and ERROR in by_model[BROKEN]["error"]
    assert all(by_model[m]["ok"] for m in MODELS if m != BROKEN), by_model
    assert by_model["digits_pipeline"]["latency_ms"] > 0


def test_status_is_degraded_while_the_probe_fails_and_ok_when_it_answers_again(
        server: TritonProcess, tmp_path: Path) -> None:
    assert in_process("probe", "--once", "--url", server.http_url, home=tmp_path).returncode == 1
    status = in_process("status", "--url", server.http_url, "--json", home=tmp_path)
    verdict = json.loads(status.stdout)
    assert status.returncode == 4 and verdict["verdict"] == "DEGRADED", status.stdout
    assert verdict["rules"] == ["model-not-answering"]
    broken = next(m for m in verdict["models"] if m["name"] == BROKEN)
    assert broken["state"] == "READY" and not broken["probe"]["ok"] and ERROR in broken["probe"]["error"]
    text = in_process("status", "--url", server.http_url, home=tmp_path).stdout
    assert f"READY, NOT ANSWERING (1):\n  {BROKEN}: " in text
    ready_line = next(line for line in text.splitlines() if line.startswith("READY ("))
    assert BROKEN not in ready_line  # counted once: under its own heading, not under READY too
    assert ready_line.startswith(f"READY ({len(MODELS) - 1}): ")
    listing = in_process("models", "list", "--url", server.http_url, home=tmp_path).stdout
    row = next(line for line in listing.splitlines() if line.startswith(BROKEN))
    assert "READY, NOT ANSWERING" in row and "fails: " in row
    assert verdict["headline"].startswith(f"DEGRADED: model '{BROKEN}' is READY but does not answer")
    set_answers(server.repository / BROKEN)  # fixed: it answers again once reloaded
    try:
        with TritonClient(server.http_url) as client:
            client.load(BROKEN)
        assert in_process("probe", "--once", "--url", server.http_url, home=tmp_path).returncode == 0
        status = in_process("status", "--url", server.http_url, home=tmp_path)
        assert status.returncode == 0, status.stdout
    finally:
        set_answers(server.repository / BROKEN, fails_with=ERROR)
        with TritonClient(server.http_url) as client:
            client.load(BROKEN)


def test_a_model_under_a_load_test_is_skipped_and_a_saved_request_is_used(
        server: TritonProcess, tmp_path: Path) -> None:
    watch.save_input("digits_classifier", source_record(
        {"features": InputSource(SourceKind.JSON, json.dumps([[3.0] * 64]))}), "tester", home=tmp_path)
    with TritonClient(server.http_url) as client:
        prober = Prober(client, home=tmp_path)
        with server_lock(tmp_path, server.http_url, "digits_pipeline"):
            assert load_test_running(tmp_path, server.http_url).model == "digits_pipeline"  # type: ignore[union-attr]
            held = prober.run(force=True)
        assert load_test_running(tmp_path, server.http_url) is None
        free = prober.run(force=True)
    assert "digits_pipeline" in held.skipped and "load test" in held.skipped["digits_pipeline"]
    assert "digits_pipeline" not in {p.model for p in held.probes}
    saved = {p.model: p for p in free.probes}
    assert saved["digits_classifier"].input == "saved" and saved["digits_classifier"].ok
    assert saved["digits_preprocess"].input == "zeros"


def test_probes_are_bounded_per_model(server: TritonProcess, tmp_path: Path) -> None:
    now = [1000.0]
    with TritonClient(server.http_url) as client:
        prober = Prober(client, home=tmp_path, interval_s=1.0, clock=lambda: now[0])  # raised to 5 s
        assert len(prober.run().probes) == len(MODELS)
        now[0] += 4.0
        assert prober.run().probes == ()  # not due yet
        now[0] += 1.5
        assert len(prober.run().probes) == len(MODELS)


def test_the_sampler_probes_and_geadmin_metrics_say_so(server: TritonProcess, tmp_path: Path) -> None:
    with TritonClient(server.http_url) as client:
        client.unload("digits_pipeline")  # behind geadmin's back: no audit row
        client.unload("digits_postprocess")
        audit.record_action("unload", "digits_postprocess", True, "", server=client.url,
                            actor=Actor.os_user(Origin.CLI), home=tmp_path)  # an operator's unload
        try:
            sampler = Sampler(SamplerOptions(server.metrics_url, tmp_path, interval_s=0.5),
                              watchers=[Prober(client, home=tmp_path).run], say=lambda _: None)
            stop = threading.Event()
            thread = threading.Thread(target=sampler.run, args=(stop,))
            thread.start()
            try:
                assert wait_for(lambda: BROKEN in watch.latest_probes(client.url, home=tmp_path) and {
                    s.state for s in watch.model_states(client.url, home=tmp_path)
                    if s.model in ("digits_postprocess", "digits_pipeline")} == {"UNAVAILABLE"}, 30)
            finally:
                stop.set()
                thread.join(10)
        finally:
            client.load("digits_postprocess")
            client.load("digits_pipeline")
        endpoint = MetricsEndpoint(tmp_path, free_port(), dashboard_url="http://127.0.0.1:8501").start()
        try:
            found = metrics(endpoint.url)
        finally:
            endpoint.stop()
    server_label = ("server", client.url)
    assert found[("geadmin_probe_success", (("model", BROKEN), server_label))] == 0.0
    assert found[("geadmin_probe_success", (("model", "digits_classifier"), server_label))] == 1.0
    assert ("geadmin_probe_success", (("model", "digits_pipeline"), server_label)) not in found  # not READY
    unloaded = ("geadmin_model_state", (("model", "digits_pipeline"), ("operator_unload", "false"),
                                        server_label, ("state", "UNAVAILABLE")))
    assert found[unloaded] == 1.0  # unloaded behind geadmin's back: not an operator's unload
    assert found[("geadmin_model_state", (("model", "digits_postprocess"), ("operator_unload", "true"),
                                          server_label, ("state", "UNAVAILABLE")))] == 1.0
    assert found[("geadmin_model_state", (("model", BROKEN), ("operator_unload", "false"), server_label,
                                          ("state", "READY")))] == 1.0
    assert found[("geadmin_sampler_source_up", (("source", server.metrics_url),))] == 1.0
    assert found[("geadmin_info", (("dashboard_url", "http://127.0.0.1:8501"), ("version", "0.1.0")))] == 1.0
    assert found[("geadmin_exporter_database_up", ())] == 1.0
    # what the alert rules subtract: the batcher's configured wait, geadmin's own probe traffic
    delay = "geadmin_model_max_queue_delay_seconds"
    assert found[(delay, (("model", "digits_classifier"), server_label))] == pytest.approx(0.001)  # 1000 us
    assert (delay, (("model", "digits_pipeline"), server_label)) not in found  # no batcher of its own
    assert found[("geadmin_probe_requests_per_second", (("model", "digits_classifier"), server_label))] > 0




def test_the_models_page_and_the_overview_show_ready_but_not_answering(
        server: TritonProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch, tmp_path)
    point_at(monkeypatch, server)
    assert in_process("probe", "--once", "--url", server.http_url, home=tmp_path).returncode == 1
    at = AppTest.from_file(APP, default_timeout=90)
    at.switch_page("models.py")
    run(at)
    frame = at.dataframe[0].value
    states = dict(zip(frame["name"], frame["state"], strict=True))
    probes = dict(zip(frame["name"], frame["probe"], strict=True))
    assert states[BROKEN] == "READY, NOT ANSWERING" and probes[BROKEN].startswith("fails: ")
    assert states["digits_pipeline"] == "READY" and probes["digits_pipeline"].startswith("answers (")
    captions = [c.value for c in at.caption]
    assert any("4 READY, 1 READY, NOT ANSWERING" in c for c in captions), captions
    overview = run(AppTest.from_file(APP, default_timeout=90))
    banners = [str(w.value) for w in overview.warning] + [str(e.value) for e in overview.error]
    assert any(f"model '{BROKEN}' is READY but does not answer" in b for b in banners), banners
    counters = {m.label: m.value for m in overview.metric}
    assert counters["not answering"] == "1" and counters["ready"] == str(len(MODELS) - 1), counters
    assert [h.value for h in overview.subheader if h.value.startswith("READY but not answering")] == \
        ["READY but not answering (1)"]


def pending_requests(server: TritonProcess, model: str) -> float:
    return metrics(server.metrics_url)[("nv_inference_pending_request_count",
                                        (("model", model), ("version", "1")))]


def test_a_hung_model_holds_one_probe_in_triton_not_one_per_interval(
        triton_factory: Callable[..., TritonProcess], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A client timeout does not cancel a request in Triton: a probe every interval would pile
    up behind a hung execute for ever. While the model finishes nothing, the round says the
    first probe still waits instead; a reload by geadmin, or ten intervals, send one again.
    An unload then never ends (Triton waits for the request): it says why, with the probe."""
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path))
    server = triton_factory(models=[])
    add_hung_model(server.repository, HUNG)
    now = [time.time()]
    with TritonClient(server.http_url, timeout_s=2) as client:
        client.load(HUNG)
        prober = Prober(client, home=tmp_path, interval_s=5.0, clock=lambda: now[0])
        (first,) = prober.run().probes
        assert not first.ok and first.input == "zeros"
        said = f"infer with {HUNG!r}: no answer from Triton at {client.url} within 2 s — "
        assert first.error.startswith(said), first.error
        assert "or hung in its execute, where every request waits" in first.error
        sent = time.strftime("%H:%M:%S", time.gmtime(first.at_s))
        for _ in range(3):
            now[0] += 5.0
            (held,) = prober.run().probes
            assert not held.ok and held.input == "held", held
            assert held.error.startswith(f"no answer to the probe sent at {sent} UTC"), held.error
            assert "its execute is hung, or slower than the probe's timeout (2 s)" in held.error
        assert watch.fresh_probes(client.url, now_s=now[0], home=tmp_path)[HUNG].input == "held"
        at = datetime.fromtimestamp(now[0], timezone.utc)
        (reason,) = assess(take_snapshot("hung", client), EvidenceSources(home=tmp_path, now=at)).reasons
        assert reason.fix.startswith(f"reload it (geadmin models reload {HUNG}): a new instance serves")
        audit.record("reload", HUNG, audit.Result.OK, server=client.url, home=tmp_path)
        now[0] += 5.0
        (after_reload,) = prober.run().probes
        assert after_reload.input == "zeros" and "no answer from Triton" in after_reload.error
        # Queued behind the first, which executes: 1, not the 4 a probe per round would leave
        # (the gauge counts requests awaiting execution; Triton refreshes it every 2 s).
        assert wait_for(lambda: pending_requests(server, HUNG) == 1, 10)
        now[0] += 5.0 * 10
        (capped,) = prober.run().probes  # ten intervals on: sent again, whatever the statistics say
        assert capped.input == "zeros"
        assert wait_for(lambda: pending_requests(server, HUNG) == 2, 10)
        (unload,) = run_action(client, ModelAction.UNLOAD, [HUNG], settle_timeout_s=3, auth=admin_auth())
        assert not unload.ok
        probed = time.strftime("%H:%M:%S", time.gmtime(capped.at_s))
        assert unload.message.startswith(
            f"unload of {HUNG!r} was accepted, but it is still UNLOADING after 3 s (geadmin's probe of it "
            f"had no answer at {probed} UTC) — Triton unloads a model only once the requests it runs end: "
            "one hung in its execute holds the unload until Triton restarts (`geadmin stack restart "
            "triton`"), unload.message
    server.stop(timeout_s=2)  # the hung requests keep Triton from exiting: SIGKILL after 2 s
