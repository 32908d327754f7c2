"""The load-failure explainer against the real tritonserver and its real log."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
import tritonclient.http as httpclient
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from geadmin.diagnose.explain import log_reason
from geadmin.domain import ModelState, Serving
from geadmin.errors import ExplainedLoadError, ExplainedLoadTimeoutError
from geadmin.ops.models.actions import ActionResult, ModelAction, run_action
from geadmin.ops.models.explained_load import load_explained
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support.auth import admin_auth
from tests.support.samples import add_python_model
from tests.support.transports import TRANSPORTS, url_for


def classify_zeros(server: TritonProcess) -> np.ndarray:
    """A real inference on digits_classifier: proof that it serves."""
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"), network_timeout=10)
    features = httpclient.InferInput("features", [1, 64], "FP32")
    features.set_data_from_numpy(np.zeros((1, 64), dtype=np.float32))
    result = client.infer("digits_classifier", [features])
    client.close()
    return np.asarray(result.as_numpy("probabilities"))


def graph_executor_config(server: TritonProcess) -> model_config_pb2.ModelConfig:
    text = (server.repository / "digits_classifier" / "config.pbtxt").read_text()
    config = text_format.Parse(text, model_config_pb2.ModelConfig())
    config.ClearField("backend")
    config.platform = "graph_executor"  # from older Ascend guides; Triton rejects it
    return config


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_rejected_config_override_is_explained_from_the_log_and_old_version_serves(
    triton_server: TritonProcess, transport: str
) -> None:
    client = TritonClient(url_for(triton_server, transport), load_timeout_s=60)
    with pytest.raises(ExplainedLoadError) as caught:
        load_explained(client, "digits_classifier", log=LocalLogFile(triton_server.log_path),
                       repository=triton_server.repository, config=graph_executor_config(triton_server),
                       auth=admin_auth())
    explanation = caught.value.explanation
    assert "failed to poll from model repository" in explanation.error  # all the API says
    assert "unexpected platform type 'graph_executor'" in log_reason(explanation.log_lines)
    # Triton's line only says *that* the platform is unknown; the layout check leads with the fix.
    assert explanation.reason.startswith("platform 'graph_executor' is not a Triton platform")
    assert 'replace it with backend: "npu_ge"' in str(caught.value).splitlines()[0]
    assert explanation.serving is Serving.PREVIOUS and explanation.serving_version == "1"
    assert "unexpected platform type 'graph_executor'" in str(caught.value)
    assert "version 1 (the previously loaded one) is still serving" in str(caught.value)
    assert classify_zeros(triton_server).shape == (1, 10)


def test_rejected_config_on_disk_keeps_old_version_serving(
    triton_factory: Callable[..., TritonProcess],
) -> None:
    server = triton_factory(models=["digits_classifier"])
    config_path = server.repository / "digits_classifier" / "config.pbtxt"
    config_path.write_text(config_path.read_text().replace('backend: "python"',
                                                           'platform: "graph_executor"'))
    for transport in TRANSPORTS:
        client = TritonClient(url_for(server, transport), load_timeout_s=60)
        with pytest.raises(ExplainedLoadError) as caught:
            load_explained(client, "digits_classifier", log=LocalLogFile(server.log_path),
                           repository=server.repository, auth=admin_auth())
        explanation = caught.value.explanation
        assert "unexpected platform type 'graph_executor'" in log_reason(explanation.log_lines)
        assert explanation.serving is Serving.PREVIOUS
        assert {e.name: e.state for e in client.repository_index()}["digits_classifier"] is ModelState.READY
    probabilities = classify_zeros(server)
    assert probabilities.shape == (1, 10) and abs(float(probabilities.sum()) - 1.0) < 1e-3


def test_missing_model_file_hangs_the_load_and_is_reported_as_soon_as_triton_logs_it(
    triton_factory: Callable[..., TritonProcess],
) -> None:
    """Triton 2.51's python stub dies on a missing model.py and the load never returns: the
    stub's line is in the log within milliseconds, so the failure is reported then, not at
    the client's load timeout (60 s here)."""
    server = triton_factory(models=[])  # the factory's servers do not wait out the hung load at exit
    (server.repository / "text_normalize" / "1" / "model.py").unlink()
    client = TritonClient(server.http_url, load_timeout_s=60)
    seen: list[tuple[float, str]] = []
    started = time.monotonic()
    with pytest.raises(ExplainedLoadTimeoutError) as caught:
        load_explained(client, "text_normalize", log=LocalLogFile(server.log_path),
                       repository=server.repository, progress=lambda s, line: seen.append((s, line)),
                       auth=admin_auth())
    assert time.monotonic() - started < 30  # far below the 60 s load timeout
    explanation = caught.value.explanation
    assert explanation.hung and "is stuck: Triton keeps it LOADING" in str(caught.value).splitlines()[0]
    # The headline is the stub's own line, with what clears it.
    assert explanation.reason.startswith("Failed to preinitialize Python stub: Python model file not found")
    assert "restart Triton" in explanation.reason
    assert any("no model.py in" in p and "'python' backend" in p for p in explanation.layout_problems)
    assert all("text_normalize" in line.raw for line in explanation.log_lines)
    assert seen and seen[-1][1].startswith("Failed to preinitialize Python stub")  # shown while waiting
    # Unloading it cannot work while Triton keeps it loading: say so, and what clears it.
    (result,) = run_action(client, ModelAction.UNLOAD, ["text_normalize"], log=LocalLogFile(server.log_path),
                           settle_timeout_s=1, auth=admin_auth())
    assert not result.ok
    assert result.message.startswith("cannot unload 'text_normalize': it is stuck LOADING after Triton "
                                     "logged: Failed to preinitialize Python stub")
    assert "restart Triton" in result.message
    client.close()
    server.stop(timeout_s=2)  # the hung load keeps Triton from exiting: SIGKILL after 2 s, not 12


def test_a_load_hung_in_initialize_stalls_no_other_call_and_is_not_waited_for(
    triton_factory: Callable[..., TritonProcess],
) -> None:
    """Triton serves an HTTP load on one of its threads, and every connection kept alive on
    that thread waits while the load hangs (docs/development.md): geadmin's reads after it go around on a
    new connection, so it can still say the model is not serving; and the action does not
    wait out its settle time for the model it loaded itself (LOADING is its result)."""
    server = triton_factory(models=[])
    add_python_model(server.repository, "hangs", "time.sleep(120)")
    client = TritonClient(server.http_url, timeout_s=3, load_timeout_s=3)
    assert "hangs" in {e.name for e in client.repository_index()}  # kept alive, as the CLI's and the pages'
    outcome: list[ActionResult] = []
    acting = threading.Thread(target=lambda: outcome.extend(run_action(
        client, ModelAction.LOAD, ["hangs"], log=LocalLogFile(server.log_path), repository=server.repository,
        settle_timeout_s=600, auth=admin_auth())), daemon=True)
    acting.start()
    acting.join(timeout=90)
    assert not acting.is_alive(), "the load waited for the model it loaded itself to settle"
    (result,) = outcome
    assert not result.ok and result.message.startswith("load of 'hangs' did not finish in ")
    first = result.message.splitlines()[0]
    assert "had not answered the load after the load timeout (3 s); its last line about the model" in first
    assert "— fix: Triton keeps the model LOADING until its initialize returns" in first
    assert "Triton answered:" not in result.message  # it did not: nothing to quote
    assert "restart Triton" in first
    assert "the model was not loaded before, and is not serving" in result.message
    assert {e.name: e.state for e in client.repository_index()}["hangs"] is ModelState.LOADING
    client.close()
    server.stop(timeout_s=2)  # the hung load keeps Triton from exiting: SIGKILL after 2 s


def test_the_load_timeout_setting_bounds_the_cli_wait_and_the_flag_wins(
    triton_factory: Callable[..., TritonProcess], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """GEADMIN_LOAD_TIMEOUT_S is how long the CLI and the dashboard wait for a load (120 s
    unset); --load-timeout overrides it."""
    from geadmin.cli.main import main

    server = triton_factory(models=[])
    add_python_model(server.repository, "hangs", "time.sleep(120)")
    add_python_model(server.repository, "hangs_too", "time.sleep(120)")
    load = ["models", "load", "--url", server.http_url]
    codes: list[int] = []
    # Unset, each would wait 120 s; with the env at 100 s, only the flag can end the second by then.
    for env_s, argv in (("2", [*load, "hangs"]), ("100", [*load, "hangs_too", "--load-timeout", "2"])):
        monkeypatch.setenv("GEADMIN_LOAD_TIMEOUT_S", env_s)
        acting = threading.Thread(target=lambda args=argv: codes.append(main(args)), daemon=True)
        acting.start()
        acting.join(timeout=60)
        assert not acting.is_alive(), f"{argv} with GEADMIN_LOAD_TIMEOUT_S={env_s} waited past 60 s"
    assert codes == [1, 1]
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("geadmin: error:")]
    assert errors[0].startswith("geadmin: error: load of 'hangs' did not finish in ")
    assert errors[1].startswith("geadmin: error: load of 'hangs_too' did not finish in ")
    server.stop(timeout_s=2)  # the hung loads keep Triton from exiting: SIGKILL after 2 s


def test_initialize_error_reason_comes_from_the_log(
    triton_factory: Callable[..., TritonProcess],
) -> None:
    server = triton_factory(models=[])
    model_py = server.repository / "text_normalize" / "1" / "model.py"
    model_py.write_text("class TritonPythonModel:\n    def initialize(self, args):\n"
                        "        raise RuntimeError('tokenizer file is corrupted')\n")
    client = TritonClient("grpc://" + server.grpc_url, load_timeout_s=60)
    with pytest.raises(ExplainedLoadError) as caught:
        load_explained(client, "text_normalize", log=LocalLogFile(server.log_path),
                       repository=server.repository, auth=admin_auth())
    explanation = caught.value.explanation
    assert "tokenizer file is corrupted" in explanation.reason
    assert explanation.layout_problems == ()
    assert explanation.serving is Serving.NEVER_LOADED


def test_unknown_model_without_log_source_still_explains_layout(triton_server: TritonProcess) -> None:
    client = TritonClient(triton_server.http_url)
    with pytest.raises(ExplainedLoadError) as caught:
        load_explained(client, "digits_clasifier", repository=triton_server.repository, auth=admin_auth())
    explanation = caught.value.explanation
    assert explanation.reason.startswith("no model directory")
    assert "did you mean 'digits_classifier'" in explanation.reason
    assert "GEADMIN_TRITON_LOG" in str(caught.value)


def test_only_the_tail_since_the_load_is_read(triton_server: TritonProcess) -> None:
    """Lines about the model from an earlier failure must not be blamed for this one."""
    log = LocalLogFile(triton_server.log_path)
    client = TritonClient(triton_server.http_url, load_timeout_s=60)
    with pytest.raises(ExplainedLoadError):
        load_explained(client, "digits_classifier", log=log, config=graph_executor_config(triton_server),
                       auth=admin_auth())
    too_small = client.model_config("digits_classifier")
    too_small.max_batch_size = 4  # below the preferred batch sizes 8 and 16
    with pytest.raises(ExplainedLoadError) as caught:
        load_explained(client, "digits_classifier", log=log, config=too_small, auth=admin_auth())
    explanation = caught.value.explanation
    assert "preferred size must be <= max batch size" in log_reason(explanation.log_lines)
    assert "preferred size must be <= max batch size" in explanation.reason
    assert not any("graph_executor" in line.raw for line in explanation.log_lines)
    assert explanation.serving is Serving.PREVIOUS
