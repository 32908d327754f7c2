"""Creating models from templates against real tritonservers: the python template becomes
READY and answers; an npu_ge .om on a host without CANN is created and its load fails with
the backend's own reason; both are audited; the CLI does the same and refuses like the core."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from geadmin import audit
from geadmin.cli.main import main
from geadmin.domain import ModelState
from geadmin.errors import TritonUnreachableError
from geadmin.ops.models.create import CreateOutcome, create_model
from geadmin.repository import revisions
from geadmin.repository.templates import Params, TensorSpec
from geadmin.stack.backends import BUILT_NPU_GE, library
from geadmin.stack.processes import free_port
from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support.auth import admin_auth, auth_as
from tests.support.samples import SAMPLE_MODELS

TWO_TENSORS = Params(max_batch_size=8,
                     inputs=(TensorSpec("INPUT0", "FP32", (4,)), TensorSpec("IDS", "INT64", (2,))),
                     outputs=(TensorSpec("OUTPUT0", "FP32", (4,)), TensorSpec("IDS_OUT", "INT64", (2,))))


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    return home


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    return triton_factory(models=[])  # the samples on disk, none loaded: starts in ~2 s


@pytest.fixture
def client(server: TritonProcess) -> Iterator[TritonClient]:
    with TritonClient(server.http_url, load_timeout_s=90) as triton:
        yield triton


def npu_ge_dir() -> Path:
    """The npu_ge build `geadmin up` uses; built here when missing (as the backend tests do)."""
    if library("npu_ge", BUILT_NPU_GE).is_file():
        return BUILT_NPU_GE
    from tests.support.npu_ge import build_backend
    return build_backend().lib_dir


def test_the_python_template_is_created_ready_and_answers_an_inference(
    server: TritonProcess, client: TritonClient
) -> None:
    result = create_model(client, server.repository, "echo", "python", TWO_TENSORS,
                          auth=auth_as("ann"), log=LocalLogFile(server.log_path))
    assert result.outcome is CreateOutcome.LOADED and result.ok, result.message
    assert result.load_state is ModelState.READY and client.model_ready("echo")
    assert result.files == ("config.pbtxt", "1/model.py") and result.revision == 1
    infer = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        ids = np.array([[7, 9], [-1, 3]], dtype=np.int64)
        inputs = [grpcclient.InferInput("INPUT0", [2, 4], "FP32"),
                  grpcclient.InferInput("IDS", [2, 2], "INT64")]
        inputs[0].set_data_from_numpy(x)
        inputs[1].set_data_from_numpy(ids)
        answer = infer.infer("echo", inputs, client_timeout=30)
    finally:
        infer.close()
    np.testing.assert_array_equal(answer.as_numpy("OUTPUT0"), x)
    np.testing.assert_array_equal(answer.as_numpy("IDS_OUT"), ids)
    # Triton lists exactly the model directories: no staging directory was left to index.
    assert {e.name for e in client.repository_index()} == {*SAMPLE_MODELS, "echo"}
    rows = audit.query(model="echo")
    assert [(r.action, r.result, r.who, r.origin) for r in rows] == [
        ("load", "ok", "ann", "dashboard"), ("create", "ok", "ann", "dashboard"),
        ("create", "started", "ann", "dashboard")]
    assert rows[1].server == client.url and '+backend: "python"' in rows[1].diff
    config = server.repository / "echo" / "config.pbtxt"
    assert revisions.history(server.repository, "echo")[0].data == config.read_bytes()


def test_an_npu_ge_om_without_cann_is_created_and_its_load_fails_with_the_backends_reason(
    triton_factory: Callable[..., TritonProcess], sample_repository: Path, tmp_path: Path
) -> None:
    backends = prepare_backend_directory(tmp_path / "backends", extra={"npu_ge": npu_ge_dir()})
    server = triton_factory(sample_repository, models=[], backend_dir=backends,
                            env={"ASCEND_HOME_PATH": "", "ASCEND_TOOLKIT_HOME": ""})
    with TritonClient(server.http_url, load_timeout_s=90) as client:
        result = create_model(client, server.repository, "resnet", "npu_ge_om", Params(device_ids=(0, 1)),
                              {"1/model.om": b"an .om compiled by ATC"}, log=LocalLogFile(server.log_path),
                              auth=admin_auth())
        assert client.is_live()  # the failed load crashed nothing
    assert result.outcome is CreateOutcome.LOAD_FAILED and not result.ok
    assert "cannot load the ACL runtime libascendcl.so" in result.reason  # the backend's own words
    assert "set_env.sh" in result.reason
    assert result.load_state is ModelState.UNAVAILABLE and result.explanation is not None
    assert "the load failed" in result.message and "next step" in result.message
    assert (server.repository / "resnet" / "1" / "model.om").read_bytes() == b"an .om compiled by ATC"
    rows = audit.query(model="resnet")
    assert [(r.action, r.result) for r in rows] == [("load", "failed"), ("create", "ok"),
                                                    ("create", "started")]
    assert "libascendcl.so" in rows[0].message


def test_an_npu_ge_om_on_a_triton_without_npu_ge_reports_the_missing_backend(
    server: TritonProcess, client: TritonClient
) -> None:
    result = create_model(client, server.repository, "resnet", "npu_ge_om", None,
                          {"1/model.om": b"om"}, log=LocalLogFile(server.log_path), auth=admin_auth())
    assert result.outcome is CreateOutcome.LOAD_FAILED
    assert "unable to find backend library for backend 'npu_ge'" in result.reason, result.reason
    assert "make backend" in result.reason  # with the fix
    assert (server.repository / "resnet" / "config.pbtxt").is_file()
    assert result.load_state is ModelState.UNAVAILABLE


def test_the_cli_creates_and_loads_and_prints_json(
    server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    own = tmp_path / "model.py"
    own.write_bytes(b"import triton_python_backend_utils as pb_utils\n\n\nclass TritonPythonModel:\n"
                    b"    def execute(self, requests):\n"
                    b"        return [pb_utils.InferenceResponse([pb_utils.Tensor('y', 2 * pb_utils."
                    b"get_input_tensor_by_name(r, 'x').as_numpy())]) for r in requests]\n")
    code = main(["models", "create", "doubler", "--template", "python", "--url", server.http_url,
                 "--repository", str(server.repository), "--triton-log", str(server.log_path),
                 "--input", "x:FP32:3", "--output", "y:FP32:3", "--file", f"1/model.py={own}",
                 "--max-batch-size", "0", "--json"])
    record = json.loads(capsys.readouterr().out)
    assert code == 0, record
    assert (record["outcome"], record["load_state"], record["ok"]) == ("loaded", "READY", True)
    assert (server.repository / "doubler" / "1" / "model.py").read_bytes() == own.read_bytes()
    infer = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        x = grpcclient.InferInput("x", [3], "FP32")
        x.set_data_from_numpy(np.array([1, 2, 3], dtype=np.float32))
        y = infer.infer("doubler", [x], client_timeout=30).as_numpy("y")
    finally:
        infer.close()
    np.testing.assert_array_equal(y, [2, 4, 6])


def test_the_cli_refuses_unsafe_names_and_an_unreachable_triton_writing_nothing(
    server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    om = tmp_path / "m.om"
    om.write_bytes(b"om")
    before = sorted(p.name for p in server.repository.iterdir())
    base = ["models", "create", "resnet", "--template", "npu_ge_om", "--repository", str(server.repository)]
    assert main([*base, "--url", server.http_url, "--file", f"1/../../evil.om={om}"]) == 1
    # notes (e.g. which Triton log the CLI found) may come first; then the error, in one line
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("geadmin: note:")]
    assert lines[0].startswith("geadmin: error: refused path '1/../../evil.om': '..' would leave")
    assert len(lines) == 1
    assert main([*base, "--url", server.http_url, "--file", str(om), "--upload-limit", "1"]) == 1
    assert "is 2 bytes, more than 1 bytes, the upload limit (--upload-limit): " in capsys.readouterr().err
    assert main([*base, "--url", f"http://127.0.0.1:{free_port()}", "--file", str(om), "--timeout", "2"]) == 3
    assert "geadmin: error:" in capsys.readouterr().err
    assert main([*base, "--url", server.http_url]) == 1  # no .om: the validator refuses it
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("geadmin: note:")]
    assert lines[0].startswith("geadmin: error: refused: 'resnet' would not load: no model.om")
    assert sorted(p.name for p in server.repository.iterdir()) == before
    # audited by the core; the oversize local file was refused by the CLI from its size, before reading
    # (the validator refuses after the "started" row: the staged directory was built and checked)
    assert [r.result for r in audit.query(action="create")] == ["refused", "started", "refused", "refused"]


def test_a_refusal_for_an_unreachable_triton_raises_before_writing(sample_repository: Path) -> None:
    before = sorted(p.name for p in sample_repository.iterdir())
    with TritonClient(f"http://127.0.0.1:{free_port()}", timeout_s=2) as client, \
            pytest.raises(TritonUnreachableError):
        create_model(client, sample_repository, "echo", "python", auth=admin_auth())
    assert sorted(p.name for p in sample_repository.iterdir()) == before
