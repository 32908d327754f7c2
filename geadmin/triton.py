"""The one module that talks to Triton (through tritonclient), over HTTP or gRPC.

Both transports return the same types: protobuf messages from Triton's own service and
model-config schemas, or the frozen dataclasses below. Every call has a timeout (loads a
longer one: a load can hang, FACTS.md), and every failure leaves as a `TritonError`
subclass chosen by one translation table (`translate_error`).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import enum
import http.client
import json
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import urlsplit

import grpc
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from geventhttpclient import useragent
from geventhttpclient.response import HTTPConnectionClosed
from google.protobuf import json_format
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2, service_pb2
from tritonclient.utils import InferenceServerException
from tritonclient.utils.shared_memory import SharedMemoryException

from geadmin.errors import (
    ConfigError,
    ForbiddenError,
    LoadFailedError,
    ModelNotFoundError,
    TritonError,
    TritonRequestError,
    TritonTimeoutError,
    TritonUnreachableError,
)

T = TypeVar("T")
M = TypeVar("M", bound=Message)

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_LOAD_TIMEOUT_S = 120.0
HTTP_WORKERS = 4  # concurrent HTTP calls per endpoint (a long load must not block the rest)
QUEUE_GRACE_S = 5.0  # how long an HTTP call may wait for a free worker, beyond its own timeout
HTTP_ADMIN_KEY_HEADER = "admin-key"
GRPC_ADMIN_KEY_HEADER = "triton-grpc-protocol-admin-key"


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
        if "://" not in raw:
            raw = "http://" + raw
        try:
            parts = urlsplit(raw)
        except ValueError as exc:  # e.g. an unbalanced "[" (IPv6 brackets)
            raise ConfigError(f"invalid Triton URL {url!r}: {exc}") from None
        scheme = parts.scheme.lower()
        if scheme not in ("http", "https", "grpc", "grpcs"):
            raise ConfigError(
                f"unsupported Triton URL scheme {parts.scheme!r} in {url!r}: "
                "use http://host:8000 or grpc://host:8001"
            )
        transport = Transport.GRPC if scheme.startswith("grpc") else Transport.HTTP
        try:
            port = parts.port
        except ValueError:
            raise ConfigError(f"invalid port in Triton URL {url!r}") from None
        if not parts.hostname:
            raise ConfigError(f"no host in Triton URL {url!r}")
        default_port = 8001 if transport is Transport.GRPC else 8000
        return cls(transport, parts.hostname, port or default_port, scheme in ("https", "grpcs"))

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        scheme = {Transport.HTTP: "http", Transport.GRPC: "grpc"}[self.transport]
        return f"{scheme}{'s' if self.ssl else ''}://{self.address}"


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


# -- error translation ----------------------------------------------------------------
# Status (HTTP code or gRPC StatusCode name) -> our error. Load calls turn request-level
# rejections into LoadFailedError (see translate_error).
_R, _F, _N, _T, _U = (TritonRequestError, ForbiddenError, ModelNotFoundError, TritonTimeoutError,
                      TritonUnreachableError)
STATUS_ERRORS: dict[str, type[TritonError]] = {
    # HTTP: every 4xx/5xx code, so a proxy in front of Triton cannot surprise us.
    "400": _R, "401": _F, "402": _R, "403": _F, "404": _N, "405": _R, "406": _R, "407": _F,
    "408": _T, "409": _R, "410": _N, "411": _R, "412": _R, "413": _R, "414": _R, "415": _R,
    "416": _R, "417": _R, "418": _R, "421": _R, "422": _R, "423": _R, "424": _R, "425": _R,
    "426": _R, "428": _R, "429": _R, "431": _R, "451": _F,
    "500": _R, "501": _R, "502": _U, "503": _U, "504": _T, "505": _R, "506": _R, "507": _R,
    "508": _R, "510": _R, "511": _F,
    # gRPC: every StatusCode name.
    "OK": _R,
    "CANCELLED": _R,
    "UNKNOWN": _R,
    "INVALID_ARGUMENT": _R,
    "DEADLINE_EXCEEDED": _T,
    "NOT_FOUND": _N,
    "ALREADY_EXISTS": _R,
    "PERMISSION_DENIED": _F,
    "UNAUTHENTICATED": _F,
    "RESOURCE_EXHAUSTED": _R,
    "FAILED_PRECONDITION": _R,
    "ABORTED": _R,
    "OUT_OF_RANGE": _R,
    "UNIMPLEMENTED": _R,
    "INTERNAL": _R,
    "UNAVAILABLE": _U,
    "DATA_LOSS": _R,
}

# Transport-level exceptions (tritonclient lets these through from sockets / gevent /
# geventhttpclient). Order matters: the first isinstance match wins, so subclasses come
# before bases. gevent.Timeout is handled apart (imported lazily).
# No free HTTP worker in time: concurrent.futures.TimeoutError is TimeoutError from 3.11 on.
_FUTURE_TIMEOUT: tuple[tuple[type[BaseException], type[TritonError]], ...] = (
    () if concurrent.futures.TimeoutError is TimeoutError
    else ((concurrent.futures.TimeoutError, TritonTimeoutError),)
)
EXCEPTION_ERRORS: tuple[tuple[type[BaseException], type[TritonError]], ...] = (
    (ConnectionRefusedError, _U),
    (ConnectionResetError, _U),
    (ConnectionAbortedError, _U),
    (BrokenPipeError, _U),
    (socket.gaierror, _U),
    (TimeoutError, _T),  # socket.timeout is TimeoutError since 3.10
    *_FUTURE_TIMEOUT,
    (HTTPConnectionClosed, _U),  # the server closed the connection mid-answer
    (http.client.HTTPException, _R),  # an answer that is not HTTP (wrong port?)
    (useragent.DNSError, _U),
    (useragent.BadStatusCode, _R),
    (useragent.EmptyResponse, _U),
    (useragent.ConnectionError, _U),
    (SharedMemoryException, _R),  # system shared-memory regions (infer)
    (json_format.ParseError, _R),  # an answer that is not what Triton's schema says
    (grpc.FutureTimeoutError, _T),
    (grpc.FutureCancelledError, _R),
    (grpc.RpcError, _R),
    (OSError, _U),
)

_RESTRICTED_MARKERS = ("this api is restricted", "admin-key", "protocol-admin-key")
_REFUSED_MARKERS = ("connection refused", "failed to connect", "connect failed")
# Triton answers 400 / INVALID_ARGUMENT for e.g. statistics of an unknown or unloaded model.
_NOT_FOUND_MARKERS = ("is not found", "is not available", "unknown model")


def _status_name(exc: InferenceServerException) -> str:
    status = exc.status() or ""
    return str(status).removeprefix("StatusCode.")


def translate_error(exc: BaseException, action: str, url: str, *, loading: bool = False) -> TritonError:
    """Turn any exception raised by tritonclient into our error, with a useful message."""
    if isinstance(exc, TritonError):
        return exc
    if isinstance(exc, InferenceServerException):
        return _translate_server_exception(exc, action, url, loading)
    gevent_timeout = _gevent_timeout_type()
    if gevent_timeout is not None and isinstance(exc, gevent_timeout):
        return TritonTimeoutError(f"{action}: Triton at {url} did not answer in time", url=url)
    for exc_type, ours in EXCEPTION_ERRORS:
        if isinstance(exc, exc_type):
            return ours(f"{action}: {_describe(ours, url)} ({exc})", url=url)
    return TritonRequestError(f"{action}: unexpected {type(exc).__name__}: {exc}", url=url)


def _translate_server_exception(
    exc: InferenceServerException, action: str, url: str, loading: bool
) -> TritonError:
    status = _status_name(exc)
    message = exc.message() or str(exc)
    lowered = message.lower()
    ours = STATUS_ERRORS.get(status, TritonRequestError)
    if any(marker in lowered for marker in _RESTRICTED_MARKERS):
        ours = ForbiddenError  # gRPC reports a missing admin key as UNAVAILABLE
    elif ours is TritonUnreachableError and not any(m in lowered for m in _REFUSED_MARKERS):
        ours = TritonRequestError if status != "UNAVAILABLE" else ours
    elif "deadline exceeded" in lowered or "timed out" in lowered:
        ours = TritonTimeoutError
        message = f"{_describe(ours, url)} ({message})"
    elif loading and ours in (TritonRequestError, ModelNotFoundError):
        ours = LoadFailedError
    elif ours is TritonRequestError and any(m in lowered for m in _NOT_FOUND_MARKERS):
        ours = ModelNotFoundError
    code = int(status) if status.isdigit() else None
    if ours is ForbiddenError:
        message = (f"{message} — this Triton restricts the API; set the admin key with "
                   "--admin-key or GEADMIN_ADMIN_KEY")
    elif ours is TritonUnreachableError:
        message = f"{_describe(ours, url)} ({message})"
    return ours(f"{action}: {message}", url=url, status=code)


def _describe(ours: type[TritonError], url: str) -> str:
    if ours is TritonUnreachableError:
        return f"Triton at {url} is unreachable — is it running, and is the URL right?"
    if ours is TritonTimeoutError:
        return f"Triton at {url} did not answer in time"
    return f"request to Triton at {url} failed"


def _gevent_timeout_type() -> type[BaseException] | None:
    try:
        from gevent import Timeout
    except ImportError:  # pragma: no cover - gevent comes with tritonclient[http]
        return None
    return Timeout


# -- the client -----------------------------------------------------------------------
class TritonClient:
    """Facade over tritonclient for one Triton endpoint.

    Safe to share between threads. The gRPC client is thread-safe and shared. The HTTP
    client is gevent-based and must stay on the thread that made it (FACTS.md), and each
    thread that touches gevent gets its own event loop that is never freed — Streamlit
    runs every rerun on a new thread — so HTTP calls run on a small pool of long-lived
    worker threads, each with its own clients.
    """

    def __init__(
        self,
        url: str,
        *,
        admin_key: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        load_timeout_s: float = DEFAULT_LOAD_TIMEOUT_S,
    ) -> None:
        self.endpoint = Endpoint.parse(url)
        self.admin_key = admin_key
        self.timeout_s = timeout_s
        self.load_timeout_s = load_timeout_s
        self._local = threading.local()  # per HTTP worker thread: {timeout_s: client}
        self._http_pool: ThreadPoolExecutor | None = None
        self._grpc_lock = threading.Lock()
        self._grpc: grpcclient.InferenceServerClient | None = None

    @property
    def url(self) -> str:
        return self.endpoint.url

    @property
    def transport(self) -> Transport:
        return self.endpoint.transport

    # -- server ---------------------------------------------------------------------
    def is_live(self) -> bool:
        return bool(self._call("check liveness", lambda c, kw: c.is_server_live(**kw)))

    def is_ready(self) -> bool:
        return bool(self._call("check readiness", lambda c, kw: c.is_server_ready(**kw)))

    def health(self) -> Health:
        live = self.is_live()
        return Health(live=live, ready=live and self.is_ready())

    def server_info(self) -> ServerInfo:
        meta = self._message(
            "read server metadata",
            lambda c, kw: c.get_server_metadata(**kw),
            service_pb2.ServerMetadataResponse,
        )
        return ServerInfo(meta.name, meta.version, tuple(meta.extensions))

    def model_ready(self, name: str, version: str = "") -> bool:
        """Whether Triton would serve `name` (a version, or the latest) right now."""
        return bool(self._call(
            f"check readiness of {name!r}", lambda c, kw: c.is_model_ready(name, version, **kw)
        ))

    # -- repository -----------------------------------------------------------------
    def repository_index(self) -> list[ModelEntry]:
        def fetch(client: Any, kwargs: dict[str, Any]) -> Any:
            raw = client.get_model_repository_index(**kwargs)
            return {"models": raw} if isinstance(raw, list) else raw

        index = self._message("list the model repository", fetch, service_pb2.RepositoryIndexResponse)
        return sorted(
            (ModelEntry(m.name, m.version, ModelState.parse(m.state), m.reason) for m in index.models),
            key=lambda entry: (entry.name, entry.version),
        )

    def load(
        self,
        name: str,
        *,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> None:
        """Load (or reload) a model, optionally overriding its config and files.

        `files` maps paths inside the model directory (e.g. "1/model.py") to contents;
        Triton accepts them only together with `config` (FACTS.md).
        """
        if files and config is None:
            raise ConfigError("file overrides need a config override too (Triton ignores them alone)")
        config_json = _config_json(config) if config is not None else None
        overrides = {f"file:{path}": data for path, data in (files or {}).items()} or None
        self._call(
            f"load model {name!r}",
            lambda c, kw: c.load_model(name, config=config_json, files=overrides, **kw),
            loading=True,
        )

    def reload(self, name: str) -> None:
        """Triton reloads a loaded model when asked to load it again."""
        self.load(name)

    def unload(self, name: str, *, dependents: bool = False) -> None:
        self._call(
            f"unload model {name!r}",
            lambda c, kw: c.unload_model(name, unload_dependents=dependents, **kw),
        )

    # -- models ---------------------------------------------------------------------
    def model_config(self, name: str, version: str = "") -> model_config_pb2.ModelConfig:
        def fetch(client: Any, kwargs: dict[str, Any]) -> Any:
            raw = client.get_model_config(name, version, **kwargs)
            return raw if "config" in raw else {"config": raw}

        response = self._message(
            f"read the config of {name!r}", fetch, service_pb2.ModelConfigResponse
        )
        return response.config

    def model_metadata(self, name: str, version: str = "") -> service_pb2.ModelMetadataResponse:
        return self._message(
            f"read the metadata of {name!r}",
            lambda c, kw: c.get_model_metadata(name, version, **kw),
            service_pb2.ModelMetadataResponse,
        )

    def model_statistics(self, name: str = "", version: str = "") -> list[service_pb2.ModelStatistics]:
        response = self._message(
            f"read statistics of {name or 'all models'!r}",
            lambda c, kw: c.get_inference_statistics(name, version, **kw),
            service_pb2.ModelStatisticsResponse,
        )
        return list(response.model_stats)

    # -- logging --------------------------------------------------------------------
    def log_settings(self) -> dict[str, Any]:
        # Flattened inside the call, so an unexpected answer is translated like any failure.
        return self._call("read log settings",
                          lambda c, kw: _plain_log_settings(c.get_log_settings(**kw, **_as_json(c))))

    def update_log_settings(self, **settings: Any) -> dict[str, Any]:
        """E.g. `update_log_settings(log_verbose_level=1)`; returns the new settings."""
        return self._call(
            "change log settings",
            lambda c, kw: _plain_log_settings(c.update_log_settings(settings, **kw, **_as_json(c))),
        )

    # -- plumbing -------------------------------------------------------------------
    def _message(self, action: str, fetch: Callable[[Any, dict[str, Any]], Any], message_type: type[M]) -> M:
        """Run `fetch` and return its answer as `message_type`, whatever the transport."""

        def call(client: Any, kwargs: dict[str, Any]) -> M:
            if isinstance(client, grpcclient.InferenceServerClient):
                kwargs = {**kwargs, "as_json": True}
            # Parsed inside the call so a malformed answer is translated like any failure.
            return json_format.ParseDict(fetch(client, kwargs), message_type(), ignore_unknown_fields=True)

        return self._call(action, call)

    def _call(self, action: str, fn: Callable[[Any, dict[str, Any]], T], *, loading: bool = False) -> T:
        timeout_s = self.load_timeout_s if loading else self.timeout_s
        try:
            if self.endpoint.transport is Transport.GRPC:
                return self._run(fn, timeout_s)
            # The HTTP client's own timeouts bound the wait on the worker.
            # Bounded even when every worker is busy with a long load.
            return self._pool().submit(self._run, fn, timeout_s).result(timeout=timeout_s + QUEUE_GRACE_S)
        except Exception as exc:
            raise translate_error(exc, action, self.url, loading=loading) from exc

    def _run(self, fn: Callable[[Any, dict[str, Any]], T], timeout_s: float) -> T:
        client, kwargs = self._client(timeout_s)
        return fn(client, kwargs)

    def _pool(self) -> ThreadPoolExecutor:
        with self._grpc_lock:
            if self._http_pool is None:
                self._http_pool = ThreadPoolExecutor(
                    max_workers=HTTP_WORKERS, thread_name_prefix=f"geadmin-http-{self.endpoint.address}"
                )
            return self._http_pool

    def _client(self, timeout_s: float) -> tuple[Any, dict[str, Any]]:
        headers: dict[str, str] = {}
        if self.endpoint.transport is Transport.GRPC:
            if self.admin_key:
                headers[GRPC_ADMIN_KEY_HEADER] = self.admin_key
            return self._grpc_client(), {"headers": headers or None, "client_timeout": timeout_s}
        if self.admin_key:
            headers[HTTP_ADMIN_KEY_HEADER] = self.admin_key
        return self._http_client(timeout_s), {"headers": headers or None}

    def _http_client(self, timeout_s: float) -> httpclient.InferenceServerClient:
        clients: dict[float, httpclient.InferenceServerClient] = self._local.__dict__.setdefault("http", {})
        if timeout_s not in clients:
            clients[timeout_s] = httpclient.InferenceServerClient(
                self.endpoint.address,
                ssl=self.endpoint.ssl,
                connection_timeout=min(timeout_s, self.timeout_s),
                network_timeout=timeout_s,
            )
        return clients[timeout_s]

    def _grpc_client(self) -> grpcclient.InferenceServerClient:
        with self._grpc_lock:
            if self._grpc is None:
                self._grpc = grpcclient.InferenceServerClient(self.endpoint.address, ssl=self.endpoint.ssl)
            return self._grpc

    def close(self) -> None:
        """Close every connection. HTTP clients are closed on the worker threads that own
        them (gevent objects must not cross threads); else they die at interpreter exit
        and gevent prints a traceback."""
        with self._grpc_lock:
            pool, self._http_pool = self._http_pool, None
            grpc_client, self._grpc = self._grpc, None
        if pool is not None:
            workers = len(getattr(pool, "_threads", ())) or 1
            # One task per worker: the barrier holds each until all run, so each lands on its own thread.
            barrier = threading.Barrier(workers)
            for future in [pool.submit(self._close_thread_clients, barrier) for _ in range(workers)]:
                future.result(timeout=self.timeout_s + 5)
            pool.shutdown(wait=True)
        if grpc_client is not None:
            grpc_client.close()

    def _close_thread_clients(self, barrier: threading.Barrier) -> None:
        with contextlib.suppress(threading.BrokenBarrierError):
            barrier.wait(timeout=self.timeout_s)
        for client in self._local.__dict__.pop("http", {}).values():
            with contextlib.suppress(Exception):
                client.close()

    def __enter__(self) -> TritonClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _as_json(client: Any) -> dict[str, Any]:
    return {"as_json": True} if isinstance(client, grpcclient.InferenceServerClient) else {}


def _config_json(config: str | Mapping[str, Any] | model_config_pb2.ModelConfig) -> str:
    if isinstance(config, model_config_pb2.ModelConfig):
        return json_format.MessageToJson(config, preserving_proto_field_name=True)
    if isinstance(config, str):
        return config
    return json.dumps(dict(config))


def _plain_log_settings(raw: Mapping[str, Any]) -> dict[str, Any]:
    """gRPC wraps each value as {"settings": {k: {"boolParam": ...}}}; HTTP sends it flat."""
    settings = raw.get("settings", raw)
    plain: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping) and len(value) == 1:
            (value,) = value.values()
        plain[key] = value
    return plain
