"""How a call reaches one Triton endpoint: the transport's client, its timeout, its thread, and
the admin key on the calls of Triton's restricted categories only.

`TritonClient` (geadmin.triton.client) says what is asked of Triton; a `Connection` carries each
question there and brings back the answer or a `TritonError` chosen by the one translation table
(`geadmin.triton.translate`). The admin key goes only on the calls of RESTRICTED categories
(repository, model config, logging, trace), never on inference, health, metadata or statistics,
so a model, a proxy or a mistyped address that sees those requests never sees the key.

Every answer is read with a bound (`ANSWER_LIMIT_BYTES`, `INFER_ANSWER_LIMIT_BYTES`): a fleet
member that discovery found, or anything else at a configured address, answers whatever it
likes, and tritonclient reads all of it — a 96 MB model index took the CLI to 1 GB of memory
(measured) and a larger one would take the dashboard with it. Over HTTP the body is read here,
block by block, before tritonclient parses it; over gRPC the channel refuses a larger message.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from google.protobuf import json_format
from google.protobuf.message import Message

from geadmin.domain import Endpoint, Transport
from geadmin.errors import AnswerTooLargeError, ConnectionsBusyError, TritonError, TritonTimeoutError
from geadmin.triton.pools import close_on_each_thread
from geadmin.triton.silence import Silence
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
# The most geadmin reads of one answer. Control answers (index, config, statistics, metadata) of
# a real server are kilobytes to a few MB: 10,000 models make a 0.6 MB index. An inference
# answer carries the model's tensors (the Playground's images). gRPC has one channel for both.
ANSWER_LIMIT_BYTES = 64 << 20
INFER_ANSWER_LIMIT_BYTES = 256 << 20
_READ_BLOCK = 1 << 16


class _QuietWhenHalfBuilt:
    """tritonclient's clients close in `__del__` what `__init__` sets last, so one whose
    `__init__` raised (a stop signal's handler landing in it during `geadmin up`'s start)
    printed an AttributeError traceback when collected; and one still alive while the
    interpreter exits closed its channel through grpc's already torn-down module (an
    AttributeError on None). These close only once built, and not at exit (the process's
    end closes the sockets)."""

    _built = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._built = True

    def __del__(self) -> None:
        if self._built and not sys.is_finalizing():
            super().__del__()  # type: ignore[misc]


class HttpClient(_QuietWhenHalfBuilt, httpclient.InferenceServerClient):
    """tritonclient's HTTP client (gevent: one per thread, see Connection)."""

    def __del__(self) -> None:
        # Collected while its worker thread ends (a Connection dropped unclosed): gevent's
        # per-thread state may be cleared first (gevent issue 1961), and joining the pool
        # raised "'_Threadlocal' object has no attribute 'loop'". The hub and the client's
        # sockets go with the thread.
        with contextlib.suppress(AttributeError):
            super().__del__()


    def _get(self, request_uri: str, headers: Any, query_params: Any) -> BufferedAnswer:
        return read_bounded(super()._get(request_uri, headers, query_params), request_uri)

    def _post(self, request_uri: str, request_body: Any, headers: Any, query_params: Any) -> BufferedAnswer:
        answer = super()._post(request_uri, request_body, headers, query_params)
        return read_bounded(answer, request_uri)


class BufferedAnswer:
    """An HTTP answer read whole (at most its limit), as tritonclient reads one: `status_code`,
    `get(header)` and `read()`."""

    def __init__(self, response: Any, body: bytes) -> None:
        self._response, self._body = response, body

    @property
    def status_code(self) -> int:
        return int(self._response.status_code)

    def get(self, key: str, default: Any = None) -> Any:
        return self._response.get(key, default)

    def read(self, length: int | None = None) -> bytes:
        cut = len(self._body) if length is None else length
        part, self._body = self._body[:cut], self._body[cut:]
        return part


def read_bounded(response: Any, request_uri: str) -> BufferedAnswer:
    """The body of `response`, refused (its socket closed, never kept) once over the limit."""
    limit = INFER_ANSWER_LIMIT_BYTES if request_uri.rstrip("/").endswith("/infer") else ANSWER_LIMIT_BYTES
    try:
        declared = response.content_length
    except ValueError:  # a Content-Length that is not a number: read and count
        declared = None
    if declared is not None and declared > limit:
        _drop(response)
        raise AnswerTooLargeError(f"{declared:,} bytes announced; geadmin reads at most {limit >> 20} MiB")
    parts: list[bytes] = []
    received = 0
    while part := response.read(_READ_BLOCK):
        received += len(part)
        if received > limit:
            _drop(response)
            raise AnswerTooLargeError(f"still sending past {limit >> 20} MiB, the most geadmin reads")
        parts.append(bytes(part))
    return BufferedAnswer(response, b"".join(parts))


def _drop(response: Any) -> None:
    """Close the answer's socket: returned to the pool half read, it would serve the rest of
    this body as the next answer."""
    sock = getattr(response, "_sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()
    response._sock = None


class GrpcClient(_QuietWhenHalfBuilt, grpcclient.InferenceServerClient):
    """tritonclient's gRPC client (thread-safe: one per Connection), refusing a message over
    INFER_ANSWER_LIMIT_BYTES; tritonclient's own keepalive settings otherwise."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        keepalive = grpcclient.KeepAliveOptions()
        kwargs["channel_args"] = [
            ("grpc.max_send_message_length", 2**31 - 1),  # tritonclient's: what we send is ours
            ("grpc.max_receive_message_length", INFER_ANSWER_LIMIT_BYTES),
            ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
            ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
            ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
            ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ]
        super().__init__(*args, **kwargs)


class Connection:
    """The way to one Triton endpoint. Safe to share between threads.

    The gRPC client is thread-safe and shared. The HTTP client is gevent-based and must stay
    on the thread that made it (FACTS.md), and each thread that touches gevent gets its own
    event loop that is never freed — Streamlit runs every rerun on a new thread — so HTTP
    calls run on a small pool of long-lived worker threads, each with its own clients.
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
        self._http_generation = 0  # bumped after an HTTP timeout: every worker reopens its connections
        self._grpc_lock = threading.Lock()
        self._grpc: GrpcClient | None = None
        self.silence = Silence(self.endpoint.url)

    @property
    def url(self) -> str:
        return self.endpoint.url

    def message(self, action: str, fetch: Callable[[Any, dict[str, Any]], Any], message_type: type[M],
                 *, restricted: bool = False, read: bool = False, server_check: bool = False) -> M:
        """Run `fetch` and return its answer as `message_type`, whatever the transport."""

        def call(client: Any, kwargs: dict[str, Any]) -> M:
            if isinstance(client, grpcclient.InferenceServerClient):
                kwargs = {**kwargs, "as_json": True}
            # Parsed inside the call so a malformed answer is translated like any failure.
            return json_format.ParseDict(fetch(client, kwargs), message_type(), ignore_unknown_fields=True)

        return self.call(action, call, restricted=restricted, read=read, server_check=server_check)

    def call(self, action: str, fn: Callable[[Any, dict[str, Any]], T], *, loading: bool = False,
              restricted: bool = False, read: bool = False, server_check: bool = False) -> T:
        """Run `fn(client, kwargs)`; `restricted`: a call of a RESTRICTED category (the key goes along);
        `read`: it changes nothing, so over HTTP a timeout on a kept-alive connection is asked
        again once on a new one (see `_run`), and while the server is held silent it is not sent
        (`silence`); `server_check`: a question Triton's frontend answers without any model
        (liveness, readiness, metadata), whose timeout on the wire opens that hold."""
        if read:
            self.silence.check(action)
        timeout_s = self.load_timeout_s if loading else self.timeout_s
        try:
            answer = self._sent(action, fn, timeout_s, restricted, read)
        except Exception as exc:
            error = self._translated(exc, action, loading)
            if server_check and type(error) is TritonTimeoutError:
                error = self.silence.unanswered(action, timeout_s)
            raise error from exc
        self.silence.answered()
        return answer

    def _sent(self, action: str, fn: Callable[[Any, dict[str, Any]], T], timeout_s: float,
              restricted: bool, read: bool) -> T:
        if self.endpoint.transport is Transport.GRPC:
            return self._run(fn, timeout_s, restricted)
        # The HTTP client's own timeouts bound the wait on the worker; this bounds the wait for
        # a worker when every one is busy with a long load.
        waited_s = (2 if read else 1) * timeout_s + QUEUE_GRACE_S
        future = self._pool().submit(self._run, fn, timeout_s, restricted, read, action)
        try:
            return future.result(timeout=waited_s)
        except TimeoutError as exc:
            if future.done():  # the worker's own (socket.timeout is TimeoutError), or just in
                return future.result()
            future.cancel()  # never sent if still queued
            raise ConnectionsBusyError(f"{action}: not sent — geadmin's {HTTP_WORKERS} connections to "
                                       f"{self.url} were all busy (long loads) for {waited_s:g}s: try "
                                       "again when they end", url=self.url) from exc

    def _translated(self, exc: BaseException, action: str, loading: bool) -> TritonError:
        """The one translation, and after an HTTP timeout the kept connections dropped: a load
        that hangs may hold the Triton thread they sit on (see `_run`)."""
        error = translate_error(exc, action, self.url, loading=loading)
        if isinstance(error, (TritonTimeoutError, AnswerTooLargeError)) \
                and self.endpoint.transport is Transport.HTTP:
            self._drop_kept_connections()
        return error

    def _drop_kept_connections(self) -> None:
        """Every worker opens its HTTP connections afresh at its next call."""
        with self._grpc_lock:
            self._http_generation += 1

    def _run(self, fn: Callable[[Any, dict[str, Any]], T], timeout_s: float, restricted: bool,
             read: bool = False, action: str = "") -> T:
        client, kwargs, kept = self._client(timeout_s, restricted)
        try:
            return fn(client, kwargs)
        except Exception as exc:
            # Triton's HTTP server serves each connection on one of its threads, and a load
            # holds its thread until the model loads: every connection kept alive on that
            # thread waits with it, while a new connection goes to a free thread (docs/development.md).
            # So a read that times out on a kept connection is asked once more on a new one,
            # and every worker drops its kept connections; a timeout on a new one is final.
            if not (read and kept and isinstance(self._translated(exc, action, False), TritonTimeoutError)):
                raise
        client, kwargs, _ = self._client(timeout_s, restricted)
        return fn(client, kwargs)

    def _pool(self) -> ThreadPoolExecutor:
        with self._grpc_lock:
            if self._http_pool is None:
                self._http_pool = ThreadPoolExecutor(
                    max_workers=HTTP_WORKERS, thread_name_prefix=f"geadmin-http-{self.endpoint.address}"
                )
            return self._http_pool

    def _client(self, timeout_s: float, restricted: bool) -> tuple[Any, dict[str, Any], bool]:
        """The transport's client, the call's keyword arguments, and whether the client's
        HTTP connection was kept from an earlier call (gRPC: False, its channel reconnects itself)."""
        if self.endpoint.transport is Transport.GRPC:
            kwargs = {**self._client_kwargs(restricted), "client_timeout": timeout_s}
            return self._grpc_client(), kwargs, False
        client, kept = self._http_client(timeout_s)
        return client, self._client_kwargs(restricted), kept

    def _client_kwargs(self, restricted: bool) -> dict[str, Any]:
        if not (restricted and self.admin_key):
            return {"headers": None}
        header = GRPC_ADMIN_KEY_HEADER if self.endpoint.transport is Transport.GRPC else HTTP_ADMIN_KEY_HEADER
        return {"headers": {header: self.admin_key}}

    def _http_client(self, timeout_s: float) -> tuple[HttpClient, bool]:
        """This worker thread's client for `timeout_s`, and whether it was used before; opened
        afresh when a timeout since its last call dropped every kept connection."""
        local = self._local.__dict__
        if local.get("generation") != self._http_generation:
            self._close_thread_clients(None)
            local["generation"] = self._http_generation
        clients: dict[float, HttpClient] = local.setdefault("http", {})
        kept = timeout_s in clients
        if not kept:
            clients[timeout_s] = HttpClient(
                self.endpoint.address,
                ssl=self.endpoint.ssl,
                connection_timeout=min(timeout_s, self.timeout_s),
                network_timeout=timeout_s,
            )
        return clients[timeout_s], kept

    def _grpc_client(self) -> GrpcClient:
        with self._grpc_lock:
            if self._grpc is None:
                self._grpc = GrpcClient(self.endpoint.address, ssl=self.endpoint.ssl,
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

    def _close_thread_clients(self, barrier: threading.Barrier | None) -> None:
        if barrier is not None:
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait(timeout=self.timeout_s)
        for client in self._local.__dict__.pop("http", {}).values():
            with contextlib.suppress(Exception):
                client.close()

    def one_off_call(self, action: str, fn: Callable[[Any, dict[str, Any]], T]) -> T:
        """An HTTP call on the calling thread with a client of its own, closed after (a load:
        never held, see `silence`)."""
        try:
            client = HttpClient(
                self.endpoint.address, ssl=self.endpoint.ssl,
                connection_timeout=self.timeout_s, network_timeout=self.load_timeout_s)
            try:
                answer = fn(client, self._client_kwargs(restricted=True))
            finally:
                client.close()
        except Exception as exc:
            raise self._translated(exc, action, loading=True) from exc
        self.silence.answered()
        return answer
