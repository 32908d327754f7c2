"""An operator's unload against a real tritonserver, through the CLI: a config written to the
unloaded model afterwards (`config apply` / `config rollback` without --load) loads nothing, so
`geadmin status` still says OK with who unloaded it; an apply that loaded it counts (Triton
unloading it behind geadmin's back is then model-dropped), and one whose load failed is a
failure."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.domain import ModelState
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support import repository
from tests.support.processes import wait_for
from tests.support.samples import samples_triton
from tests.support.stack import geadmin

pytestmark = pytest.mark.integration
MODEL = "text_normalize"
CPU = "instance_group [ { count: 1 kind: KIND_CPU } ]"
GPU = "instance_group [ { count: 1 kind: KIND_GPU } ]"  # rejected: no GPU on this server (FACTS.md)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    yield from samples_triton(tmp_path_factory.mktemp("written"), models=[MODEL])


@pytest.fixture
def server(module_server: TritonProcess) -> Iterator[TritonProcess]:
    """The module's server with its files as they were and MODEL READY, after each test too."""
    files = repository.snapshot(module_server.repository)
    repository.put_back(module_server, files, loaded=[MODEL])
    yield module_server
    repository.put_back(module_server, files, loaded=[MODEL])


def run(server: TritonProcess, home: Path, *args: str) -> tuple[int, str]:
    where = ("--url", server.http_url, "--repository", str(server.repository),
             "--triton-log", str(server.log_path))
    done = geadmin(*args, *where, home=home)
    return done.returncode, done.stdout + done.stderr


def status(server: TritonProcess, home: Path) -> tuple[int, dict[str, object]]:
    code, out = run(server, home, "status", "--json")
    return code, json.loads(out[:out.rindex("}") + 1])


def config_file(server: TritonProcess, tmp_path: Path, old: str, new: str, name: str) -> Path:
    text = (server.repository / MODEL / "config.pbtxt").read_text()
    assert old in text, text
    path = tmp_path / name
    path.write_text(text.replace(old, new, 1))
    return path


def state(server: TritonProcess) -> ModelState:
    return {e.name: e.state for e in TritonClient(server.http_url).repository_index()}[MODEL]


def model_row(document: dict[str, object]) -> dict[str, str]:
    (row,) = [m for m in document["models"] if m["name"] == MODEL]  # type: ignore[attr-defined]
    return row


def test_a_config_written_after_an_operators_unload_keeps_status_ok(
        server: TritonProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run(server, home, "models", "unload", MODEL)[0] == 0
    assert wait_for(lambda: state(server) is ModelState.UNAVAILABLE, 30)
    smaller = config_file(server, tmp_path, "max_batch_size: 16", "max_batch_size: 8", "smaller.pbtxt")
    code, out = run(server, home, "config", "apply", MODEL, str(smaller), "--yes")
    assert code == 0 and "the model is not loaded, so Triton has not checked it" in out, out
    code, out = run(server, home, "config", "rollback", MODEL, "--yes")
    assert code == 0, out
    assert state(server) is ModelState.UNAVAILABLE  # nothing loaded it
    rows = [(r.action, r.result) for r in audit.query(model=MODEL, home=home) if r.result != "started"]
    assert rows == [("rollback", "written"), ("apply", "written"), ("unload", "ok")]

    code, document = status(server, home)
    assert code == 0 and document["verdict"] == "OK", document["headline"]
    assert model_row(document)["unloaded_by_operator"].startswith("unloaded by ")


def test_an_apply_that_loaded_after_the_unload_then_unloaded_behind_geadmins_back_is_dropped(
        server: TritonProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run(server, home, "models", "unload", MODEL)[0] == 0
    smaller = config_file(server, tmp_path, "max_batch_size: 16", "max_batch_size: 8", "smaller.pbtxt")
    code, out = run(server, home, "config", "apply", MODEL, str(smaller), "--load", "--yes")
    assert code == 0 and state(server) is ModelState.READY, out
    with TritonClient(server.http_url) as behind_our_back:
        behind_our_back.unload(MODEL)
        assert wait_for(lambda: state(server) is ModelState.UNAVAILABLE, 30)

    code, document = status(server, home)
    assert code == 4 and document["rules"] == ["model-dropped"], document["headline"]
    assert model_row(document)["unloaded_by_operator"] == ""


def test_an_apply_whose_load_failed_after_the_unload_is_a_failure(
        server: TritonProcess, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run(server, home, "models", "unload", MODEL)[0] == 0
    gpu = config_file(server, tmp_path, CPU, GPU, "gpu.pbtxt")
    code, out = run(server, home, "config", "apply", MODEL, str(gpu), "--load", "--no-validate", "--yes")
    assert code == 1 and "restored, byte for byte" in out, out
    assert audit.query(model=MODEL, action="apply", home=home)[0].result == "rolled_back"

    code, document = status(server, home)
    assert code == 4 and document["rules"] == ["model-failed"], document["headline"]
    assert MODEL in document["failed"]  # type: ignore[operator]
