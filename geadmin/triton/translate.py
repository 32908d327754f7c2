"""One translation table from tritonclient's exceptions to geadmin's errors.

Every HTTP status, gRPC status code and transport exception maps to a `TritonError`
subclass (a test walks them all); messages say what to do, e.g. that a port speaks the
other protocol.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import socket

import grpc
from geventhttpclient import useragent
from geventhttpclient.response import HTTPConnectionClosed
from google.protobuf import json_format
from tritonclient.utils import InferenceServerException
from tritonclient.utils.shared_memory import SharedMemoryException

from geadmin.domain import DEFAULT_PORTS, Endpoint, Transport
from geadmin.errors import (
    AnswerTooLargeError,
    ForbiddenError,
    GeAdminError,
    LoadFailedError,
    ModelNotFoundError,
    TritonError,
    TritonRequestError,
    TritonTimeoutError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.failure_table import CONNECTION_FAILURES

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
    *((kind, _U) for kind in CONNECTION_FAILURES),
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
# tritonclient's words for a non-200 answer whose body is not Triton's JSON error: another
# service (or a proxy's error page) answers at the address.
_NOT_TRITON_MARKER = "while decoding the response"
# grpcio's words for a message over the channel's max_receive_message_length.
_GRPC_TOO_LARGE_MARKER = "received message larger than max"
# grpcio's words when the port answers HTTP/1 ("...got frame type 79": the 'H' of "HTTP/1.x").
_HTTP1_MARKERS = ("socket closed", "failed parsing http/2")


def _status_name(exc: InferenceServerException) -> str:
    status = exc.status() or ""
    return str(status).removeprefix("StatusCode.")


def translate_error(exc: BaseException, action: str, url: str, *, loading: bool = False) -> TritonError:
    """Turn any exception raised by tritonclient into our error, with a useful message."""
    if isinstance(exc, AnswerTooLargeError) and not exc.url:  # raised by the bounded read
        return _too_large(action, url, str(exc))
    if isinstance(exc, TritonError):
        return exc
    if isinstance(exc, InferenceServerException):
        return _translate_server_exception(exc, action, url, loading)
    gevent_timeout = _gevent_timeout_type()
    if gevent_timeout is not None and isinstance(exc, gevent_timeout):
        return TritonTimeoutError(f"{action}: {_describe(TritonTimeoutError, url)}", url=url)
    if isinstance(exc, http.client.HTTPException) and not isinstance(exc, HTTPConnectionClosed):
        return WrongProtocolError(f"{action}: {_wrong_protocol(url, Transport.HTTP)} ({exc})", url=url)
    for exc_type, ours in EXCEPTION_ERRORS:
        if isinstance(exc, exc_type):
            said = f" ({exc})" if str(exc) else ""  # a bare TimeoutError says nothing
            return ours(f"{action}: {_describe(ours, url)}{said}", url=url)
    return TritonRequestError(f"{action}: unexpected {type(exc).__name__}: {exc}", url=url)


def _translate_server_exception(
    exc: InferenceServerException, action: str, url: str, loading: bool
) -> TritonError:
    status = _status_name(exc)
    message = exc.message() or str(exc)
    lowered = message.lower()
    if status == "RESOURCE_EXHAUSTED" and _GRPC_TOO_LARGE_MARKER in lowered:
        return _too_large(action, url, message)
    ours = STATUS_ERRORS.get(status, TritonRequestError)
    if _NOT_TRITON_MARKER in lowered and ours in (TritonRequestError, ModelNotFoundError):
        return WrongProtocolError(
            f"{action}: {url} answered HTTP {status}, but not as Triton does (its answer is not Triton's "
            f"JSON: {message.split(': ', 1)[-1]}) — another service, or a proxy's error page, answers "
            f"there: give Triton's HTTP port (default {DEFAULT_PORTS['http']})", url=url,
            status=int(status) if status.isdigit() else None)
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
    if ours is TritonUnreachableError and any(m in lowered for m in _HTTP1_MARKERS) and _speaks_http(url):
        return WrongProtocolError(f"{action}: {_wrong_protocol(url, Transport.GRPC)} ({message})", url=url)
    if ours is ForbiddenError:
        message = (f"{message} — this Triton restricts the API; set the admin key with "
                   "--admin-key or GEADMIN_ADMIN_KEY")
    elif ours is TritonUnreachableError:
        message = f"{_describe(ours, url)} ({message})"
    elif ours is ModelNotFoundError:
        message = (f"{message} — Triton at {url} does not serve it: check the name and its state "
                   "(`geadmin models list`), and load it (`geadmin models load NAME`)")
    return ours(f"{action}: {message}", url=url, status=code)


def _too_large(action: str, url: str, said: str) -> AnswerTooLargeError:
    return AnswerTooLargeError(
        f"{action}: {url} sent an answer too large to read ({said}) — not a Triton, or not one to "
        "trust: check the address (and, in a fleet, who answers there)", url=url)


def _describe(ours: type[TritonError], url: str) -> str:
    if ours is TritonUnreachableError:
        return f"Triton at {url} is unreachable — is it running, and is the URL right?"
    if ours is TritonTimeoutError:
        return (f"Triton at {url} did not answer in time — it, or the model it works for, is slow or hung: "
                "`geadmin status` says which")
    return f"request to Triton at {url} failed"


def _wrong_protocol(url: str, spoken: Transport) -> str:
    """`spoken` is what we sent; the port answered in the other protocol."""
    if spoken is Transport.HTTP:
        return (f"{url} does not answer HTTP — this port speaks gRPC (or is not Triton's): use "
                f"grpc://HOST:PORT for it, or Triton's HTTP port (default {DEFAULT_PORTS['http']})")
    return (f"{url} does not answer gRPC — this port speaks HTTP: use http://HOST:PORT for it, or "
            f"Triton's gRPC port (default {DEFAULT_PORTS['grpc']})")


def _speaks_http(url: str, timeout_s: float = 1.0) -> bool:
    """Check, don't assume: does the port a gRPC call failed on answer an HTTP request?"""
    try:
        endpoint = Endpoint.parse(url)
        with socket.create_connection((endpoint.host, endpoint.port), timeout=timeout_s) as sock:
            sock.settimeout(timeout_s)
            sock.sendall(b"GET /v2/health/live HTTP/1.0\r\nHost: triton\r\n\r\n")
            return sock.recv(5) == b"HTTP/"
    except (OSError, ValueError, GeAdminError):
        return False


def _gevent_timeout_type() -> type[BaseException] | None:
    try:
        from gevent import Timeout
    except ImportError:  # pragma: no cover - gevent comes with tritonclient[http]
        return None
    return Timeout


