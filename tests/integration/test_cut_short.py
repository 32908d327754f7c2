"""Nothing lost when a change is cut short: `geadmin config apply` and `geadmin models create`
run in a child process that SIGKILLs itself at each step (GEADMIN_FAULT_POINT, the test hook
of `geadmin.test_hooks.fault_point`), against a real tritonserver. Then geadmin starts again
(a CLI command that names the repository) and the test checks the files (the old or the new
config, never half of one; the previous one kept as a revision; a model directory whole or
absent, no staging left), what Triton serves, and the audit log (the started row, closed as
interrupted and flagged until a rollback). A load/unload whose progress callback raises (as
a Streamlit rerun does) is audited too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.diagnose import interrupted
from geadmin.ops.models.actions import ModelAction, run_action
from geadmin.ops.models.apply import apply_config
from geadmin.repository import revisions, store
from geadmin.repository.revisions import sha256_of
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient
from tests.support.auth import auth_as
from tests.support.samples import copy_samples

ROOT = Path(__file__).resolve().parents[2]
MODEL = "digits_classifier"
OLD_DELAY, NEW_DELAY = 1000, 2500


class ScriptRerun(BaseException):
    """What Streamlit raises inside a page's `st.*` call when a click asks for a rerun."""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("TRITON_URL", "ADMIN_KEY", "TRITON_LOG", "REPOSITORY", "SERVERS_FILE", "TRITON_URLS",
                 "FAULT_POINT"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def server(triton_factory: Callable[..., TritonProcess], tmp_path: Path, home: Path) -> TritonProcess:
    return triton_factory(copy_samples(tmp_path / "model_repository"), models=[MODEL])


def geadmin(home: Path, *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in a child process (a fresh geadmin start), cut short at `fault` when given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GEADMIN_")}
    env["GEADMIN_HOME"] = str(home)
    if fault:
        env["GEADMIN_FAULT_POINT"] = fault
    return subprocess.run([sys.executable, "-m", "geadmin.cli", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=180, check=False)


def served_delay(server: TritonProcess) -> int:
    with TritonClient(server.http_url) as client:
        return int(client.model_config(MODEL).dynamic_batching.max_queue_delay_microseconds)


@pytest.mark.parametrize(("step", "on_disk", "served"), [
    ("apply.started", "previous", OLD_DELAY),  # the started row is written, the file is not
    ("apply.written", "new", OLD_DELAY),  # the new file is on disk, Triton was not asked
    ("apply.loaded", "new", NEW_DELAY),  # Triton loaded it; the outcome row was never written
])
def test_an_apply_killed_at_each_step_leaves_a_whole_file_and_is_reconciled_at_the_next_start(
    server: TritonProcess, home: Path, tmp_path: Path, step: str, on_disk: str, served: int
) -> None:
    path = server.repository / MODEL / "config.pbtxt"
    old = path.read_bytes()
    new = old.replace(f"max_queue_delay_microseconds: {OLD_DELAY}".encode(),
                      f"max_queue_delay_microseconds: {NEW_DELAY}".encode())
    assert new != old
    (tmp_path / "new.pbtxt").write_bytes(new)
    where = ["--url", server.http_url, "--repository", str(server.repository)]

    killed = geadmin(home, "config", "apply", MODEL, str(tmp_path / "new.pbtxt"), *where, fault=step)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)

    # The files: never half-written, the previous config kept as a revision once anything was written.
    assert path.read_bytes() == (old if on_disk == "previous" else new)
    assert not [p.name for p in path.parent.iterdir() if p.name.endswith(".geadmin-tmp")]
    kept = revisions.revision_with_hash(server.repository, MODEL, sha256_of(old))
    assert (kept is not None) is (on_disk == "new")
    assert served_delay(server) == served  # Triton serves the old config or the new, whole
    (started,) = audit.query(model=MODEL)  # started, and nothing after it
    assert (started.action, started.result) == ("apply", "started")

    # Start again: any command that names the repository reconciles it.
    again = geadmin(home, "models", "list", *where)
    assert again.returncode == 0, again.stderr
    rows = audit.query(model=MODEL)
    assert [r.result for r in rows] == ["interrupted", "started"]
    assert f"+  max_queue_delay_microseconds: {NEW_DELAY}" in rows[0].diff
    flags = interrupted.unresolved(server.repository)
    if on_disk == "previous":
        assert flags == [] and "nothing was written" in rows[0].message
        assert "nothing was written" in again.stderr  # said once, at the start that closed it
        return
    (flag,) = flags
    assert kept is not None and flag.previous_revision == kept.number
    assert f"an interrupted apply of {MODEL!r}" in again.stderr and flag.rollback_command in again.stderr
    assert "it validates" in flag.message

    # `geadmin status` says so (DEGRADED, exit 4) with the way back; the rollback it names clears it.
    status = geadmin(home, "status", *where)
    assert status.returncode == 4 and "interrupted" in status.stdout + status.stderr, status.stdout
    back = geadmin(home, "config", "rollback", MODEL, str(kept.number), *where)
    assert back.returncode == 0, back.stderr
    assert path.read_bytes() == old and served_delay(server) == OLD_DELAY
    assert interrupted.unresolved(server.repository) == []
    assert geadmin(home, "status", *where).returncode == 0
    assert geadmin(home, "models", "list", *where).stderr.count("interrupted") == 0  # closed once


@pytest.mark.parametrize(("step", "created"), [
    ("create.started", False),  # the started row is written, nothing staged
    ("create.staged", False),  # the staging directory is full, not renamed into place
    ("create.renamed", True),  # the directory is in place; no outcome row, not loaded
])
def test_a_create_killed_at_each_step_leaves_the_model_whole_or_absent_and_no_staging(
    server: TritonProcess, home: Path, step: str, created: bool
) -> None:
    where = ["--url", server.http_url, "--repository", str(server.repository)]
    before = sorted(p.name for p in server.repository.iterdir())
    killed = geadmin(home, "models", "create", "echo", "--template", "python", "--input", "INPUT0:FP32:4",
                     "--output", "OUTPUT0:FP32:4", *where, fault=step)
    assert killed.returncode == -signal.SIGKILL, (killed.stdout, killed.stderr)
    staging = [p for p in server.repository.iterdir() if p.name.startswith(".geadmin-staging-")]
    assert bool(staging) is (step == "create.staged")  # SIGKILL runs no `finally`: left behind
    (started,) = audit.query(model="echo")
    assert (started.action, started.result) == ("create", "started")
    if staging:  # never offered as a model: not by Triton's index (2.51 skips hidden directories),
        # not by geadmin's listing, not by the compose loader (which also filters them itself)
        with TritonClient(server.http_url) as client:
            assert not [e.name for e in client.repository_index() if e.name.startswith(".")]
        assert store.model_names(server.repository) == sorted(before)
        loader = subprocess.run(
            [sys.executable, str(ROOT / "deploy" / "triton-load-models.py"), "--url", server.http_url],
            env={**os.environ, "TRITON_LOAD_MODELS": "*", "TRITON_LIVE_TIMEOUT": "30"}, text=True,
            capture_output=True, timeout=120, check=False)
        assert ".geadmin-staging" not in loader.stdout and "loading " in loader.stdout, loader.stdout

    again = geadmin(home, "models", "list", *where)
    assert again.returncode == 0, again.stderr
    assert not [p for p in server.repository.iterdir() if p.name.startswith(".")]  # staging removed
    model_dir = server.repository / "echo"
    if created:
        assert sorted(p.name for p in server.repository.iterdir()) == sorted([*before, "echo"])
        assert sorted(str(p.relative_to(model_dir)) for p in model_dir.rglob("*")) == [
            "1", "1/model.py", "config.pbtxt"]
        with TritonClient(server.http_url, load_timeout_s=60) as client:  # whole: Triton loads it
            client.load("echo")
            assert client.model_ready("echo")
            assert [i.name for i in client.model_config("echo").input] == ["INPUT0"]
    else:
        assert sorted(p.name for p in server.repository.iterdir()) == before
        with TritonClient(server.http_url) as client:
            assert "echo" not in {e.name for e in client.repository_index()}
            assert not [e.name for e in client.repository_index() if e.name.startswith(".")]
    rows = audit.query(model="echo")
    assert [(r.action, r.result) for r in rows[-2:]] == [("create", "interrupted"), ("create", "started")]
    closed = rows[-2]
    assert ("in place, whole" in closed.message) is created
    assert ("nothing was created" in closed.message) is not created
    if step == "create.staged":
        assert "staging directory" in again.stderr and "removed" in again.stderr


def test_a_progress_callback_that_raises_leaves_each_action_audited(
    server: TritonProcess, home: Path
) -> None:
    """The Models page draws progress with `st.progress`; a click during a bulk action makes
    Streamlit raise from inside that call. The action that ran is audited all the same."""
    calls: list[str] = []

    def progress(done: int, total: int, text: str) -> None:
        calls.append(text)
        if done == 1:  # after the first unload, before the second
            raise ScriptRerun

    with TritonClient(server.http_url, load_timeout_s=60) as client:
        client.load("text_normalize")
        with pytest.raises(ScriptRerun):
            run_action(client, ModelAction.UNLOAD, [MODEL, "text_normalize"], progress=progress,
                       auth=auth_as("ann"))
        rows = audit.query(action="unload")
        assert [(r.model, r.result, r.who) for r in rows] == [(MODEL, "ok", "ann")]
        assert not client.model_ready(MODEL) and client.model_ready("text_normalize")

        reports: list[str] = []

        def mid_load(done: int, total: int, text: str) -> None:
            reports.append(text)
            if len(reports) == 2:  # the first report comes before the load; the next ones during it
                raise ScriptRerun

        with pytest.raises(ScriptRerun):
            run_action(client, ModelAction.LOAD, [MODEL], progress=mid_load, auth=auth_as("bob"))
        (row,) = audit.query(action="load")
        assert (row.model, row.result, row.who) == (MODEL, "failed", "bob")
        assert "cut short before its outcome was known" in row.message


def test_an_apply_unwound_mid_load_in_its_own_process_is_closed_at_once(
    server: TritonProcess, home: Path
) -> None:
    """The Config editor's progress callback draws with Streamlit; a rerun raises from inside it
    while Triton loads the new config. The started row is closed there and then (no restart
    needed), and the apply is flagged with the revision to go back to."""
    path = server.repository / MODEL / "config.pbtxt"
    old = path.read_bytes()
    new = old.replace(f"max_queue_delay_microseconds: {OLD_DELAY}".encode(),
                      f"max_queue_delay_microseconds: {NEW_DELAY}".encode())

    def progress(elapsed_s: float, latest: str) -> None:
        raise ScriptRerun

    with TritonClient(server.http_url, load_timeout_s=60) as client, pytest.raises(ScriptRerun):
        apply_config(client, server.repository, MODEL, new, progress=progress, auth=auth_as("ann"))
    assert path.read_bytes() == new  # whole: the write happened before the load was asked
    rows = audit.query(model=MODEL)
    assert [(r.action, r.result) for r in rows] == [("apply", "interrupted"), ("apply", "started")]
    assert "cut short in this process by ScriptRerun" in rows[0].message
    (flag,) = interrupted.unresolved(server.repository)
    kept = revisions.revision_with_hash(server.repository, MODEL, sha256_of(old))
    assert kept is not None and flag.previous_revision == kept.number
