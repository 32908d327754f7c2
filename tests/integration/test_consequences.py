"""Consequences known before and after, against real tritonservers: a member change that the
ensemble refuses, and an unload of a member without its dependents, name `digits_pipeline`
before (prediction, validator, CLI refusal) and report it after, with Triton's own reason
from its log, each in the audit log."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.cli.main import main
from geadmin.diagnose import impact
from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import take_snapshot
from geadmin.diagnose.impact import Effect
from geadmin.domain import ModelState, Serving
from geadmin.errors import ConfigInvalidError
from geadmin.ops.models.actions import SIDE_EFFECT, ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import ApplyOutcome
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support.apptest import isolate
from tests.support.auth import admin_auth

MEMBER, PIPELINE = "digits_classifier", "digits_pipeline"
TRITON_SAYS = ("ensemble digits_pipeline allows maximum batch size 32, but it contains model "
               "digits_classifier which only allows maximum batch size to be 16")


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch, tmp_path / "home")
    return tmp_path / "home"


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    return triton_factory()


@pytest.fixture
def client(server: TritonProcess) -> Iterator[TritonClient]:
    with TritonClient(server.http_url, load_timeout_s=60) as triton:
        yield triton


def smaller_batch(server: TritonProcess) -> str:
    text = (server.repository / MEMBER / "config.pbtxt").read_text()
    return text.replace("max_batch_size: 32", "max_batch_size: 16").replace("[ 8, 16 ]", "[ 8 ]")


def states(client: TritonClient) -> dict[str, ModelState]:
    return {e.name: e.state for e in client.repository_index()}


def test_apply_of_a_smaller_batch_is_predicted_refused_and_reported_with_tritons_reason(
        server: TritonProcess, client: TritonClient, home: Path) -> None:
    new = smaller_batch(server)
    before = impact.predict(client, "apply", [MEMBER], repository=server.repository,
                            new_configs={MEMBER: parse_pbtxt(new)})
    assert before.taken_down == [PIPELINE]
    assert before.consequences[0].effect is Effect.REFUSED and before.consequences[0].reason == TRITON_SAYS

    with pytest.raises(ConfigInvalidError, match="Triton would unload ensemble digits_pipeline"):
        apply_config(client, server.repository, MEMBER, new, log=LocalLogFile(server.log_path),
                     auth=admin_auth())
    assert states(client)[PIPELINE] is ModelState.READY  # refused: nothing written, nothing reloaded

    result = apply_config(client, server.repository, MEMBER, new, log=LocalLogFile(server.log_path),
                          validate=False, auth=admin_auth())
    assert result.outcome is ApplyOutcome.APPLIED
    [change] = result.side_effects
    assert (change.model, change.before, change.after) == (PIPELINE, ModelState.READY, ModelState.UNAVAILABLE)
    assert change.reason == f"Invalid argument: {TRITON_SAYS}" and TRITON_SAYS in change.log_line
    assert states(client)[PIPELINE] is ModelState.UNAVAILABLE
    [row] = audit.query(action=SIDE_EFFECT, home=home)
    assert (row.model, row.result) == (PIPELINE, "failed") and TRITON_SAYS in row.message
    [applied] = audit.query(action="apply", result="ok", home=home)
    assert f"also changed state:\n  {PIPELINE}: READY → UNAVAILABLE" in applied.message


def test_unload_without_dependents_names_the_pipeline_before_and_reports_it_after(
        server: TritonProcess, client: TritonClient, home: Path) -> None:
    before = impact.predict(client, "unload", [MEMBER], repository=server.repository)
    assert [(c.model, c.effect) for c in before.consequences] == [(PIPELINE, Effect.UNLOADED)]
    assert "this also takes down digits_pipeline" in before.headline()

    [result] = run_action(client, ModelAction.UNLOAD, [MEMBER], log=LocalLogFile(server.log_path),
                          repository=server.repository, auth=admin_auth())
    assert result.ok
    [change] = result.side_effects
    assert (change.model, change.after) == (PIPELINE, ModelState.UNAVAILABLE)
    assert "ensemble digits_pipeline contains models that are not available or ambiguous: digits_classifier" \
        in change.reason
    # The operator's unload took the pipeline down, as both faces said before it ran: an unload
    # of the pipeline too, never a failure (issue 32: `status` stayed DEGRADED "failed: unloaded").
    assert audit.query(action=SIDE_EFFECT, home=home) == []
    [row] = audit.query(action="unload", model=PIPELINE, home=home)
    assert row.result == "ok" and "after the unload of 'digits_classifier'" in row.message
    sources = EvidenceSources(client, LocalLogFile(server.log_path), server.repository, home)
    verdict = assess(take_snapshot("local", client), sources)
    assert verdict.ok and verdict.rules == [], verdict.headline
    assert verdict.unloaded[PIPELINE].startswith("unloaded by ")
    assert {m.name for m in verdict.found.idle} == {MEMBER, PIPELINE}


def test_a_plain_reload_reloads_the_pipeline_and_changes_no_other_state(
        server: TritonProcess, client: TritonClient) -> None:
    before = impact.predict(client, "reload", [MEMBER], repository=server.repository)
    assert [(c.model, c.effect) for c in before.consequences] == [(PIPELINE, Effect.RELOADED)]
    assert not before.takes_down
    [result] = run_action(client, ModelAction.RELOAD, [MEMBER], log=LocalLogFile(server.log_path),
                          auth=admin_auth())
    assert result.ok and result.side_effects == ()
    assert states(client)[PIPELINE] is ModelState.READY


def test_cli_refuses_without_a_terminal_and_goes_ahead_with_yes(
        server: TritonProcess, client: TritonClient, home: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))  # a script: no terminal to ask
    url = ["--url", server.http_url, "--repository", str(server.repository), "--triton-log",
           str(server.log_path)]
    new = tmp_path / "config.pbtxt"
    new.write_text(smaller_batch(server))

    assert main(["config", "apply", MEMBER, str(new), "--no-validate", *url]) == 1
    err = capsys.readouterr().err
    assert f"{PIPELINE}: refused by Triton, so unloaded — {TRITON_SAYS}" in err
    assert "pass --yes (or --with-dependents) to go ahead. Nothing was done" in err
    assert states(client)[PIPELINE] is ModelState.READY
    assert [r.result for r in audit.query(action="apply", home=home)] == ["refused"]

    assert main(["models", "unload", MEMBER, *url, "--json"]) == 1
    refused = json.loads(capsys.readouterr().out)
    assert refused["kind"] == "refused" and refused["impact"]["takes_down"] == [PIPELINE]

    assert main(["config", "apply", MEMBER, str(new), "--no-validate", "--yes", *url]) == 0
    err = capsys.readouterr().err
    assert "also changed state" in err
    assert f"{PIPELINE}: READY → UNAVAILABLE — Invalid argument: {TRITON_SAYS}" in err
    assert states(client)[PIPELINE] is ModelState.UNAVAILABLE


def test_a_backend_this_server_lacks_is_refused_before_anything_is_written(
        server: TritonProcess, client: TritonClient) -> None:
    backends = impact.process_backends(server.pid)
    assert backends == frozenset({"python"})  # the wheel's python backend, nothing else in its directory
    config = server.repository / "text_normalize" / "config.pbtxt"
    original = config.read_text()
    with pytest.raises(ConfigInvalidError) as refused:
        apply_config(client, server.repository, "text_normalize",
                     original.replace('backend: "python"', 'backend: "pytorch"'), backends=backends,
                     auth=admin_auth())
    [finding] = [f for f in refused.value.findings if f.rule == "server.backend_unavailable"]
    assert "backend 'pytorch' is not installed in this server (it has: python)" in finding.message
    assert config.read_text() == original
    assert impact.process_backends(None) is None


def answer_at_a_terminal(argv: list[str], answer: str, env: dict[str, str]) -> tuple[int, str]:
    """Run `geadmin argv` with a terminal on standard input; type `answer` when it asks."""
    controller, terminal = os.openpty()
    process = subprocess.Popen([sys.executable, "-m", "geadmin.cli", *argv], stdin=terminal,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(terminal)
    os.write(controller, answer.encode() + b"\n")  # the terminal keeps it until the prompt reads it
    out, err = process.communicate(timeout=90)
    os.close(controller)
    return process.returncode, out.decode() + err.decode()


def test_at_a_terminal_the_cli_asks_and_no_means_nothing_is_done(
        server: TritonProcess, client: TritonClient, home: Path) -> None:
    env = {**os.environ, "GEADMIN_HOME": str(home)}
    argv = ["models", "unload", MEMBER, "--url", server.http_url, "--repository", str(server.repository)]
    code, output = answer_at_a_terminal(argv, "n", env)
    assert code == 1, output
    assert "Take down digits_pipeline too? [y/N]" in output
    assert "not confirmed: digits_pipeline would go down" in output
    assert states(client)[MEMBER] is ModelState.READY and states(client)[PIPELINE] is ModelState.READY
    assert [(r.action, r.result) for r in audit.query(home=home)] == [("unload", "refused")]

    code, output = answer_at_a_terminal(argv, "y", env)
    assert code == 0, output
    assert "digits_pipeline: READY → UNAVAILABLE" in output
    assert states(client)[PIPELINE] is ModelState.UNAVAILABLE


def test_at_a_terminal_config_apply_asks_the_editor_s_question_and_a_no_is_audited(
        server: TritonProcess, client: TritonClient, home: Path, tmp_path: Path) -> None:
    new = tmp_path / "config.pbtxt"
    new.write_text(smaller_batch(server))
    env = {**os.environ, "GEADMIN_HOME": str(home)}
    argv = ["config", "apply", MEMBER, str(new), "--no-validate", "--url", server.http_url,
            "--repository", str(server.repository)]
    code, output = answer_at_a_terminal(argv, "n", env)
    assert code == 1, output
    # the question and the refusal are the core's (geadmin.ops.models.change_plan), the Config editor's too
    assert f"Apply the new config of {MEMBER} although it takes down {PIPELINE}? [y/N]" in output
    assert f"not confirmed: {PIPELINE} would go down. Nothing was done" in output
    assert (server.repository / MEMBER / "config.pbtxt").read_text() != new.read_text()
    assert states(client)[PIPELINE] is ModelState.READY
    [row] = audit.query(home=home)
    assert (row.action, row.model, row.result) == ("apply", MEMBER, "refused")
    assert row.message == f"not confirmed: {PIPELINE} would go down. Nothing was done"


def test_a_rejected_ensemble_apply_reloads_the_restored_config_and_it_serves_again(
        server: TritonProcess) -> None:
    """Triton unloads an ensemble whose new config it refuses: geadmin puts the previous file back
    AND loads it again, then asks Triton whether it serves, and says so (it was left down)."""
    path = server.repository / PIPELINE / "config.pbtxt"
    original = path.read_bytes()
    missing_version = original.decode().replace("model_version: -1", "model_version: 7", 1)
    with TritonClient(server.http_url, load_timeout_s=60) as client:
        assert client.model_ready(PIPELINE)
        with pytest.raises(ConfigInvalidError, match="has no version 7"):  # the validator knows first
            apply_config(client, server.repository, PIPELINE, missing_version, auth=admin_auth())
        result = apply_config(client, server.repository, PIPELINE, missing_version, validate=False,
                              log=LocalLogFile(server.log_path), auth=admin_auth())
        assert result.outcome is ApplyOutcome.ROLLED_BACK, result.message
        assert path.read_bytes() == original
        states = {e.name: e.state for e in client.repository_index()}
        assert states[PIPELINE] is ModelState.READY and client.model_ready(PIPELINE), states
    assert result.serving is Serving.PREVIOUS, result.message
    assert "reloaded" in result.message and "serves again" in result.message, result.message
    assert [r.result for r in audit.query(model=PIPELINE)][:2] == ["rolled_back", "started"]
