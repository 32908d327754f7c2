"""Which log explains a Triton the CLI was pointed at by URL alone (`--url`, no
GEADMIN_TRITON_LOG, no GEADMIN_HOME naming its workspace).

Without its log, a rejected config is explained only as Triton answers it: "failed to poll
from model repository". `find_log` looks, first match wins:

1. the workspaces geadmin knows without being told (GEADMIN_HOME, the default
   $XDG_DATA_HOME/geadmin): a live `geadmin up` whose stack.json names that URL;
2. when the server runs on this host: Triton's logging API (`GET /v2/logging` answers
   `log_file` when Triton was started with `--log-file`; a restricted API, so it needs the
   key where one is set);
3. when the server runs on this host: the tritonserver process listening on its port (of
   this user; another program there is not Triton, and its output is not Triton's log) — its
   `--log-file`, else the file its stdout goes to, which is how `geadmin up` starts
   Triton; when that file is a workspace's log (`<home>/logs/tritonserver.log` beside a
   stack.json naming the URL), that workspace's repository comes with it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from geadmin import settings
from geadmin.domain import Endpoint
from geadmin.errors import ConfigError, GeAdminError
from geadmin.stack.target import Target, is_stack_server
from geadmin.stack.workspace import Workspace
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import (
    flag_value,
    is_tritonserver,
    listening_pids,
    log_file_setting,
    process_arguments,
    process_log_file,
)

API_TIMEOUT_S = 2.0  # the logging API is asked only on this host: a short wait


@dataclass(frozen=True)
class FoundLog:
    path: Path
    how: str  # for the note the CLI prints
    repository: Path | None = None
    home: Path | None = None  # the workspace, when the server is a `geadmin up` Triton


def default_homes() -> list[Path]:
    """GEADMIN_HOME (when set) and the default workspace, without repeats."""
    homes: list[Path] = []
    for home in (settings.home(), settings.default_home()):
        if home not in homes:
            homes.append(home)
    return homes


def is_this_host(host: str) -> bool:
    """True when `host` is an address of this machine: one a socket can bind to."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return False
    for family, _, _, _, address in infos:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address[0], 0))
            return True
        except OSError:
            continue
    return False


def find_log(url: str, admin_key: str | None = None, homes: Iterable[Path] | None = None) -> FoundLog | None:
    """The log of the Triton at `url`, or None when nothing on this host says where it is."""
    for home in homes if homes is not None else default_homes():
        stack = Workspace(home).live_stack()
        if stack is not None and is_stack_server(url, stack):
            return FoundLog(stack.triton_log, f"the embedded stack of {home}", stack.repository, home)
    try:
        endpoint = Endpoint.parse(url)
    except ConfigError:
        return None
    if not is_this_host(endpoint.host):
        return None
    try:
        with TritonClient(url, admin_key=admin_key, timeout_s=API_TIMEOUT_S) as client:
            named = log_file_setting(client.log_settings())
    except GeAdminError:  # restricted without the key, or not answering: the next way
        named = None
    if named is not None:
        return FoundLog(named, "Triton's logging API (log_file)")
    for pid in filter(is_tritonserver, listening_pids(endpoint.port)):
        path = process_log_file(pid)
        if path is not None:
            return _from_process(url, pid, endpoint.port, path)
    return None


def _from_process(url: str, pid: int, port: int, path: Path) -> FoundLog:
    how = f"the tritonserver (pid {pid}) listening on port {port}"
    home = path.parent.parent
    stack = Workspace(home).live_stack() if path == Workspace(home).triton_log else None
    if stack is not None and is_stack_server(url, stack):
        return FoundLog(path, f"{how}, the embedded stack of {home}", stack.repository, home)
    repository = flag_value(process_arguments(pid), "--model-repository")
    return FoundLog(path, how, Path(repository) if repository and Path(repository).is_dir() else None)


def with_found_log(target: Target) -> Target:
    """`target` with the log (and repository, if unknown) `find_log` finds, and a note
    saying where they come from; `target` itself when it has a log or none is found."""
    if target.log_path is not None:
        return target
    found = find_log(target.spec.url, target.spec.admin_key)
    if found is None:
        return target
    note = f"reading Triton's log {found.path} (found from {found.how})"
    if found.home is not None and found.home != settings.home():
        note += f"; set GEADMIN_HOME={found.home} to use that workspace (and its admin key) directly"
    return replace(target, log_path=found.path, repository=target.repository or found.repository,
                   notes=(*target.notes, note))
