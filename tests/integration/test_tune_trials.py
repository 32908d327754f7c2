"""The tuner's trials against a real tritonserver: a model named like the old trial
(`gears__tune`) stays READY and untouched; `geadmin status`, sampled through a whole `geadmin
tune` whose ceiling search has Triton refuse loads, never exits 4 for the trial; a SIGKILLed
tune's trial is removed (and audited) by the next sampler start; a winner is applied only on
the server the run measured and only to the file the run started from; compose's start-up
loader skips trial directories.

The tuned model `gears` is a python model that, like an npu_ge .om, refuses a max_batch_size
above its largest batch gear (8), so the search meets refused loads as it would on an NPU."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.audit import Result
from geadmin.domain import ModelState
from geadmin.ops.tune.trials import make_trial, remove_trial
from geadmin.repository import trials
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.samples import add_python_model
from tests.support.stack import GEADMIN, geadmin

pytestmark = pytest.mark.integration

MODEL = "gears"
OLD_TRIAL = f"{MODEL}__tune"  # the name the tuner used to give its trial (and delete unasked)
ROOT = Path(__file__).resolve().parents[2]
REFUSE_ABOVE_8 = ('import json\nif json.loads(args["model_config"])["max_batch_size"] > 8:\n'
                  '    raise ValueError("no batch gear above 8")')
# 5 ms per execute, whatever the batch (an NPU's fixed cost): steady enough to measure on a busy machine
EXECUTE_5_MS = """
    def execute(self, requests):
        import triton_python_backend_utils as pb_utils
        time.sleep(0.005)
        return [pb_utils.InferenceResponse([pb_utils.Tensor(
            "y", pb_utils.get_input_tensor_by_name(r, "x").as_numpy() * 2)]) for r in requests]
"""


def add_gears_model(repository: Path, name: str) -> Path:
    model = add_python_model(repository, name, REFUSE_ABOVE_8)
    source = model / "1" / "model.py"
    source.write_text(source.read_text() + EXECUTE_5_MS)
    (model / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: 1\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [1] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [1] }]\n'
        'instance_group [{ count: 1 kind: KIND_CPU }]\n')
    return model


def tree_hash(directory: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(directory)).encode() + path.read_bytes())
    return digest.hexdigest()


def states(server: TritonProcess) -> dict[str, ModelState]:
    with TritonClient(server.http_url) as client:
        return {m.name: m.state for m in client.repository_index()}


def marked_trials(repository: Path) -> list[str]:
    return [marker.trial for _, marker in trials.marked(repository)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("tune_trials")
    repository = root / "repo"
    repository.mkdir()
    add_gears_model(repository, MODEL)
    add_gears_model(repository, OLD_TRIAL)  # an operator's model that happens to have that name
    with TritonProcess(repository, models=[MODEL, OLD_TRIAL], log_path=root / "triton.log",
                       exit_timeout_s=TEST_EXIT_TIMEOUT_S) as triton:
        yield triton


@dataclass(frozen=True)
class Tuned:
    home: Path
    document: dict[str, object]
    statuses: list[tuple[int, dict[str, object]]]  # (exit code, --json) of every status sampled
    old_trial_hash: str


def status(server: TritonProcess, home: Path) -> tuple[int, dict[str, object]]:
    done = geadmin("status", "--url", server.http_url, "--repository", str(server.repository), "--json",
                   home=home, timeout_s=60)
    return done.returncode, json.loads(done.stdout)


@pytest.fixture(scope="module")
def tuned(server: TritonProcess, tmp_path_factory: pytest.TempPathFactory) -> Tuned:
    """One `geadmin tune` run, with `geadmin status` sampled from before it starts until after it ends.
    Windows of 2000 ms: at 1000 a clean-clone run (four workers on two cores) measured nothing
    stable and the run exited 1; what is checked here is the status around the trials."""
    home = tmp_path_factory.mktemp("tune_home")
    old_hash = tree_hash(server.repository / OLD_TRIAL)
    statuses = [status(server, home)]
    env = {**os.environ, "GEADMIN_HOME": str(home)}
    run = subprocess.Popen([*GEADMIN, "tune", MODEL, "--url", server.http_url, "--repository",
                            str(server.repository), "--budget-s", "60", "--concurrency", "4", "--window-ms",
                            "2000", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env)
    try:
        while run.poll() is None:
            statuses.append(status(server, home))
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 0, out + err
    statuses.append(status(server, home))
    return Tuned(home, json.loads(out), statuses, old_hash)


def test_status_sampled_through_a_whole_tune_never_exits_4(tuned: Tuned) -> None:
    codes = [code for code, _ in tuned.statuses]
    assert codes == [0] * len(codes), [(c, s["headline"]) for c, s in tuned.statuses if c]
    seen = [t for _, s in tuned.statuses for t in s["trials"]]  # type: ignore[attr-defined]
    assert len(tuned.statuses) >= 5 and seen, "no status was taken while a trial was listed"
    assert {t["name"] for t in seen} == {f"{MODEL}__tune_{tuned.document['run']}"}
    refused = [t for t in tuned.document["trials"] if t["phase"] == "ceiling"]  # type: ignore[attr-defined]
    assert [t["max_batch_size"] for t in refused] == [64, 32, 16], refused  # Triton refused those loads
    assert all(not t["ok"] and "no batch gear above 8" in t["error"] for t in refused), refused
    final = tuned.statuses[-1][1]
    assert final["ready"] is True and final["trials"] == [], final  # a refused trial left Triton ready


def test_tuning_leaves_a_model_named_like_the_old_trial_untouched_and_ready(
        server: TritonProcess, tuned: Tuned) -> None:
    assert states(server)[OLD_TRIAL] is ModelState.READY
    assert tree_hash(server.repository / OLD_TRIAL) == tuned.old_trial_hash
    trial = f"{MODEL}__tune_{tuned.document['run']}"
    assert tuned.document["trial"] == trial and trial not in states(server)
    assert not (server.repository / trial).exists() and marked_trials(server.repository) == []
    rows = audit.query(model=MODEL, action="tune", home=tuned.home)
    assert [r.result for r in rows] == [Result.OK.value, Result.STARTED.value]
    assert all(f"run: {tuned.document['run']}" in r.message for r in rows)


def test_apply_run_is_refused_on_another_server_and_after_the_file_changed(
        server: TritonProcess, tuned: Tuned, triton_factory: object, tmp_path: Path) -> None:
    run_id, config = str(tuned.document["id"]), server.repository / MODEL / "config.pbtxt"
    other_repository = tmp_path / "other"
    other_repository.mkdir()
    add_gears_model(other_repository, MODEL)
    other: TritonProcess = triton_factory(other_repository, models=[MODEL])  # type: ignore[operator]
    before_other = (other_repository / MODEL / "config.pbtxt").read_bytes()
    refused = geadmin("tune", MODEL, "--url", other.http_url, "--repository", str(other_repository),
                      "--apply-run", run_id, home=tuned.home)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"measured {server.http_url}, not {other.http_url}" in refused.stderr
    assert (other_repository / MODEL / "config.pbtxt").read_bytes() == before_other

    original = config.read_bytes()
    config.write_bytes(original + b"# instance count agreed with the NPU team\n")
    changed = geadmin("tune", MODEL, "--url", server.http_url, "--repository", str(server.repository),
                      "--apply-run", run_id, home=tuned.home)
    assert changed.returncode != 0, changed.stdout + changed.stderr
    assert f"changed since tuning run {run_id} started" in changed.stderr
    assert config.read_bytes().endswith(b"# instance count agreed with the NPU team\n")

    config.write_bytes(original)  # the file the run started from: the winner applies
    applied = geadmin("tune", MODEL, "--url", server.http_url, "--repository", str(server.repository),
                      "--apply-run", run_id, home=tuned.home, timeout_s=120)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert config.read_text() == tuned.document["best_text"]
    config.write_bytes(original)
    with TritonClient(server.http_url) as client:
        client.load(MODEL)


def test_a_killed_tunes_trial_is_removed_and_audited_by_the_next_sampler_start(
        server: TritonProcess, tmp_path: Path) -> None:
    env = {**os.environ, "GEADMIN_HOME": str(tmp_path), "GEADMIN_REPOSITORY": str(server.repository)}
    tune = subprocess.Popen([*GEADMIN, "tune", MODEL, "--url", server.http_url, "--repository",
                             str(server.repository), "--budget-s", "120", "--concurrency", "2"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    trial = ""
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not trial:
            listed = marked_trials(server.repository)
            if listed and states(server).get(listed[0]) is ModelState.READY:
                trial = listed[0]
            time.sleep(0.2)
        assert trial, "the tune never had a READY trial"
    finally:
        os.killpg(tune.pid, signal.SIGKILL)  # geadmin and its perf_analyzer, mid-trial
        tune.wait(30)
    assert (server.repository / trial).is_dir() and states(server).get(trial) is ModelState.READY

    sampler = subprocess.Popen([*GEADMIN, "sampler", "--url", server.http_url, "--metrics-url",
                                server.metrics_url, "--interval", "1", "--no-probes"], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    try:
        assert sampler.stdout is not None
        said = [sampler.stdout.readline() for _ in range(2)]
    finally:
        sampler.send_signal(signal.SIGTERM)
        sampler.wait(30)
    assert any(line.startswith(f"removed the trial copy {trial}") for line in said), said
    assert not (server.repository / trial).exists()
    assert states(server).get(trial) in (None, ModelState.UNAVAILABLE)
    assert states(server)[OLD_TRIAL] is ModelState.READY and states(server)[MODEL] is ModelState.READY
    row = audit.query(model=MODEL, action="tune", result=Result.INTERRUPTED, home=tmp_path)[0]
    assert trial in row.message and f"unloaded it from {server.http_url}" in row.message


def test_the_compose_loader_loads_every_model_but_a_trial(triton_factory: object, tmp_path: Path) -> None:
    repository = tmp_path / "repo"
    repository.mkdir()
    add_gears_model(repository, MODEL)
    add_gears_model(repository, OLD_TRIAL)
    copy = make_trial(repository, MODEL, trials.new_run_id(), server="http://elsewhere:8000", home=tmp_path)
    copy.release()  # as a killed run leaves it
    triton: TritonProcess = triton_factory(repository, models=[])  # type: ignore[operator]
    env = {**os.environ, "TRITON_LOAD_MODELS": "*", "TRITON_MODEL_REPOSITORIES": f"/nowhere:{repository}"}
    done = subprocess.run([sys.executable, str(ROOT / "deploy" / "triton-load-models.py"), "--url",
                           triton.http_url], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"load-models: {copy.name}: skipped: a geadmin tuning trial" in done.stdout
    assert "load-models: 2 of 2 loaded" in done.stdout, done.stdout
    listed = states(triton)
    assert listed[MODEL] is listed[OLD_TRIAL] is ModelState.READY
    assert listed[copy.name] is not ModelState.READY


def test_a_refused_trial_is_listed_not_judged_and_leaves_triton_ready_once_removed(
        server: TritonProcess, tmp_path: Path) -> None:
    """The ceiling search's refused load, held still: Triton says "not ready" while it stands."""
    copy = make_trial(server.repository, MODEL, trials.new_run_id(), server=server.http_url, home=tmp_path)
    try:
        with TritonClient(server.http_url) as client:
            config = client.model_config(MODEL)
            config.name, config.max_batch_size = copy.name, 64
            with pytest.raises(Exception, match="no batch gear above 8"):
                client.load(copy.name, config=config)
            copy.refused = True
            assert client.health().ready is False
        code, verdict = status(server, tmp_path)
        assert code == 0 and verdict["verdict"] == "OK", verdict["headline"]
        assert verdict["ready"] is False  # what Triton says stays as it is: only the verdict ignores it
        assert verdict["trials"] == [{"name": copy.name, "state": "UNAVAILABLE"}]
        assert copy.name not in verdict["failed"] and verdict["drift"] == []  # type: ignore[operator]
    finally:
        with TritonClient(server.http_url) as client:
            remove_trial(client, copy)
    with TritonClient(server.http_url) as client:
        assert client.health().ready is True
    assert status(server, tmp_path)[1]["trials"] == []
