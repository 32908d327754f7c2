"""The prober's choices on a hand-built repository index, and what geadmin's metrics export of
them: one state per model whatever its versions (Triton's index has a row per version), a
trial known by its marker or its running tuning run (a name alone proves nothing), intervals
timed on a clock that never steps back, and a probe stamped before the wall clock stepped back
never standing as the latest. No request is sent here: the client points at a closed port,
and the probes themselves are tests/integration/test_probe.py's, against a real tritonserver."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from geadmin.domain import ModelEntry, ModelState
from geadmin.ops.bench.params import TUNING, RunningLoadTest
from geadmin.ops.probe import Prober, record_index
from geadmin.repository import trials
from geadmin.telemetry.alerting.exporter import GeadminCollector
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord
from geadmin.triton.client import TritonClient
from tests.support.http_doubles import closed_port

NOW = 1_800_000_000.0
LOOKALIKE = "llama__tune_20240601"  # a date is 8 hex digits: a trial's shape, an operator's model


@pytest.fixture
def client() -> Iterator[TritonClient]:
    with TritonClient(f"http://127.0.0.1:{closed_port()}") as made:
        yield made


def index(*rows: tuple[str, str, ModelState, str]) -> list[ModelEntry]:
    """As TritonClient.repository_index lists it: sorted by (name, version) as text, v10 before v9."""
    return sorted((ModelEntry(*row) for row in rows), key=lambda m: (m.name, m.version))


def exported(home: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(GeadminCollector(home, clock=lambda: NOW))
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(generate_latest(registry).decode())
            for s in family.samples}


def states(home: Path, server: str) -> dict[str, str]:
    return {s.model: s.state for s in watch.model_states(server, home=home)}


def test_a_version_retired_beside_a_ready_one_is_recorded_ready(client: TritonClient, tmp_path: Path) -> None:
    """After a version policy retires v9 while v10 serves, the model is READY: ModelNotReady must
    not page, and ModelReadyButNotAnswering must still be able to fire."""
    seen = index(("a", "9", ModelState.UNAVAILABLE, "unloaded"), ("a", "10", ModelState.READY, ""))
    record_index(client.url, seen, NOW, home=tmp_path)
    assert states(tmp_path, client.url) == {"a": "READY"}
    assert exported(tmp_path)[("geadmin_model_state", (("model", "a"), ("operator_unload", "false"),
                                                       ("server", client.url), ("state", "READY")))] == 1.0
    due, _ = Prober(client, home=tmp_path).due(seen, None, force=True)
    assert due == ["a"]  # probed once, not once per version


def test_a_failed_version_is_recorded_over_an_unloaded_one(client: TritonClient, tmp_path: Path) -> None:
    seen = index(("a", "1", ModelState.UNAVAILABLE, "unloaded"),
                 ("a", "2", ModelState.UNAVAILABLE, "failed to load 'a' version 2: out of memory"))
    record_index(client.url, seen, NOW, home=tmp_path)
    (record,) = watch.model_states(client.url, home=tmp_path)
    assert (record.state, record.reason) == ("UNAVAILABLE", "failed to load 'a' version 2: out of memory")


@pytest.mark.parametrize("known", [True, False], ids=["repository known", "no repository"])
def test_a_production_model_named_like_a_trial_is_probed_and_exported(
        client: TritonClient, tmp_path: Path, known: bool) -> None:
    repository = tmp_path / "models"
    (repository / LOOKALIKE / "1").mkdir(parents=True)  # an operator's model: no trial marker
    seen = index((LOOKALIKE, "1", ModelState.READY, ""))
    prober = Prober(client, home=tmp_path, repository=repository if known else None)
    assert prober.due(seen, None) == ([LOOKALIKE], {})
    record_index(client.url, seen, NOW, home=tmp_path)
    watch.record_probes([ProbeRecord(client.url, LOOKALIKE, NOW - 5, False, None, "boom")], home=tmp_path)
    found = exported(tmp_path)
    assert found[("geadmin_probe_success", (("model", LOOKALIKE), ("server", client.url)))] == 0.0
    assert found[("geadmin_model_state", (("model", LOOKALIKE), ("operator_unload", "false"),
                                          ("server", client.url), ("state", "READY")))] == 1.0


def test_a_marked_trial_is_neither_probed_nor_taken_for_a_model(client: TritonClient, tmp_path: Path) -> None:
    repository = tmp_path / "models"
    run = trials.new_run_id()
    trial = repository / trials.trial_name("llama", run)
    trial.mkdir(parents=True)
    marker = trials.new_marker("llama", run, client.url, tmp_path)
    (trial / trials.MARKER).write_text(json.dumps(marker.to_json()))
    seen = index(("llama", "1", ModelState.READY, ""), (trial.name, "1", ModelState.READY, ""))
    prober = Prober(client, home=tmp_path, repository=repository)
    assert prober.own_trial(trial.name, None) == ""
    assert prober.due(seen, None, force=True) == (["llama"], {})


def test_without_a_repository_a_trial_shape_is_skipped_only_while_its_models_tuning_run_holds_the_server(
        client: TritonClient, tmp_path: Path) -> None:
    seen = index(("llama", "1", ModelState.READY, ""), (LOOKALIKE, "1", ModelState.READY, ""))
    prober = Prober(client, home=tmp_path)
    tuning = RunningLoadTest("llama", f"llama{TUNING}, pid 4242")
    due, skipped = prober.due(seen, tuning, force=True)
    assert due == [] and skipped[LOOKALIKE].startswith("a tuning run of 'llama' measures it, its trial copy")
    assert skipped["llama"].startswith("a load test runs against it")
    other = RunningLoadTest("resnet", f"resnet{TUNING}, pid 4242")
    assert prober.due(seen, other, force=True) == (["llama", LOOKALIKE], {})


def test_probes_stay_due_when_the_wall_clock_steps_back(client: TritonClient, tmp_path: Path) -> None:
    wall, ticks = [NOW], [500.0]
    prober = Prober(client, home=tmp_path, interval_s=30.0, clock=lambda: wall[0], ticks=lambda: ticks[0])
    seen = index(("a", "1", ModelState.READY, ""))
    assert prober.due(seen, None)[0] == ["a"]
    ticks[0] += 10.0
    assert prober.due(seen, None)[0] == []  # not due yet
    wall[0] -= 3600.0  # NTP steps the wall clock back an hour
    ticks[0] += 21.0
    assert prober.due(seen, None)[0] == ["a"]


def test_a_probe_stamped_before_the_clock_stepped_back_is_never_the_latest(tmp_path: Path) -> None:
    server = "http://t:8000"
    watch.record_probes([ProbeRecord(server, "a", NOW + 3600, False, None, "boom")], home=tmp_path)
    assert watch.fresh_probes(server, now_s=NOW, home=tmp_path) == {}  # stamped an hour ahead: stale
    assert not [k for k in exported(tmp_path) if k[0] == "geadmin_probe_success"]
    watch.record_probes([ProbeRecord(server, "a", NOW - 1, True, 3.0)], home=tmp_path)  # after the step
    assert watch.fresh_probes(server, now_s=NOW, home=tmp_path)["a"].ok
    assert exported(tmp_path)[("geadmin_probe_success", (("model", "a"), ("server", server)))] == 1.0
