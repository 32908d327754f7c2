"""Which Triton servers the dashboard and CLI know about.

First match wins:
1. `GEADMIN_SERVERS_FILE`, a TOML file:

       [[server]]
       name = "prod-a"
       url = "grpc://10.0.0.5:8001"
       admin_key = "..."        # optional

2. `GEADMIN_TRITON_URLS`: comma-separated `url` or `name=url` items.
3. `GEADMIN_TRITON_URL`, else the caller's default (the CLI passes the live embedded
   stack's Triton), else http://127.0.0.1:8000: one server named "local".
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin import settings
from geadmin.domain import DEFAULT_PORTS, Endpoint, same_server
from geadmin.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class ServerSpec:
    name: str
    url: str
    admin_key: str | None = None


DEFAULT_TRITON_URL = f"http://127.0.0.1:{DEFAULT_PORTS['http']}"


def default_url(fallback: str | None = None) -> str:
    """GEADMIN_TRITON_URL, else `fallback`, else Triton's default address on this machine."""
    return settings.triton_url() or fallback or DEFAULT_TRITON_URL


def load_servers(fallback_url: str | None = None) -> list[ServerSpec]:
    file = settings.get("SERVERS_FILE")
    if file:
        return parse_servers_file(file)
    urls = settings.get("TRITON_URLS")
    if urls:
        return parse_url_list(urls)
    url = Endpoint.parse(default_url(fallback_url)).url  # a bad URL is a ConfigError here, early
    return [ServerSpec("local", url, settings.admin_key())]


def parse_url_list(raw: str) -> list[ServerSpec]:
    specs = []
    for index, item in enumerate(part.strip() for part in raw.split(",")):
        if not item:
            continue
        name, sep, url = item.partition("=")
        if not sep:
            name, url = "", item
        endpoint = Endpoint.parse(url)  # raises ConfigError naming the bad URL
        specs.append(ServerSpec(name.strip() or endpoint.address or f"server{index}", endpoint.url,
                                settings.admin_key()))
    return _checked(specs, settings.SETTINGS["TRITON_URLS"].env_name)


def parse_servers_file(path: Path) -> list[ServerSpec]:
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"servers file {path} does not exist (GEADMIN_SERVERS_FILE)") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read servers file {path}: {exc}") from None
    entries: Any = data.get("server")
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"{path} has no [[server]] tables; see the README for the format")
    specs = []
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            raise ConfigError(f"{path}: server #{number} needs a url = \"http://host:8000\"")
        endpoint = Endpoint.parse(entry["url"])
        key = entry.get("admin_key")
        specs.append(ServerSpec(str(entry.get("name") or endpoint.address), endpoint.url,
                                str(key) if key else settings.admin_key()))
    return _checked(specs, str(path))


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
