"""`docker compose up` for real: the CPU-only stack (compose.cpu.yaml) on this machine's engine.

The images are built from the Dockerfile FROM the local test base (scripts/docker-engine.sh:
no registry can be pulled here), the stack comes up under a unique project name with a
random admin key and free host ports, and `down -v` must leave nothing of it behind.
Nothing here skips: without an engine, a base image or a build, these tests fail.

Builds use BuildKit when the machine has a client for it (`docker buildx`, or Debian's
docker.io client with DOCKER_BUILDKIT=1): it builds only the stages a target needs and
does not copy the whole filesystem for every metadata step (on the vfs storage driver
the classic builder takes about 8 minutes where BuildKit takes 2).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import pytest

from geadmin.stack.compose import ComposeDriver
from geadmin.stack.processes import free_ports, pick_range
from geadmin.stack.workspace import SAMPLE_REPOSITORY
from tests.support.deploy import ROOT, TEST_BASE_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]

COMPOSE_FILE = ROOT / "compose.cpu.yaml"
IMAGE_REPO = "geadmin-test"  # tags reused between runs: the layers stay cached
IMAGE_TAG = "latest"
SAMPLES = {"digits_classifier", "digits_pipeline", "digits_postprocess", "digits_preprocess",
           "text_normalize"}
NPU_MODEL = "npu_resnet"
HEALTHY_TIMEOUT_S = 240
REPLICAS = 3  # `--scale triton=3`
# Each triton port is published as a range with room to spare: Docker hands a range's ports out
# in turn and the restart test moves the one replica on, so a range of exactly 3 once left the
# third replica "all ports are allocated" (a `make test` run).
PUBLISHED_RANGE = 2 * REPLICAS
HEALTHY = {"triton": "healthy", "dashboard": "healthy", "sampler": "healthy"}
T = TypeVar("T")


def run(argv: list[str], *, timeout_s: float = 120, env: dict[str, str] | None = None,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    # compose reads GEADMIN_AUTH from this environment: never the test run's (tests/conftest.py)
    env = {k: v for k, v in (os.environ if env is None else env).items() if k != "GEADMIN_AUTH"}
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                          cwd=ROOT, env=env)
    if check:
        assert done.returncode == 0, (f"{' '.join(argv)} exited {done.returncode}\n"
                                      f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
    return done


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float,
             diagnose: Callable[[], str] = lambda: "") -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}\n{diagnose()}")


def free_runs(runs: int, count: int) -> list[int]:
    """The first ports of `runs` runs of `count` consecutive free ports, all in this worker's pick
    range and none overlapping (triton publishes a range per container port, so `--scale
    triton=3` gives each replica its own): every run is held until all are picked."""
    high = pick_range()[1]
    firsts: list[int] = []
    with contextlib.ExitStack() as held:
        for _ in range(200):
            first = free_ports(1)[0]
            if first + count - 1 > high:
                continue
            with contextlib.ExitStack() as run_held:
                try:
                    for port in range(first, first + count):
                        run_held.enter_context(socket.socket()).bind(("127.0.0.1", port))
                except OSError:
                    continue
                held.enter_context(run_held.pop_all())
            firsts.append(first)
            if len(firsts) == runs:
                return firsts
    raise AssertionError(f"no {runs} runs of {count} consecutive free ports")


def build_command() -> tuple[list[str], dict[str, str]]:
    """`docker build` with BuildKit when this machine has a client for it."""
    env = dict(os.environ)
    if run(["docker", "buildx", "version"], check=False).returncode == 0:
        return ["docker", "buildx", "build", "--load"], env
    debian_client = Path("/usr/bin/docker")  # docker.io's 20.10 client has BuildKit built in
    if debian_client.is_file():
        return [str(debian_client), "build"], {**env, "DOCKER_BUILDKIT": "1"}
    return ["docker", "build"], env


def image_id(tag: str) -> str | None:
    done = run(["docker", "image", "inspect", "--format", "{{.Id}}", tag], check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def build_image(target: str) -> float:
    """Build one target FROM the test base; the image it replaces is removed (with the vfs
    storage driver every image costs its full size on disk)."""
    command, env = build_command()
    tag = f"{IMAGE_REPO}/{target}:{IMAGE_TAG}"
    previous = image_id(tag)
    started = time.monotonic()
    run([*command, "--target", target, "--build-arg", f"BASE_IMAGE={TEST_BASE_IMAGE}", "-t", tag,
         str(ROOT)], timeout_s=1500, env=env)
    elapsed = time.monotonic() - started
    if previous is not None and previous != image_id(tag):
        run(["docker", "image", "rm", previous], check=False)
    return elapsed


def http(method: str, url: str, body: Any = None, key: str | None = None,
         timeout_s: float = 30) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if key:
        request.add_header("admin-key", key)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            raw = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


@dataclass
class Stack:
    project: str
    key: str
    ports: dict[str, int]
    repository: Path
    env_file: Path
    timings: dict[str, float] = field(default_factory=dict)
    down_done: bool = False

    def compose(self, *args: str, timeout_s: float = 300,
                check: bool = True) -> subprocess.CompletedProcess[str]:
        return run(["docker-compose", "-p", self.project, "--env-file", str(self.env_file),
                    "-f", str(COMPOSE_FILE), *args], timeout_s=timeout_s, check=check)

    def triton_port(self, container_port: int) -> int:
        """The host port Docker gave the (one) triton container's `container_port`, from the range."""
        published = run(["docker", "port", self.container("triton"), f"{container_port}/tcp"]).stdout
        return int(published.split()[0].rsplit(":", 1)[1])

    @property
    def triton(self) -> str:
        return f"http://127.0.0.1:{self.triton_port(8000)}"

    @property
    def dashboard(self) -> str:
        return f"http://127.0.0.1:{self.ports['DASHBOARD_PORT']}"

    def container(self, service: str) -> str:
        ids = run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={self.project}",
                   "--filter", f"label=com.docker.compose.service={service}"]).stdout.split()
        assert len(ids) == 1, f"expected one running {service} container, got {ids}"
        return ids[0]

    def health(self) -> dict[str, str]:
        ids = run(["docker", "ps", "-aq", "--filter",
                   f"label=com.docker.compose.project={self.project}"]).stdout.split()
        if not ids:
            return {}
        found = {}
        for item in json.loads(run(["docker", "inspect", *ids]).stdout):
            state = item["State"]
            service = item["Config"]["Labels"]["com.docker.compose.service"]
            found[service] = state.get("Health", {}).get("Status") or state["Status"]
        return found

    def healthy_replicas(self, service: str) -> int:
        ids = run(["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={self.project}",
                   "--filter", f"label=com.docker.compose.service={service}"]).stdout.split()
        if not ids:
            return 0
        states = [item["State"] for item in json.loads(run(["docker", "inspect", *ids]).stdout)]
        return sum(1 for state in states if state.get("Health", {}).get("Status") == "healthy")

    def all_healthy(self) -> bool:
        return self.health() == HEALTHY

    def model_states(self) -> dict[str, str]:
        status, index = http("POST", f"{self.triton}/v2/repository/index", {}, key=self.key)
        assert status == 200, index
        return {entry["name"]: entry.get("state", "") for entry in index}

    def samples_ready(self) -> bool:
        try:
            states = self.model_states()
        except (OSError, AssertionError):
            return False
        return all(states.get(name) == "READY" for name in SAMPLES)

    def diagnose(self) -> str:
        logs = self.compose("logs", "--no-color", "--tail", "60", check=False)
        return f"health: {self.health()}\n{logs.stdout[-6000:]}{logs.stderr[-2000:]}"

    def leftovers(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        found = {"container": run(["docker", "ps", "-aq", "--filter", label]).stdout.split(),
                 "network": run(["docker", "network", "ls", "-q", "--filter", label]).stdout.split(),
                 "volume": run(["docker", "volume", "ls", "-q", "--filter", label]).stdout.split()}
        return {kind: ids for kind, ids in found.items() if ids}

    def down(self) -> None:
        if not self.down_done:
            self.compose("down", "-v", "--remove-orphans", "--timeout", "20", timeout_s=180)
            self.down_done = True


def add_npu_ge_model(repository: Path) -> None:
    """An Ascend model: on this CPU-only image npu_ge must say it cannot load libascendcl."""
    (repository / NPU_MODEL / "1").mkdir(parents=True)
    (repository / NPU_MODEL / "1" / "model.om").write_bytes(b"not a real om: no CANN in this image")
    (repository / NPU_MODEL / "config.pbtxt").write_text(
        f'name: "{NPU_MODEL}"\nbackend: "npu_ge"\nmax_batch_size: 8\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]\n')


@pytest.fixture(scope="module")
def stack(docker_engine: None) -> Iterator[Stack]:
    timings = {"build triton-cpu": build_image("triton-cpu"), "build dashboard": build_image("dashboard")}
    workdir = Path(tempfile.mkdtemp(prefix="geadmin-compose-"))
    workdir.chmod(0o755)  # the containers run as uid 1000
    repository = workdir / "model_repository"
    shutil.copytree(SAMPLE_REPOSITORY, repository, ignore=shutil.ignore_patterns("__pycache__"))
    add_npu_ge_model(repository)
    for path in [repository, *repository.rglob("*")]:
        os.chown(path, 1000, 1000)  # the dashboard edits the repository as uid 1000
    project = f"geadmintest{uuid.uuid4().hex[:10]}"
    *triton_firsts, dashboard_port = free_runs(4, PUBLISHED_RANGE)  # the dashboard's: apart from them
    ranges = dict(zip(("TRITON_HTTP_PORT", "TRITON_GRPC_PORT", "TRITON_METRICS_PORT"), triton_firsts,
                      strict=True))
    ports = {**ranges, "DASHBOARD_PORT": dashboard_port}
    key = secrets.token_urlsafe(24)
    env_file = workdir / "env"
    settings = {"TRITON_ADMIN_KEY": key, "COMPOSE_PROJECT_NAME": project, "MODEL_REPOSITORY": str(repository),
                "GEADMIN_IMAGE_REPO": IMAGE_REPO, "GEADMIN_IMAGE_TAG": IMAGE_TAG,
                "BASE_IMAGE": TEST_BASE_IMAGE, "PUBLISH_ADDRESS": "127.0.0.1", "TRITON_SHM_SIZE": "256m",
                **{name: f"{port}-{port + PUBLISHED_RANGE - 1}" for name, port in ranges.items()},
                "DASHBOARD_PORT": str(ports["DASHBOARD_PORT"]), "GEADMIN_PROBE_INTERVAL_S": "5"}
    env_file.write_text("".join(f"{name}={value}\n" for name, value in settings.items()))
    result = Stack(project, key, ports, repository, env_file, timings)
    try:
        started = time.monotonic()
        result.compose("up", "-d", "--no-build", timeout_s=600)
        wait_for("both services healthy", result.all_healthy, HEALTHY_TIMEOUT_S, result.diagnose)
        timings["up until healthy"] = time.monotonic() - started
        print("\ncompose stack timings: " + ", ".join(f"{k} {v:.0f}s" for k, v in timings.items()))
        yield result
    finally:
        result.down()
        shutil.rmtree(workdir, ignore_errors=True)


def test_every_service_becomes_healthy(stack: Stack) -> None:
    assert stack.health() == HEALTHY


def test_the_sampler_records_compose_triton_where_the_dashboard_reads_it(stack: Stack) -> None:
    probe = run(["docker", "exec", stack.container("sampler"), "geadmin", "sampler", "--check"])
    assert probe.stdout.startswith("sampler: last sample"), probe.stdout
    read = ("from geadmin.telemetry.history.store import sources; "
            "print([(s.source, s.down) for s in sources()])")
    seen = run(["docker", "exec", stack.container("dashboard"), "python", "-c", read]).stdout
    assert "('http://triton:8002/metrics', '')" in seen, seen


def test_dashboard_answers_its_health_endpoint_from_the_host(stack: Stack) -> None:
    status, body = http("GET", f"{stack.dashboard}/_stcore/health")
    assert (status, body) == (200, "ok")


def test_dashboard_reaches_triton_by_service_name(stack: Stack) -> None:
    probe = ("import urllib.request; r = urllib.request.urlopen('http://triton:8000/v2/health/live', "
             "timeout=5); print(r.status)")
    done = run(["docker", "exec", stack.container("dashboard"), "python", "-c", probe])
    assert done.stdout.strip() == "200"


def test_first_start_creates_an_admin_whose_password_file_the_log_names(stack: Stack) -> None:
    """Secure by default: no users file and no OIDC, so the dashboard made an `admin` with a
    random password, kept it in the workspace volume (0600) and named that file in its log,
    once, never the password itself."""
    dashboard = stack.container("dashboard")
    logs = run(["docker", "logs", dashboard]).stdout
    lines = [line for line in logs.splitlines() if "created the first dashboard user 'admin'" in line]
    assert len(lines) == 1, logs[-3000:]
    kept_file = "/var/lib/geadmin/initial-admin-password"
    assert f"cat {kept_file}" in lines[0]
    kept = run(["docker", "exec", dashboard, "sh", "-c", f"stat -c %a {kept_file} && cat {kept_file}"])
    mode, password = kept.stdout.split()
    assert mode == "600" and len(password) >= 20 and password not in logs
    listed = run(["docker", "exec", dashboard, "geadmin", "users", "list", "--json"]).stdout
    assert json.loads(listed) == [{"name": "admin", "role": "admin", "must_change": True}]


def test_dashboard_app_runs_in_its_container_against_compose_triton(stack: Stack) -> None:
    """The wheel's entry script, run by Streamlit's AppTest inside the dashboard container
    (its environment: GEADMIN_TRITON_URL=http://triton:8000, the key, the shared log), signed
    in as a viewer made with `geadmin users add` in the container."""
    dashboard = stack.container("dashboard")
    password = secrets.token_urlsafe(16)
    added = subprocess.run(["docker", "exec", "-i", dashboard, "geadmin", "users", "add", "vic", "--role",
                            "viewer", "--password-stdin"], input=password + "\n", capture_output=True,
                           text=True, timeout=60, check=False)
    assert added.returncode == 0, added.stderr
    script = (
        "from streamlit import config\n"
        "config.set_option('server.address', '0.0.0.0')\n"  # as the running dashboard binds
        "from streamlit.testing.v1 import AppTest\n"
        "at = AppTest.from_file('/opt/geadmin/pages/app.py', default_timeout=60)\n"
        "at.run()\n"
        "print('TITLES', [t.value for t in at.title])\n"
        "at.text_input(key='access.user').input('vic')\n"
        f"at.text_input(key='access.password').input({password!r})\n"
        "next(b for b in at.button if b.label == 'Sign in').click()\n"
        "at.run()\n"
        "print('EXCEPTIONS', [e.value for e in at.exception])\n"
        "print('ERRORS', [e.body for e in at.error])\n"
        "print('SIGNED', [c.value for c in at.sidebar.caption])\n"
        "print('TABLES', ' '.join(df.value.to_string() for df in at.dataframe))\n"
    )
    done = run(["docker", "exec", dashboard, "python", "-c", script], timeout_s=180)
    assert "TITLES ['Sign in']" in done.stdout, done.stdout[-3000:]  # nothing before sign-in
    assert "EXCEPTIONS []" in done.stdout, done.stdout[-3000:]
    assert "vic · viewer" in done.stdout, done.stdout[-3000:]
    errors = next(line for line in done.stdout.splitlines() if line.startswith("ERRORS "))
    # The one model that cannot load here, with the backend's reason, read through compose.
    assert errors.count("**") == 2 and f"**{NPU_MODEL}**" in errors, errors
    assert "cannot load the ACL runtime libascendcl.so" in errors
    tables = done.stdout.split("TABLES ", 1)[1]
    assert all(name in tables for name in SAMPLES), tables[-3000:]


def test_repository_api_needs_the_admin_key(stack: Stack) -> None:
    status, _ = http("POST", f"{stack.triton}/v2/repository/index", {})
    assert status == 403
    status, _ = http("POST", f"{stack.triton}/v2/repository/models/text_normalize/unload", {}, key="wrong")
    assert status == 403
    # shared memory too: open, a region registered by name could be read back through a model
    region = {"key": "/geadmin_probe", "offset": 0, "byte_size": 64}
    status, _ = http("POST", f"{stack.triton}/v2/systemsharedmemory/region/probe/register", region)
    assert status == 403
    assert http("GET", f"{stack.triton}/v2/systemsharedmemory/status")[0] == 403
    assert http("GET", f"{stack.triton}/v2/systemsharedmemory/status", key=stack.key) == (200, [])
    assert SAMPLES | {NPU_MODEL} <= set(stack.model_states())


def test_models_load_at_start_and_npu_ge_says_why_it_cannot_load(stack: Stack) -> None:
    wait_for("the sample models READY", stack.samples_ready, 120, stack.diagnose)
    def summary_logged() -> str | None:
        out = stack.compose("logs", "--no-color", "triton").stdout
        return out if "load-models: 5 of 6 loaded" in out else None

    logs = wait_for("the start-up loader's summary", summary_logged, 60, stack.diagnose)
    failure = next(line for line in logs.splitlines() if f"load-models: {NPU_MODEL}: FAILED" in line)
    assert "cannot load the ACL runtime libascendcl.so" in failure
    assert "unable to find backend library" not in logs


def test_a_sample_model_loads_with_the_key_and_answers_through_compose_triton(stack: Stack) -> None:
    status, body = http("POST", f"{stack.triton}/v2/repository/models/text_normalize/load", {},
                        key=stack.key, timeout_s=120)
    assert status == 200, body
    request = {"inputs": [{"name": "TEXT", "shape": [1, 1], "datatype": "BYTES",
                           "data": ["  Ｈello   WORLD "]}]}
    status, body = http("POST", f"{stack.triton}/v2/models/text_normalize/infer", request)
    assert status == 200, body
    outputs = {output["name"]: output["data"] for output in body["outputs"]}
    assert outputs == {"NORMALIZED": ["hello world"], "TOKEN_COUNT": [2]}


def test_triton_log_is_on_the_shared_volume_and_in_docker_logs(stack: Stack) -> None:
    read = "print(open('/var/log/triton/tritonserver.log').read())"
    shared = run(["docker", "exec", stack.container("dashboard"), "python", "-c", read]).stdout
    assert "Started HTTPService at 0.0.0.0:8000" in shared
    assert "cannot load the ACL runtime libascendcl.so" in shared  # what the explainer needs
    write = "open('/var/log/triton/x', 'w')"
    done = run(["docker", "exec", stack.container("dashboard"), "python", "-c", write], check=False)
    assert done.returncode != 0 and "Read-only file system" in done.stderr
    assert "Started HTTPService" in stack.compose("logs", "--no-color", "triton").stdout


def test_metrics_have_summary_latencies(stack: Stack) -> None:
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.triton_port(8002)}/metrics",
                                timeout=10) as response:
        text = response.read().decode()
    summaries = [line for line in text.splitlines() if line.startswith("nv_inference_request_summary_us{")]
    assert any('model="text_normalize"' in line and 'quantile="0.99"' in line
               for line in summaries), summaries


def test_compose_driver_lists_restarts_and_tails_the_real_containers(stack: Stack) -> None:
    driver = ComposeDriver(stack.project)
    services = {status.name: status for status in driver.services()}
    assert set(services) == set(HEALTHY)
    for status in services.values():
        assert status.running and status.health == "healthy", status
    before = services["triton"].started_at
    driver.restart("triton")
    wait_for("triton healthy again after the restart",
             lambda: next((s for s in driver.services() if s.name == "triton" and s.health == "healthy"
                           and s.started_at != before), None), 120, stack.diagnose)
    # The entry point loads the models again at every start: nobody has to.
    wait_for("the sample models READY after the restart", stack.samples_ready, 120, stack.diagnose)
    assert http("GET", f"{stack.dashboard}/_stcore/health")[0] == 200, "the dashboard stayed up"
    lines = driver.logs("triton", tail=200)
    assert any("load-models: 5 of 6 loaded" in line for line in lines), lines[-20:]
    assert len(driver.logs("triton", tail=5)) <= 5


def fleet_cli(stack: Stack, *args: str, stdin: str | None = None,
              trusted: bool = True) -> subprocess.CompletedProcess[str]:
    """`geadmin fleet ...` in the dashboard container: its fleet is GEADMIN_FLEET=dns:triton:8000;
    `trusted`: with GEADMIN_FLEET_TRUSTED_NETWORKS the project network's subnet, as the docs say
    (else every replica is read-only: membership before keys)."""
    subnet = run(["docker", "network", "inspect", f"{stack.project}_default", "--format",
                  "{{(index .IPAM.Config 0).Subnet}}"]).stdout.strip() if trusted else ""
    return subprocess.run(["docker", "exec", "-i", "-e", f"GEADMIN_FLEET_TRUSTED_NETWORKS={subnet}",
                           stack.container("dashboard"), "geadmin", "fleet", *args,
                           *([] if args[0] == "status" else ["--latency-slack-ms", "10000"])],
                          input=stdin, capture_output=True, text=True, timeout=300, check=False)


def test_scaled_to_three_the_dashboard_finds_each_replica_by_dns_and_rolls_out_across_them(
    stack: Stack
) -> None:
    stack.compose("up", "-d", "--no-build", "--scale", f"triton={REPLICAS}", timeout_s=600)
    wait_for("three healthy triton replicas", lambda: stack.healthy_replicas("triton") == REPLICAS,
             HEALTHY_TIMEOUT_S, stack.diagnose)

    def fleet_settled() -> dict[str, Any] | None:
        done = fleet_cli(stack, "status", "--json")
        document = json.loads(done.stdout) if done.stdout.startswith("{") else None
        if document is None or len(document["servers"]) != REPLICAS or document["skew"] or document["down"]:
            return None
        return document

    document = wait_for("every replica serving the samples", fleet_settled, HEALTHY_TIMEOUT_S, stack.diagnose)
    assert all(s["source"] == "dns:triton:8000" and not s["problem"] for s in document["servers"]), document
    assert {s["trust"] for s in document["servers"]} == {"trusted"}, document  # in the project's subnet
    unproven = fleet_cli(stack, "reload", "text_normalize", trusted=False)  # no proof: read-only replicas
    assert unproven.returncode == 2 and "refused before anything changed: 3 member(s)" in unproven.stderr, \
        unproven.stdout + unproven.stderr
    assert {c["state"] for c in document["matrix"]["text_normalize"].values()} == {"READY"}
    # npu_ge cannot load on this CPU-only image: failed on every replica, so never "OK"
    assert document["failed"] and document["failed"][0].startswith(f"{NPU_MODEL}: failed on 3 of 3: ")
    reload = fleet_cli(stack, "reload", "text_normalize", "--wave-size", "2")
    assert reload.returncode == 0, reload.stdout + reload.stderr
    assert reload.stdout.startswith("ROLLOUT DONE: reload text_normalize on 3 server(s) in 2 wave(s)")
    path = stack.repository / "digits_classifier" / "config.pbtxt"
    new = path.read_text().replace("max_queue_delay_microseconds: 1000", "max_queue_delay_microseconds: 2000")
    assert new != path.read_text()
    apply = fleet_cli(stack, "apply", "digits_classifier", "-", stdin=new)
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert apply.stdout.startswith("ROLLOUT DONE: apply digits_classifier on 3 server(s) in 3 wave(s)")
    assert path.read_text() == new  # the shared repository, written once

    def probed_replicas() -> set[str] | None:  # the sampler finds the replicas again each minute
        read = "from geadmin.telemetry.history import watch; print(' '.join(watch.probed_servers()))"
        found = set(run(["docker", "exec", stack.container("sampler"), "python", "-c", read]).stdout.split())
        return found if len(found) == REPLICAS else None

    probed = wait_for("the sampler probing every replica", probed_replicas, 150, stack.diagnose)
    assert {urlsplit(u).port for u in probed} == {8000} and "http://triton:8000" not in probed  # each pod


def test_down_leaves_no_container_network_or_volume(stack: Stack) -> None:
    assert stack.leftovers(), "the stack should exist before down"
    stack.down()
    assert stack.leftovers() == {}
