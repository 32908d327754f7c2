"""The compose images' start-up loader (deploy/triton-load-models.py) against a model whose load
kills Triton: every container restart had loaded it again, a crash loop that took the other
models down with it. Each round below is one start of the container: a new real tritonserver on
the same repository and the same state file (the container's layer, kept across restarts)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from geadmin.triton.client import TritonClient
from tests.support.processes import quick_stopping_triton
from tests.support.samples import add_answering_model, add_python_model

pytestmark = pytest.mark.integration

LOADER = Path(__file__).resolve().parents[2] / "deploy" / "triton-load-models.py"
KILLS_TRITON = "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)"


def start_of_container(repository: Path, state: Path, tmp_path: Path, round_: int, *,
                       load_timeout_s: int = 60, stop_while_loading: str = "") -> tuple[int, str, bool]:
    """One container start: Triton with no model, then the loader beside it; when Triton dies
    the loader is SIGKILLed, as the container's end does. Triton appends to one log across the
    starts, as the image's --log-file does. `stop_while_loading`: once that model is in flight,
    `docker stop`: SIGTERM to Triton, then after a grace everything in the container is killed.
    (Loader's exit code, its output and the READY models, whether Triton is alive.)"""
    log = tmp_path / "triton.log"
    server = quick_stopping_triton(repository, models=[], log_path=log)
    server.start()
    output = tmp_path / f"loader{round_}.out"
    try:
        with output.open("w") as out:
            loader = subprocess.Popen(
                [sys.executable, str(LOADER), "--url", server.http_url], stdout=out, stderr=subprocess.STDOUT,
                env={**os.environ, "TRITON_LOAD_MODELS": "*", "TRITON_LIVE_TIMEOUT": "30",
                     "TRITON_LOAD_TIMEOUT": str(load_timeout_s), "TRITON_LOAD_STATE": str(state),
                     "TRITON_MODEL_REPOSITORIES": str(repository), "TRITON_LOG_FILE": str(log)})
            deadline = time.monotonic() + 120
            while loader.poll() is None and server.alive() and time.monotonic() < deadline:
                sending = "load-models: loading " in output.read_text()  # this start's loads, not the last's
                if stop_while_loading and sending and stop_while_loading in in_flight(state):
                    os.kill(server.pid or 0, signal.SIGTERM)
                    time.sleep(1.0)  # the grace (docker's is 10 s; the slow load takes longer)
                    loader.kill()
                    server.stop()
                    break
                time.sleep(0.1)
            if loader.poll() is None:
                loader.kill()
            code = loader.wait(timeout=10)
        said = output.read_text()
        alive = server.alive()
        if alive:
            with TritonClient(server.http_url) as client:
                ready = {e.name for e in client.repository_index() if e.state.value == "READY"}
            said += f"READY: {sorted(ready)}\n"
        return code, said, alive
    finally:
        server.stop()


def in_flight(state: Path) -> list[str]:
    try:
        return list(json.loads(state.read_text())["in_flight"])
    except (OSError, ValueError):  # not written yet, or replaced under us: asked again
        return []


def test_a_model_whose_load_kills_triton_is_left_out_after_the_second_exit_alone(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    add_python_model(repository, "crasher", KILLS_TRITON)
    add_answering_model(repository, "fine")
    state = tmp_path / "state" / "load-models.json"

    code, said, alive = start_of_container(repository, state, tmp_path, 1)
    assert (code, alive) == (-signal.SIGKILL, False), said
    assert "crasher" in json.loads(state.read_text())["in_flight"]

    # Second start: the cut-off loads are suspects, each alone after the others; the crasher
    # takes Triton down alone, and is left out.
    code, said, alive = start_of_container(repository, state, tmp_path, 2)
    assert (code, alive) == (-signal.SIGKILL, False), said
    assert "load-models: Triton stopped while crasher" in said
    assert "(a load may have killed it): they load one at a time, after the others" in said
    assert json.loads(state.read_text())["in_flight"] == ["crasher"]

    # Third start: the crasher took Triton down alone: left out; everything else loads, Triton stays up.
    code, said, alive = start_of_container(repository, state, tmp_path, 3)
    assert ("load-models: crasher: FAILED: Triton exited while it loaded, twice (the second time alone): "
            "left out of every start until its files change") in said
    assert alive, said
    assert code == 1, said  # not every model named is serving: the crasher is said FAILED
    assert said.count("crasher: FAILED") == 1, said
    assert "load-models: 1 of 1 loaded; left out: crasher" in said
    assert "READY: ['fine']" in said

    # Fixed: its files changed, so the next start tries it again (alone) and it loads.
    add_fixed = repository / "crasher" / "1" / "model.py"
    add_fixed.write_text(add_fixed.read_text().replace("os.kill(os.getppid(), signal.SIGKILL)", "pass"))
    code, said, alive = start_of_container(repository, state, tmp_path, 4)
    assert "crasher: its files changed since it was left out: loading it again, alone" in said
    assert (code, alive) == (0, True), said
    assert "READY: ['crasher', 'fine']" in said
    assert json.loads(state.read_text()) == {"in_flight": [], "alone": False, "log_at": -1, "suspects": [],
                                             "left_out": {}}


def test_a_state_file_that_cannot_be_written_is_said_and_the_loads_go_on(tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    add_answering_model(repository, "fine")
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    code, said, alive = start_of_container(repository, blocked / "state.json", tmp_path, 1)
    assert (code, alive) == (0, True), said
    assert "cannot write the state file" in said and "set TRITON_LOAD_STATE to a writable path" in said
    assert "READY: ['fine']" in said


def test_a_stop_on_request_during_the_loads_blames_no_model(tmp_path: Path) -> None:
    """`docker stop` twice while a healthy slow model loads: Triton logs the SIGTERM, so the next
    start loads it as usual, never one at a time and never left out."""
    repository = tmp_path / "repo"
    add_python_model(repository, "slow", "time.sleep(30)")
    add_answering_model(repository, "fine")
    state = tmp_path / "state.json"
    for round_ in (1, 2):
        code, said, alive = start_of_container(repository, state, tmp_path, round_, stop_while_loading="slow")
        assert not alive, said
        assert "slow" in in_flight(state)
        if round_ == 2:
            assert "load-models: Triton was stopped on request (its log says so) while " in said
            assert "one at a time" not in said, said
    (repository / "slow" / "1" / "model.py").write_text(
        (repository / "slow" / "1" / "model.py").read_text().replace("time.sleep(30)", "pass"))
    code, said, alive = start_of_container(repository, state, tmp_path, 3)
    assert "Triton was stopped on request" in said and "left out" not in said, said
    assert (code, alive) == (0, True), said
    assert "READY: ['fine', 'slow']" in said


def test_a_load_that_outlives_its_timeout_then_kills_triton_is_a_suspect_next_time(tmp_path: Path) -> None:
    """Our wait on a load ended ('still loading'), then the load killed Triton: it stayed in flight,
    so the next start loads it alone instead of crash-looping."""
    repository = tmp_path / "repo"
    add_python_model(repository, "late_crasher", "time.sleep(8)\n" + KILLS_TRITON)
    add_answering_model(repository, "fine")
    state = tmp_path / "state.json"
    _, said, alive = start_of_container(repository, state, tmp_path, 1, load_timeout_s=4)
    assert "late_crasher: FAILED: still loading after 4s (Triton keeps trying)" in said
    assert not alive, said
    assert "late_crasher" in in_flight(state)  # (the python backend loaded 'fine' behind it: it may be too)
    _, said, alive = start_of_container(repository, state, tmp_path, 2, load_timeout_s=4)
    assert "loaded (a load may have killed it): they load one at a time, after the others" in said
    assert "late_crasher one at a time, after the others" in said
