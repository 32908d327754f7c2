"""The verdict against a real tritonserver: `geadmin status` (a subprocess) says DEGRADED with
its own exit code for a failed or dropped model and for a hand-edited config.pbtxt, and OK
again once the served config is put back."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import take_snapshot
from geadmin.diagnose.verdict import Level, VerdictRule
from geadmin.domain import ModelState
from geadmin.ops.bundle import build_bundle
from geadmin.ops.models.put_back import PUT_BACK_ACTION, put_back_served
from geadmin.repository import locks
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support.auth import auth_as
from tests.support.processes import wait_for
from tests.support.stack import geadmin

pytestmark = pytest.mark.integration
CLASSIFIER, PIPELINE = "digits_classifier", "digits_pipeline"


def status(server: TritonProcess, home: Path, *flags: str) -> tuple[int, str, dict[str, object]]:
    args = ("status", "--url", server.http_url, "--repository", str(server.repository),
            "--triton-log", str(server.log_path), *flags)
    text = geadmin(*args, home=home)
    document = geadmin(*args, "--json", home=home)
    assert text.returncode == document.returncode, (text.stdout, text.stderr)
    return text.returncode, text.stdout, json.loads(document.stdout)


def edit(server: TritonProcess, model: str, old: str, new: str) -> None:
    path = server.repository / model / "config.pbtxt"
    text = path.read_text()
    assert old in text, text
    path.write_text(text.replace(old, new, 1))


def states(client: TritonClient) -> dict[str, ModelState]:
    return {m.name: m.state for m in client.repository_index()}


def test_a_failed_model_and_the_ensemble_it_took_down_make_status_degraded(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    server = triton_factory()
    home = tmp_path / "home"
    code, text, _ = status(server, home)
    assert code == 0 and text.startswith("OK: Triton serves; 5 model(s) READY"), text

    client = TritonClient(server.http_url, load_timeout_s=60)
    edit(server, CLASSIFIER, "data_type: TYPE_FP32", "data_type: TYPE_FOO")  # the bad enum
    client.unload(CLASSIFIER)  # behind geadmin's back: no operator unload in the audit log
    assert wait_for(lambda: states(client)[PIPELINE] is not ModelState.READY, 30)
    with pytest.raises(Exception, match="failed to poll from model repository"):
        client.load(CLASSIFIER)
    # Triton's unload returns before the model is gone: judge once it is (a clean run on a busy
    # machine saw it still UNLOADING, which is a change in progress, not yet a reason)
    assert wait_for(lambda: states(client)[CLASSIFIER] is ModelState.UNAVAILABLE, 30), states(client)

    code, text, document = status(server, home)
    assert code == 4, text
    assert text.startswith("DEGRADED: model '")
    reasons = {r["model"]: r for r in document["reasons"]}  # type: ignore[attr-defined]
    assert f"Poll failed for model directory '{CLASSIFIER}'" in reasons[CLASSIFIER]["text"]  # Triton's log
    assert reasons[PIPELINE]["text"].startswith(f"model '{PIPELINE}' ")  # a failure with Triton's reason
    assert "ensemble digits_pipeline" in reasons[PIPELINE]["text"]
    assert document["verdict"] == "DEGRADED"
    assert set(document["rules"]) <= {"model-failed", "model-dropped"}  # type: ignore[arg-type]
    assert PIPELINE in document["failed"]  # type: ignore[operator]  # a failure, not "not loaded"
    assert not [line for line in text.splitlines() if line.startswith("NOT LOADED") and PIPELINE in line]

    code, _, _ = status(server, home, "--strict")
    assert code == 1
    code, text, _ = status(server, home, "--expect", CLASSIFIER)
    assert code == 1 and text.startswith(f"DOWN: expected model '{CLASSIFIER}' is ")
    client.close()


def test_an_ensemble_dropped_by_a_members_reload_names_tritons_reason(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    server = triton_factory()
    client = TritonClient(server.http_url, load_timeout_s=60)
    edit(server, CLASSIFIER, "max_batch_size: 32", "max_batch_size: 16")
    client.load(CLASSIFIER)  # Triton takes it, and unloads the ensemble that allows 32
    assert wait_for(lambda: states(client)[PIPELINE] is ModelState.UNAVAILABLE, 30)
    verdict = assess(take_snapshot("s", client), EvidenceSources(client, LocalLogFile(server.log_path),
                                                         server.repository, tmp_path / "home"))
    assert verdict.level is Level.DEGRADED
    (reason,) = [r for r in verdict.reasons if r.model == PIPELINE]
    assert reason.rule in (VerdictRule.MODEL_DROPPED, VerdictRule.MODEL_FAILED)
    assert "allows maximum batch size 32, but it contains model digits_classifier" in reason.text
    assert PIPELINE not in [m.name for m in verdict.found.idle]
    client.close()


def test_a_hand_edited_config_is_drift_until_the_served_config_is_put_back(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    server = triton_factory()
    home = tmp_path / "home"
    edit(server, CLASSIFIER, "max_queue_delay_microseconds: 1000", "max_queue_delay_microseconds: 5000")
    with locks.edit_lock(server.repository, CLASSIFIER, "apply", home=home, wait_s=0):
        code, text, _ = status(server, home)
        assert code == 0, text  # an apply runs: its file leads what serves until it ends (no put back)
    code, text, document = status(server, home)
    assert code == 4 and document["rules"] == ["drift"], text
    assert (f"DRIFT: {CLASSIFIER}: on disk: valid, but not what Triton serves (not reloaded since it "
            "changed) (dynamic_batching.max_queue_delay_microseconds differ) — serving the previous "
            "config since ") in text

    # The same file, now broken: a failed reload keeps the old version serving; the flag says why
    # the next restart would fail, with the line.
    edit(server, CLASSIFIER, "data_type: TYPE_FP32", "data_type: TYPE_FOO")
    client = TritonClient(server.http_url, load_timeout_s=60)
    with pytest.raises(Exception, match="failed to poll"):
        client.load(CLASSIFIER)
    assert states(client)[CLASSIFIER] is ModelState.READY
    code, text, document = status(server, home)
    assert code == 4
    (drift,) = document["drift"]  # type: ignore[misc]
    assert drift["on_disk"].startswith("does not parse, line 6: ") and not drift["loads"]
    assert drift["fix"].startswith("open it in the Config editor")

    # The diagnostics bundle carries the same verdict.
    bundle = build_bundle(client, repository=server.repository, log_path=server.log_path)
    with tarfile.open(fileobj=io.BytesIO(bundle.packed())) as archive:
        member = next(m for m in archive.getmembers() if m.name.endswith("verdict.json"))
        packed = json.load(archive.extractfile(member))  # type: ignore[arg-type]
    assert packed["verdict"] == "DEGRADED" and packed["rules"] == ["drift"]
    assert packed["headline"] == document["headline"]

    message = put_back_served(client, server.repository, CLASSIFIER, auth=auth_as("alice"), home=home)
    assert message.endswith("disk and Triton agree again")
    restored = (server.repository / CLASSIFIER / "config.pbtxt").read_text()
    assert "TYPE_FOO" not in restored and "max_queue_delay_microseconds: 1000" in restored
    (row,) = audit.query(action=PUT_BACK_ACTION, home=home)
    assert row.who == "alice" and row.result == "ok" and "TYPE_FOO" in row.diff
    code, text, _ = status(server, home)
    assert code == 0 and "none drifted from its file" in text, text
    client.load(CLASSIFIER)  # what is on disk loads again
    client.close()


def test_a_deliberate_stop_is_audited_as_a_stop_and_status_says_who_stopped_triton(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geadmin.stack.drivers import perform
    from geadmin.stack.local import LocalDriver
    from geadmin.stack.workspace import Workspace
    from tests.support.stack import running_up

    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))  # the Stack page's process writes its row there
    with running_up(home, wait_for="models: "):
        driver = LocalDriver(Workspace(home))
        perform(driver, "triton", "stop", auth=auth_as("alice"))
        assert wait_for(lambda: driver.services()[0].state == "stopped", 20)
        rows = {(r.model, r.action): r for r in audit.query(home=home)}
        stopped = rows[("tritonserver", "stop")]  # the supervisor's row: a stop, not a failed exit
        assert stopped.result == "ok" and stopped.message.startswith(
            "stopped from the Stack page by alice (dashboard): tritonserver stopped as asked after "), stopped
        assert "exit code" not in stopped.message
        assert ("tritonserver", "exit") not in rows
        assert rows[("triton", "stop")].who == "alice"

        result = geadmin("status", home=home)
        assert result.returncode == 3, result.stdout + result.stderr
        first, call = result.stdout.splitlines()[:2]
        assert first.startswith("DOWN: Triton was stopped by alice (dashboard) at ")  # the cause leads
        assert "is it running" not in first
        assert call.startswith("  check liveness: Triton at ")  # then the call that failed


def test_a_killed_dashboard_is_in_the_server_history(tmp_path: Path) -> None:
    import os
    import signal

    from geadmin.stack.server_history import server_history
    from geadmin.stack.workspace import Workspace
    from tests.support.stack import running_up

    home = tmp_path / "home"
    with running_up(home):
        workspace = Workspace(home)
        info = workspace.live_stack()
        assert info is not None and info.dashboard_pid is not None
        os.kill(info.dashboard_pid, signal.SIGKILL)

        def restarted() -> bool:
            now = workspace.live_stack()
            return now is not None and bool(now.dashboard_exits) and now.dashboard_pid != info.dashboard_pid

        assert wait_for(restarted, 60)
        history = server_history(workspace.live_stack())  # type: ignore[arg-type]
        assert history.dashboard_restarts == 1 and history.triton_restarts == 0
        (record,) = history.dashboard_exits
        assert record.signal == "SIGKILL" and record.restarted and not record.requested


def test_a_model_whose_directory_is_deleted_while_it_serves_is_degraded_until_it_is_back(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    """Triton's index lists only what is on disk: a model whose directory is deleted vanishes
    from every view while it answers, until the next restart loses it. Its statistics still
    list it: status says DEGRADED and names it; a reload of it says the previous one serves."""
    server = triton_factory(models=["text_normalize", CLASSIFIER])
    home = tmp_path / "home"
    moved = tmp_path / "text_normalize"
    (server.repository / "text_normalize").rename(moved)
    with TritonClient(server.http_url, load_timeout_s=60) as client:
        assert "text_normalize" not in states(client) and client.model_ready("text_normalize")
    code, text, document = status(server, home)
    assert code == 4 and document["rules"] == ["drift"], text
    assert text.splitlines()[0] == (
        "DEGRADED: model 'text_normalize' still serves, but its directory is gone from the repository, so "
        "Triton's index no longer lists it — the next restart of Triton, or a reload, loses it")
    (drift,) = document["drift"]  # type: ignore[misc]
    assert drift["gone"] and drift["fix"].startswith("put its directory back")
    reload = geadmin("models", "reload", "text_normalize", "--yes", "--url", server.http_url,
                     "--repository", str(server.repository), "--triton-log", str(server.log_path), home=home)
    said = f"geadmin: error: load of 'text_normalize' failed: no model directory {server.repository}"
    assert reload.returncode == 1 and reload.stderr.startswith(said), reload.stderr
    assert "the previously loaded version is still serving" in reload.stderr
    assert "not loaded before" not in reload.stderr
    moved.rename(server.repository / "text_normalize")
    code, text, _ = status(server, home)
    assert code == 0, text


def test_a_deleted_config_is_drift_and_putting_back_what_serves_writes_it_again(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    """The directory stays, its config.pbtxt is gone: the model serves, and the next restart
    fails to load it. Not "none drifted from its file": there is no file."""
    server = triton_factory(models=[CLASSIFIER])
    home = tmp_path / "home"
    path = server.repository / CLASSIFIER / "config.pbtxt"
    path.unlink()
    code, text, document = status(server, home)
    assert code == 4 and document["rules"] == ["drift"], text
    said = f"DRIFT: {CLASSIFIER}: on disk: no config.pbtxt in {path.parent} — serving the previous config"
    assert said in text
    with TritonClient(server.http_url) as client:
        message = put_back_served(client, server.repository, CLASSIFIER, auth=auth_as("alice"), home=home)
    assert message.endswith("disk and Triton agree again"), message
    # No revision was kept (geadmin never applied one): Triton's normalized form, which loads
    assert path.read_text().startswith(f'name: "{CLASSIFIER}"')
    code, text, _ = status(server, home)
    assert code == 0, text


def test_a_repository_that_went_away_says_to_put_it_back(
    triton_factory: Callable[..., TritonProcess], tmp_path: Path
) -> None:
    server = triton_factory(models=[CLASSIFIER])
    away = tmp_path / "away"
    server.repository.rename(away)
    code, text, document = status(server, tmp_path / "home")
    assert code == 4 and document["rules"] == ["index-unreadable"], text
    assert text.startswith(f"DEGRADED: cannot list the models: list the model repository: failed to open "
                           f"directory {server.repository}"), text
    (reason,) = document["reasons"]  # type: ignore[misc]
    assert reason["fix"].startswith("put back the model repository Triton was started with")
    assert text.splitlines()[1] == f"  fix: {reason['fix']}"  # right under the cause, as on the Overview
    away.rename(server.repository)
    assert status(server, tmp_path / "home")[0] == 0
