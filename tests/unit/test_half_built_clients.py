"""A tritonclient client whose constructor raised (a stop signal's handler landing in it during
`geadmin up`'s start) is collected without a traceback on stderr: geadmin's clients close only
once built, and not while the interpreter exits (geadmin/triton/connection.py). The stock
clients are the control."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import gevent.pool
import grpc
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from geadmin.triton.connection import GrpcClient, HttpClient


class Interrupted(Exception):
    """What a stop signal's handler raises in the middle of a constructor."""


def interrupt(*args: Any, **kwargs: Any) -> None:
    raise Interrupted


def unraisable_after_a_failed_build(make: Callable[[str], object],
                                    monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda raised: seen.append(repr(raised.exc_value)))
    with pytest.raises(Interrupted):
        make("127.0.0.1:1")
    gc.collect()
    return seen


@pytest.fixture
def http_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gevent.pool.Pool, "__init__", interrupt)  # the step before the last


@pytest.fixture
def grpc_interrupted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(grpc, "insecure_channel", interrupt)


def test_a_half_built_http_client_is_collected_quietly(http_interrupted: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    stock = unraisable_after_a_failed_build(httpclient.InferenceServerClient, monkeypatch)
    assert stock and "_closed" in stock[0], stock  # the control: tritonclient's own says so
    assert unraisable_after_a_failed_build(HttpClient, monkeypatch) == []


def test_a_half_built_grpc_client_is_collected_quietly(grpc_interrupted: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    stock = unraisable_after_a_failed_build(grpcclient.InferenceServerClient, monkeypatch)
    assert stock and "_stream" in stock[0], stock
    assert unraisable_after_a_failed_build(GrpcClient, monkeypatch) == []


def test_a_built_client_still_closes_when_collected(monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[bool] = []
    monkeypatch.setattr(httpclient.InferenceServerClient, "close", lambda self: closed.append(True))
    HttpClient("127.0.0.1:1")
    gc.collect()
    assert closed == [True]


def test_a_client_collected_while_the_interpreter_exits_is_not_closed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At exit grpc's module globals may already be None: closing then raised in __del__."""
    closed: list[bool] = []
    monkeypatch.setattr(grpcclient.InferenceServerClient, "close", lambda self: closed.append(True))
    client = GrpcClient("127.0.0.1:1")
    monkeypatch.setattr(sys, "is_finalizing", lambda: True)
    del client
    gc.collect()
    assert closed == []


def test_an_http_client_collected_as_its_thread_ends_is_collected_quietly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """As a worker thread ends, gevent's per-thread state can be gone before the thread's
    clients are collected: joining the client's pool raised (seen in make test's warnings)."""

    def torn_down(self: object, timeout: float | None = None) -> None:
        raise AttributeError("'_Threadlocal' object has no attribute 'loop'")

    seen: list[str] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda raised: seen.append(repr(raised.exc_value)))
    monkeypatch.setattr(gevent.pool.Pool, "join", torn_down)
    stock = httpclient.InferenceServerClient("127.0.0.1:1")
    del stock
    gc.collect()
    assert seen and "'loop'" in seen[0], seen  # the control: tritonclient's own prints it
    seen.clear()
    ours = HttpClient("127.0.0.1:1")
    del ours
    gc.collect()
    assert seen == []
