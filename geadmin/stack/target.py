"""Which Triton a command talks to, and which log and repository explain that Triton.

One rule for the CLI and the pages:

- the server: `--url`, else `--server NAME`, else `GEADMIN_TRITON_URL`, else the live
  embedded stack of the workspace (`$GEADMIN_HOME/stack.json`), else http://127.0.0.1:8000;
- its log: `--triton-log`, else `GEADMIN_TRITON_LOG` — only for the server it belongs to
  (GEADMIN_TRITON_URL's, or the one the CLI picks by default); when it is set but belongs
  to another server, a note says so instead of ignoring it silently — else the stack's log
  when the server is the stack's Triton, else its compose container's log
  (GEADMIN_COMPOSE_PROJECT, for that same server: geadmin.stack.compose_logs);
- its repository: the same way (`--repository`, `GEADMIN_REPOSITORY`, the stack's);
- its admin key: `--admin-key`, else the embedded stack's own key (its workspace's
  `triton-admin-key` file) when the server is the stack's Triton, else the key configured
  for that server (geadmin.triton.servers) — never another server's;
- its HTTP, gRPC and metrics URLs: `server_urls`, one rule for every command and page.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from geadmin import settings
from geadmin.domain import LOOPBACK_HOSTS, Endpoint, Transport, same_server, url_host
from geadmin.errors import ConfigError
from geadmin.stack.compose_logs import ComposeLogSource, compose_for
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.logs import LocalLogFile, LogSource
from geadmin.triton.servers import DEFAULT_TRITON_URL, ServerSpec, env_key_for, key_warning, load_servers


@dataclass(frozen=True)
class Target:
    spec: ServerSpec
    log_path: Path | None = None
    repository: Path | None = None
    source: str = ""  # how the server was chosen, for messages
    notes: tuple[str, ...] = ()  # settings given but not used, and why
    stack: StackInfo | None = field(default=None, repr=False, compare=False)  # the live stack, if any

    def log(self) -> LogSource | None:
        """Its log file, else the log of its compose container (geadmin.stack.compose_logs)."""
        if self.log_path:
            return LocalLogFile(self.log_path)
        driver = compose_for(self.spec.url)
        return ComposeLogSource(driver) if driver is not None else None

    def urls(self) -> ServerUrls:
        """This server's HTTP, gRPC and metrics URLs (see `server_urls`)."""
        return server_urls(self.spec, self.stack)


@dataclass(frozen=True)
class ServerUrls:
    """One server's endpoints. `guessed` names those worked out from the settings' ports
    (GEADMIN_HTTP_PORT, GEADMIN_GRPC_PORT, GEADMIN_METRICS_PORT) on the server's host
    rather than known (the server's own URL, the live stack's stack.json, the servers file,
    GEADMIN_TRITON_METRICS_URL)."""

    http: str
    grpc: str
    metrics: str
    guessed: frozenset[str] = frozenset()  # of "http", "grpc", "metrics"
    given: frozenset[str] = frozenset()  # configured by the user (servers file, GEADMIN_TRITON_METRICS_URL)
    source: str = ""  # where the known ones come from, for messages

    def url(self, transport: Transport) -> str:
        return self.http if transport is Transport.HTTP else self.grpc

    def is_guess(self, kind: Transport | str) -> bool:
        return (kind.value if isinstance(kind, Transport) else kind) in self.guessed

    def known(self) -> tuple[str, ...]:
        """The HTTP and gRPC URLs known, not guessed: the server is recorded under these."""
        endpoints = (("http", self.http), ("grpc", self.grpc))
        return tuple(url for kind, url in endpoints if not self.is_guess(kind))


def server_urls(spec: ServerSpec, stack: StackInfo | None) -> ServerUrls:
    """The HTTP, gRPC and metrics URLs of the server `spec` names — the one rule behind every
    command's `--protocol`, `geadmin npu`, the NPU and Metrics pages, Playground and Load test.

    Each URL, first match wins: `spec.url` itself for its own transport; the servers file's
    `http_url` / `grpc_url` / `metrics_url`; GEADMIN_TRITON_METRICS_URL for the metrics of the
    server it belongs to (the default one); the live stack's stack.json when `spec` is the
    stack's Triton; else the settings' port of that kind on the server's host (a guess).
    """
    own = Endpoint.parse(spec.url)
    from_stack = stack is not None and is_stack_server(spec.url, stack)
    env_metrics = settings.TRITON_METRICS_URL.get()
    known: dict[str, str | None] = {"http": spec.http_url, "grpc": spec.grpc_url, "metrics": spec.metrics_url}
    known[own.transport.value] = own.url
    if env_metrics and not known["metrics"] and same_server(spec.url, default_server(stack)[0]):
        known["metrics"] = str(env_metrics)
    given = {kind for kind, url in known.items() if url and kind != own.transport.value}
    if from_stack:
        assert stack is not None
        for kind, url in (("http", stack.http_url), ("grpc", stack.grpc_url), ("metrics", stack.metrics_url)):
            known[kind] = known[kind] or url
    guessed = frozenset(kind for kind, url in known.items() if not url)
    for kind in guessed:  # only these read the settings' ports: a bad unused one breaks nothing
        known[kind] = _guess(own, kind)
    source = (f"the embedded stack of {stack.home}" if from_stack and stack is not None
              else f"the server {spec.name!r}")
    return ServerUrls(str(known["http"]), str(known["grpc"]), str(known["metrics"]), guessed,
                      frozenset(given), source)


def _guess(own: Endpoint, kind: str) -> str:
    if kind == "metrics":
        return f"http://{url_host(own.host)}:{settings.port('metrics')}/metrics"
    transport = Transport(kind)
    return replace(own, transport=transport,
                   port=settings.port("grpc" if transport is Transport.GRPC else "http")).url


def live_stack(home: Path | None = None) -> StackInfo | None:
    return Workspace(home or settings.home()).live_stack()


def is_stack_server(url: str, stack: StackInfo | None) -> bool:
    """`url` names one of the stack's Triton ports, whatever scheme it was written with
    (`--url 127.0.0.1:GRPC --protocol grpc` is the stack's gRPC endpoint)."""
    if stack is None:
        return False
    try:
        address = _address(url)
        return address in (_address(stack.http_url), _address(stack.grpc_url))
    except ConfigError:
        return False


def _address(url: str) -> tuple[str, int]:
    """Host and port, a loopback host under one name (`localhost:8000` is the stack's 127.0.0.1:8000)."""
    endpoint = Endpoint.parse(url)
    return ("127.0.0.1" if endpoint.host in LOOPBACK_HOSTS else endpoint.host), endpoint.port


def default_server(stack: StackInfo | None) -> tuple[str, str]:
    """(url, how it was chosen) when no flag names a server."""
    env_url = settings.TRITON_URL.get()
    if env_url:
        return env_url, settings.TRITON_URL.env_name
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
    fallback = stack.http_url if stack else None
    if url:
        spec, source = ServerSpec(url, url, env_key_for(url, fallback)), "--url"
    elif server:
        spec, source = _named(server, stack), "--server"
    else:
        default_url, source = default_server(stack)
        spec = ServerSpec("default", default_url, env_key_for(default_url, fallback))
    target = explained_by(Target(spec, source=source), stack, triton_log, repository)
    spec = replace(target.spec, admin_key=admin_key) if admin_key else target.spec
    notes = list(target.notes)
    if settings.ADMIN_KEY.get() and spec.admin_key is None:
        notes.append(f"GEADMIN_ADMIN_KEY is not sent to {spec.url}: it belongs to "
                     f"{default_server(stack)[0]}; pass --admin-key for this server")
    warning = key_warning(spec)
    if warning:
        notes.append(warning)
    return replace(target, spec=spec, notes=tuple(notes))


def explained_by(
    target: Target,
    stack: StackInfo | None,
    triton_log: str | Path | None = None,
    repository: str | Path | None = None,
) -> Target:
    """`target` with the log and repository that belong to its server."""
    url = target.spec.url
    default_url, _ = default_server(stack)
    belongs = same_server(url, default_url) or (not settings.TRITON_URL.get() and is_stack_server(url, stack))
    from_stack = is_stack_server(url, stack)
    notes = list(target.notes)

    def pick(flag: str | Path | None, setting: settings.Setting[Path],
             stack_value: Path | None) -> Path | None:
        if flag:
            return Path(flag).expanduser()
        env_value = setting.get()
        if env_value is not None:
            if belongs:
                return env_value
            notes.append(f"{setting.env_name}={env_value} is not used: it belongs to {default_url}, "
                         f"not {url}; pass --{setting.name.lower().replace('_', '-')} for this server")
        return stack_value if from_stack else None

    log_path = pick(triton_log, settings.TRITON_LOG, stack.triton_log if stack else None)
    repo = pick(repository, settings.REPOSITORY, stack.repository if stack else None)
    return replace(target, spec=with_stack_key(target.spec, stack), log_path=log_path, repository=repo,
                   notes=tuple(notes), stack=stack)


def with_stack_key(spec: ServerSpec, stack: StackInfo | None) -> ServerSpec:
    """`spec` with the embedded stack's own admin key when it names the stack's Triton: the
    only key that Triton accepts (a key configured for that address would be refused)."""
    if stack is None or not is_stack_server(spec.url, stack):
        return spec
    key = Workspace(stack.home).admin_key()
    return replace(spec, admin_key=key) if key else spec


def _named(name: str, stack: StackInfo | None) -> ServerSpec:
    specs = load_servers(stack.http_url if stack else None)
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        raise ConfigError(f"no server named {name!r}; configured: {', '.join(s.name for s in specs)}")
    return spec


def configured_targets(stack: StackInfo | None) -> list[Target]:
    """Every configured server (the pages' list, `status --all`), each with its log and key."""
    return [explained_by(Target(spec, source="configured"), stack)
            for spec in load_servers(stack.http_url if stack else None)]


def key_warnings(targets: list[Target]) -> list[str]:
    """For the Settings page: each configured server whose admin key travels unencrypted."""
    return [warning for target in targets if (warning := key_warning(target.spec))]
