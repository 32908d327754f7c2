"""The facade against the real tritonserver, over HTTP and gRPC."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from geadmin.domain import ModelState, Transport
from geadmin.errors import InvalidArgumentError, ModelNotFoundError
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.transports import TRANSPORTS, url_for


def states(client: TritonClient) -> dict[str, ModelState]:
    return {entry.name: entry.state for entry in client.repository_index()}


def wait_for(client: TritonClient, name: str, wanted: ModelState, timeout_s: float = 30.0) -> ModelState:
    """HTTP unload answers while the model is still UNLOADING: poll, bounded."""
    deadline = time.monotonic() + timeout_s
    state = states(client).get(name, ModelState.NOT_LOADED)
    while state is not wanted and time.monotonic() < deadline:
        time.sleep(0.1)
        state = states(client).get(name, ModelState.NOT_LOADED)
    return state


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_server_identity_health_and_index(triton_server: TritonProcess, transport: str) -> None:
    client = TritonClient(url_for(triton_server, transport))
    assert client.transport is Transport(transport)
    assert client.is_live() and client.is_ready()
    info = client.server_info()
    assert info.name == "triton" and info.version == "2.51.0"
    assert "model_repository(unload_dependents)" in info.extensions
    index = states(client)
    assert set(index) >= {"digits_classifier", "digits_pipeline", "text_normalize"}
    assert index["digits_classifier"] is ModelState.READY
    assert client.model_ready("digits_classifier")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_model_metadata_normalized_config_and_statistics(
    triton_server: TritonProcess, transport: str
) -> None:
    client = TritonClient(url_for(triton_server, transport))
    metadata = client.model_metadata("digits_classifier")
    assert [t.name for t in metadata.inputs] == ["features"]
    assert list(metadata.inputs[0].shape) == [-1, 64] and metadata.inputs[0].datatype == "FP32"
    config = client.model_config("digits_classifier")
    assert isinstance(config, model_config_pb2.ModelConfig)
    assert config.max_batch_size == 32 and config.backend == "python"
    assert config.instance_group[0].count == 1  # normalized: defaults filled in
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16]
    stats = client.model_statistics("digits_classifier")
    assert [s.version for s in stats] == ["1"]
    assert stats[0].name == "digits_classifier"
    with pytest.raises(ModelNotFoundError):
        client.model_config("no_such_model")


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_log_verbosity_changes_live_and_is_restored(triton_server: TritonProcess, transport: str) -> None:
    client = TritonClient(url_for(triton_server, transport))
    before = client.log_settings()
    assert before["log_verbose_level"] == 0 and before["log_info"] is True
    try:
        assert client.update_log_settings(log_verbose_level=2)["log_verbose_level"] == 2
        assert client.log_settings()["log_verbose_level"] == 2
    finally:
        client.update_log_settings(log_verbose_level=before["log_verbose_level"])
    assert client.log_settings()["log_verbose_level"] == 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unload_with_dependents_then_load_brings_the_pipeline_back(
    triton_factory: Callable[..., TritonProcess], transport: str
) -> None:
    server = triton_factory(models=["digits_pipeline"])  # composing models load as dependencies
    client = TritonClient(url_for(server, transport), load_timeout_s=60)
    composing = ("digits_preprocess", "digits_classifier", "digits_postprocess")
    assert all(states(client)[name] is ModelState.READY for name in ("digits_pipeline", *composing))

    client.unload("digits_pipeline", dependents=True)
    assert wait_for(client, "digits_pipeline", ModelState.UNAVAILABLE) is ModelState.UNAVAILABLE
    for name in composing:
        assert wait_for(client, name, ModelState.UNAVAILABLE) is ModelState.UNAVAILABLE, name
    assert states(client)["text_normalize"] is ModelState.NOT_LOADED

    client.load("digits_pipeline")
    assert all(states(client)[name] is ModelState.READY for name in ("digits_pipeline", *composing))


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_unload_without_dependents_keeps_the_steps(
    triton_factory: Callable[..., TritonProcess], transport: str
) -> None:
    server = triton_factory(models=["digits_pipeline"])
    client = TritonClient(url_for(server, transport))
    client.unload("digits_pipeline")
    assert wait_for(client, "digits_pipeline", ModelState.UNAVAILABLE) is ModelState.UNAVAILABLE
    assert states(client)["digits_classifier"] is ModelState.READY


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_reload_with_config_override_and_files_then_back(
    triton_factory: Callable[..., TritonProcess], transport: str
) -> None:
    server = triton_factory(models=["text_normalize"])
    client = TritonClient(url_for(server, transport), load_timeout_s=60)
    config = client.model_config("text_normalize")
    assert config.max_batch_size == 16
    changed = model_config_pb2.ModelConfig()
    changed.CopyFrom(config)
    changed.max_batch_size = 4
    del changed.dynamic_batching.preferred_batch_size[:]  # normalization filled it with 16
    client.load("text_normalize", config=changed)
    assert client.model_config("text_normalize").max_batch_size == 4

    # A file override: the model directory then holds only the files sent.
    source = (server.repository / "text_normalize" / "1" / "model.py").read_bytes()
    client.load("text_normalize", config=changed, files={"1/model.py": source})
    assert client.model_ready("text_normalize")

    client.reload("text_normalize")  # back to the repository's config
    assert client.model_config("text_normalize").max_batch_size == 16
    assert client.model_statistics("text_normalize")[0].inference_count == 0  # stats reset on reload


def test_file_overrides_need_a_config(triton_server: TritonProcess) -> None:
    client = TritonClient(triton_server.http_url)
    with pytest.raises(InvalidArgumentError, match="config override"):
        client.load("text_normalize", files={"1/model.py": b""})


def test_pbtxt_of_normalized_config_round_trips(triton_server: TritonProcess) -> None:
    config = TritonClient(triton_server.http_url).model_config("digits_pipeline")
    text = text_format.MessageToString(config)
    assert text_format.Parse(text, model_config_pb2.ModelConfig()) == config
    assert np.array(config.input[0].dims).tolist() == [8, 8]


def test_a_shared_http_client_does_not_leak_descriptors_across_threads(triton_server: TritonProcess) -> None:
    """Streamlit runs each rerun on a new thread; the shared facade must not grow per thread."""
    import os
    import threading

    client = TritonClient(triton_server.http_url)

    def one_call() -> None:
        assert client.is_live()

    def on_new_threads(count: int) -> None:
        for _ in range(count):
            thread = threading.Thread(target=one_call)
            thread.start()
            thread.join(timeout=10)

    on_new_threads(8)  # warm up the worker pool
    before = len(os.listdir("/proc/self/fd"))
    on_new_threads(60)
    after = len(os.listdir("/proc/self/fd"))
    client.close()
    assert after - before < 8, f"{after - before} descriptors leaked over 60 threads"


def test_a_malformed_answer_is_a_request_error_not_a_traceback(triton_server: TritonProcess) -> None:
    from tritonclient.grpc import service_pb2

    from geadmin.errors import TritonRequestError

    client = TritonClient(triton_server.http_url)
    with pytest.raises(TritonRequestError, match="Failed to parse models field"):
        client.message("read something", lambda c, kw: {"models": "not a list"},
                        service_pb2.RepositoryIndexResponse)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_hidden_directories_triton_lists_are_not_models(
    triton_factory: Callable[..., TritonProcess], transport: str
) -> None:
    server = triton_factory(models=[])
    hidden = server.repository / ".geadmin-staging-new-x1" / "new"
    hidden.mkdir(parents=True)
    (hidden / "config.pbtxt").write_text('name: "new"\nbackend: "python"\n')
    bare = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    assert ".geadmin-staging-new-x1" in {m["name"] for m in bare.get_model_repository_index()}  # Triton does
    client = TritonClient(url_for(server, transport))
    names = {entry.name for entry in client.repository_index()}
    assert "digits_classifier" in names and not any(n.startswith(".") for n in names)
