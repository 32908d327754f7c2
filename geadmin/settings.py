"""Every `GEADMIN_*` environment variable: its name, default, parser and meaning, once.

This is the only module that reads them (a test enforces it). A CLI flag of the same name
wins over the variable, which wins over the default; a variable is parsed only when a
command asks for it, so a bad `GEADMIN_HTTP_PORT` does not break `geadmin status`. The
settings reference, docs/reference/settings.md, is generated from `SETTINGS` by
scripts/gen_docs.py (tests/unit/test_docs.py fails when it is stale).
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

from geadmin.domain import DEFAULT_PORTS
from geadmin.errors import ConfigError

PREFIX = "GEADMIN_"
T = TypeVar("T")


def is_port(value: int) -> bool:
    return 0 < value < 65536


def parse_port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"must be a port number, got {raw!r}") from exc
    if not is_port(value):
        raise ConfigError(f"must be a port between 1 and 65535, got {value}")
    return value


def parse_path(raw: str) -> Path:
    return Path(raw).expanduser()


def parse_http_url(raw: str) -> str:
    """An http(s) base URL (a path prefix allowed), without a trailing slash."""
    text = raw.strip().rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc or " " in text or parts.query:
        raise ConfigError(f"must be an http(s) URL like http://prometheus:9090, got {raw!r}")
    return text


def parse_flag(raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"must be 1 or 0, got {raw!r}")


def bounded_number(unit: str, low: float, high: float, bounds: str,
                   *, low_inclusive: bool = True) -> Callable[[str], float]:
    """A parser for a number of `unit` within [low, high] (or (low, high]); nan and inf fail."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError as exc:
            raise ConfigError(f"must be a number of {unit}, got {raw!r}") from exc
        above_low = value >= low if low_inclusive else value > low
        if not (above_low and value <= high):  # nan compares false: refused too
            raise ConfigError(f"must be {bounds}, got {raw}")
        return value

    return parse


parse_seconds = bounded_number("seconds", 0.05, 3600, "between 0.05 and 3600 seconds")
parse_hours = bounded_number("hours", 0, 24 * 366, "more than 0 and at most a year of hours",
                             low_inclusive=False)
parse_minutes = bounded_number("minutes", 1, 7 * 24 * 60, "between 1 minute and a week")


def parse_port_range(raw: str) -> tuple[int, int]:
    low, sep, high = raw.partition("-")
    try:
        bounds = (int(low), int(high)) if sep else None
    except ValueError:
        bounds = None
    if bounds is None or not (1024 <= bounds[0] < bounds[1] <= 65535):
        raise ConfigError(f"expected a port range LOW-HIGH within 1024-65535, got {raw!r}")
    return bounds


def parse_proxy_hops(raw: str) -> int:
    value = bounded_number("proxies", 0, 10, "a whole number from 0 to 10")(raw)
    if value != int(value):
        raise ConfigError(f"must be a whole number from 0 to 10, got {raw}")
    return int(value)


@dataclass(frozen=True)
class Setting:
    name: str  # without the prefix
    parse: Callable[[str], Any]
    default: str | None  # as text, parsed like a value from the environment; None: unset
    meaning: str
    secret: bool = False  # never shown: pages, bundles and logs say only "set" / "not set"

    @property
    def env_name(self) -> str:
        return PREFIX + self.name


def _default_home() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data_home) / "geadmin")


def default_home() -> Path:
    """The workspace when GEADMIN_HOME is not set (whether or not it is)."""
    return Path(_default_home())


SETTINGS: dict[str, Setting] = {s.name: s for s in (
    Setting("HOME", parse_path, None, "workspace directory (default $XDG_DATA_HOME/geadmin, "
            "else ~/.local/share/geadmin)"),
    Setting("REPOSITORY", parse_path, None, "the served model repository"),
    Setting("TRITONSERVER", parse_path, None, "tritonserver binary to run"),
    Setting("HOST", str, "127.0.0.1", "address Triton and the dashboard bind"),
    Setting("HTTP_PORT", parse_port, str(DEFAULT_PORTS["http"]), "Triton HTTP port"),
    Setting("GRPC_PORT", parse_port, str(DEFAULT_PORTS["grpc"]), "Triton gRPC port"),
    Setting("METRICS_PORT", parse_port, str(DEFAULT_PORTS["metrics"]), "Triton metrics port"),
    Setting("DASHBOARD_PORT", parse_port, str(DEFAULT_PORTS["dashboard"]), "dashboard port"),
    Setting("TRITON_URL", str, None, "the Triton to talk to"),
    Setting("TRITON_URLS", str, None, "several servers: name=url,name2=url2"),
    Setting("SERVERS_FILE", parse_path, None, "several servers, from a TOML file"),
    Setting("FLEET", str, None, "the default fleet's discovery sources, comma-separated: servers, "
            "dns:HOST:PORT, prometheus:URL?job=JOB, kubernetes:NAMESPACE?selector=LABELS (geadmin fleet); "
            "its shared repository is GEADMIN_REPOSITORY"),
    Setting("FLEET_ADMIN_KEY", str, None, "the admin key of the servers GEADMIN_FLEET's sources discover "
            "(one key for every replica, e.g. from one Kubernetes Secret)", secret=True),
    Setting("FLEET_TRUSTED_NETWORKS", str, None, "the default fleet's trusted networks, comma-separated "
            "CIDRs (10.0.0.0/8,fd00::/64): a discovered member whose address lies in one gets "
            "GEADMIN_FLEET_ADMIN_KEY; without a proof, discovered members are read-only"),
    Setting("FLEET_WORKLOAD", str, None, "the default fleet's Kubernetes workload, KIND/NAME "
            "(Deployment/triton): a pod its controller chain proves it owns gets GEADMIN_FLEET_ADMIN_KEY"),
    Setting("FLEET_TLS_CA_FILE", parse_path, None, "the default fleet's CA (PEM): a discovered member whose "
            "gRPC port presents a certificate chaining to it is trusted, over grpcs:// only"),
    Setting("ADMIN_KEY", str, None, "key for Triton's restricted APIs", secret=True),
    Setting("TRITON_LOG", parse_path, None, "Triton's log file, read to explain failures"),
    Setting("BACKEND_DIRS", str, None, "extra Triton backends: name=DIR,name2=DIR2 "
            "(default npu_ge=build/backend/npu_ge when built)"),
    Setting("STACK", str, "auto", "stack driver for the Stack page: auto, local or compose"),
    Setting("COMPOSE_PROJECT", str, None, "compose project whose containers the Stack page manages"),
    Setting("DOCKER", str, "docker", "docker CLI binary the compose driver runs"),
    Setting("DEBUG", parse_flag, "0", "1: print the traceback of an internal error"),
    Setting("AUTH", str, "auto", "dashboard sign-in: auto (OIDC, else the users file, else a token on "
            "loopback), local (users file), oidc (st.login), token (the link `geadmin up` prints) or open "
            "(no sign-in, loopback only, said on every page)"),
    Setting("USERS_FILE", parse_path, None, "the local users file (default $GEADMIN_HOME/users.toml)"),
    Setting("SESSION_IDLE_MIN", parse_minutes, "30", "minutes without activity before a dashboard "
            "session signs out"),
    Setting("SESSION_MAX_H", parse_hours, "12", "hours after sign-in when a dashboard session ends, "
            "active or not"),
    Setting("REQUIRE_SIGN_IN", parse_flag, "0", "1: the dashboard never runs without sign-in, even on "
            "loopback (the dashboard image sets it)"),
    Setting("PROXY_HOPS", parse_proxy_hops, "0", "reverse proxies in front of the dashboard: with N > 0, "
            "sign-in limits count the client named N hops from the right of X-Forwarded-For"),
    Setting("OIDC_ROLES_CLAIM", str, "groups", "the OIDC claim that lists the user's groups"),
    Setting("OIDC_ROLE_MAP", str, "", "OIDC group -> role: group=admin,group2=operator"),
    Setting("OIDC_DEFAULT_ROLE", str, "none", "role of an OIDC user in no mapped group: none (refuse "
            "sign-in) or viewer, operator, admin"),
    Setting("NPU_EXPORTER_URL", str, None, "npu-exporter's /metrics, the first NPU source tried"),
    Setting("TRITON_METRICS_URL", str, None, "Triton's /metrics page (default: the running stack's, "
            "else http://127.0.0.1:<GEADMIN_METRICS_PORT>/metrics)"),
    Setting("SAMPLE_INTERVAL_S", parse_seconds, "2", "seconds between two samples of the telemetry "
            "sampler (geadmin sampler, geadmin up)"),
    Setting("PROMETHEUS_URL", parse_http_url, None, "a Prometheus that scrapes Triton (base URL, e.g. "
            "http://prometheus:9090): the charts read their history from it with PromQL instead of the "
            "sampler's database"),
    Setting("PROBE_INTERVAL_S", parse_seconds, "30", "seconds between two synthetic probes of one READY "
            "model (at least 5; the sampler probes every READY model; geadmin probe)"),
    Setting("SAMPLER_METRICS_PORT", parse_port, None, "port of geadmin's own Prometheus endpoint "
            "(probes, model states, objectives), served by the sampler (geadmin up, geadmin sampler)"),
    Setting("ALERTMANAGER_URL", parse_http_url, None, "an Alertmanager (base URL, e.g. "
            "http://alertmanager:9093): the Overview and geadmin alerts list its active alerts"),
    Setting("DASHBOARD_URL", parse_http_url, None, "the dashboard's address as operators open it (alerts, "
            "the bundle and geadmin alerts link there; default http://127.0.0.1:<GEADMIN_DASHBOARD_PORT>)"),
    Setting("RUNBOOK_BASE_URL", parse_http_url, None, "where the team's runbooks live (e.g. "
            "https://wiki.example/runbooks/): an alert's runbook_url under it, or under "
            "GEADMIN_DASHBOARD_URL, is shown as a link; any other is shown as text (anyone can post an "
            "alert to Alertmanager)"),
    Setting("HISTORY_RETENTION_H", parse_hours, "24", "hours of telemetry history kept in the "
            "workspace database (downsampled to 1-minute buckets beyond 1 h)"),
    Setting("FREE_PORT_RANGE", parse_port_range, None, "LOW-HIGH: where servers started on free ports "
            "(tests, benchmarks) pick them (default 20000-32767, below the kernel's ephemeral ports)"),
    Setting("ROLLOUT_PAUSE_MAX_S", bounded_number("seconds", 1, 7 * 24 * 3600, "between 1 second and a week"),
            "1800", "seconds a fleet rollout may stay paused: longer, it stops and puts back every server "
            "it changed (audited), so a forgotten pause never blocks the fleet"),
    Setting("FAULT_POINT", str, None, "test hook, never set in production: the name of a step of "
            "an apply, a create or a fleet rollout (e.g. apply.written, rollout.changed.1) at which "
            "geadmin kills itself with SIGKILL, so "
            "fault tests can check that nothing is lost when a change is cut short"),
)}


def raw(name: str) -> str | None:
    """The variable as set (None when unset or empty)."""
    value = os.environ.get(SETTINGS[name].env_name)
    return value if value not in (None, "") else None


def is_set(name: str) -> bool:
    return raw(name) is not None


def shown(name: str) -> str:
    """The variable as it may be displayed: a secret as "set" / "not set", else its value
    ("" when unset)."""
    value = raw(name)
    if SETTINGS[name].secret:
        return "set" if value else "not set"
    return value or ""


def get(name: str, flag: T | None = None) -> Any:
    """The flag if given, else the parsed variable, else the parsed default (None: unset)."""
    if flag is not None:
        return flag
    setting = SETTINGS[name]
    text = raw(name)
    if text is None:
        text = setting.default
    if text is None:
        return None
    try:
        return setting.parse(text)
    except ConfigError as exc:
        raise ConfigError(f"{setting.env_name} {exc}") from exc


def home(flag: str | os.PathLike[str] | None = None) -> Path:
    """The workspace directory (model repository copy, logs, stack file)."""
    if flag:
        return Path(flag).expanduser().absolute()  # one path, whatever the cwd of a child
    return get("HOME") or Path(_default_home())


@contextlib.contextmanager
def workspace_for_process(flag: str | os.PathLike[str] | None) -> Iterator[Path]:
    """One workspace for everything a command does: a `--home DIR` flag becomes GEADMIN_HOME
    (absolute) for the command's whole run, so every row, file and child process that does not
    name a workspace itself (audit rows written deep in the core, the sampler, the dashboard)
    lands in DIR, never in the default workspace. The variable is put back afterwards."""
    if not flag:
        yield home()
        return
    resolved = Path(flag).expanduser().absolute()
    key = SETTINGS["HOME"].env_name
    before = os.environ.get(key)
    os.environ[key] = str(resolved)
    try:
        yield resolved
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def port(kind: str, flag: int | None = None) -> int:
    """`kind` is a key of DEFAULT_PORTS: http, grpc, metrics, dashboard."""
    return int(get(f"{kind.upper()}_PORT", flag))


def triton_url() -> str | None:
    """GEADMIN_TRITON_URL when set (None: not given; callers pick the stack or the default)."""
    return raw("TRITON_URL")


def admin_key() -> str | None:
    return raw("ADMIN_KEY")


def triton_log() -> Path | None:
    return get("TRITON_LOG")


def repository() -> Path | None:
    return get("REPOSITORY")


def fault_point(step: str) -> None:
    """Test hook: when GEADMIN_FAULT_POINT names `step`, this process dies here by SIGKILL (no
    cleanup, no finally, like a power cut or an OOM kill). A no-op when the variable is unset:
    tests/integration/test_cut_short.py sets it in a child process to cut an apply or a
    create short at each of its steps."""
    if raw("FAULT_POINT") == step:
        os.kill(os.getpid(), signal.SIGKILL)


def debug() -> bool:
    try:
        return bool(get("DEBUG"))
    except ConfigError:
        return True  # asked for something: better too much than nothing


def without_settings(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without any GEADMIN_* variable: for a child that must see none of geadmin's
    settings or secrets (the tritonserver of `geadmin up`, and the model code it runs)."""
    return {key: value for key, value in base.items() if not key.startswith(PREFIX)}


def child_environment(base: Mapping[str, str], values: Mapping[str, str | None]) -> dict[str, str]:
    """`base` with settings set for a child process (`None` removes one), e.g. the dashboard."""
    env = dict(base)
    for name, value in values.items():
        key = SETTINGS[name].env_name
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def dashboard_url() -> str:
    """Where operators open the dashboard: links in alerts, the bundle and `geadmin alerts`."""
    return get("DASHBOARD_URL") or f"http://127.0.0.1:{port('dashboard')}"


def link_bases() -> tuple[str, ...]:
    """The bases an outside link (an alert's runbook_url) must point under to be shown as a link."""
    runbooks = get("RUNBOOK_BASE_URL")
    return (dashboard_url(), runbooks) if runbooks else (dashboard_url(),)
