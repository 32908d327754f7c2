"""Which Triton a command talks to, and which log and repository explain that Triton.

One rule for the CLI and the pages:

- the server: `--url`, else `--server NAME`, else `GEADMIN_TRITON_URL`, else the live
  embedded stack of the workspace (`$GEADMIN_HOME/stack.json`), else http://127.0.0.1:8000;
- its log: `--triton-log`, else `GEADMIN_TRITON_LOG` — only for the server it belongs to
  (GEADMIN_TRITON_URL's, or the one the CLI picks by default); when it is set but belongs
  to another server, a note says so instead of ignoring it silently — else the stack's log
  when the server is the stack's Triton;
- its repository: the same way (`--repository`, `GEADMIN_REPOSITORY`, the stack's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from geadmin import settings
from geadmin.domain import same_server
from geadmin.errors import ConfigError
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.logs import LocalLogFile, LogSource
from geadmin.triton.servers import DEFAULT_TRITON_URL, ServerSpec, load_servers


@dataclass(frozen=True)
class Target:
    spec: ServerSpec
    log_path: Path | None = None
    repository: Path | None = None
    source: str = ""  # how the server was chosen, for messages
    notes: tuple[str, ...] = ()  # settings given but not used, and why

    def log(self) -> LogSource | None:
        return LocalLogFile(self.log_path) if self.log_path else None


def live_stack(home: Path | None = None) -> StackInfo | None:
    return Workspace(home or settings.home()).live_stack()


def is_stack_server(url: str, stack: StackInfo | None) -> bool:
    return stack is not None and (same_server(url, stack.http_url) or same_server(url, stack.grpc_url))


def default_server(stack: StackInfo | None) -> tuple[str, str]:
    """(url, how it was chosen) when no flag names a server."""
    env_url = settings.triton_url()
    if env_url:
        return env_url, settings.SETTINGS["TRITON_URL"].env_name
    if stack is not None:
        return stack.http_url, f"the embedded stack of {stack.home} (pid {stack.pid})"
    return DEFAULT_TRITON_URL, "the default address"


def resolve(
    *,
    url: str | None = None,
    server: str | None = None,
    admin_key: str | None = None,
    triton_log: str | Path | None = None,
    repository: str | Path | None = None,
    stack: StackInfo | None = None,
) -> Target:
    """The target of one command; `stack` is the live embedded stack (see `live_stack`)."""
    key = admin_key or settings.admin_key()
    if url:
        spec, source = ServerSpec(url, url, key), "--url"
    elif server:
        spec, source = _named(server, admin_key, stack), "--server"
    else:
        default_url, source = default_server(stack)
        spec = ServerSpec("default", default_url, key)
    return explained_by(Target(spec, source=source), stack, triton_log, repository)


def explained_by(
    target: Target,
    stack: StackInfo | None,
    triton_log: str | Path | None = None,
    repository: str | Path | None = None,
) -> Target:
    """`target` with the log and repository that belong to its server."""
    url = target.spec.url
    default_url, _ = default_server(stack)
    belongs = same_server(url, default_url) or (not settings.triton_url() and is_stack_server(url, stack))
    from_stack = is_stack_server(url, stack)
    notes = list(target.notes)

    def pick(flag: str | Path | None, name: str, stack_value: Path | None) -> Path | None:
        if flag:
            return Path(flag).expanduser()
        env_value: Path | None = settings.get(name)
        if env_value is not None:
            if belongs:
                return env_value
            notes.append(f"GEADMIN_{name}={env_value} is not used: it belongs to {default_url}, "
                         f"not {url}; pass --{name.lower().replace('_', '-')} for this server")
        return stack_value if from_stack else None

    log_path = pick(triton_log, "TRITON_LOG", stack.triton_log if stack else None)
    repo = pick(repository, "REPOSITORY", stack.repository if stack else None)
    return replace(target, log_path=log_path, repository=repo, notes=tuple(notes))


def _named(name: str, admin_key_flag: str | None, stack: StackInfo | None) -> ServerSpec:
    specs = load_servers(stack.http_url if stack else None)
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        raise ConfigError(f"no server named {name!r}; configured: {', '.join(s.name for s in specs)}")
    return replace(spec, admin_key=admin_key_flag or spec.admin_key)


def configured_targets(stack: StackInfo | None) -> list[Target]:
    """Every configured server (the pages' list, `status --all`), each with its log."""
    return [explained_by(Target(spec, source="configured"), stack)
            for spec in load_servers(stack.http_url if stack else None)]
