"""Apply with automatic rollback, against real tritonservers: a rejected config is put back
byte for byte while the model keeps answering; a good one is live; conflicts and
unparseable configs are refused; every attempt is in the audit log; the CLI does the same."""

from __future__ import annotations

import argparse
import errno
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2

from geadmin import audit
from geadmin.cli import audit_log, config, config_change
from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.main import main
from geadmin.domain import ModelState, Serving
from geadmin.errors import (
    ConfigConflictError,
    ConfigInvalidError,
    ConfigLockedError,
    ConfigParseError,
    RepositoryError,
    TritonUnreachableError,
)
from geadmin.ops.models.actions import wait_settled
from geadmin.ops.models.apply import apply_config, rollback
from geadmin.ops.models.apply_result import ApplyOutcome
from geadmin.ops.models.put_back import PUT_BACK_ACTION, put_back_served
from geadmin.repository import atomic, locks, revisions, store
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES
from geadmin.stack.processes import free_port
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile
from tests.support import repository
from tests.support.auth import admin_auth, auth_as
from tests.support.processes import TEST_EXIT_TIMEOUT_S, wait_for
from tests.support.samples import add_slow_start_model, copy_samples, slow_start_parameter

MODEL = "digits_classifier"
CPU = "instance_group [ { count: 1 kind: KIND_CPU } ]"
GPU = "instance_group [ { count: 1 kind: KIND_GPU } ]"  # rejected: no GPU on this server (FACTS.md)


@pytest.fixture(autouse=True)
def _workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    return home


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonProcess]:
    root = tmp_path_factory.mktemp("apply")
    server = TritonProcess(copy_samples(root / "model_repository"), models=[MODEL],
                           log_path=root / "tritonserver.log",
                           exit_timeout_s=TEST_EXIT_TIMEOUT_S)  # as triton_factory
    server.start()
    yield server
    server.stop()


@pytest.fixture
def server(module_server: TritonProcess) -> Iterator[TritonProcess]:
    """The module's server, put back after each test: its repository files restored byte for
    byte, MODEL reloaded from them and READY, nothing else loaded. (Apply reads the log from
    where it stood when it began, so earlier tests' lines do not leak into its reasons.)"""
    files = repository.snapshot(module_server.repository)
    yield module_server
    repository.put_back(module_server, files, loaded=[MODEL])


@pytest.fixture
def client(server: TritonProcess) -> Iterator[TritonClient]:
    with TritonClient(server.http_url, load_timeout_s=60) as triton:
        yield triton


def config_path(server: TritonProcess) -> Path:
    return server.repository / MODEL / "config.pbtxt"


@dataclass
class InferenceLoop:
    """Infers on its own thread (its own gRPC client) until stopped; counts answers and failures."""

    url: str
    ok: int = 0
    failures: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        client = grpcclient.InferenceServerClient(self.url)
        features = grpcclient.InferInput("features", [1, 64], "FP32")
        features.set_data_from_numpy(np.random.default_rng(0).random((1, 64), dtype=np.float32))
        try:
            while not self._stop.is_set():
                try:
                    result = client.infer(MODEL, [features], client_timeout=10)
                    assert result.as_numpy("probabilities").shape == (1, 10)
                    self.ok += 1
                except Exception as exc:  # every failure is what the test is about
                    self.failures.append(str(exc))
        finally:
            client.close()

    def __enter__(self) -> InferenceLoop:
        self._thread = threading.Thread(target=self.run, daemon=True)
        self._thread.start()
        assert wait_for(lambda: self.ok > 0 or bool(self.failures), 30), "no inference answered"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def test_apply_rolls_back_when_triton_rejects_config_while_inference_keeps_answering(
    server: TritonProcess, client: TritonClient, _workspace: Path
) -> None:
    path = config_path(server)
    original = path.read_bytes()
    opened = store.read_config(server.repository, MODEL)
    with InferenceLoop(server.grpc_url) as loop:
        before_apply = loop.ok
        result = apply_config(client, server.repository, MODEL, original.decode().replace(CPU, GPU),
                              expected_sha256=opened.sha256, log=LocalLogFile(server.log_path),
                              auth=auth_as("ann"))
        answered_during_apply = loop.ok - before_apply
    assert result.outcome is ApplyOutcome.ROLLED_BACK and not result.ok
    assert "KIND_GPU" in result.message and "no GPUs are available" in result.message  # the real reason
    assert "restored, byte for byte" in result.message
    assert result.explanation is not None and result.serving is Serving.PREVIOUS
    assert path.read_bytes() == original  # byte-identical, comments and all
    assert sorted(p.name for p in path.parent.iterdir()) == ["1", "config.pbtxt"]
    assert loop.failures == [] and answered_during_apply > 0
    assert client.model_ready(MODEL)
    kind = client.model_config(MODEL).instance_group[0].kind
    assert kind == model_config_pb2.ModelInstanceGroup.KIND_CPU  # the old version serves
    (row, started) = audit.query(model=MODEL)  # the outcome after the row written before the file
    assert (started.action, started.result, started.who) == ("apply", "started", "ann")
    assert (row.action, row.result, row.who, row.origin) == ("apply", "rolled_back", "ann", "dashboard")
    assert "+instance_group [ { count: 1 kind: KIND_GPU } ]" in row.diff and "no GPUs" in row.message
    assert row.server == client.url


def test_a_good_change_is_live_and_a_rollback_puts_the_old_one_back(
    server: TritonProcess, client: TritonClient
) -> None:
    path = config_path(server)
    original = path.read_bytes()
    changed = original.replace(b"max_queue_delay_microseconds: 1000", b"max_queue_delay_microseconds: 2500")
    result = apply_config(client, server.repository, MODEL, changed,
                          expected_sha256=revisions.sha256_of(original), log=LocalLogFile(server.log_path),
                          auth=admin_auth())
    assert result.outcome is ApplyOutcome.APPLIED, result.message
    assert result.serving is Serving.PREVIOUS and result.serving_version == "1"
    assert result.warnings == ()  # Triton's live config carries every field of the file
    assert path.read_bytes() == changed and result.revision == 2
    assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == 2500
    kept = revisions.history(server.repository, MODEL)
    assert [(r.number, r.data) for r in kept] == [(2, changed), (1, original)]

    back = rollback(client, server.repository, MODEL, log=LocalLogFile(server.log_path), auth=admin_auth())
    assert back.outcome is ApplyOutcome.APPLIED, back.message
    assert path.read_bytes() == original
    assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == 1000
    again = rollback(client, server.repository, MODEL, 1, auth=admin_auth())
    assert again.outcome is ApplyOutcome.UNCHANGED and "already has the config of revision 1" in again.message
    rows = audit.query(model=MODEL)
    assert [(r.action, r.result) for r in rows] == [("rollback", "ok"), ("rollback", "started"),
                                                    ("apply", "ok"), ("apply", "started")]
    assert rows[0].message.startswith("rollback to revision 1: applied")
    assert "-  max_queue_delay_microseconds: 2500" in rows[0].diff


def test_a_concurrent_edit_is_refused_and_the_colleague_s_file_is_kept(
    server: TritonProcess, client: TritonClient
) -> None:
    path = config_path(server)
    opened = store.read_config(server.repository, MODEL)
    colleague = opened.data.replace(b"preferred_batch_size: [ 8, 16 ]", b"preferred_batch_size: [ 4 ]")
    path.write_bytes(colleague)  # edited by hand (or by another dashboard) meanwhile
    mine = opened.data.replace(b"max_queue_delay_microseconds: 1000", b"max_queue_delay_microseconds: 10")
    with pytest.raises(ConfigConflictError, match="changed since you opened it") as info:
        apply_config(client, server.repository, MODEL, mine, expected_sha256=opened.sha256,
                     base_text=opened.text, auth=admin_auth())
    assert path.read_bytes() == colleague
    assert "+  preferred_batch_size: [ 4 ]" in info.value.diff()
    assert list(client.model_config(MODEL).dynamic_batching.preferred_batch_size) == [8, 16]  # no reload
    (row,) = audit.query(model=MODEL)
    assert row.result == "refused" and "changed since you opened it" in row.message


def python_model_nowhere(tmp_path: Path) -> tuple[Path, TritonClient]:
    """A repository with one python model `m`, and a client of a server that is not there: a
    change refused before anything is written never reaches it."""
    repository = tmp_path / "repo"
    (repository / "m" / "1").mkdir(parents=True)
    (repository / "m" / "1" / "model.py").write_text("")
    (repository / "m" / "config.pbtxt").write_text('name: "m"\nbackend: "python"\n')
    return repository, TritonClient(f"http://127.0.0.1:{free_port()}")


def test_an_unparseable_config_is_refused_before_anything_is_written(
    tmp_path: Path, _workspace: Path
) -> None:
    repository, nowhere = python_model_nowhere(tmp_path)
    with pytest.raises(ConfigParseError, match=r"line 2, column 21.*no value named TYPE_FOO"):
        apply_config(nowhere, repository, "m", 'name: "m"\ninput [{ data_type: TYPE_FOO }]\n',
                     auth=admin_auth())
    assert (repository / "m" / "config.pbtxt").read_text() == 'name: "m"\nbackend: "python"\n'
    (row,) = audit.query()
    assert row.result == "refused" and "TYPE_FOO" in row.message and "+input" in row.diff
    with pytest.raises(TritonUnreachableError):  # a valid config is not written blind either
        apply_config(nowhere, repository, "m", 'name: "m"\nbackend: "python"\nmax_batch_size: 2\n',
                     auth=admin_auth())
    assert (repository / "m" / "config.pbtxt").read_text() == 'name: "m"\nbackend: "python"\n'
    assert [r.result for r in audit.query()] == ["refused", "refused"]


def test_a_config_the_validator_rejects_is_refused_unless_told_and_then_triton_rejects_it_too(
    server: TritonProcess, client: TritonClient, _workspace: Path
) -> None:
    path = config_path(server)
    original = path.read_bytes()
    too_big = original.decode().replace("preferred_batch_size: [ 8, 16 ]", "preferred_batch_size: [ 8, 64 ]")
    with pytest.raises(ConfigInvalidError, match=r"preferred.*64.*line 12.*Nothing was written") as refused:
        apply_config(client, server.repository, MODEL, too_big, auth=admin_auth())
    assert [f.rule for f in refused.value.findings if f.severity.value == "error"] == [
        "triton.preferred_batch_size"]
    assert path.read_bytes() == original
    (row,) = audit.query(model=MODEL)
    assert row.result == "refused" and "preferred" in row.message
    result = apply_config(client, server.repository, MODEL, too_big, validate=False,
                          log=LocalLogFile(server.log_path), auth=admin_auth())
    assert result.outcome is ApplyOutcome.ROLLED_BACK, result.message  # the validator agreed with Triton
    assert path.read_bytes() == original and client.model_ready(MODEL)


def test_validator_warnings_come_back_with_a_successful_apply(
    server: TritonProcess, client: TritonClient, _workspace: Path
) -> None:
    (server.repository / MODEL / "01").mkdir()  # Triton ignores it: a warning, not an error
    changed = config_path(server).read_text().replace("max_queue_delay_microseconds: 1000",
                                                      "max_queue_delay_microseconds: 2000")
    result = apply_config(client, server.repository, MODEL, changed, auth=admin_auth())
    assert result.outcome is ApplyOutcome.APPLIED, result.message
    assert [w for w in result.warnings if w.startswith("validator:")] != [], result.warnings
    assert any("triton.version_dir_ignored" in w for w in result.warnings)


def test_a_config_that_loads_but_fails_a_test_request_is_restored_and_reloaded(
    server: TritonProcess, client: TritonClient, _workspace: Path
) -> None:
    path = config_path(server)
    original = path.read_bytes()
    wrong_dims = original.decode().replace("dims: [ 64 ]", "dims: [ 65 ]")  # loads; the model cannot run it
    # validate=False: the validator refuses 65 already (digits_pipeline on disk feeds it 64)
    result = apply_config(client, server.repository, MODEL, wrong_dims, smoke=True,
                          log=LocalLogFile(server.log_path), validate=False, auth=admin_auth())
    assert result.outcome is ApplyOutcome.ROLLED_BACK, result.message
    assert result.message.startswith(f"the new config of {MODEL!r} loaded, but a test request failed: ")
    assert "restored, byte for byte and reloaded" in result.message
    assert path.read_bytes() == original
    assert client.model_config(MODEL).input[0].dims == [64]  # the previous config serves again
    assert audit.query(model=MODEL)[0].result == "rolled_back"
    good = original.decode().replace("max_queue_delay_microseconds: 1000",
                                     "max_queue_delay_microseconds: 1500")
    result = apply_config(client, server.repository, MODEL, good, smoke=True, auth=admin_auth())
    assert result.outcome is ApplyOutcome.APPLIED and "a test request answered in" in result.message


SLOW_START = "slow_start"


def test_a_load_still_running_at_the_deadline_keeps_the_new_file_that_triton_is_loading(
    server: TritonProcess, _workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Triton read the new file when the load began; putting the old one back at geadmin's
    deadline would leave Triton serving a config no file holds once the load ends. The new
    file stays, the outcome says the load had not finished and how to roll back, and the
    status names that apply (not "reload it") until the load ends."""
    add_slow_start_model(server.repository, SLOW_START)
    path = server.repository / SLOW_START / "config.pbtxt"
    original = path.read_bytes()
    slow = original + slow_start_parameter(12)
    with TritonClient(server.http_url, load_timeout_s=60) as patient:
        patient.load(SLOW_START)
    with TritonClient(server.http_url, load_timeout_s=2) as impatient:
        result = apply_config(impatient, server.repository, SLOW_START, slow,
                              log=LocalLogFile(server.log_path), auth=auth_as("ann"))
    assert result.outcome is ApplyOutcome.UNFINISHED and not result.ok, result.message
    first, *rest = result.message.splitlines()
    assert first.startswith(f"load of {SLOW_START!r} did not finish in "), first
    assert "Triton had not answered the reload after the load timeout (2 s)" in first
    assert "— fix: Triton loads the new config beside the previous version, which serves meanwhile" in first
    said = "\n".join(rest)
    assert "the new config.pbtxt stays on disk: Triton is loading it" in said
    assert f"`geadmin config rollback {SLOW_START} 1`" in said  # the previous config, kept as revision 1
    assert "restored" not in result.message
    assert path.read_bytes() == slow  # what Triton is loading
    assert result.serving is Serving.PREVIOUS  # the previous version answers meanwhile
    (row, _started) = audit.query(model=SLOW_START)
    assert (row.action, row.result, row.who) == ("apply", "unfinished", "ann")
    status = ["status", "--url", server.http_url, "--repository", str(server.repository)]
    assert main(status) == ExitCode.DEGRADED  # still loading: the previous config serves
    said = capsys.readouterr().out
    assert f"the apply by ann at {row.at:%H:%M} UTC stopped waiting for Triton's load of this file" in said
    assert "fix: wait: this clears when the load ends" in said and "apply it (reload" not in said
    with TritonClient(server.http_url, load_timeout_s=60) as triton:
        # the index says READY all along (the previous version serves): the live config tells
        assert wait_for(lambda: triton.model_config(SLOW_START).parameters["init_s"].string_value == "12", 30)
        assert triton.model_ready(SLOW_START)
    assert path.read_bytes() == slow  # the file holds what serves
    assert main(status) == ExitCode.OK, capsys.readouterr().out


def run_cli(argv: list[str]) -> int:
    """The `config` actions and the `audit` command, on a parser of our own."""
    parser = argparse.ArgumentParser(prog="geadmin")
    commands = parser.add_subparsers(dest="command", required=True)
    config.register(commands)
    config_change.register(commands)
    audit_log.register(commands)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_cli_apply_history_rollback_and_audit(
    server: TritonProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    where = ["--url", server.http_url, "--repository", str(server.repository),
             "--triton-log", str(server.log_path)]
    path = config_path(server)
    original = path.read_bytes()
    bad, good = tmp_path / "bad.pbtxt", tmp_path / "good.pbtxt"
    bad.write_bytes(original.replace(CPU.encode(), GPU.encode()))
    good.write_bytes(original.replace(b"preferred_batch_size: [ 8, 16 ]", b"preferred_batch_size: [ 8 ]"))

    assert run_cli(["config", "apply", MODEL, str(bad), *where]) == 1
    captured = capsys.readouterr()
    assert "no GPUs are available" in captured.err and "restored, byte for byte" in captured.err
    assert "+instance_group [ { count: 1 kind: KIND_GPU } ]" in captured.out  # the diff
    assert path.read_bytes() == original

    assert run_cli(["config", "apply", MODEL, str(good), "--expect-hash",
                    revisions.sha256_of(original)[:12], *where]) == 0
    assert "Triton reloaded it, and version 1 serves it" in capsys.readouterr().out
    stale = revisions.sha256_of(original)  # the file changed (the good apply) since this was read
    assert run_cli(["config", "apply", MODEL, str(bad), "--expect-hash", stale, *where]) == 1
    assert "changed since you opened it" in capsys.readouterr().err

    assert run_cli(["config", "history", MODEL, "--repository", str(server.repository)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["REV", "WHEN", "WHO", "SHA256", "NOTE"] and table[1].startswith("2*")
    assert run_cli(["config", "history", MODEL, "--repository", str(server.repository), "--show", "1"]) == 0
    assert capsys.readouterr().out.encode() == original

    assert run_cli(["config", "rollback", MODEL, *where, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outcome"] == "applied"
    assert path.read_bytes() == original

    assert run_cli(["audit", "--json", "--model", MODEL]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["action"], r["result"]) for r in rows] == [
        ("rollback", "ok"), ("rollback", "started"), ("apply", "refused"), ("apply", "ok"),
        ("apply", "started"), ("apply", "rolled_back"), ("apply", "started")]
    assert {r["origin"] for r in rows} == {"cli"} and all(r["who"] for r in rows)

    # A model that is not loaded: written, not loaded behind the operator's back.
    with TritonClient(server.http_url) as other:
        other.unload(MODEL)
        assert wait_settled(other, [MODEL], 30)
    assert run_cli(["config", "apply", MODEL, str(good), *where]) == 0
    assert "the model is not loaded, so Triton has not checked it" in capsys.readouterr().out
    states = {e.name: e.state for e in TritonClient(server.http_url).repository_index()}
    assert states[MODEL] is not ModelState.READY


def test_a_config_larger_than_a_config_can_be_read_is_refused_before_the_started_row(
    tmp_path: Path, _workspace: Path
) -> None:
    repository, nowhere = python_model_nowhere(tmp_path)
    huge = 'name: "m"\nbackend: "python"\n' + "# padding\n" * (MAX_CONFIG_BYTES // 10 + 1)
    with pytest.raises(RepositoryError, match=r"is 4,194,3\d\d bytes, more than a config can be "
                       r"\(4,194,304 bytes, 4 MiB\): nothing was written"):
        apply_config(nowhere, repository, "m", huge, auth=admin_auth())
    assert (repository / "m" / "config.pbtxt").read_text() == 'name: "m"\nbackend: "python"\n'
    assert [r.result for r in audit.query()] == ["refused"]  # no started row: nothing to reconcile


def test_a_directory_fsync_failure_after_the_write_is_an_apply_of_the_file_on_disk(
    server: TritonProcess, client: TritonClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(directory: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    path = config_path(server)
    changed = path.read_bytes().replace(b"max_queue_delay_microseconds: 1000",
                                        b"max_queue_delay_microseconds: 3000")
    with monkeypatch.context() as patched:
        patched.setattr(atomic, "_fsync_handle", broken)  # the directory's, after the rename
        result = apply_config(client, server.repository, MODEL, changed, auth=admin_auth())
    assert result.outcome is ApplyOutcome.APPLIED, result.message
    assert "the new config.pbtxt is on disk (read back), but:" in result.message
    assert "IS written" in result.message and "Input/output error" in result.message
    assert path.read_bytes() == changed
    assert client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds == 3000
    (row, started) = audit.query(model=MODEL)
    assert (started.result, row.result) == ("started", "ok")
    assert "the new config.pbtxt is on disk" in row.message


def test_put_back_served_is_refused_while_an_apply_of_the_model_runs(
    server: TritonProcess, client: TritonClient, _workspace: Path
) -> None:
    path = config_path(server)
    drifted = path.read_bytes().replace(b"max_queue_delay_microseconds: 1000",
                                        b"max_queue_delay_microseconds: 4000")
    path.write_bytes(drifted)  # as an apply writes it before its (long) load
    refused = pytest.raises(ConfigLockedError, match=f"an apply of '{MODEL}' is under way: wait for it")
    with locks.edit_lock(server.repository, MODEL, "apply", wait_s=0), refused:  # as that apply holds it
        put_back_served(client, server.repository, MODEL, auth=admin_auth())
    assert path.read_bytes() == drifted  # untouched
    (row,) = audit.query(action=PUT_BACK_ACTION)
    assert row.result == "refused" and "nothing was written" in row.message
    put_back_served(client, server.repository, MODEL, auth=admin_auth())  # free again: puts it back
    assert b"max_queue_delay_microseconds: 1000" in path.read_bytes()
