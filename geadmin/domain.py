"""Value types every layer shares (layer 0: imports nothing of geadmin but errors).

Frozen dataclasses and enums only: no I/O, no talking to Triton, no reading of settings.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, replace
from datetime import datetime
from urllib.parse import urlsplit

from geadmin.errors import ConfigError

# The one table of default ports (Triton's own defaults, and Streamlit's).
DEFAULT_PORTS: dict[str, int] = {"http": 8000, "grpc": 8001, "metrics": 8002, "dashboard": 8501}
URL_FORMS = "http://host:8000, https://host:8000, grpc://host:8001, grpcs://host:8001 or host:port (HTTP)"
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*):(?!\d)")


class Transport(str, enum.Enum):
    HTTP = "http"
    GRPC = "grpc"


class ModelState(str, enum.Enum):
    """A model's state in the repository index, whatever the transport."""

    READY = "READY"
    LOADING = "LOADING"
    UNLOADING = "UNLOADING"
    UNAVAILABLE = "UNAVAILABLE"
    NOT_LOADED = "NOT_LOADED"  # in the repository, never touched since the server started

    @classmethod
    def parse(cls, raw: str) -> ModelState:
        return cls.__members__.get(raw.upper(), cls.NOT_LOADED) if raw else cls.NOT_LOADED


@dataclass(frozen=True)
class Endpoint:
    """A Triton address: `http://host:port`, `https://...`, `grpc://host:port`, or `host:port`."""

    transport: Transport
    host: str
    port: int
    ssl: bool = False

    @classmethod
    def parse(cls, url: str) -> Endpoint:
        raw = url.strip()
        scheme_match = _SCHEME.match(raw)
        if "://" not in raw:
            if scheme_match:  # "htp:/host:8000", "grpc:host": a scheme, but not a URL
                raise ConfigError(f"invalid Triton URL {url!r}: use {URL_FORMS}")
            raw = "http://" + raw
        try:
            parts = urlsplit(raw)
        except ValueError as exc:  # e.g. an unbalanced "[" (IPv6 brackets)
            raise ConfigError(f"invalid Triton URL {url!r}: {exc}; use {URL_FORMS}") from exc
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https", "grpc", "grpcs"):
            raise ConfigError(f"unsupported Triton URL scheme {parts.scheme!r} in {url!r}: use {URL_FORMS}")
        transport = Transport.GRPC if scheme.startswith("grpc") else Transport.HTTP
        try:
            port = parts.port
        except ValueError as exc:
            raise ConfigError(f"invalid port in Triton URL {url!r}: use {URL_FORMS}") from exc
        if not parts.hostname:
            raise ConfigError(f"no host in Triton URL {url!r}: use {URL_FORMS}")
        if parts.path.strip("/"):
            raise ConfigError(f"Triton URL {url!r} has a path ({parts.path}); use {URL_FORMS}")
        default_port = DEFAULT_PORTS[transport.value]
        return cls(transport, parts.hostname, port or default_port, scheme in ("https", "grpcs"))

    @property
    def address(self) -> str:
        """`host:port`, an IPv6 literal in brackets (`[fd00::5]:8001`): the form a URL, gRPC's
        target and the HTTP client take; a bare `fd00::5:8001` is ambiguous and refused."""
        return f"{url_host(self.host)}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.transport.value}{'s' if self.ssl else ''}://{self.address}"


def url_host(host: str) -> str:
    """`host` as a URL takes it: an IPv6 literal (the only host with ":") in brackets."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def same_server(url_a: str, url_b: str) -> bool:
    """Two URLs that name the same Triton (the HTTP and gRPC ports of one server do not)."""
    try:
        return Endpoint.parse(url_a).url == Endpoint.parse(url_b).url
    except ConfigError:
        return False


LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def server_keys(*urls: str) -> tuple[str, ...]:
    """The URLs one server is recorded under, for lookups by any of them: each of `urls` (the
    caller's: one server's endpoints) as `Endpoint.url` writes it, and a loopback one under each
    loopback name (`--url localhost:8000` reads what the sampler recorded for 127.0.0.1:8000)."""
    keys: list[str] = []
    for url in urls:
        try:
            endpoint = Endpoint.parse(url)
        except ConfigError:
            continue
        hosts = LOOPBACK_HOSTS if endpoint.host in LOOPBACK_HOSTS else (endpoint.host,)
        keys += [replace(endpoint, host=host).url for host in hosts]
    return tuple(dict.fromkeys(keys))


@dataclass(frozen=True)
class Ports:
    http: int
    grpc: int
    metrics: int


@dataclass(frozen=True)
class ServerInfo:
    name: str
    version: str
    extensions: tuple[str, ...]


@dataclass(frozen=True)
class Health:
    live: bool
    ready: bool


@dataclass(frozen=True)
class ModelEntry:
    """One row of the repository index."""

    name: str
    version: str
    state: ModelState
    reason: str


# -- Triton's log ---------------------------------------------------------------------
@dataclass(frozen=True)
class LogCursor:
    """A point in a log: a byte offset in one file (its inode), and a wall-clock time."""

    offset: int
    at: datetime
    inode: int = 0


@dataclass(frozen=True)
class LogLine:
    severity: str  # I, W, E, V; "" for a line Triton did not format (e.g. stub output)
    message: str
    raw: str


# -- a failed load, explained ---------------------------------------------------------
class Serving(str, enum.Enum):
    """What serves the model after the failed load."""

    PREVIOUS = "the previously loaded version is still serving"
    NOTHING = "the model is NOT serving"
    NEVER_LOADED = "the model was not loaded before, and is not serving"
    UNKNOWN = "could not check whether the model is serving"


@dataclass(frozen=True)
class Explanation:
    """What geadmin found out about a failed (or hung) load. `reason` leads every message."""

    model: str
    error: str  # what the API answered
    reason: str  # the most specific finding, with its fix (geadmin.diagnose.advice)
    log_lines: tuple[LogLine, ...] = ()
    layout_problems: tuple[str, ...] = ()
    serving: Serving = Serving.UNKNOWN
    serving_version: str = ""
    serving_error: str = ""  # why the serving check failed (Serving.UNKNOWN)
    log_description: str = ""  # where the log was read; "" when no log source is known
    timed_out: bool = False  # the load was still running when the client gave up
    hung: bool = False  # Triton logged a fatal error but keeps the model LOADING
    elapsed_s: float = 0.0

    @property
    def unfinished(self) -> bool:
        """Still running when geadmin stopped waiting, with no failure logged: not failed (yet)."""
        return self.timed_out and not self.hung

    def summary(self) -> str:
        if self.hung:
            head = (f"load of {self.model!r} is stuck: Triton keeps it LOADING after this error "
                    f"({format_duration(self.elapsed_s)}): {self.reason}")
        elif self.timed_out:
            waited = format_duration(self.elapsed_s)
            head = f"load of {self.model!r} did not finish in {waited}: {self.reason}"
        else:
            head = f"load of {self.model!r} failed: {self.reason}"
        lines = [head]
        if self.error and self.error not in self.reason and not self.unfinished:  # no answer to quote
            lines.append(f"  Triton answered: {self.error}")
        lines += [f"  repository: {problem}" for problem in self.layout_problems
                  if problem not in self.reason]
        serving = self.serving.value
        if self.serving is Serving.PREVIOUS and self.serving_version:
            serving = f"version {self.serving_version} (the previously loaded one) is still serving"
        if self.serving_error:
            serving = f"{serving}: {self.serving_error}"
        lines.append(f"  {serving}")
        if self.log_lines:
            lines.append(f"  Triton log ({self.log_description}):")
            lines += [f"    {line.raw}" for line in self.log_lines[-20:]]
        elif self.log_description:
            lines.append(f"  nothing about {self.model!r} in the {self.log_description}")
        else:
            lines.append("  Triton's log is not available here (pass --triton-log or set "
                         "GEADMIN_TRITON_LOG to its file)")
        return "\n".join(lines)


def format_duration(seconds: float) -> str:
    """The one way a duration is printed: "0.4 s", "12 s", "2 min 5 s", "35 min", "2 h 5 min",
    "3 d 4 h" — read at a glance, never "2154s"."""
    if seconds < 0:
        return "-" + format_duration(-seconds)
    if seconds < 9.95 and seconds != int(seconds):
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 10:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h" if hours else f"{days} d"
