"""The New model page through Streamlit's AppTest, against a real tritonserver: a python
model created from the page is READY and answers; refusals show the cause and the next step
(never a traceback) and write nothing; an uploaded file lands where the template expects it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import tritonclient.grpc as grpcclient
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from pages.ui import keys
from tests.support import repository
from tests.support.apptest import APP, isolate, point_at, run
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.samples import copy_samples


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    isolate(monkeypatch, tmp_path / "home")
    st.cache_data.clear()
    yield
    st.cache_data.clear()


pytestmark = pytest.mark.integration  # one tritonserver for the module (module_server)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("new_model")
    started = TritonProcess(copy_samples(root / "model_repository"), models=[],
                            log_path=root / "tritonserver.log", exit_timeout_s=TEST_EXIT_TIMEOUT_S)
    started.start()
    yield started
    started.stop()


@pytest.fixture
def server(module_server: TritonProcess, monkeypatch: pytest.MonkeyPatch) -> Iterator[TritonProcess]:
    """The module's server (samples on disk, none loaded); what a test creates is removed and
    unloaded after it."""
    files = repository.snapshot(module_server.repository)
    yield point_at(monkeypatch, module_server)
    repository.put_back(module_server, files, loaded=[])


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("new_model.py")
    return run(at)


def fill(at: AppTest, template: str, name: str) -> AppTest:
    at.selectbox(key=keys.NEW_MODEL_TEMPLATE).set_value(template)
    run(at)
    at.text_input(key=keys.NEW_MODEL_NAME).set_value(name)
    return run(at)


def create(at: AppTest) -> AppTest:
    at.button(key=keys.NEW_MODEL_CREATE).click()
    return run(at)


def test_a_python_model_created_on_the_page_is_ready_and_answers(server: TritonProcess) -> None:
    at = fill(open_page(), "python", "echo_ui")
    preview = at.code[0].value
    assert 'name: "echo_ui"' in preview and 'backend: "python"' in preview and "# " in preview
    assert any("per file" in c.value for c in at.caption)  # the size limit is shown
    at.text_area(key=f"{keys.NEW_MODEL_INPUTS_PREFIX}python").set_value("x:INT32:3")
    at.text_area(key=f"{keys.NEW_MODEL_OUTPUTS_PREFIX}python").set_value("y:INT32:3")
    create(run(at))
    assert [s.value for s in at.success] and "loaded: READY" in at.success[0].value, \
        [e.value for e in at.error]
    assert TritonClient(server.http_url).model_ready("echo_ui")
    infer = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        x = grpcclient.InferInput("x", [1, 3], "INT32")
        x.set_data_from_numpy(np.array([[5, 6, 7]], dtype=np.int32))
        answer = infer.infer("echo_ui", [x], client_timeout=30)
        np.testing.assert_array_equal(answer.as_numpy("y"), [[5, 6, 7]])
    finally:
        infer.close()
    started, = audit.query(action="create", result="started")  # written before staging
    (row,) = [r for r in audit.query(action="create") if r.result != "started"]
    assert (row.model, row.result, row.origin) == ("echo_ui", "ok", "dashboard")
    assert started.model == "echo_ui"


def test_refusals_show_the_cause_and_next_step_and_write_nothing(server: TritonProcess) -> None:
    before = sorted(p.name for p in server.repository.iterdir())
    at = create(fill(open_page(), "python", "digits_classifier"))  # a sample model's name
    assert "Not created:" in at.error[0].value and "already exists" in at.error[0].value
    assert "Next step:" in at.error[0].value
    at = create(fill(open_page(), "npu_ge_om", "resnet"))  # no .om uploaded
    message = at.error[0].value
    assert "Not created:" in message and "would not load" in message and "no model.om" in message
    assert "npu_ge.model_file" in set(at.dataframe[0].value["rule"])  # the findings, as a table
    assert sorted(p.name for p in server.repository.iterdir()) == before


def test_with_triton_down_create_says_so_and_writes_nothing(server: TritonProcess,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")
    before = sorted(p.name for p in server.repository.iterdir())
    at = create(fill(open_page(), "python", "echo_down"))
    assert "Not created:" in at.error[0].value and "start Triton" in at.error[0].value
    assert sorted(p.name for p in server.repository.iterdir()) == before
    at.checkbox(key=keys.NEW_MODEL_LOAD).uncheck()
    create(fill(run(at), "python", "echo_down"))  # without loading, Triton is not needed
    assert "not loaded" in at.success[0].value
    assert (server.repository / "echo_down" / "1" / "model.py").is_file()


def test_an_invalid_knob_is_shown_before_create_and_disables_it(server: TritonProcess) -> None:
    at = fill(open_page(), "npu_ge_om", "resnet")
    at.text_input(key=keys.NEW_MODEL_DEVICE_IDS).set_value("0;1")
    run(at)
    assert any("expected NPU ids" in w.value for w in at.warning)
    assert at.button(key=keys.NEW_MODEL_CREATE).disabled


def test_an_uploaded_om_lands_in_the_version_directory_and_its_load_reason_is_shown(
    server: TritonProcess,
) -> None:
    at = fill(open_page(), "npu_ge_om", "resnet")
    at.file_uploader(key=f"{keys.NEW_MODEL_FILE_PREFIX}npu_ge_om").set_value(
        ("resnet.om", b"an offline model", "application/octet-stream"))
    create(run(at))
    assert (server.repository / "resnet" / "1" / "model.om").read_bytes() == b"an offline model"
    # This Triton has no npu_ge backend: the page says so, with the fix, and keeps the directory.
    error = at.error[0].value
    assert "was created, but Triton did not load it" in error
    assert "unable to find backend library for backend 'npu_ge'" in error and "Next step:" in error
