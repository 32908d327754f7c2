"""The translation table: every failure tritonclient can surface maps to one of our errors."""

from __future__ import annotations

import http
import importlib
import inspect
import pkgutil
import socket

import geventhttpclient
import grpc
import pytest
from gevent import Timeout as GeventTimeout
from tritonclient.utils import InferenceServerException

from geadmin.errors import (
    ForbiddenError,
    LoadFailedError,
    ModelNotFoundError,
    TritonError,
    TritonRequestError,
    TritonTimeoutError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.triton.translate import EXCEPTION_ERRORS, STATUS_ERRORS, translate_error

URL = "http://127.0.0.1:8000"
NOT_JSON = "an exception occurred in the client while decoding the response"  # tritonclient's words


def exception_classes(*package_names: str) -> set[type[BaseException]]:
    """Every exception class defined anywhere in these packages (recursively)."""
    found: set[type[BaseException]] = set()
    for package_name in package_names:
        package = importlib.import_module(package_name)
        names = [package_name]
        if hasattr(package, "__path__"):
            names += [m.name for m in pkgutil.walk_packages(package.__path__, package_name + ".",
                                                           onerror=lambda _name: None)]
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception:  # optional extras (e.g. cuda shared memory) may not import
                continue
            found |= {obj for obj in vars(module).values()
                      if inspect.isclass(obj) and issubclass(obj, BaseException)
                      and obj.__module__.split(".")[0] in ("tritonclient", "geventhttpclient", "_parser")}
    return found


def test_every_grpc_status_code_has_an_explicit_mapping() -> None:
    missing = [code.name for code in grpc.StatusCode if code.name not in STATUS_ERRORS]
    assert not missing, f"add these gRPC codes to STATUS_ERRORS: {missing}"


def test_every_http_error_status_has_an_explicit_mapping() -> None:
    missing = [s.value for s in http.HTTPStatus if s.value >= 400 and str(s.value) not in STATUS_ERRORS]
    assert not missing, f"add these HTTP codes to STATUS_ERRORS: {missing}"


def test_every_exception_class_of_tritonclient_and_geventhttpclient_is_mapped() -> None:
    classes = exception_classes("tritonclient", "geventhttpclient")
    assert InferenceServerException in classes and len(classes) >= 5  # the walk found them
    unmapped = [cls for cls in classes
                if cls is not InferenceServerException
                and not any(issubclass(cls, known) for known, _ in EXCEPTION_ERRORS)]
    assert not unmapped, f"add these to EXCEPTION_ERRORS: {unmapped}"


@pytest.mark.parametrize(
    "exc_type",
    [grpc.RpcError, grpc.FutureTimeoutError, grpc.FutureCancelledError, socket.timeout, socket.gaierror,
     ConnectionRefusedError, ConnectionResetError, BrokenPipeError, OSError, http.client.HTTPException],
)
def test_transport_exceptions_have_an_explicit_mapping(exc_type: type[BaseException]) -> None:
    assert any(issubclass(exc_type, known) for known, _ in EXCEPTION_ERRORS)


def test_the_table_never_falls_back_for_mapped_classes() -> None:
    """First match wins: a subclass listed after its base would be dead code."""
    seen: list[type[BaseException]] = []
    for exc_type, _ in EXCEPTION_ERRORS:
        shadowing = [base for base in seen if issubclass(exc_type, base)]
        assert not shadowing, f"{exc_type} is shadowed by {shadowing}"
        seen.append(exc_type)


def test_connection_refused_is_unreachable_never_timeout() -> None:
    err = translate_error(ConnectionRefusedError(111, "Connection refused"), "check liveness", URL)
    assert type(err) is TritonUnreachableError
    grpc_refused = InferenceServerException(
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: "
        "Failed to connect to remote host: Connection refused", status="StatusCode.UNAVAILABLE")
    assert type(translate_error(grpc_refused, "x", URL)) is TritonUnreachableError


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (TimeoutError("timed out"), TritonTimeoutError),
        (GeventTimeout(1), TritonTimeoutError),
        (InferenceServerException("Deadline Exceeded", status="StatusCode.DEADLINE_EXCEEDED"),
         TritonTimeoutError),
        (InferenceServerException("This API is restricted, expecting header 'admin-key'", status="403"),
         ForbiddenError),
        (InferenceServerException("This protocol is restricted, expecting header "
                                  "'triton-grpc-protocol-admin-key'", status="StatusCode.UNAVAILABLE"),
         ForbiddenError),
        (InferenceServerException("Request for unknown model: 'x' is not found", status="400"),
         ModelNotFoundError),
        (InferenceServerException("requested model 'x' is not available", status="400"),
         ModelNotFoundError),
        (InferenceServerException("bad request", status="400"), TritonRequestError),
        (InferenceServerException("bad gateway", status="502"), TritonRequestError),
        # Not Triton's JSON: another service answers (its 404 page); a proxy's 502 page is not
        # that: the proxy is there, Triton behind it is not.
        (InferenceServerException(f"{NOT_JSON}: Parse error at offset 0: Invalid value.", status="404"),
         WrongProtocolError),
        (InferenceServerException(f"{NOT_JSON}: Parse error at offset 0: Invalid value.", status="400"),
         WrongProtocolError),
        (InferenceServerException(f"{NOT_JSON}: Parse error at offset 0: Invalid value.", status="502"),
         TritonRequestError),
        (ValueError("surprise"), TritonRequestError),
    ],
)
def test_translation_examples(exc: BaseException, expected: type[TritonError]) -> None:
    err = translate_error(exc, "do it", URL)
    assert type(err) is expected
    assert str(err).startswith("do it: ")


def test_load_rejections_become_load_failed() -> None:
    exc = InferenceServerException("failed to load 'm', failed to poll from model repository", status="500")
    assert type(translate_error(exc, "load", URL, loading=True)) is LoadFailedError
    refused = ConnectionRefusedError(111, "Connection refused")
    assert type(translate_error(refused, "load", URL, loading=True)) is TritonUnreachableError


def test_forbidden_message_names_the_fix() -> None:
    exc = InferenceServerException("This API is restricted", status="403")
    assert "--admin-key" in str(translate_error(exc, "list", URL))


def test_geventhttpclient_connection_closed_is_unreachable() -> None:
    from geventhttpclient.response import HTTPConnectionClosed

    assert type(translate_error(HTTPConnectionClosed("closed"), "x", URL)) is TritonUnreachableError
    assert geventhttpclient  # the package the walk above inspects
