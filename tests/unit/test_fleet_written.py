"""A fleet apply, or its put back, on a server where the model is not loaded wrote a file and
changed nothing that serves: its row in the server's workspace is `written`, never `ok` (an
`ok` there turned an operator's unload into "model dropped", DEGRADED). Where the model is
loaded the reload is the change: `ok`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from geadmin import audit, db
from geadmin.access import guard
from geadmin.audit import Actor, Origin, Result
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RolloutPlan
from geadmin.domain import ModelEntry, ModelState
from geadmin.fleet import journal, restore
from geadmin.fleet.server_audit import ServerAudit
from geadmin.fleet.wave import Control, WaveChanger
from geadmin.repository import revisions, store

OLD, NEW = b'name: "echo"\nbackend: "python"\n', b'name: "echo"\nbackend: "python"\nmax_batch_size: 4\n'


class Index:
    """A server's repository index, and nothing else: no load or reload may be asked of it."""

    def __init__(self, *entries: ModelEntry) -> None:
        self.entries = list(entries)

    def repository_index(self) -> list[ModelEntry]:
        return self.entries

    def close(self) -> None:
        pass


def plan(repository: Path, ready: bool | None) -> RolloutPlan:
    server = PlannedServer("a", "http://127.0.0.1:1", 1, str(repository), ready)
    return RolloutPlan("lab", "apply", "echo", (server,), 1, 1,
                       (Previous(str(repository), revisions.sha256_of(OLD), 1),), NEW.decode(),
                       revisions.sha256_of(NEW))


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(the operator's workspace, server a's workspace, the repository)."""
    operator, server, repository = tmp_path / "operator", tmp_path / "srv-a", tmp_path / "models"
    with db.connect(server):
        pass
    monkeypatch.setenv("GEADMIN_HOME", str(operator))
    (repository / "echo" / "1").mkdir(parents=True)
    (repository / "echo" / "config.pbtxt").write_bytes(OLD)
    revisions.record_revision(repository, "echo", OLD, who="ann", home=operator)
    return operator, server, repository


@pytest.mark.parametrize(("loaded", "ready", "result"), [
    (False, True, Result.WRITTEN), (True, False, Result.OK),
    (None, False, Result.WRITTEN), (None, True, Result.OK), (None, None, Result.OK)])
def test_an_apply_put_back_where_the_model_is_not_loaded_is_written(
        homes: tuple[Path, Path, Path], loaded: bool | None, ready: bool | None, result: Result) -> None:
    operator, server, repository = homes
    on_server = ServerAudit(plan(repository, ready), Actor("ann", Origin.CLI), operator, 7)
    assert on_server.put_back("a", "http://127.0.0.1:1", server, "", "restore", loaded=loaded) == ""
    (row,) = audit.query(home=server)
    assert (row.action, row.result) == ("rollback", result.value)


def test_a_put_back_names_the_servers_where_the_model_is_not_loaded_and_nothing_was_reloaded(
        homes: tuple[Path, Path, Path]) -> None:
    operator, _, repository = homes  # the file is back already (OLD): only a reload is left to do
    not_loaded: set[str] = set()
    problems = restore.put_back(plan(repository, True), ["a"], {"a": cast(Any, Index())},
                                auth=guard.os_user(), home=operator, note="restore", not_loaded=not_loaded)
    assert problems == {"a": ""} and not_loaded == {"a"}
    assert store.read_config(repository, "echo").data == OLD


def test_a_shared_repository_already_written_is_written_on_a_server_where_the_model_is_not_loaded(
        homes: tuple[Path, Path, Path]) -> None:
    operator, _, repository = homes
    recorder = journal.Recorder(plan(repository, False), Actor("ann", Origin.CLI), operator)
    member = cast(Any, SimpleNamespace(name="a"))
    changer = WaveChanger([member], {}, None, recorder, lambda _: None, Control(), 1.0, False, False)
    assert changer._reloaded(member, str(repository), cast(Any, Index()), "written once") == ""
    result, message, _ = changer.done["a"]
    assert result is Result.WRITTEN and "not loaded there" in message, message
    other = ModelEntry("other", "1", ModelState.READY, "")
    changer._reloaded(member, str(repository), cast(Any, Index(other)), "written once")
    assert changer.done["a"][0] is Result.WRITTEN
