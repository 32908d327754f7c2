"""`geadmin models ...` against real tritonservers, through the CLI entry point."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin.cli.main import main
from geadmin.domain import ModelState
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.samples import SAMPLE_MODELS


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)


def states(server: TritonProcess) -> dict[str, ModelState]:
    return {e.name: e.state for e in TritonClient(server.http_url).repository_index()}


def test_list_json_has_every_model(triton_server: TritonProcess, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["models", "list", "--json", "--url", "grpc://" + triton_server.grpc_url]) == 0
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(SAMPLE_MODELS)
    assert rows["digits_classifier"]["state"] == "READY"
    assert rows["digits_classifier"]["max batch size"] == 32


def test_list_text_uses_env_url(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("NAME") and "digits_pipeline" in out and "ensemble" in out


def test_unload_load_reload_round_trip(
    triton_factory: Callable[..., TritonProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = triton_factory(models=["digits_pipeline"])
    url = ["--url", server.http_url]
    assert main(["models", "unload", "digits_pipeline", "--dependents", *url]) == 0
    after = states(server)
    assert after["digits_pipeline"] is ModelState.UNAVAILABLE
    assert after["digits_preprocess"] is ModelState.UNAVAILABLE
    assert main(["models", "load", "digits_pipeline", "text_normalize", *url]) == 0
    assert all(state is ModelState.READY for state in states(server).values())
    assert main(["models", "reload", "text_normalize", *url]) == 0
    assert "reloaded 'text_normalize'" in capsys.readouterr().out


def test_failed_load_exits_non_zero_with_the_real_reason(
    triton_factory: Callable[..., TritonProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    server = triton_factory(models=["digits_classifier"])
    config = server.repository / "digits_classifier" / "config.pbtxt"
    config.write_text(config.read_text().replace('backend: "python"', 'platform: "graph_executor"'))
    code = main(["models", "reload", "digits_classifier", "text_normalize", "--url", server.http_url,
                 "--triton-log", str(server.log_path), "--repository", str(server.repository)])
    assert code == 1
    captured = capsys.readouterr()
    assert "unexpected platform type 'graph_executor'" in captured.err
    assert "still serving" in captured.err
    assert "reloaded 'text_normalize'" in captured.out  # one failure does not stop the others
    assert states(server)["digits_classifier"] is ModelState.READY


def test_failed_load_json_carries_the_explanation(
    triton_server: TritonProcess, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", triton_server.http_url)  # the log is that server's
    monkeypatch.setenv("GEADMIN_TRITON_LOG", str(triton_server.log_path))
    monkeypatch.setenv("GEADMIN_REPOSITORY", str(triton_server.repository))
    assert main(["models", "load", "no_such_model", "--json"]) == 1
    (result,) = json.loads(capsys.readouterr().out)
    assert result["ok"] is False
    explanation = result["explanation"]
    # The layout's finding leads (where, and what to do); Triton's generic line stays in the log lines.
    reason = explanation["reason"]
    assert reason.startswith("no model directory ") and "— fix: check the name" in reason
    assert any("model not found in any model repository" in line for line in explanation["log_lines"])
    assert explanation["serving"] == "NEVER_LOADED"
    assert any("no model directory" in p for p in explanation["layout_problems"])


@pytest.mark.parametrize("command", [["list"], ["load", "m"], ["unload", "m"], ["reload", "m"]])
def test_unreachable_server_exits_3(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["models", *command, "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "2"])
    assert code == 3
    err = capsys.readouterr().err
    assert "unreachable" in err and "timed out" not in err


def test_list_gives_the_log_reason_for_a_config_triton_cannot_parse(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    legacy = sample_repository / "legacy_ge"
    (legacy / "1").mkdir(parents=True)
    (legacy / "config.pbtxt").write_text('name: "legacy_ge"\nplatform: "graph_executor"\n')
    server = triton_factory(repository=sample_repository)
    args = ["models", "list", "--json", "--url", server.http_url]
    empty_log = sample_repository.parent / "empty.log"  # else the CLI finds the server's log itself
    empty_log.write_text("")
    assert main([*args, "--triton-log", str(empty_log)]) == 0
    without_log = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert without_log["legacy_ge"]["state"] == "NOT_LOADED" and not without_log["legacy_ge"]["reason"]

    assert main([*args, "--triton-log", str(server.log_path)]) == 0
    with_log = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert "unexpected platform type 'graph_executor'" in with_log["legacy_ge"]["reason"]
