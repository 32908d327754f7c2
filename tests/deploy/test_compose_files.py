"""compose.yaml and compose.cpu.yaml: the compose-spec schema, their structure, .env.example,
and that Triton runs there with the flags geadmin gives the Triton it starts itself."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from geadmin import settings
from geadmin.domain import Ports
from geadmin.stack.tritonserver import TritonProcess
from tests.support.deploy import ROOT, venv_tool

ASCEND = ROOT / "compose.yaml"
CPU = ROOT / "compose.cpu.yaml"
FILES = {"ascend": ASCEND, "cpu": CPU}
ENV_EXAMPLE = ROOT / ".env.example"
ASCEND_DEVICES = {"/dev/davinci0", "/dev/davinci_manager", "/dev/devmm_svm", "/dev/hisi_hdc"}
DRIVER_MOUNTS = {"/usr/local/dcmi", "/usr/local/bin/npu-smi", "/usr/local/Ascend/driver/lib64",
                 "/usr/local/Ascend/driver/version.info", "/etc/ascend_install.info"}
# Flags of TritonProcess.command() that a container does not take, and why.
NOT_IN_CONTAINERS = {
    "--http-address", "--grpc-address", "--metrics-address",  # a container binds 0.0.0.0 (default)
    "--backend-config",  # python,shm-region-prefix-name: per-process names on a shared /dev/shm;
    # a container has its own /dev/shm
    "--load-model",  # the entry point loads models after start (see compose.yaml)
}


def load(path: Path) -> dict[str, Any]:
    return YAML(typ="safe").load(path.read_text())


COMPOSE = {kind: load(path) for kind, path in FILES.items()}


def service(kind: str, name: str) -> dict[str, Any]:
    return COMPOSE[kind]["services"][name]


def flags(arguments: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for argument in arguments:
        name, _, value = argument.partition("=")
        found.setdefault(name, []).append(value)
    return found


def mounts(svc: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """container path -> (source, mode) of a service's short-syntax volumes."""
    found = {}
    for entry in svc.get("volumes", []):
        match = re.fullmatch(r"(\$\{[^}]*\}|[^:]+):([^:]+)(?::(\w+))?", entry)
        assert match, f"cannot read the volume {entry!r}"
        found[match.group(2)] = (match.group(1), match.group(3) or "rw")
    return found


def geadmin_triton_command() -> list[str]:
    process = TritonProcess(Path("/models"), binary=Path("/opt/tritonserver/bin/tritonserver"),
                            backend_dir=Path("/opt/tritonserver/backends"),
                            log_path=Path("/var/log/triton/tritonserver.log"),
                            ports=Ports(http=8000, grpc=8001, metrics=8002), models=[],
                            trace_file=Path("/var/log/triton/trace.json"))
    return process.command()[1:]


def test_compose_files_validate_against_the_compose_spec() -> None:
    done = subprocess.run([venv_tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                           str(ASCEND), str(CPU)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.docker
@pytest.mark.parametrize("kind", FILES)
def test_docker_compose_v1_accepts_the_file_with_every_profile(kind: str, docker_engine: None,
                                                                tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(ENV_EXAMPLE.read_text().replace("TRITON_ADMIN_KEY=\n", "TRITON_ADMIN_KEY=k\n"))
    done = subprocess.run(["docker-compose", "--env-file", str(env_file), "-f", str(FILES[kind]),
                           "--profile", "npu", "--profile", "monitoring", "config"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "admin-key=k" in done.stdout


@pytest.mark.docker
def test_compose_refuses_to_start_without_an_admin_key(docker_engine: None, tmp_path: Path) -> None:
    env_file = tmp_path / "env"
    env_file.write_text(ENV_EXAMPLE.read_text())  # TRITON_ADMIN_KEY is empty there
    done = subprocess.run(["docker-compose", "--env-file", str(env_file), "-f", str(CPU), "config"],
                          capture_output=True, text=True, timeout=60, check=False, cwd=ROOT)
    assert done.returncode != 0
    assert "set TRITON_ADMIN_KEY in .env" in done.stderr


@pytest.mark.parametrize("kind", FILES)
def test_triton_runs_with_the_flags_geadmin_gives_its_own_triton(kind: str) -> None:
    compose = flags(service(kind, "triton")["command"])
    ours = flags(geadmin_triton_command())
    for name, values in ours.items():
        if name in NOT_IN_CONTAINERS:
            continue
        assert name in compose, f"{kind}: triton lacks {name} (geadmin passes {values})"
    for name in ("--model-control-mode", "--metrics-config", "--exit-on-error", "--model-repository",
                 "--backend-directory", "--http-port", "--grpc-port", "--metrics-port", "--trace-config"):
        assert compose[name] == ours[name], f"{kind}: {name} is {compose[name]}, geadmin uses {ours[name]}"
    assert compose["--model-control-mode"] == ["explicit"]
    assert compose["--metrics-config"] == ["summary_latencies=true"]
    assert "--load-model" not in compose, "loading at start can block the server for good"
    assert compose["--log-file"] == ["/var/log/triton/tritonserver.log"]
    # the traces beside the log, on the volume the dashboard mounts (`geadmin traffic capture`)
    assert compose["--trace-config"] == ["triton,file=/var/log/triton/trace.json", "level=OFF"]


@pytest.mark.parametrize("kind", FILES)
def test_repository_api_is_restricted_with_the_key_the_dashboard_sends(kind: str) -> None:
    compose = flags(service(kind, "triton")["command"])
    key = "${TRITON_ADMIN_KEY:?set TRITON_ADMIN_KEY in .env (see .env.example)}"
    for flag in ("--http-restricted-api", "--grpc-restricted-protocol"):
        [value] = compose[flag]
        apis, _, header = value.partition(":")  # the colon form (FACTS.md)
        assert {"model-repository", "model-config"} <= set(apis.split(","))
        assert header == f"admin-key={key}"
    assert service(kind, "dashboard")["environment"]["GEADMIN_ADMIN_KEY"] == key
    assert service(kind, "triton")["environment"]["TRITON_ADMIN_KEY"] == key


@pytest.mark.parametrize("kind", FILES)
def test_ports_are_published_on_configurable_host_ports(kind: str) -> None:
    expected = {
        "triton": ["${PUBLISH_ADDRESS:-127.0.0.1}:${TRITON_HTTP_PORT:-8000}:8000",
                   "${PUBLISH_ADDRESS:-127.0.0.1}:${TRITON_GRPC_PORT:-8001}:8001",
                   "${PUBLISH_ADDRESS:-127.0.0.1}:${TRITON_METRICS_PORT:-8002}:8002"],
        "dashboard": ["${PUBLISH_ADDRESS:-127.0.0.1}:${DASHBOARD_PORT:-8501}:8501"],
        "prometheus": ["${PUBLISH_ADDRESS:-127.0.0.1}:${PROMETHEUS_PORT:-9090}:9090"],
    }
    for name, ports in expected.items():
        assert service(kind, name)["ports"] == ports


@pytest.mark.parametrize("kind", FILES)
def test_healthchecks_restart_policy_and_start_order(kind: str) -> None:
    triton, dashboard = service(kind, "triton"), service(kind, "dashboard")
    # live, not ready: strict readiness turns false when one model fails (compose.yaml says why)
    assert "http://127.0.0.1:8000/v2/health/live" in " ".join(triton["healthcheck"]["test"])
    assert "http://127.0.0.1:8501/_stcore/health" in " ".join(dashboard["healthcheck"]["test"])
    assert "/-/healthy" in " ".join(service(kind, "prometheus")["healthcheck"]["test"])
    assert dashboard["depends_on"] == {"triton": {"condition": "service_healthy"}}
    assert service(kind, "prometheus")["depends_on"] == {"triton": {"condition": "service_healthy"}}
    for name, svc in COMPOSE[kind]["services"].items():
        assert svc["restart"] == "unless-stopped", name


@pytest.mark.parametrize("kind", FILES)
def test_volumes_share_the_log_keep_the_workspace_and_mount_the_repository(kind: str) -> None:
    triton, dashboard = mounts(service(kind, "triton")), mounts(service(kind, "dashboard"))
    assert triton["/var/log/triton"] == ("triton-log", "rw")
    assert dashboard["/var/log/triton"] == ("triton-log", "ro")
    assert dashboard["/var/lib/geadmin"] == ("workspace", "rw")
    assert triton["/models"][1] == "ro" and dashboard["/models"][1] == "rw"
    assert triton["/models"][0] == dashboard["/models"][0]
    assert {"triton-log", "workspace", "prometheus-data"} <= set(COMPOSE[kind]["volumes"])
    env = service(kind, "dashboard")["environment"]
    assert env["GEADMIN_TRITON_LOG"] == "/var/log/triton/tritonserver.log"
    assert env["GEADMIN_HOME"] == "/var/lib/geadmin" and env["GEADMIN_REPOSITORY"] == "/models"
    assert env["GEADMIN_TRITON_URL"] == "http://triton:8000"  # by service name
    assert env["GEADMIN_STACK"] == "compose"
    for name in env:
        assert name.removeprefix(settings.PREFIX) in settings.SETTINGS, f"{name} is no geadmin setting"


def test_ascend_triton_gets_the_npu_devices_and_driver_mounts() -> None:
    triton = service("ascend", "triton")
    assert {entry.split(":")[1] for entry in triton["devices"]} == ASCEND_DEVICES
    driver = {path: source for path, source in mounts(triton).items() if path in DRIVER_MOUNTS}
    assert set(driver) == DRIVER_MOUNTS
    assert all(mode == "ro" and source == path for path, (source, mode) in
               zip(driver, driver.values(), strict=True))
    assert triton["build"]["target"] == "triton"
    text = ASCEND.read_text()
    assert "ASCEND_VISIBLE_DEVICES" in text and "runtime: ascend" in text, "Ascend Docker Runtime documented"


def test_cpu_variant_has_no_npu_parts_and_serves_the_samples() -> None:
    triton = service("cpu", "triton")
    assert "devices" not in triton and "group_add" not in triton and "runtime" not in triton
    assert not set(mounts(triton)) & DRIVER_MOUNTS
    assert "npu-exporter" not in COMPOSE["cpu"]["services"]
    assert triton["build"]["target"] == "triton-cpu"
    assert mounts(triton)["/models"][0] == "${MODEL_REPOSITORY:-./geadmin/samples/model_repository}"
    assert (ROOT / "geadmin" / "samples" / "model_repository").is_dir()


def test_cpu_variant_differs_from_compose_yaml_only_in_the_npu_parts() -> None:
    npu_only = {"devices", "group_add", "image", "build", "volumes"}
    a, c = service("ascend", "triton"), service("cpu", "triton")
    assert {k: v for k, v in a.items() if k not in npu_only} == \
        {k: v for k, v in c.items() if k not in npu_only}
    assert {p: s for p, s in mounts(a).items() if p not in DRIVER_MOUNTS and p != "/models"} == \
        {p: s for p, s in mounts(c).items() if p != "/models"}
    for name in ("dashboard", "sampler", "prometheus"):
        a, c = service("ascend", name), service("cpu", name)
        assert {k: v for k, v in a.items() if k != "volumes"} == \
            {k: v for k, v in c.items() if k != "volumes"}
    assert COMPOSE["ascend"]["volumes"] == COMPOSE["cpu"]["volumes"]


def test_profiles_hold_the_optional_services() -> None:
    services = COMPOSE["ascend"]["services"]
    assert services["npu-exporter"]["profiles"] == ["npu"]
    assert services["prometheus"]["profiles"] == ["monitoring"]
    assert services["alertmanager"]["profiles"] == ["monitoring"]
    assert "profiles" not in services["triton"] and "profiles" not in services["dashboard"]
    exporter = services["npu-exporter"]
    assert exporter["command"] == ["npu-exporter", "-port=8082", "-ip=0.0.0.0", "-containerMode=docker"]
    assert set(mounts(exporter)) >= DRIVER_MOUNTS
    assert exporter["privileged"] is True


def test_prometheus_scrapes_triton_geadmin_and_the_exporter_and_alerts_through_alertmanager() -> None:
    config = load(ROOT / "deploy" / "prometheus.yml")
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = {name: job["static_configs"][0]["targets"] for name, job in jobs.items()
               if "static_configs" in job}
    assert targets == {"npu-exporter": ["npu-exporter:8082"], "geadmin": ["sampler:9309"]}
    # every replica of the triton service, by DNS (compose answers the name with each)
    assert jobs["triton"]["dns_sd_configs"] == [{"names": ["triton"], "type": "A", "port": 8002}]
    assert config["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"] == ["alertmanager:9093"]
    sampler = COMPOSE["ascend"]["services"]["sampler"]
    assert sampler["environment"]["GEADMIN_SAMPLER_METRICS_PORT"] == "9309"
    assert sampler["command"] == ["geadmin", "sampler", "--metrics-host", "0.0.0.0", "--fleet", "default"]
    assert sampler["environment"]["GEADMIN_FLEET"] == "${GEADMIN_FLEET:-dns:triton:8000}"
    prometheus = COMPOSE["ascend"]["services"]["prometheus"]
    rules = [m for m in prometheus["volumes"] if "geadmin-alerts.yml" in m]
    assert rules and config["rule_files"] == [rules[0].split(":")[1]]


def test_env_example_lists_every_variable_the_compose_files_use() -> None:
    # A commented-out "# NAME=value" counts: it documents a default each file sets itself.
    listed = set(re.findall(r"^(?:# )?([A-Z][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), re.MULTILINE))
    used: set[str] = set()
    mentioned: set[str] = set()  # also in comments (the Ascend Docker Runtime alternative)
    for path in FILES.values():
        mentioned |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", path.read_text()))
        code = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        used |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", code))
    assert used, "no ${VAR} found: the pattern is broken"
    assert used - listed == set(), f".env.example lacks {sorted(used - listed)}"
    assert listed - mentioned == set(), f".env.example lists unused {sorted(listed - mentioned)}"


@pytest.mark.parametrize("kind", FILES)
def test_dashboard_runs_geadmin_dashboard_with_sign_in(kind: str) -> None:
    """The image's CMD is `geadmin dashboard` (it builds Streamlit's flags from DashboardProcess,
    as `geadmin up` does); compose adds no `command:` and asks for local sign-in."""
    assert "command" not in service(kind, "dashboard")
    dockerfile = (ROOT / "Dockerfile").read_text()
    cmd_line = next(line for line in dockerfile.splitlines() if line.startswith("CMD [\"geadmin\""))
    assert cmd_line == 'CMD ["geadmin", "dashboard", "--host", "0.0.0.0", "--port", "8501"]'
    assert service(kind, "dashboard")["environment"]["GEADMIN_AUTH"] == "${GEADMIN_AUTH:-local}"


@pytest.mark.parametrize("kind", FILES)
def test_the_sampler_records_compose_triton_into_the_dashboards_workspace(kind: str) -> None:
    sampler, dashboard = service(kind, "sampler"), service(kind, "dashboard")
    assert sampler["image"] == dashboard["image"]
    assert sampler["command"] == ["geadmin", "sampler", "--metrics-host", "0.0.0.0", "--fleet", "default"]
    assert sampler["environment"]["GEADMIN_FLEET"] == "${GEADMIN_FLEET:-dns:triton:8000}"  # for Prometheus
    assert sampler["environment"]["GEADMIN_TRITON_URL"] == "http://triton:8000"  # the probes' Triton
    assert sampler["environment"]["GEADMIN_ADMIN_KEY"] == dashboard["environment"]["GEADMIN_ADMIN_KEY"]
    assert sampler["environment"]["GEADMIN_TRITON_METRICS_URL"] == "http://triton:8002/metrics"
    assert sampler["environment"]["GEADMIN_HOME"] == dashboard["environment"]["GEADMIN_HOME"]
    assert "workspace:/var/lib/geadmin" in sampler["volumes"]
    assert sampler["depends_on"]["triton"]["condition"] == "service_healthy"
    assert sampler["restart"] == "unless-stopped"
