"""Every `GEADMIN_*` environment variable: its name, default, parser and meaning, once.

This is the only module that reads them (a test enforces it). A CLI flag of the same name
wins over the variable, which wins over the default; a variable is parsed only when a
command asks for it, so a bad `GEADMIN_HTTP_PORT` does not break `geadmin status`. The
settings reference, docs/reference/settings.md, is generated from `SETTINGS` by
scripts/gen_docs.py (tests/unit/test_docs.py fails when it is stale).

Each variable is a typed module constant, read as `settings.SAMPLE_INTERVAL_S.get(flag)`: the
value has its parser's type (a `Defaulted` one is never None), and a misspelt name fails mypy
instead of passing as a string key. Test hooks (`GEADMIN_FAULT_POINT`) are no settings: they
live in geadmin/test_hooks.py.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar
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
class Setting(Generic[T]):
    """One variable, read through its module constant (`settings.HTTP_PORT.get()`): a misspelt
    name is an attribute mypy does not know, and the value has the parser's type."""

    name: str  # without the prefix; the module constant of the same name holds it
    parse: Callable[[str], T]
    default: str | None  # as text, parsed like a value from the environment; None: unset
    meaning: str
    secret: bool = False  # never shown: pages, bundles and logs say only "set" / "not set"

    @property
    def env_name(self) -> str:
        return PREFIX + self.name

    def raw(self) -> str | None:
        """The variable as set (None when unset or empty)."""
        value = os.environ.get(self.env_name)
        return value if value not in (None, "") else None

    def is_set(self) -> bool:
        return self.raw() is not None

    def shown(self) -> str:
        """The variable as it may be displayed: a secret as "set" / "not set", else its value
        ("" when unset)."""
        value = self.raw()
        if self.secret:
            return "set" if value else "not set"
        return value or ""

    def get(self, flag: T | None = None) -> T | None:
        """The flag if given, else the parsed variable, else the parsed default (None: unset)."""
        if flag is not None:
            return flag
        text = self.raw()
        if text is None:
            text = self.default
        if text is None:
            return None
        try:
            return self.parse(text)
        except ConfigError as exc:
            raise ConfigError(f"{self.env_name} {exc}") from exc


class Defaulted(Setting[T]):
    """A setting with a default: its value is never None."""

    def get(self, flag: T | None = None) -> T:
        value = super().get(flag)
        if value is None:  # only a table row without a default could get here
            raise ConfigError(f"{self.env_name} has no default")
        return value


def _default_home() -> str:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return str(Path(data_home) / "geadmin")


def default_home() -> Path:
    """The workspace when GEADMIN_HOME is not set (whether or not it is)."""
    return Path(_default_home())


HOME = Setting("HOME", parse_path, None,
    "workspace directory (default $XDG_DATA_HOME/geadmin, else ~/.local/share/geadmin)")
REPOSITORY = Setting("REPOSITORY", parse_path, None, "the served model repository")
TRITONSERVER = Setting("TRITONSERVER", parse_path, None, "tritonserver binary to run")
HOST = Defaulted("HOST", str, "127.0.0.1", "address Triton and the dashboard bind")
HTTP_PORT = Defaulted("HTTP_PORT", parse_port, str(DEFAULT_PORTS["http"]), "Triton HTTP port")
GRPC_PORT = Defaulted("GRPC_PORT", parse_port, str(DEFAULT_PORTS["grpc"]), "Triton gRPC port")
METRICS_PORT = Defaulted("METRICS_PORT", parse_port, str(DEFAULT_PORTS["metrics"]), "Triton metrics port")
DASHBOARD_PORT = Defaulted("DASHBOARD_PORT", parse_port, str(DEFAULT_PORTS["dashboard"]), "dashboard port")
TRITON_URL = Setting("TRITON_URL", str, None, "the Triton to talk to")
TRITON_URLS = Setting("TRITON_URLS", str, None, "several servers: name=url,name2=url2")
SERVERS_FILE = Setting("SERVERS_FILE", parse_path, None, "several servers, from a TOML file")
FLEET = Setting("FLEET", str, None,
    "the default fleet's discovery sources, comma-separated: servers, dns:HOST:PORT, "
    "prometheus:URL?job=JOB, kubernetes:NAMESPACE?selector=LABELS (geadmin fleet); its shared repository "
    "is GEADMIN_REPOSITORY")
FLEET_ADMIN_KEY = Setting("FLEET_ADMIN_KEY", str, None,
    "the admin key of the servers GEADMIN_FLEET's sources discover (one key for every replica, e.g. from "
    "one Kubernetes Secret)", secret=True)
FLEET_TRUSTED_NETWORKS = Setting("FLEET_TRUSTED_NETWORKS", str, None,
    "the default fleet's trusted networks, comma-separated CIDRs (10.0.0.0/8,fd00::/64): a discovered "
    "member whose address lies in one gets GEADMIN_FLEET_ADMIN_KEY; without a proof, discovered members "
    "are read-only")
FLEET_WORKLOAD = Setting("FLEET_WORKLOAD", str, None,
    "the default fleet's Kubernetes workload, KIND/NAME (Deployment/triton): a pod its controller chain "
    "proves it owns gets GEADMIN_FLEET_ADMIN_KEY")
FLEET_TLS_CA_FILE = Setting("FLEET_TLS_CA_FILE", parse_path, None,
    "the default fleet's CA (PEM): a discovered member whose gRPC port presents a certificate chaining "
    "to it is trusted, over grpcs:// only")
ADMIN_KEY = Setting("ADMIN_KEY", str, None, "key for Triton's restricted APIs", secret=True)
TRITON_LOG = Setting("TRITON_LOG", parse_path, None, "Triton's log file, read to explain failures")
BACKEND_DIRS = Setting("BACKEND_DIRS", str, None,
    "extra Triton backends: name=DIR,name2=DIR2 (default npu_ge=build/backend/npu_ge when built)")
STACK = Defaulted("STACK", str, "auto", "stack driver for the Stack page: auto, local or compose")
COMPOSE_PROJECT = Setting("COMPOSE_PROJECT", str, None,
    "compose project whose containers the Stack page manages")
DOCKER = Defaulted("DOCKER", str, "docker", "docker CLI binary the compose driver runs")
DEBUG = Defaulted("DEBUG", parse_flag, "0", "1: print the traceback of an internal error")
AUTH = Defaulted("AUTH", str, "auto",
    "dashboard sign-in: auto (OIDC, else the users file, else a token on loopback), local (users file), "
    "oidc (st.login), token (the link `geadmin up` prints) or open (no sign-in, loopback only, said on "
    "every page)")
USERS_FILE = Setting("USERS_FILE", parse_path, None,
    "the local users file (default $GEADMIN_HOME/users.toml)")
SESSION_IDLE_MIN = Defaulted("SESSION_IDLE_MIN", parse_minutes, "30",
    "minutes without activity before a dashboard session signs out")
SESSION_MAX_H = Defaulted("SESSION_MAX_H", parse_hours, "12",
    "hours after sign-in when a dashboard session ends, active or not")
REQUIRE_SIGN_IN = Defaulted("REQUIRE_SIGN_IN", parse_flag, "0",
    "1: the dashboard never runs without sign-in, even on loopback (the dashboard image sets it)")
PROXY_HOPS = Defaulted("PROXY_HOPS", parse_proxy_hops, "0",
    "reverse proxies in front of the dashboard: with N > 0, sign-in limits count the client named N hops "
    "from the right of X-Forwarded-For")
OIDC_ROLES_CLAIM = Defaulted("OIDC_ROLES_CLAIM", str, "groups", "the OIDC claim that lists the user's groups")
OIDC_ROLE_MAP = Defaulted("OIDC_ROLE_MAP", str, "", "OIDC group -> role: group=admin,group2=operator")
OIDC_DEFAULT_ROLE = Defaulted("OIDC_DEFAULT_ROLE", str, "none",
    "role of an OIDC user in no mapped group: none (refuse sign-in) or viewer, operator, admin")
NPU_EXPORTER_URL = Setting("NPU_EXPORTER_URL", str, None,
    "npu-exporter's /metrics, the first NPU source tried")
NPU_FAULT_TABLE = Setting("NPU_FAULT_TABLE", parse_path, None,
    "NPU fault levels merged over the built-in table (MindCluster's faultCode.json shape)")
TRITON_METRICS_URL = Setting("TRITON_METRICS_URL", str, None,
    "Triton's /metrics page (default: the running stack's, else "
    "http://127.0.0.1:<GEADMIN_METRICS_PORT>/metrics)")
LOAD_TIMEOUT_S = Defaulted("LOAD_TIMEOUT_S", parse_seconds, "120",
    "seconds the dashboard and the CLI wait for one model's load before saying it has not finished (the "
    "load goes on in Triton; a large npu_ge model can compile for minutes); --load-timeout overrides it")
SAMPLE_INTERVAL_S = Defaulted("SAMPLE_INTERVAL_S", parse_seconds, "2",
    "seconds between two samples of the telemetry sampler (geadmin sampler, geadmin up)")
PROMETHEUS_URL = Setting("PROMETHEUS_URL", parse_http_url, None,
    "a Prometheus that scrapes Triton (base URL, e.g. http://prometheus:9090): the charts read their "
    "history from it with PromQL instead of the sampler's database")
PROBE_INTERVAL_S = Defaulted("PROBE_INTERVAL_S", parse_seconds, "30",
    "seconds between two synthetic probes of one READY model (at least 5; the sampler probes every READY "
    "model; geadmin probe)")
SAMPLER_METRICS_PORT = Setting("SAMPLER_METRICS_PORT", parse_port, None,
    "port of geadmin's own Prometheus endpoint (probes, model states, objectives), served by the sampler "
    "(geadmin up, geadmin sampler)")
ALERTMANAGER_URL = Setting("ALERTMANAGER_URL", parse_http_url, None,
    "an Alertmanager (base URL, e.g. http://alertmanager:9093): the Overview and geadmin alerts list its "
    "active alerts")
DASHBOARD_URL = Setting("DASHBOARD_URL", parse_http_url, None,
    "the dashboard's address as operators open it (alerts, the bundle and geadmin alerts link there; "
    "default http://127.0.0.1:<GEADMIN_DASHBOARD_PORT>)")
RUNBOOK_BASE_URL = Setting("RUNBOOK_BASE_URL", parse_http_url, None,
    "where the team's runbooks live (e.g. https://wiki.example/runbooks/): an alert's runbook_url under "
    "it, or under GEADMIN_DASHBOARD_URL, is shown as a link; any other is shown as text (anyone can post "
    "an alert to Alertmanager)")
HISTORY_RETENTION_H = Defaulted("HISTORY_RETENTION_H", parse_hours, "24",
    "hours of telemetry history kept in the workspace database (downsampled to 1-minute buckets beyond 1 "
    "h)")
FREE_PORT_RANGE = Setting("FREE_PORT_RANGE", parse_port_range, None,
    "LOW-HIGH: where servers started on free ports (tests, benchmarks) pick them (default 20000-32767, "
    "below the kernel's ephemeral ports)")
ROLLOUT_PAUSE_MAX_S = Defaulted(
    "ROLLOUT_PAUSE_MAX_S", bounded_number("seconds", 1, 7 * 24 * 3600, "between 1 second and a week"), "1800",
    "seconds a fleet rollout may stay paused: longer, it stops and puts back every server it changed "
    "(audited), so a forgotten pause never blocks the fleet")

SETTINGS: dict[str, Setting[Any]] = {
    value.name: value for value in tuple(globals().values()) if isinstance(value, Setting)}


def home(flag: str | os.PathLike[str] | None = None) -> Path:
    """The workspace directory (model repository copy, logs, stack file)."""
    if flag:
        return Path(flag).expanduser().absolute()  # one path, whatever the cwd of a child
    return HOME.get() or Path(_default_home())


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
    key = HOME.env_name
    before = os.environ.get(key)
    os.environ[key] = str(resolved)
    try:
        yield resolved
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


PortKind = Literal["http", "grpc", "metrics", "dashboard"]  # the keys of DEFAULT_PORTS
PORTS: dict[PortKind, Defaulted[int]] = {
    "http": HTTP_PORT, "grpc": GRPC_PORT, "metrics": METRICS_PORT, "dashboard": DASHBOARD_PORT}


def port(kind: PortKind, flag: int | None = None) -> int:
    return PORTS[kind].get(flag)


def debug() -> bool:
    try:
        return DEBUG.get()
    except ConfigError:
        return True  # asked for something: better too much than nothing


def without_settings(base: Mapping[str, str]) -> dict[str, str]:
    """`base` without any GEADMIN_* variable: for a child that must see none of geadmin's
    settings or secrets (the tritonserver of `geadmin up`, and the model code it runs)."""
    return {key: value for key, value in base.items() if not key.startswith(PREFIX)}


def child_environment(base: Mapping[str, str], values: Mapping[Setting[Any], str | None]) -> dict[str, str]:
    """`base` with settings set for a child process (`None` removes one), e.g. the dashboard."""
    env = dict(base)
    for setting, value in values.items():
        key = setting.env_name
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def dashboard_url() -> str:
    """Where operators open the dashboard: links in alerts, the bundle and `geadmin alerts`."""
    return DASHBOARD_URL.get() or f"http://127.0.0.1:{port('dashboard')}"


def link_bases() -> tuple[str, ...]:
    """The bases an outside link (an alert's runbook_url) must point under to be shown as a link."""
    runbooks = RUNBOOK_BASE_URL.get()
    return (dashboard_url(), runbooks) if runbooks else (dashboard_url(),)
