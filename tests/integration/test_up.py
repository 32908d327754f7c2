"""`geadmin up` and `geadmin status` end to end, as subprocesses, against the real binaries."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from geadmin import audit
from geadmin.stack.processes import free_port, free_ports
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import SAMPLES_DIR
from tests.support.processes import OutputCollector, alive, all_pids, cmdline, descendants, wait_for
from tests.support.samples import SAMPLE_MODELS, add_python_model, copy_samples
from tests.support.stack import GEADMIN, Up, geadmin, port_args, running_up

# Every test here runs `geadmin up` (a real tritonserver) or the CLI as a subprocess.
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    with running_up(tmp_path_factory.mktemp("up_home"), wait_for="models: ") as stack:
        yield stack


def test_both_servers_answer_and_every_sample_model_is_ready(up: Up) -> None:
    assert f"Dashboard http://127.0.0.1:{up.dashboard}" in up.output
    with urllib.request.urlopen(f"http://127.0.0.1:{up.dashboard}/_stcore/health", timeout=5) as r:
        assert r.status == 200
    client = httpclient.InferenceServerClient(f"127.0.0.1:{up.http}")
    with pytest.raises(InferenceServerException, match="restricted"):  # the index needs the stack's key
        client.get_model_repository_index()
    key = (up.home / "triton-admin-key").read_text().strip()
    index = {m["name"]: m.get("state") for m in client.get_model_repository_index(headers={"admin-key": key})}
    assert index == dict.fromkeys(SAMPLE_MODELS, "READY")
    with urllib.request.urlopen(f"http://127.0.0.1:{up.metrics}/metrics", timeout=5) as r:
        assert b"nv_inference_request_success" in r.read()


def test_workspace_holds_the_repository_copy_and_the_triton_log(up: Up) -> None:
    assert sorted(p.name for p in (up.home / "model_repository").iterdir()) == SAMPLE_MODELS
    log = (up.home / "logs" / "tritonserver.log").read_text()
    assert "successfully loaded 'digits_pipeline'" in log


def test_ensemble_returns_the_right_digit_for_real_images(up: Up) -> None:
    examples = np.load(SAMPLES_DIR / "digits_examples.npz")
    client = httpclient.InferenceServerClient(f"127.0.0.1:{up.http}")
    image = httpclient.InferInput("IMAGE", list(examples["images"].shape), "UINT8")
    image.set_data_from_numpy(examples["images"])
    result = client.infer("digits_pipeline", [image])
    np.testing.assert_array_equal(result.as_numpy("LABEL").ravel(), examples["labels"])
    assert result.as_numpy("LABEL_NAME")[3, 0] == b"three"
    assert (result.as_numpy("SCORE") > 0.5).all()


def test_status_exit_codes_and_json(up: Up) -> None:
    ok = geadmin("status", "--url", up.url, "--expect", "digits_pipeline", home=up.home)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "READY (5)" in ok.stdout

    over_grpc = geadmin("status", "--url", f"grpc://127.0.0.1:{up.grpc}", "--json", home=up.home)
    document = json.loads(over_grpc.stdout)
    assert over_grpc.returncode == 0 and document["ok"] is True
    assert {m["name"]: m["state"] for m in document["models"]} == dict.fromkeys(SAMPLE_MODELS, "READY")
    stack = json.loads((up.home / "stack.json").read_text())
    triton = document["triton"]  # the stack's Triton: its process, for scripts that watch it
    assert triton["pid"] == stack["triton"]["pid"] and triton["pid"] is not None
    assert triton["state"] == "running" and triton["stack_pid"] == up.process.pid
    os.kill(triton["pid"], 0)  # a live process

    by_flag = geadmin("status", "--url", f"127.0.0.1:{up.grpc}", "--protocol", "grpc", "--json",
                      home=up.home)
    assert by_flag.returncode == 0, by_flag.stderr
    assert json.loads(by_flag.stdout)["url"] == f"grpc://127.0.0.1:{up.grpc}"

    missing = geadmin("status", "--url", up.url, "--expect", "digits_pipeline", "no_such_model",
                      "--json", home=up.home)
    assert missing.returncode == 1
    assert json.loads(missing.stdout)["expected_not_ready"] == ["no_such_model"]

    down = geadmin("status", "--url", f"http://127.0.0.1:{free_port()}", home=up.home)
    assert down.returncode == 3
    assert "unreachable" in down.stdout and "Connection refused" in down.stdout
    for result in (ok, over_grpc, missing, down):  # connections closed before exit: no gevent noise
        assert "Traceback" not in result.stderr and "Exception ignored" not in result.stderr


def test_the_cli_in_a_second_terminal_uses_the_running_stack_and_its_log(up: Up) -> None:
    stack = json.loads((up.home / "stack.json").read_text())
    assert (stack["http_url"], stack["pid"]) == (up.url, up.process.pid)
    assert stack["triton_log"] == str(up.home / "logs" / "tritonserver.log")
    broken = up.home / "model_repository" / "broken_cli"
    (broken / "1").mkdir(parents=True)
    (broken / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    (broken / "config.pbtxt").write_text(
        'name: "broken_cli"\nbackend: "python"\ninput [{ name: "x" data_type: TYPE_FOO dims: [1] }]\n')
    try:
        loaded = geadmin("models", "load", "broken_cli", home=up.home)  # no --url, no --triton-log
        assert loaded.returncode == 1, loaded.stdout + loaded.stderr
        first = loaded.stderr.splitlines()[0]
        assert first.startswith("geadmin: error: load of 'broken_cli' failed: ")
        assert "config.pbtxt does not parse: line 3, column" in first and "TYPE_FOO" in first
        assert f"Triton log (log file {stack['triton_log']})" in loaded.stderr  # the stack's log
        status = geadmin("status", "--expect", "digits_pipeline", home=up.home)
        assert status.returncode == 4, status.stdout  # an unrelated failure: DEGRADED, not DOWN (1)
        assert up.url in status.stdout and "broken_cli" in status.stdout
    finally:
        shutil.rmtree(broken)


def test_a_url_with_the_other_protocols_port_says_which_protocol_it_speaks(up: Up) -> None:
    http_on_grpc = geadmin("status", "--url", f"http://127.0.0.1:{up.grpc}", home=up.home)
    assert http_on_grpc.returncode == 3 and "this port speaks gRPC" in http_on_grpc.stdout
    grpc_on_http = geadmin("status", "--url", f"grpc://127.0.0.1:{up.http}", home=up.home)
    assert grpc_on_http.returncode == 3 and "this port speaks HTTP" in grpc_on_http.stdout

    bad_timeout = geadmin("status", "--url", up.url, "--timeout", "-1", home=up.home)
    assert bad_timeout.returncode == 2
    assert "seconds must be more than 0, got -1" in bad_timeout.stderr


def test_second_up_names_the_taken_port_and_starts_nothing(up: Up, tmp_path: Path) -> None:
    second = geadmin("up", *port_args(up.http, *free_ports(3)),
                     home=tmp_path / "home2")
    assert second.returncode == 2
    assert f"port {up.http} (Triton HTTP)" in second.stderr
    assert "--http-port" in second.stderr
    assert not (tmp_path / "home2" / "model_repository").exists()
    assert up.process.poll() is None  # the first stack is unharmed


def test_sigterm_stops_everything_within_15s(tmp_path: Path) -> None:
    with running_up(tmp_path) as stack:
        children = descendants(stack.process.pid)
        assert len(children) >= 2  # tritonserver (+ python stubs) and streamlit
        prefix = shm_prefix_of_tritonserver(children)
        # the stubs make their regions as their models load, after Triton answers ready
        assert wait_for(lambda: list(Path("/dev/shm").glob(f"{prefix}*")), 60), \
            "the python stubs should have shm regions"
        children = descendants(stack.process.pid)  # the stubs started since
        started = time.monotonic()
        stack.process.send_signal(signal.SIGTERM)
        stack.process.wait(timeout=15)
        assert time.monotonic() - started < 15
        assert stack.process.returncode == 0
    assert wait_for(lambda: not any(alive(pid) for pid in children), 2)
    assert not list(Path("/dev/shm").glob(f"{prefix}*"))
    (stop,) = audit.query(action="stop", home=tmp_path)  # the signal is the stop's origin
    assert stop.message.startswith("stopped by signal SIGTERM: `geadmin up` ended; tritonserver stopped "
                                   "as asked after "), stop.message


def test_sigterm_while_a_model_load_hangs_stops_everything_within_15s(tmp_path: Path) -> None:
    repository = copy_samples(tmp_path / "repo")
    add_python_model(repository, "slow_start", "time.sleep(600)")
    with running_up(tmp_path / "home", "--repository", str(repository)) as stack:
        assert wait_for(lambda: any(b"slow_start" in cmdline(pid) for pid in descendants(stack.process.pid)),
                        60), "the slow model's stub should be initializing"
        children = descendants(stack.process.pid)
        started = time.monotonic()
        stack.process.send_signal(signal.SIGTERM)
        stack.process.wait(timeout=15)
        assert time.monotonic() - started < 15
        assert stack.process.returncode == 0
    assert wait_for(lambda: not any(alive(pid) for pid in children), 2)
    assert "Traceback" not in stack.collector.text


# The signal lands at different steps of the start: before the tritonserver is spawned,
# while it is spawned, while it comes up. A handler that raised could land between the
# child's fork and the line recording it, and leave that tritonserver running.
@pytest.mark.parametrize("delay_s", [0.0, 0.02, 0.1, 0.5])
def test_sigterm_during_start_up_stops_what_had_started(tmp_path: Path, delay_s: float) -> None:
    """Before Triton is live `geadmin up` is still starting: a signal unwinds the start."""
    with running_up(tmp_path / "home", wait_for="starting tritonserver") as stack:
        time.sleep(delay_s)
        stack.process.send_signal(signal.SIGTERM)
        stack.process.wait(timeout=15)
    assert stack.process.returncode == 128 + signal.SIGTERM, stack.collector.text
    assert "interrupted during start-up" in stack.collector.text
    home = str(tmp_path / "home").encode()
    assert wait_for(lambda: not [pid for pid in all_pids() if home in cmdline(pid)], 5), \
        [cmdline(pid) for pid in all_pids() if home in cmdline(pid)]
    assert "Traceback" not in stack.collector.text


def shm_prefix_of_tritonserver(pids: set[int]) -> str:
    for pid in pids:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        for arg in argv:
            if arg.startswith(b"--backend-config=python,shm-region-prefix-name="):
                return arg.split(b"=", 2)[2].decode()
    raise AssertionError("no tritonserver among the stack's processes")


def test_missing_binary_is_a_short_error_and_nothing_runs(tmp_path: Path) -> None:
    result = geadmin("up", "--tritonserver", str(tmp_path / "missing"),
                     *port_args(*free_ports(4)), home=tmp_path)
    assert result.returncode == 2
    assert "tritonserver not found at" in result.stderr and "nvidia-pytriton" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_triton_that_dies_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    started = time.monotonic()
    result = geadmin("up", "--tritonserver", "/bin/false",
                     *port_args(*free_ports(4)), home=tmp_path)
    assert result.returncode == 2
    assert "tritonserver exited with code 1 during start-up" in result.stderr
    assert str(tmp_path / "logs" / "tritonserver.log") in result.stderr
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30


def test_a_missing_repository_is_named(tmp_path: Path) -> None:
    result = geadmin("up", "--repository", str(tmp_path / "nowhere"),
                     *port_args(*free_ports(4)), home=tmp_path)
    assert result.returncode == 2
    assert f"model repository {tmp_path / 'nowhere'} does not exist" in result.stderr


def test_attach_mode_starts_only_the_dashboard(triton_server: TritonProcess, tmp_path: Path) -> None:
    dashboard_port = free_port()
    env = {**os.environ, "GEADMIN_HOME": str(tmp_path)}
    process = subprocess.Popen(
        [*GEADMIN, "up", "--triton-url", triton_server.http_url, "--dashboard-port", str(dashboard_port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        output = OutputCollector(process).wait_for("Press Ctrl-C to stop.", timeout_s=60)
        assert f"Triton    {triton_server.http_url}  (attached)" in output
        children = descendants(process.pid)
        commands = [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in children]
        assert not any(b"tritonserver" in c for c in commands)
        assert any(b"streamlit" in c for c in commands)
        assert not (tmp_path / "model_repository").exists()
        with urllib.request.urlopen(f"http://127.0.0.1:{dashboard_port}/_stcore/health", timeout=5) as r:
            assert r.status == 200
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    assert process.returncode == 0
    assert triton_server.alive()  # attaching never stops someone else's Triton


def test_a_second_up_on_the_same_workspace_is_refused(up: Up) -> None:
    second = geadmin("up", *port_args(*free_ports(4)), home=up.home)
    assert second.returncode == 2
    assert f"another `geadmin up` (pid {up.process.pid}) is using the workspace {up.home}" in second.stderr
    assert up.process.poll() is None
    assert (up.home / "logs" / "tritonserver.log").exists()  # its log was not rotated away


def test_a_file_that_is_not_a_program_is_named(tmp_path: Path) -> None:
    fake = tmp_path / "tritonserver"
    fake.write_text("not a program")
    fake.chmod(0o755)
    result = geadmin("up", "--tritonserver", str(fake),
                     *port_args(*free_ports(4)), home=tmp_path)
    assert result.returncode == 2
    assert f"cannot run {fake}: Exec format error" in result.stderr
    assert "Traceback" not in result.stderr


def test_ports_out_of_range_are_usage_errors(tmp_path: Path) -> None:
    result = geadmin("up", "--http-port", "99999", home=tmp_path)
    assert result.returncode == 2
    assert "a port is between 1 and 65535, got 99999" in result.stderr
    env_result = subprocess.run(
        [*GEADMIN, "up"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "GEADMIN_HOME": str(tmp_path), "GEADMIN_GRPC_PORT": "70000"},
    )
    assert env_result.returncode == 2
    assert "GEADMIN_GRPC_PORT must be a port between 1 and 65535, got 70000" in env_result.stderr
    assert "Traceback" not in result.stderr + env_result.stderr


def test_a_bad_port_variable_for_up_does_not_break_status(up: Up) -> None:
    result = subprocess.run(
        [*GEADMIN, "status", "--url", up.url], capture_output=True, text=True, timeout=60,
        env={**os.environ, "GEADMIN_HTTP_PORT": "not-a-port", "GEADMIN_HOME": str(up.home)},  # its key
    )
    assert result.returncode == 0, result.stderr


def test_cli_picks_servers_by_name_and_checks_them_all(up: Up) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    env = {**os.environ, "GEADMIN_TRITON_URLS": f"main={up.url},spare={down}",
           "GEADMIN_HOME": str(up.home)}  # the workspace holds the stack's admin key

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*GEADMIN, *args], capture_output=True, text=True, env=env, timeout=60)

    by_name = cli("status", "--server", "main", "--expect", "digits_pipeline")
    assert by_name.returncode == 0, by_name.stdout + by_name.stderr

    every = cli("status", "--all", "--json")
    assert every.returncode == 3  # the worst of: main OK (0), spare unreachable (3)
    assert [(r["server"], r["ok"]) for r in json.loads(every.stdout)] == [("main", True), ("spare", False)]

    listed = cli("models", "list", "--server", "main", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "digits_pipeline" in listed.stdout

    unknown = cli("status", "--server", "nope")
    assert unknown.returncode == 2
    assert "no server named 'nope'; configured: main, spare" in unknown.stderr


def test_the_incident_guides_edit_workflow_copy_edit_validate_apply(up: Up, tmp_path: Path) -> None:
    """docs/guide/incident.md, step 4, as written: copy the served config out of the stack's
    repository, edit the copy, validate it (no flags: the stack's repository), apply it."""
    served = up.home / "model_repository" / "digits_classifier" / "config.pbtxt"
    original = served.read_text()
    copy = tmp_path / "edited.pbtxt"
    copy.write_text(original.replace("max_queue_delay_microseconds: 1000",
                                     "max_queue_delay_microseconds: 2000"))
    try:
        validated = geadmin("config", "validate", str(copy), home=up.home)
        assert validated.returncode == 0, validated.stdout + validated.stderr
        first, how = validated.stdout.splitlines()[:2]
        assert first == "OK: 1 model, no errors or warnings"
        repository = up.home / "model_repository"
        assert how.startswith(f"validated {copy} as model 'digits_classifier' of {repository}"), how
        applied = geadmin("config", "apply", "digits_classifier", str(copy), home=up.home)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert "max_queue_delay_microseconds: 2000" in served.read_text()
        broken = tmp_path / "broken.pbtxt"
        broken.write_text(original.replace("max_batch_size: 32", "max_batch_sise: 32"))
        refused = geadmin("config", "validate", str(broken), home=up.home)
        assert refused.returncode == 1 and "max_batch_sise" in refused.stdout, refused.stdout
    finally:
        copy.write_text(original)
        assert geadmin("config", "apply", "digits_classifier", str(copy), home=up.home).returncode == 0


@pytest.mark.parametrize("attach", [False, True])
def test_an_unusable_workspace_is_named(attach: bool) -> None:
    extra = ["--triton-url", "http://127.0.0.1:1"] if attach else []
    result = geadmin("up", *extra, *port_args(*free_ports(4)), home=Path("/proc/geadmin-nope"))
    assert result.returncode == 2
    assert "/proc/geadmin-nope" in result.stderr
    assert "internal error" not in result.stderr and "Traceback" not in result.stderr
