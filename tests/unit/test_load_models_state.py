"""The compose loader's state file (deploy/triton-load-models.py): what it survives, and how it
tells a stop on request from a crash in Triton's log."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.deploy import load_models_script

script = load_models_script()


def test_a_state_file_that_cannot_be_read_is_said_and_the_loader_starts_without_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "state.json"
    for broken in ('{"in_flight": [', "null", '["a"]', '{"in_flight": ["a"], "left_out": {"m": 3}}', "\xff",
                   "[" * 100_000):
        path.write_bytes(broken.encode("latin-1"))
        state = script.State(str(path))
        assert (state.in_flight, state.suspects, state.left_out) == ([], [], {})
        assert f"cannot read the state file {path}" in capsys.readouterr().out


def test_the_state_is_never_written_through_a_link_left_at_its_temporary_name(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    path = tmp_path / "state.json"
    (tmp_path / f"state.json.{os.getpid()}.tmp").symlink_to(victim)
    state = script.State(str(path))
    state.flying(["m"])
    assert victim.read_text() == "precious"
    assert script.State(str(path)).in_flight == ["m"]
    assert not (tmp_path / f"state.json.{os.getpid()}.tmp").exists()


@pytest.mark.parametrize(("after", "on_request"), [
    ("Signal (15) received.\n", True),  # docker stop, compose restart
    ("Signal (2) received.\n", True),  # Ctrl-C
    ("Signal (11) received.\n0# 0x00005555 in tritonserver\n", False),  # a crash
    ("", False),  # SIGKILL (the OOM killer): nothing logged
])
def test_a_stop_on_request_is_read_from_the_log_after_the_loads_were_sent(
        tmp_path: Path, after: str, on_request: bool) -> None:
    log = tmp_path / "tritonserver.log"
    log.write_text("I1208 earlier run\nSignal (15) received.\nI1208 this run started\n")
    since = log.stat().st_size  # the earlier run's stop is before the loads: not this one's
    with log.open("a") as appended:
        appended.write("I1208 loading model\n" + after + "I1208 the next start\n")
    assert script.stopped_on_request(str(log), since) is on_request


def test_a_log_that_is_shorter_than_when_the_loads_were_sent_says_nothing(tmp_path: Path) -> None:
    log = tmp_path / "tritonserver.log"
    log.write_text("Signal (15) received.\n")
    assert not script.stopped_on_request(str(log), 10_000)  # rotated or truncated
    assert not script.stopped_on_request(str(log), -1)  # not known when the loads were sent
    assert not script.stopped_on_request("", 0)  # no log file (Kubernetes: stdout)
