"""How the facade fails against real servers: restricted API, nothing listening, a server
that never answers, and a load that hangs."""

from __future__ import annotations

import glob
import http.server
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from geadmin.domain import ModelState
from geadmin.errors import (
    AnswerTooLargeError,
    ConnectionsBusyError,
    ForbiddenError,
    ModelNotFoundError,
    TritonNotAskedError,
    TritonTimeoutError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import SHM_DIR, TritonProcess
from geadmin.triton import connection
from geadmin.triton.client import TritonClient
from geadmin.triton.silence import Silence
from geadmin.triton.tensors import Tensor
from tests.support.auth import admin_auth
from tests.support.http_doubles import JsonServiceDouble
from tests.support.processes import quick_stopping_triton
from tests.support.samples import add_hung_model, copy_samples
from tests.support.transports import TRANSPORTS, url_for

SECRET = "s3cret"
RESTRICTED = [
    f"--http-restricted-api=model-repository,model-config:admin-key={SECRET}",
    f"--grpc-restricted-protocol=model-repository,model-config:admin-key={SECRET}",
]


@pytest.fixture(scope="module")
def restricted_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("restricted")
    server = quick_stopping_triton(copy_samples(root / "repo"), models=["text_normalize"],
                           extra_args=RESTRICTED, log_path=root / "tritonserver.log")
    server.start()
    yield server
    server.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_restricted_api_without_key_is_forbidden_with_a_hint(
    restricted_server: TritonProcess, transport: str
) -> None:
    client = TritonClient(url_for(restricted_server, transport))
    assert client.is_live()  # health is not restricted
    with pytest.raises(ForbiddenError, match="admin key"):
        client.repository_index()
    with pytest.raises(ForbiddenError):
        client.model_config("text_normalize")
    with pytest.raises(ForbiddenError):
        client.unload("text_normalize")
    with pytest.raises(ForbiddenError):
        client.load("text_normalize")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_restricted_api_with_wrong_key_is_forbidden(restricted_server: TritonProcess, transport: str) -> None:
    with pytest.raises(ForbiddenError):
        TritonClient(url_for(restricted_server, transport), admin_key="wrong").repository_index()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_restricted_api_with_key_works(restricted_server: TritonProcess, transport: str) -> None:
    client = TritonClient(url_for(restricted_server, transport), admin_key=SECRET, load_timeout_s=60)
    assert {e.name: e.state for e in client.repository_index()}["text_normalize"] is ModelState.READY
    assert client.model_config("text_normalize").name == "text_normalize"
    client.reload("text_normalize")
    assert client.model_ready("text_normalize")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_connection_refused_is_unreachable_not_timeout(transport: str) -> None:
    port = free_port()  # nothing listens there
    scheme = "http" if transport == "http" else "grpc"
    client = TritonClient(f"{scheme}://127.0.0.1:{port}", timeout_s=2.0)
    started = time.monotonic()
    for call in (client.is_live, client.repository_index, lambda: client.load("x")):
        with pytest.raises(TritonUnreachableError, match="unreachable") as caught:
            call()
        assert not isinstance(caught.value, TritonTimeoutError)
    assert time.monotonic() - started < 2.0  # refused is immediate, not waited out


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unknown_host_is_unreachable(transport: str) -> None:
    scheme = "http" if transport == "http" else "grpc"
    with pytest.raises(TritonUnreachableError):
        TritonClient(f"{scheme}://no-such-host.invalid:8000", timeout_s=2.0).is_live()


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A socket that accepts connections and never answers: a hung server."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(listener.getsockname()[1])
    stop.set()
    thread.join(timeout=2)
    for conn in accepted:
        conn.close()
    listener.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_that_never_answers_times_out(silent_listener: int, transport: str) -> None:
    scheme = "http" if transport == "http" else "grpc"
    client = TritonClient(f"{scheme}://127.0.0.1:{silent_listener}", timeout_s=1.0)
    started = time.monotonic()
    with pytest.raises(TritonTimeoutError, match=r"accepts connections but answered nothing in 1s — it is "
                       r"hung or overloaded, not down: read the end of its log, and restart it"):
        client.is_live()
    assert time.monotonic() - started < 5.0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_server_that_never_answers_is_asked_once_then_held(silent_listener: int, transport: str) -> None:
    """A page asks a dozen questions: after the first goes unanswered the other reads fail at
    once, naming the first, until the hold ends; then the server is asked again. A change is
    always sent (a hold another page opened must not cut an apply in half), and a held read is
    'not asked' (nothing sent), never a timeout (sent, maybe still running)."""
    scheme = "http" if transport == "http" else "grpc"
    client = TritonClient(f"{scheme}://127.0.0.1:{silent_listener}", timeout_s=1.0, load_timeout_s=1.0)
    client.silence = Silence(client.url, hold_s=3.0)
    with pytest.raises(TritonTimeoutError):
        client.is_live()
    started = time.monotonic()
    for ask in (client.repository_index, lambda: client.model_config("m"), client.is_ready):
        with pytest.raises(TritonNotAskedError, match=r"not asked — Triton at .* answered nothing in 1s "
                           r"when asked to check liveness \d+s ago: it is hung or overloaded.*asks it "
                           r"again in \d+s"):
            ask()
    assert time.monotonic() - started < 0.5
    with pytest.raises(TritonTimeoutError) as sent:  # a load is sent, and waits its own timeout
        client.load("m")
    assert not isinstance(sent.value, TritonNotAskedError)
    assert time.monotonic() - started >= 0.9
    time.sleep(max(0.0, 3.0 - (time.monotonic() - started) + 0.1))  # the hold is a duration: nothing to poll
    asked_again = time.monotonic()
    with pytest.raises(TritonTimeoutError, match="accepts connections but answered nothing"):
        client.server_info()
    assert time.monotonic() - asked_again >= 0.9


def test_busy_workers_are_not_a_silent_server(silent_listener: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four long loads hold every HTTP worker: a liveness check that finds no free worker was
    never sent, so it says so and opens no hold."""
    monkeypatch.setattr(connection, "QUEUE_GRACE_S", 0.5)
    client = TritonClient(f"http://127.0.0.1:{silent_listener}", timeout_s=0.5, load_timeout_s=4.0)
    ended: list[BaseException] = []

    def load() -> None:
        try:
            client.load("m")
        except TritonTimeoutError as exc:
            ended.append(exc)

    loads = [threading.Thread(target=load, daemon=True) for _ in range(connection.HTTP_WORKERS)]
    for thread in loads:
        thread.start()
    time.sleep(0.3)  # the loads are taken by the workers (nothing to wait on: they never answer)
    with pytest.raises(ConnectionsBusyError, match=r"check liveness: not sent — geadmin's 4 connections to "
                       r"http://127\.0\.0\.1:\d+ were all busy \(long loads\)"):
        client.is_live()
    assert not client.silence.holding
    for thread in loads:
        thread.join(timeout=10)
    assert len(ended) == connection.HTTP_WORKERS


def test_a_model_that_hangs_does_not_hold_its_server(triton_factory: Callable[..., TritonProcess],
                                                     tmp_path: Path) -> None:
    """An inference that times out is the model's, not the server's: the next question is asked."""
    repository = tmp_path / "repo"
    add_hung_model(repository, "hangs")
    server = triton_factory(repository=repository, models=["hangs"])
    with TritonClient(server.http_url, timeout_s=1.0) as client:
        with pytest.raises(TritonTimeoutError):
            client.infer("hangs", [Tensor("x", "FP32", np.ones(1, dtype=np.float32))])
        assert not client.silence.holding
        assert client.is_live()
        assert {e.name: e.state for e in client.repository_index()}["hangs"] is ModelState.READY


SLOW_MODEL_PY = """
import time

class TritonPythonModel:
    def initialize(self, args):
        time.sleep(60)

    def execute(self, requests):
        return []
"""
SLOW_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""


def add_slow_model(repository: Path, name: str) -> None:
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "config.pbtxt").write_text(SLOW_CONFIG.format(name=name))
    (repository / name / "1" / "model.py").write_text(SLOW_MODEL_PY)


def test_load_that_hangs_raises_timeout_and_server_is_cleaned_up(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path
) -> None:
    for transport in TRANSPORTS:
        add_slow_model(sample_repository, f"slow_{transport}")
    server = triton_factory(repository=sample_repository, models=[])
    for transport in TRANSPORTS:
        client = TritonClient(url_for(server, transport), load_timeout_s=2.0)
        started = time.monotonic()
        with pytest.raises(TritonTimeoutError):
            client.load(f"slow_{transport}")
        assert time.monotonic() - started < 10.0
        state = {e.name: e.state for e in client.repository_index()}[f"slow_{transport}"]
        assert state is ModelState.LOADING  # still hanging server-side; the client gave up
    pid = server.pid
    server.stop(timeout_s=5)
    assert not server.alive()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        import os

        os.kill(pid, 0)
    assert not glob.glob(str(SHM_DIR / f"{server.shm_prefix}*"))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unknown_model_is_not_found(triton_server: TritonProcess, transport: str) -> None:
    client = TritonClient(url_for(triton_server, transport))
    with pytest.raises(ModelNotFoundError, match=r"does not serve it: check the name and its state "
                       r"\(`geadmin models list`\), and load it"):
        client.model_metadata("no_such_model")
    with pytest.raises(ModelNotFoundError):
        client.model_statistics("no_such_model")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_real_answer_over_the_limit_is_refused_on_both_transports(
    triton_server: TritonProcess, transport: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The limits are wired into both of tritonclient's clients (HTTP: read here; gRPC: the
    channel's max_receive_message_length), shown with Triton's own answers and a 100-byte
    limit (the config is 134 bytes over gRPC)."""
    monkeypatch.setattr(connection, "ANSWER_LIMIT_BYTES", 100)
    monkeypatch.setattr(connection, "INFER_ANSWER_LIMIT_BYTES", 100)
    with TritonClient(url_for(triton_server, transport)) as client:
        assert client.is_live()
        with pytest.raises(AnswerTooLargeError, match=r"read the config of 'digits_classifier': .* sent an "
                           r"answer too large to read \("):
            client.model_config("digits_classifier")
        assert client.is_live()


def test_a_load_on_a_server_that_never_answers_is_not_blamed_on_the_model(silent_listener: int) -> None:
    from geadmin.errors import ExplainedLoadTimeoutError
    from geadmin.ops.models.explained_load import load_explained

    client = TritonClient(f"http://127.0.0.1:{silent_listener}", timeout_s=1.0, load_timeout_s=1.0)
    with pytest.raises(TritonTimeoutError) as raised:
        load_explained(client, "digits_classifier", auth=admin_auth())
    assert not isinstance(raised.value, ExplainedLoadTimeoutError)
    assert ("did not answer in time — it, or the model it works for, is slow or hung: `geadmin status` "
            "says which") in str(raised.value)


@pytest.fixture
def other_http_service() -> Iterator[int]:
    """A real HTTP server that is not Triton (the standard library's): 404 and HTML to Triton's paths."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    yield server.server_address[1]
    server.shutdown()
    serving.join(timeout=5)


def test_another_http_service_on_the_port_is_named_for_both_protocols(other_http_service: int) -> None:
    """Not "does not serve it: load it" (a 404 read as an unknown model), not "unreachable": the
    port answers, in HTTP/1, and not as Triton does."""
    with (TritonClient(f"http://127.0.0.1:{other_http_service}", timeout_s=3) as client,
          pytest.raises(WrongProtocolError) as over_http):
        client.server_info()
    said = str(over_http.value)
    assert "answered HTTP 404, but not as Triton does (its answer is not Triton's JSON" in said
    assert said.endswith("answers there: give Triton's HTTP port (default 8000)") and "load it" not in said
    with (TritonClient(f"grpc://127.0.0.1:{other_http_service}", timeout_s=3) as client,
          pytest.raises(WrongProtocolError) as over_grpc):
        client.server_info()
    assert "does not answer gRPC — this port speaks HTTP: use http://HOST:PORT for it" in str(over_grpc.value)


def test_a_service_answering_json_objects_everywhere_is_never_an_empty_triton() -> None:
    """Its object parsed as an empty index: "OK: Triton serves", the repository empty, on every page."""
    service = JsonServiceDouble(lambda path: (200, {"status": "ok"}))  # another service, every path
    try:
        with (TritonClient(service.url, timeout_s=3) as client,
              pytest.raises(WrongProtocolError, match=r"not as Triton does \(a JSON dict where Triton")):
            client.repository_index()
    finally:
        service.close()
