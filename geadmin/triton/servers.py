"""Which Triton servers the dashboard and CLI know about.

First match wins:
1. `GEADMIN_SERVERS_FILE`, a TOML file:

       [[server]]
       name = "prod-a"
       url = "grpc://10.0.0.5:8001"
       admin_key_file = "/etc/geadmin/prod-a.key"   # optional; or admin_key = "..."
       http_url = "https://10.0.0.5:8000"           # optional: its other endpoints, when
       metrics_url = "http://10.0.0.5:8002/metrics" # not on the GEADMIN_*_PORT ports
       repository = "/srv/models/prod-a"            # optional: its model repository, as this
                                                    # machine mounts it (geadmin fleet apply)
       home = "/srv/geadmin-a"                      # optional: the workspace (GEADMIN_HOME) of
                                                    # the geadmin that serves it, as this machine
                                                    # mounts it: a fleet change is audited there too

2. `GEADMIN_TRITON_URLS`: comma-separated `url` or `name=url` items.
3. `GEADMIN_TRITON_URL`, else the caller's default (the CLI passes the live embedded
   stack's Triton), else http://127.0.0.1:8000: one server named "local".

Admin keys are per server: a server gets the key its own entry names, and
`GEADMIN_ADMIN_KEY` belongs to one server only, the default one (GEADMIN_TRITON_URL's,
else the caller's default) — never to every server of a list. A key bound for a
non-loopback host over plain HTTP or gRPC gets a warning (`key_warning`).
"""

from __future__ import annotations

import ipaddress
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geadmin import settings
from geadmin.domain import DEFAULT_PORTS, Endpoint, Transport, same_server
from geadmin.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class ServerSpec:
    """One configured server. `http_url` / `grpc_url` / `metrics_url`: its other endpoints
    when the configuration names them (else geadmin.stack.target.server_urls works them out)."""

    name: str
    url: str
    admin_key: str | None = field(default=None, repr=False)  # never in a log or a repr
    http_url: str | None = None
    grpc_url: str | None = None
    metrics_url: str | None = None
    repository: Path | None = None  # its model repository as this machine sees it (fleet apply)
    home: Path | None = None  # the workspace of the geadmin that serves it (fleet changes audited there)


DEFAULT_TRITON_URL = f"http://127.0.0.1:{DEFAULT_PORTS['http']}"


def default_url(fallback: str | None = None) -> str:
    """GEADMIN_TRITON_URL, else `fallback`, else Triton's default address on this machine."""
    return settings.TRITON_URL.get() or fallback or DEFAULT_TRITON_URL


def load_servers(fallback_url: str | None = None) -> list[ServerSpec]:
    file = settings.SERVERS_FILE.get()
    if file:
        return parse_servers_file(file, fallback_url)
    urls = settings.TRITON_URLS.get()
    if urls:
        return parse_url_list(urls, fallback_url)
    url = Endpoint.parse(default_url(fallback_url)).url  # a bad URL is a ConfigError here, early
    return [ServerSpec("local", url, settings.ADMIN_KEY.get())]


def env_key_for(url: str, fallback_url: str | None = None) -> str | None:
    """GEADMIN_ADMIN_KEY when `url` is the server it belongs to (the default one), else None."""
    return settings.ADMIN_KEY.get() if same_server(url, default_url(fallback_url)) else None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def key_warning(spec: ServerSpec) -> str | None:
    """Why sending `spec`'s admin key is exposed on the network, or None: a key bound for a
    host other than loopback over plain (unencrypted) HTTP or gRPC can be read on the way."""
    if not spec.admin_key:
        return None
    exposed = []
    for url in (spec.url, spec.http_url, spec.grpc_url):
        if url is None:
            continue
        endpoint = Endpoint.parse(url)
        if not endpoint.ssl and not is_loopback(endpoint.host):
            exposed.append(endpoint.url)
    if not exposed:
        return None
    return (f"the admin key of {spec.name!r} is sent unencrypted to {', '.join(dict.fromkeys(exposed))}: "
            "anyone who can watch that network can read it and load, unload or reconfigure models; "
            "use https:// or grpcs:// (e.g. behind a TLS proxy), or reach Triton over loopback or "
            "a private network only")


def parse_url_list(raw: str, fallback_url: str | None = None) -> list[ServerSpec]:
    specs = []
    for index, item in enumerate(part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, url = item.partition("=")
        if not sep:
            name, url = "", item
        endpoint = Endpoint.parse(url)  # raises ConfigError naming the bad URL
        specs.append(ServerSpec(name.strip() or endpoint.address or f"server{index}", endpoint.url,
                                env_key_for(endpoint.url, fallback_url)))
    return _checked(specs, settings.TRITON_URLS.env_name)


def parse_servers_file(path: Path, fallback_url: str | None = None) -> list[ServerSpec]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError as exc:
        raise ConfigError(f"servers file {path} does not exist (GEADMIN_SERVERS_FILE)") from exc
    except (OSError, tomllib.TOMLDecodeError, RecursionError) as exc:  # tomllib recurses per nesting level
        raise ConfigError(f"cannot read servers file {path}: {exc}") from exc
    entries: Any = data.get("server")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path} has no [[server]] tables; see docs/guide/servers.md for the format")
    specs = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigError(f"{path}: server #{number} needs a url = \"http://host:8000\"")
        endpoint = Endpoint.parse(entry["url"])
        key = _entry_key(path, number, entry) or env_key_for(endpoint.url, fallback_url)
        specs.append(ServerSpec(str(entry.get("name") or endpoint.address), endpoint.url, key,
                                http_url=_entry_url(path, number, entry, "http_url", Transport.HTTP),
                                grpc_url=_entry_url(path, number, entry, "grpc_url", Transport.GRPC),
                                metrics_url=_entry_metrics(path, number, entry),
                                repository=_entry_path(path, number, entry, "repository"),
                                home=_entry_path(path, number, entry, "home")))
    return _checked(specs, str(path))


def _entry_key(path: Path, number: int, entry: dict[str, Any]) -> str | None:
    key, key_file = entry.get("admin_key"), entry.get("admin_key_file")
    if key and key_file:
        raise ConfigError(f"{path}: server #{number} has both admin_key and admin_key_file; keep one")
    if key_file:
        return read_key_file(f"{path}: server #{number}", str(key_file))
    return str(key) if key else None


def read_key_file(where: str, key_file: str) -> str:
    """The admin key in `key_file` (stripped); ConfigError starting with `where` when it
    cannot be read or is empty (servers file entries, fleet tables)."""
    try:
        key = Path(key_file).expanduser().read_text().strip()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read admin_key_file {key_file}: {exc.strerror or exc}") from exc
    if not key:
        raise ConfigError(f"{where}: admin_key_file {key_file} is empty")
    return key


def _entry_url(path: Path, number: int, entry: dict[str, Any], key: str, transport: Transport) -> str | None:
    value = entry.get(key)
    if value is None:
        return None
    endpoint = Endpoint.parse(str(value))
    if endpoint.transport is not transport:
        raise ConfigError(f"{path}: server #{number}: {key} must be a {transport.value} URL, got {value!r}")
    return endpoint.url


def _entry_path(path: Path, number: int, entry: dict[str, Any], key: str) -> Path | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\x00" in value:
        raise ConfigError(f"{path}: server #{number}: {key} must be a directory path")
    found = Path(value).expanduser()
    if key == "home" and not found.is_absolute():  # relative to whichever directory a command ran in
        raise ConfigError(f"{path}: server #{number}: home must be an absolute path (the workspace "
                          f"directory, e.g. /srv/geadmin-a), got {value!r}")
    return found


def _entry_metrics(path: Path, number: int, entry: dict[str, Any]) -> str | None:
    value = entry.get("metrics_url")
    if value is None:
        return None
    try:
        return settings.parse_http_url(str(value))
    except ConfigError as exc:
        raise ConfigError(f"{path}: server #{number}: metrics_url {exc}") from exc


def _checked(specs: list[ServerSpec], source: str) -> list[ServerSpec]:
    if not specs:
        raise ConfigError(f"{source} names no servers")
    names = [spec.name for spec in specs]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(f"{source}: server names must be unique, repeated: {', '.join(duplicates)}")
    return specs


def is_env_server(url: str) -> bool:
    """True for the server GEADMIN_TRITON_URL names (the default one when it is unset): the
    server whose log GEADMIN_TRITON_LOG is."""
    return same_server(url, default_url())
