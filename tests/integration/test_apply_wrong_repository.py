"""An apply whose --repository is not the repository Triton serves, against a real tritonserver:
geadmin writes there, Triton reloads its own unchanged file and says success. The live config
still has the previous value of every field the change sets: the apply fails, says in its
first line that Triton did not load the file geadmin wrote and why, and puts that file back.
An apply Triton only normalizes (a default written out, a kind it resolves) still applies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support import repository
from tests.support.processes import TEST_EXIT_TIMEOUT_S
from tests.support.samples import copy_samples

pytestmark = pytest.mark.integration

MODEL = "digits_classifier"
OLD_DELAY, NEW_DELAY = 1000, 2500


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("wrong_repository")
    server = TritonProcess(copy_samples(root / "model_repository"), models=[MODEL],
                           log_path=root / "tritonserver.log", exit_timeout_s=TEST_EXIT_TIMEOUT_S)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server(module_server: TritonProcess) -> Iterator[TritonProcess]:
    files = repository.snapshot(module_server.repository)
    yield module_server
    repository.put_back(module_server, files, loaded=[MODEL])


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def served_delay(server: TritonProcess) -> int:
    with TritonClient(server.http_url) as client:
        return int(client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds)


def apply(server: TritonProcess, repo: Path, new: bytes, tmp_path: Path) -> int:
    (tmp_path / "new.pbtxt").write_bytes(new)
    return main(["config", "apply", MODEL, str(tmp_path / "new.pbtxt"), "--url", server.http_url,
                 "--repository", str(repo)])


def test_an_apply_to_a_repository_triton_does_not_serve_fails_and_puts_the_file_back(
    server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = copy_samples(tmp_path / "a_copy_triton_does_not_serve")
    path = other / MODEL / "config.pbtxt"
    old = path.read_bytes()
    new = old.replace(f"max_queue_delay_microseconds: {OLD_DELAY}".encode(),
                      f"max_queue_delay_microseconds: {NEW_DELAY}".encode())

    assert apply(server, other, new, tmp_path) == ExitCode.FAILED
    out, err = capsys.readouterr()
    first = next(line for line in err.splitlines() if not line.startswith("geadmin: note:"))
    assert first.startswith("geadmin: error: Triton's live config ignores the change geadmin wrote to "
                            f"{path}: "), err
    assert f"most likely because {other} is not the repository this Triton serves" in first
    assert "dynamic_batching.max_queue_delay_microseconds" in first
    assert "--repository" in first
    assert "applied" not in out + err
    assert "the previous config.pbtxt is restored, byte for byte" in err
    assert path.read_bytes() == old  # the copy geadmin wrote is put back
    assert served_delay(server) == OLD_DELAY
    assert (server.repository / MODEL / "config.pbtxt").read_bytes() == old  # never touched
    row, _started = audit.query(model=MODEL)
    assert row.result == "rolled_back" and row.message.startswith("Triton's live config ignores the change")


def test_an_apply_triton_only_normalizes_is_applied(
    server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = server.repository / MODEL / "config.pbtxt"
    old = path.read_bytes()
    for new in (old + b"version_policy: { latest: { num_versions: 1 } }\n",  # Triton's default, written
                old.replace(b"kind: KIND_CPU", b"kind: KIND_AUTO"),  # resolved to the kind it had
                old.replace(b"count: 1 kind: KIND_CPU", b"count: 1")):  # removed: filled back in
        assert apply(server, server.repository, new, tmp_path) == ExitCode.OK, capsys.readouterr()
        out, _ = capsys.readouterr()
        assert f"applied the new config of {MODEL!r}: Triton reloaded it" in out
        assert path.read_bytes() == new
