"""The one module that talks to Triton (through tritonclient), over HTTP or gRPC.

Both transports return the same types: protobuf messages from Triton's own service and
model-config schemas, or the value types of `geadmin.domain`. Every call has a timeout (loads a
longer one: a load can hang, FACTS.md), and every failure leaves as a `TritonError`
subclass chosen by one translation table (`geadmin.triton.translate`); tensors of requests
and responses are `geadmin.triton.tensors`. The admin key goes only on the calls of Triton's
restricted categories (RESTRICTED below: repository, model config, logging, trace), never on
inference, health, metadata or statistics, so a model, a proxy or a mistyped address that
sees those requests never sees the key; which server a key belongs to: geadmin.triton.servers.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2, service_pb2

from geadmin.domain import Endpoint, Health, ModelEntry, ModelState, ServerInfo, Transport
from geadmin.errors import InvalidArgumentError
from geadmin.triton.pools import close_on_each_thread
from geadmin.triton.tensors import InferResponse, Tensor, _infer_inputs, _requested_outputs, _response
from geadmin.triton.translate import translate_error

T = TypeVar("T")
M = TypeVar("M", bound=Message)

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_LOAD_TIMEOUT_S = 120.0
HTTP_WORKERS = 4  # concurrent HTTP calls per endpoint (a long load must not block the rest)
QUEUE_GRACE_S = 5.0  # how long an HTTP call may wait for a free worker, beyond its own timeout
HTTP_ADMIN_KEY_HEADER = "admin-key"
GRPC_ADMIN_KEY_HEADER = "triton-grpc-protocol-admin-key"
# Triton's restricted API categories geadmin calls; the admin key is sent on these only.
RESTRICTED = ("model-repository", "model-config", "logging", "trace")


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
        tls_ca: str | None = None,
    ) -> None:
        self.endpoint = Endpoint.parse(url)
        self.admin_key = admin_key
        self.tls_ca = tls_ca  # grpcs:// only: the one CA the server's certificate must chain to
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

        index = self._message("list the model repository", fetch, service_pb2.RepositoryIndexResponse,
                              restricted=True)
        # Triton lists every directory, hidden ones too; those are never models (geadmin's own
        # staging directories of a model being created, editors' and rsync's temporaries).
        return sorted(
            (ModelEntry(m.name, m.version, ModelState.parse(m.state), m.reason) for m in index.models
             if not m.name.startswith(".")),
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
        self._call(f"load model {name!r}", self._load_fn(name, config, files), loading=True, restricted=True)

    def start_load(
        self,
        name: str,
        *,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None = None,
        files: Mapping[str, bytes] | None = None,
    ) -> PendingLoad:
        """`load` on a thread of its own, returning at once, so the caller can watch Triton's
        log while it works and give up on a load that hangs without being held by it: the
        thread is a daemon with its own HTTP connection, and nothing waits for it at exit."""
        fn = self._load_fn(name, config, files)
        action = f"load model {name!r}"
        if self.endpoint.transport is Transport.GRPC:
            return PendingLoad(lambda: self._call(action, fn, loading=True, restricted=True), name)
        return PendingLoad(lambda: self._one_off_call(action, fn), name)

    def _load_fn(
        self,
        name: str,
        config: str | Mapping[str, Any] | model_config_pb2.ModelConfig | None,
        files: Mapping[str, bytes] | None,
    ) -> Callable[[Any, dict[str, Any]], Any]:
        if files and config is None:
            raise InvalidArgumentError("file overrides need a config override too (Triton ignores them "
                                       "alone)")
        config_json = _config_json(config) if config is not None else None
        overrides = {f"file:{path}": data for path, data in (files or {}).items()} or None
        return lambda c, kw: c.load_model(name, config=config_json, files=overrides, **kw)

    def _one_off_call(self, action: str, fn: Callable[[Any, dict[str, Any]], T]) -> T:
        """An HTTP call on the calling thread with a client of its own, closed after."""
        try:
            client = httpclient.InferenceServerClient(
                self.endpoint.address, ssl=self.endpoint.ssl,
                connection_timeout=self.timeout_s, network_timeout=self.load_timeout_s)
            try:
                return fn(client, self._client_kwargs(restricted=True))
            finally:
                client.close()
        except Exception as exc:
            raise translate_error(exc, action, self.url, loading=True) from exc

    def reload(self, name: str) -> None:
        """Triton reloads a loaded model when asked to load it again."""
        self.load(name)

    def unload(self, name: str, *, dependents: bool = False) -> None:
        self._call(
            f"unload model {name!r}",
            lambda c, kw: c.unload_model(name, unload_dependents=dependents, **kw),
            restricted=True,
        )

    # -- models ---------------------------------------------------------------------
    def model_config(self, name: str, version: str = "") -> model_config_pb2.ModelConfig:
        def fetch(client: Any, kwargs: dict[str, Any]) -> Any:
            raw = client.get_model_config(name, version, **kwargs)
            return raw if "config" in raw else {"config": raw}

        response = self._message(
            f"read the config of {name!r}", fetch, service_pb2.ModelConfigResponse, restricted=True
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

    def infer(
        self,
        name: str,
        inputs: Sequence[Tensor],
        *,
        outputs: Sequence[str] = (),
        class_count: int = 0,
        version: str = "",
    ) -> InferResponse:
        """One inference request; the response's outputs come in Triton's order.

        `outputs` empty asks for every output. `class_count` > 0 asks Triton's
        classification extension for the top classes of each requested output (BYTES
        "score:index[:label]"). Tensors travel as binary data on both transports (BF16
        as float32 arrays, truncated by tritonclient).
        """
        def call(client: Any, kwargs: dict[str, Any]) -> InferResponse:
            module: Any = grpcclient if isinstance(client, grpcclient.InferenceServerClient) else httpclient
            result = client.infer(name, _infer_inputs(module, inputs), model_version=version,
                                  outputs=_requested_outputs(module, outputs, class_count), **kwargs)
            return _response(result)

        return self._call(f"infer with {name!r}", call)

    # -- logging --------------------------------------------------------------------
    def log_settings(self) -> dict[str, Any]:
        # Flattened inside the call, so an unexpected answer is translated like any failure.
        return self._call("read log settings",
                          lambda c, kw: _plain_log_settings(c.get_log_settings(**kw, **_as_json(c))),
                          restricted=True)

    def update_log_settings(self, **settings: Any) -> dict[str, Any]:
        """E.g. `update_log_settings(log_verbose_level=1)`; returns the new settings."""
        return self._call(
            "change log settings",
            lambda c, kw: _plain_log_settings(c.update_log_settings(settings, **kw, **_as_json(c))),
            restricted=True,
        )

    # -- plumbing -------------------------------------------------------------------
    def _message(self, action: str, fetch: Callable[[Any, dict[str, Any]], Any], message_type: type[M],
                 *, restricted: bool = False) -> M:
        """Run `fetch` and return its answer as `message_type`, whatever the transport."""

        def call(client: Any, kwargs: dict[str, Any]) -> M:
            if isinstance(client, grpcclient.InferenceServerClient):
                kwargs = {**kwargs, "as_json": True}
            # Parsed inside the call so a malformed answer is translated like any failure.
            return json_format.ParseDict(fetch(client, kwargs), message_type(), ignore_unknown_fields=True)

        return self._call(action, call, restricted=restricted)

    def _call(self, action: str, fn: Callable[[Any, dict[str, Any]], T], *, loading: bool = False,
              restricted: bool = False) -> T:
        """Run `fn(client, kwargs)`; `restricted`: a call of a RESTRICTED category (the key goes along)."""
        timeout_s = self.load_timeout_s if loading else self.timeout_s
        try:
            if self.endpoint.transport is Transport.GRPC:
                return self._run(fn, timeout_s, restricted)
            # The HTTP client's own timeouts bound the wait on the worker.
            # Bounded even when every worker is busy with a long load.
            return self._pool().submit(self._run, fn, timeout_s, restricted).result(
                timeout=timeout_s + QUEUE_GRACE_S)
        except Exception as exc:
            raise translate_error(exc, action, self.url, loading=loading) from exc

    def _run(self, fn: Callable[[Any, dict[str, Any]], T], timeout_s: float, restricted: bool) -> T:
        client, kwargs = self._client(timeout_s, restricted)
        return fn(client, kwargs)

    def _pool(self) -> ThreadPoolExecutor:
        with self._grpc_lock:
            if self._http_pool is None:
                self._http_pool = ThreadPoolExecutor(
                    max_workers=HTTP_WORKERS, thread_name_prefix=f"geadmin-http-{self.endpoint.address}"
                )
            return self._http_pool

    def _client(self, timeout_s: float, restricted: bool) -> tuple[Any, dict[str, Any]]:
        if self.endpoint.transport is Transport.GRPC:
            return self._grpc_client(), {**self._client_kwargs(restricted), "client_timeout": timeout_s}
        return self._http_client(timeout_s), self._client_kwargs(restricted)

    def _client_kwargs(self, restricted: bool) -> dict[str, Any]:
        if not (restricted and self.admin_key):
            return {"headers": None}
        header = GRPC_ADMIN_KEY_HEADER if self.endpoint.transport is Transport.GRPC else HTTP_ADMIN_KEY_HEADER
        return {"headers": {header: self.admin_key}}

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
                self._grpc = grpcclient.InferenceServerClient(self.endpoint.address, ssl=self.endpoint.ssl,
                                                              root_certificates=self.tls_ca)
            return self._grpc

    def close(self) -> None:
        """Close every connection. HTTP clients are closed on the worker threads that own
        them (gevent objects must not cross threads); else they die at interpreter exit
        and gevent prints a traceback."""
        with self._grpc_lock:
            pool, self._http_pool = self._http_pool, None
            grpc_client, self._grpc = self._grpc, None
        if pool is not None:
            close_on_each_thread(pool, self._close_thread_clients, self.timeout_s + 5)
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


class PendingLoad:
    """A load running on its own daemon thread (`TritonClient.start_load`)."""

    def __init__(self, run: Callable[[], object], name: str) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(run,), daemon=True,
                                        name=f"geadmin-load-{name}")
        self._thread.start()

    def _run(self, run: Callable[[], object]) -> None:
        try:
            run()
        except BaseException as exc:  # handed to the caller by result()
            self._error = exc
        finally:
            self._done.set()

    def wait(self, timeout_s: float | None) -> bool:
        """True when the load answered within `timeout_s`."""
        return self._done.wait(timeout_s)

    def result(self) -> None:
        """Raise what the load raised (a TritonError), if anything."""
        if self._error is not None:
            raise self._error


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
