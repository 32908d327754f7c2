"""Apply of an ensemble that Triton rejects, against a real tritonserver: Triton unloads the
ensemble when it refuses the new config, so geadmin puts the previous file back AND loads it
again, then asks Triton whether it serves, and says so in the outcome."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.domain import ModelState, Serving
from geadmin.errors import ConfigInvalidError
from geadmin.ops.models.apply import apply_config
from geadmin.ops.models.apply_result import ApplyOutcome
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support.auth import admin_auth

PIPELINE = "digits_pipeline"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess]) -> TritonProcess:
    return triton_factory(models=[PIPELINE])


@pytest.fixture
def client(server: TritonProcess) -> Iterator[TritonClient]:
    with TritonClient(server.http_url, load_timeout_s=60) as triton:
        yield triton


def test_a_rejected_ensemble_apply_reloads_the_restored_config_and_it_serves_again(
        server: TritonProcess, client: TritonClient) -> None:
    path = server.repository / PIPELINE / "config.pbtxt"
    original = path.read_bytes()
    assert client.model_ready(PIPELINE)
    missing_version = original.decode().replace("model_version: -1", "model_version: 7", 1)
    with pytest.raises(ConfigInvalidError, match="has no version 7"):  # the validator knows first
        apply_config(client, server.repository, PIPELINE, missing_version, auth=admin_auth())
    result = apply_config(client, server.repository, PIPELINE, missing_version, validate=False,
                          log=LocalLogFile(server.log_path), auth=admin_auth())
    assert result.outcome is ApplyOutcome.ROLLED_BACK, result.message
    assert path.read_bytes() == original
    states = {e.name: e.state for e in client.repository_index()}
    assert states[PIPELINE] is ModelState.READY and client.model_ready(PIPELINE), states
    assert result.serving is Serving.PREVIOUS, result.message
    assert "reloaded" in result.message and "serves again" in result.message, result.message
    assert [r.result for r in audit.query(model=PIPELINE)][:2] == ["rolled_back", "started"]
