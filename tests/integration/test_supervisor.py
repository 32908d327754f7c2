"""`geadmin up` supervises Triton and never waits on a model: real tritonserver, real signals."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient

from geadmin import audit
from geadmin.stack.drivers import perform
from geadmin.stack.local import STOP_TRITON, LocalDriver
from geadmin.stack.processes import pid_alive
from geadmin.stack.supervisor import READY_POLL_S
from geadmin.stack.workspace import Workspace
from tests.support.auth import auth_as
from tests.support.processes import cmdline, descendants, wait_for
from tests.support.samples import SAMPLE_MODELS, add_python_model, copy_samples
from tests.support.stack import Up, geadmin, running_up

pytestmark = pytest.mark.integration
NPU_MODEL = "npu_resnet"


def add_npu_ge_model(repository: Path, name: str = NPU_MODEL) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "1" / "model.om").write_bytes(b"not a real om: this host has no CANN")
    (repository / name / "config.pbtxt").write_text(
        f'name: "{name}"\nbackend: "npu_ge"\nmax_batch_size: 8\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]\n')


def index(up: Up) -> dict[str, str]:
    client = httpclient.InferenceServerClient(f"127.0.0.1:{up.http}")
    try:
        key = (up.home / "triton-admin-key").read_text().strip()  # the stack's Triton needs its key
        return {m["name"]: m.get("state", "") for m in client.get_model_repository_index(
            headers={"admin-key": key})}
    finally:
        client.close()


def dashboard_healthy(up: Up) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{up.dashboard}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


def stack_json(up: Up) -> dict:
    return json.loads((up.home / "stack.json").read_text())


def triton_pid(up: Up) -> int:
    for pid in descendants(up.process.pid):
        if cmdline(pid).split(b"\0")[0].endswith(b"tritonserver"):
            return pid
    raise AssertionError("no tritonserver under geadmin up")


def samples_ready(up: Up) -> bool:
    try:
        states = index(up)
    except Exception:
        return False
    return all(states.get(name) == "READY" for name in SAMPLE_MODELS)


@pytest.fixture(scope="module")
def supervised(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    base = tmp_path_factory.mktemp("supervised")
    repository = copy_samples(base / "repo")
    add_npu_ge_model(repository)
    with running_up(base / "home", "--repository", str(repository), wait_for="models: ") as up:
        yield up


def test_an_npu_ge_model_without_cann_fails_with_the_backends_own_reason(supervised: Up) -> None:
    output = supervised.output
    assert "backend npu_ge: " in output
    line = next(line for line in output.splitlines() if f"{NPU_MODEL}: FAILED" in line)
    assert "cannot load the ACL runtime libascendcl.so" in line
    assert "unable to find backend library" not in output
    assert (supervised.home / "backends" / "npu_ge" / "libtriton_npu_ge.so").exists()
    assert f"models: {len(SAMPLE_MODELS)} of {len(SAMPLE_MODELS) + 1} READY; failed: {NPU_MODEL}" in output


def test_kill_9_of_triton_keeps_the_dashboard_up_and_triton_comes_back_with_its_models(
        supervised: Up) -> None:
    assert samples_ready(supervised)
    before = triton_pid(supervised)
    killed_at = time.monotonic()
    crashed_at = audit.db.utc_now()
    os.kill(before, signal.SIGKILL)
    assert wait_for(lambda: "killed by SIGKILL" in supervised.collector.text, 10)
    assert dashboard_healthy(supervised)
    assert wait_for(lambda: samples_ready(supervised), 15), supervised.collector.text
    assert time.monotonic() - killed_at < 15
    assert dashboard_healthy(supervised)
    assert triton_pid(supervised) != before
    # The npu model was not READY before the crash, so it is not loaded again.
    assert NPU_MODEL not in {k for k, v in index(supervised).items() if v == "READY"}
    exits = stack_json(supervised)["triton"]["exits"]
    assert exits[-1]["signal"] == "SIGKILL" and exits[-1]["restarted"] is True
    # The crash is a failed exit; the restart after it is its own row, and it worked.
    assert wait_for(lambda: any(r.action == "restart" for r in audit.query(
        model="tritonserver", since=crashed_at, home=supervised.home)), 10)
    rows = audit.query(model="tritonserver", since=crashed_at, home=supervised.home)
    (crash,) = [r for r in rows if r.action == "exit"]
    assert crash.result == "failed" and crash.message.startswith("tritonserver killed by SIGKILL after ")
    assert "restart failed" not in crash.message and "restarts it" in crash.message
    (restart,) = [r for r in rows if r.action == "restart"]
    assert restart.result == "ok" and "is live again" in restart.message and restart.at >= crash.at
    status = next(s for s in LocalDriver(Workspace(supervised.home)).services() if s.name == "triton")
    assert status.restarts >= 1 and status.state == "running"


def test_kill_9_of_the_dashboard_restarts_it_and_triton_keeps_serving(supervised: Up) -> None:
    assert samples_ready(supervised)
    triton_before = triton_pid(supervised)
    dashboard_before = stack_json(supervised)["dashboard"]["pid"]
    os.kill(dashboard_before, signal.SIGKILL)
    assert wait_for(lambda: "the dashboard exited (killed by SIGKILL" in supervised.collector.text, 10), (
        supervised.collector.text[-2000:])
    assert wait_for(lambda: dashboard_healthy(supervised), 20), supervised.collector.text
    assert wait_for(lambda: stack_json(supervised)["dashboard"]["pid"] != dashboard_before, 10)
    assert triton_pid(supervised) == triton_before and samples_ready(supervised)
    assert supervised.process.poll() is None  # `geadmin up` itself runs on
    rows = audit.query(model="dashboard", home=supervised.home)
    assert rows and rows[0].action == "restart" and "killed by SIGKILL" in rows[0].message


def test_the_local_driver_restarts_triton_and_records_why(
    supervised: Up, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEADMIN_HOME", str(supervised.home))  # the Stack page's process writes its row there
    driver = LocalDriver(Workspace(supervised.home))
    before = triton_pid(supervised)
    count = len(driver.history("triton"))
    since = audit.db.utc_now()
    perform(driver, "triton", "restart", auth=auth_as("alice"))  # the Stack page's Restart
    assert wait_for(lambda: len(driver.history("triton")) > count, 15)
    assert driver.history("triton")[-1].note == "restart asked from the Stack page by alice (dashboard)"
    assert driver.history("triton")[-1].how == "stopped as asked"
    assert wait_for(lambda: samples_ready(supervised), 20), supervised.collector.text
    assert triton_pid(supervised) != before
    (restart,) = [r for r in audit.query(model="tritonserver", since=since, home=supervised.home)]
    assert (restart.action, restart.result) == ("restart", "ok"), restart
    assert restart.message.startswith("tritonserver is live again (restart ")
    assert restart.message.endswith("; restart asked from the Stack page by alice (dashboard))"), restart
    assert any("Started HTTPService" in line for line in driver.logs("triton", 400))
    with pytest.raises(Exception, match="cannot restart itself"):
        driver.restart("dashboard")


def test_a_stop_signal_from_a_shell_is_not_called_the_stack_pages_and_triton_stays_down(
    supervised: Up,
) -> None:
    driver = LocalDriver(Workspace(supervised.home))
    since = audit.db.utc_now()
    os.kill(supervised.process.pid, STOP_TRITON)  # `kill -USR1 <geadmin up>` from a shell
    assert wait_for(lambda: driver.services()[0].state == "stopped", 15)
    (stop,) = audit.query(model="tritonserver", since=since, home=supervised.home)
    assert (stop.action, stop.result) == ("stop", "ok")
    pid = supervised.process.pid
    assert stop.message.startswith(f"stopped by signal SIGUSR1 to `geadmin up` (pid {pid}), not from the "
                                   "Stack page or `geadmin stack`: tritonserver stopped as asked after "), \
        stop.message
    assert "Stack page by" not in stop.message and "exit code" not in stop.message
    time.sleep(2)  # no backoff restart after a requested stop
    assert driver.services()[0].state == "stopped"
    assert dashboard_healthy(supervised)
    driver.start("triton")
    assert wait_for(lambda: samples_ready(supervised), 20), supervised.collector.text


def test_a_hung_model_and_a_broken_config_never_hold_up_the_other_models(tmp_path: Path) -> None:
    repository = copy_samples(tmp_path / "repo")
    hung = add_python_model(repository, "hung_stub")
    (hung / "1" / "model.py").unlink()  # the stub fails and Triton keeps the load forever
    broken = add_python_model(repository, "broken_config")
    (broken / "config.pbtxt").write_text('name: "broken_config"\nbackend: "python"\n'
                                         'input [{ name: "x" data_type: TYPE_FOO dims: [1] }]\n')
    started = time.monotonic()
    with running_up(tmp_path / "home", "--repository", str(repository)) as up:
        assert wait_for(lambda: samples_ready(up), 30), up.collector.text
        assert time.monotonic() - started < 30 + 5  # + the dashboard's own start
        text = up.collector.wait_for("models: ", timeout_s=30)
        assert "hung_stub: FAILED — Failed to preinitialize Python stub" in text
        assert "broken_config: FAILED" in text and "TYPE_FOO" in text and "line 3" in text
        assert f"models: {len(SAMPLE_MODELS)} of {len(SAMPLE_MODELS) + 1} READY; failed: broken_config" \
            in text
        assert "not loading hung_stub" in text
        assert dashboard_healthy(up)
        assert "Traceback" not in text
        status = geadmin("status", home=up.home)
        assert status.returncode == 4, status.stdout + status.stderr
        assert "model 'hung_stub' failed: " in status.stdout, status.stdout


def test_a_model_dropped_behind_geadmins_back_or_left_failed_stays_degraded_after_a_crash(
        tmp_path: Path) -> None:
    """The restart loads only the models that served, and the new Triton lists the others like
    models never loaded: the audit log keeps why, so `geadmin status` stays DEGRADED (it said OK)."""
    repository = copy_samples(tmp_path / "repo")
    add_npu_ge_model(repository)  # fails at start-up: no CANN here
    with running_up(tmp_path / "home", "--repository", str(repository), wait_for="models: ") as up:
        classifier = repository / "digits_classifier" / "config.pbtxt"
        classifier.write_text(classifier.read_text().replace("max_batch_size: 32", "max_batch_size: 16"))
        key = (up.home / "triton-admin-key").read_text().strip()
        raw = httpclient.InferenceServerClient(f"127.0.0.1:{up.http}")
        try:  # a load with curl: Triton drops the ensemble above it, and geadmin's audit knows nothing
            raw.load_model("digits_classifier", headers={"admin-key": key})
        finally:
            raw.close()
        assert wait_for(lambda: index(up).get("digits_pipeline") == "UNAVAILABLE", 20)
        time.sleep(READY_POLL_S + 1)  # the supervisor's poll of what serves
        os.kill(triton_pid(up), signal.SIGKILL)
        assert wait_for(lambda: "reloading" in up.collector.text, 20), up.collector.text
        assert wait_for(lambda: index(up).get("digits_classifier") == "READY", 30)
        assert index(up).get("digits_pipeline") == ""  # listed like a model never loaded
        status = geadmin("status", home=up.home)
        assert status.returncode == 4, status.stdout + status.stderr
        assert "digits_pipeline" in status.stdout and NPU_MODEL in status.stdout, status.stdout
        (row,) = audit.query(model="digits_pipeline", action="side_effect", home=up.home)
        assert row.result == "failed" and "was not serving when Triton went" in row.message
        # the npu model's failed load says why already: no second row
        assert not audit.query(model=NPU_MODEL, action="side_effect", home=up.home)


def test_kill_9_of_geadmin_up_takes_its_triton_and_dashboard_with_it_and_status_says_so(
        tmp_path: Path) -> None:
    """An OOM kill of `geadmin up` left Triton, its stubs and the dashboard running unsupervised,
    and `geadmin status` asked "is the URL right?" of the default address."""
    with running_up(tmp_path / "home") as up:
        below = descendants(up.process.pid)
        triton = triton_pid(up)
        try:
            os.kill(up.process.pid, signal.SIGKILL)
            up.process.wait(10)
            assert wait_for(lambda: not any(pid_alive(pid) for pid in below), 15), \
                [cmdline(pid) for pid in below if pid_alive(pid)]
        finally:
            for pid in below:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        assert not pid_alive(triton)
        status = geadmin("status", home=up.home)
        assert status.returncode == 3, status.stdout + status.stderr
        first = status.stdout.splitlines()[0]
        assert first.startswith(f"DOWN: `geadmin up` of {up.home} (pid {up.process.pid}) is gone without "
                                "stopping — killed, or the machine restarted"), first
        assert first.endswith("start it again with `geadmin up`"), first


def test_no_restart_leaves_triton_down_and_the_dashboard_up(tmp_path: Path) -> None:
    with running_up(tmp_path / "home", "--no-restart") as up:
        os.kill(triton_pid(up), signal.SIGKILL)
        assert wait_for(lambda: "not restarting it (--no-restart)" in up.collector.text, 10)
        time.sleep(2)
        assert up.process.poll() is None and dashboard_healthy(up)
        assert stack_json(up)["triton"]["state"] == "exited"
        triton = LocalDriver(Workspace(up.home)).services()[0]
        assert triton.state == "exited" and "killed by SIGKILL" in triton.detail


def test_a_model_whose_load_kills_triton_is_left_out_not_reloaded_into_a_crash_loop(tmp_path: Path) -> None:
    """Every round reloaded the model whose load kills Triton (a backend that crashes on its
    file): Triton crash-looped, and every other model was cut off each time as "unreachable"."""
    repository = copy_samples(tmp_path / "repo")
    add_python_model(repository, "crasher", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)")
    with running_up(tmp_path / "home", "--repository", str(repository)) as up:
        text = up.collector.wait_for("crasher: its load killed Triton (killed by SIGKILL); Triton restarts "
                                     "without it, and it stays out until loaded by hand", timeout_s=120)
        assert "the load round was cut off: tritonserver killed by SIGKILL" in text
        assert "unreachable" not in text, text
        assert wait_for(lambda: samples_ready(up), 60), up.collector.text
        assert f"models: {len(SAMPLE_MODELS)} of {len(SAMPLE_MODELS)} READY" in up.collector.wait_for(
            f"models: {len(SAMPLE_MODELS)} of", timeout_s=60)
        restarts = up.collector.text.count("tritonserver is live again")
        assert restarts <= 2, up.collector.text  # found at once, or after one round one at a time
        assert "not loading crasher: its load killed Triton (killed by SIGKILL)" in up.collector.text
        status = geadmin("status", home=up.home)
        assert status.returncode == 4, status.stdout + status.stderr
        assert "crasher" in status.stdout and "its load killed Triton" in status.stdout, status.stdout
        # fixed and loaded by hand: a later crash reloads it with the others (it served)
        (repository / "crasher" / "1" / "model.py").write_text(
            "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n")
        loaded = geadmin("models", "load", "crasher", home=up.home)
        assert loaded.returncode == 0, loaded.stdout + loaded.stderr
        time.sleep(READY_POLL_S + 1)  # the supervisor's next poll of what serves (no sign of it outside)
        os.kill(triton_pid(up), signal.SIGKILL)
        assert wait_for(lambda: "tritonserver is live again (restart 3)" in up.collector.text, 60)
        assert wait_for(lambda: index(up).get("crasher") == "READY", 60), up.collector.text
        assert up.collector.text.count("not loading crasher") == 1, up.collector.text


def test_a_restart_asked_for_during_a_load_round_blames_no_model(tmp_path: Path) -> None:
    """Any exit under a lone load was taken for that load killing Triton: a restart from the
    Stack page while a slow model loaded left that model out, audited as its failure."""
    repository = copy_samples(tmp_path / "repo")
    add_python_model(repository, "slow", "time.sleep(30)")
    with running_up(tmp_path / "home", "--repository", str(repository)) as up:
        up.collector.wait_for("[5/6]", timeout_s=60)  # the others are done: slow loads alone
        os.kill(up.process.pid, signal.SIGHUP)  # what the Stack page's Restart sends
        text = up.collector.wait_for("tritonserver is live again", timeout_s=60)
        assert "the load round was cut off: tritonserver was stopped as asked" in text, text
        assert "killed Triton" not in text and "suspect" not in text and "alone" not in text, text
        assert not [row for row in audit.query(model="slow", home=up.home) if "killed Triton" in row.message]
