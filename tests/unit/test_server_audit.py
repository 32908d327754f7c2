"""A fleet change recorded in each changed server's own workspace (geadmin.fleet.server_audit),
and the `home` of a `[[server]]` that names that workspace. The rollout that calls it against
real tritonservers: tests/integration/test_fleet_server_audit.py."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from geadmin import audit, db
from geadmin.audit import Actor, Origin, Result
from geadmin.diagnose.rollout_plan import PlannedServer, Previous, RolloutPlan
from geadmin.domain import Ports
from geadmin.errors import ConfigError
from geadmin.fleet import discovery
from geadmin.fleet.server_audit import Config, ServerAudit
from geadmin.repository import revisions
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.triton.servers import parse_servers_file

OLD, NEW = b'name: "echo"\nbackend: "python"\n', b'name: "echo"\nbackend: "python"\nmax_batch_size: 4\n'


def plan(repository: Path, previous: int = 1) -> RolloutPlan:
    server = PlannedServer("a", "http://127.0.0.1:1", 1, str(repository))
    return RolloutPlan("lab", "apply", "echo", (server,), 1, 1,
                       (Previous(str(repository), revisions.sha256_of(OLD), previous),), NEW.decode(),
                       revisions.sha256_of(NEW))


@pytest.fixture
def homes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """(the operator's workspace, server a's workspace, the repository both name)."""
    operator, server, repository = tmp_path / "operator", tmp_path / "srv-a", tmp_path / "models"
    with db.connect(server):  # a workspace geadmin keeps: its database is there
        pass
    monkeypatch.setenv("GEADMIN_HOME", str(operator))
    revisions.record_revision(repository, "echo", OLD, who="ann", note="before a fleet apply", home=operator)
    return operator, server, repository


def test_an_apply_is_recorded_in_the_server_s_workspace_with_who_from_where_and_both_revisions(
        homes: tuple[Path, Path, Path]) -> None:
    operator, server, repository = homes
    on_server = ServerAudit(plan(repository), Actor("ann", Origin.CLI), operator, 7)
    configs = on_server.applied(str(repository), wrote=True)
    assert on_server.record("a", "http://127.0.0.1:1", server, "apply", Result.OK, "applied", diff="-x\n+y",
                            configs=configs) == ""
    (row,) = audit.query(home=server)
    assert (row.action, row.model, row.result, row.who, row.origin, row.server, row.diff) == (
        "apply", "echo", "ok", "ann", "cli", "http://127.0.0.1:1", "-x\n+y")
    assert row.message.startswith(f"fleet apply of 'echo' on a (rollout #7 of fleet 'lab', run by ann (cli) "
                                  f"on {socket.gethostname()}, workspace {operator.resolve()}): applied")
    kept = revisions.history(repository, "echo", home=server)
    assert [(r.number, r.data) for r in kept] == [(2, NEW), (1, OLD)]
    assert "rollout #7" in kept[0].note and kept[1].note == "before fleet rollout #7"


def test_a_put_back_apply_is_a_rollback_row_and_the_old_config_on_top_of_the_history(
        homes: tuple[Path, Path, Path]) -> None:
    operator, server, repository = homes
    on_server = ServerAudit(plan(repository), Actor("ann"), operator, 7)
    on_server.record("a", "u", server, "apply", Result.OK, "applied",
                     configs=on_server.applied(str(repository), wrote=True))
    assert on_server.put_back("a", "u", server, "", "fleet rollout #7 stopped: put back") == ""
    newest = audit.query(home=server)[0]
    assert (newest.action, newest.result) == ("rollback", "ok")
    assert newest.message.endswith(": fleet rollout #7 stopped: put back")
    assert [r.data for r in revisions.history(repository, "echo", home=server)] == [OLD, NEW, OLD]
    on_server.put_back("a", "u", server, "the file changed since", "restore")
    failed = audit.query(home=server)[0]
    assert (failed.result, failed.message.split(": ", 1)[1]) == ("failed", "restore: NOT put back: the file "
                                                                 "changed since")


def test_the_operator_s_own_workspace_and_an_unknown_one_get_nothing_more(
        homes: tuple[Path, Path, Path]) -> None:
    operator, _, repository = homes
    on_server = ServerAudit(plan(repository), Actor("ann"), None, 7)  # None: GEADMIN_HOME, the operator's
    assert on_server.record("a", "u", operator, "load", Result.OK, "loaded") == ""
    assert on_server.record("a", "u", None, "load", Result.OK, "loaded") == ""
    assert audit.query(home=operator) == []


def test_a_missing_workspace_is_said_and_never_created(homes: tuple[Path, Path, Path],
                                                       tmp_path: Path) -> None:
    operator, _, repository = homes
    missing = tmp_path / "typo" / "srv-a"
    on_server = ServerAudit(plan(repository), Actor("ann"), operator, 7)
    note = on_server.record("a", "u", missing, "load", Result.OK, "loaded")
    assert note == (f"not recorded in a's workspace {missing}: no such workspace directory ({missing} "
                    "does not exist)")
    assert not missing.parent.exists()


def test_a_directory_that_is_no_workspace_is_neither_written_nor_made_private(
        homes: tuple[Path, Path, Path], tmp_path: Path) -> None:
    operator, _, repository = homes
    shared = tmp_path / "srv"  # e.g. home = "/srv" by mistake
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    note = ServerAudit(plan(repository), Actor("ann"), operator, 7).record("a", "u", shared, "load",
                                                                           Result.OK, "loaded")
    assert note.startswith(f"not recorded in a's workspace {shared}: {shared} is not a geadmin workspace "
                           "(it holds no geadmin.db)"), note
    assert list(shared.iterdir()) == [] and shared.stat().st_mode & 0o777 == 0o755


def test_a_workspace_whose_database_cannot_be_written_is_said_once_and_not_tried_again(
        homes: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    operator, server, repository = homes
    (server / "geadmin.db").write_bytes(b"this is not a SQLite database, it is a note" * 100)
    on_server = ServerAudit(plan(repository), Actor("ann"), operator, 7)
    note = on_server.record("a", "u", server, "apply", Result.OK, "applied",
                            configs=[Config(repository, NEW, "n")])
    assert note.startswith(f"not recorded in a's workspace {server}: cannot open") or \
        note.startswith(f"not recorded in a's workspace {server}: cannot read or write"), note
    assert "not a database" in note
    tried: list[Path | None] = []
    monkeypatch.setattr(audit, "record", lambda *a, **k: tried.append(k.get("home")))
    assert on_server.record("a", "u", server, "rollback", Result.OK, "put back") == note
    assert tried == []  # a locked database would make every row wait out its busy timeout


def test_a_server_s_home_is_read_from_the_servers_file(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nname = "a"\nurl = "http://127.0.0.1:8000"\nhome = "/srv/geadmin-a"\n'
                    '[[server]]\nname = "b"\nurl = "http://127.0.0.2:8000"\nhome = "~/geadmin-b"\n'
                    '[[server]]\nname = "c"\nurl = "http://127.0.0.3:8000"\n')
    a, b, c = parse_servers_file(file)
    assert (a.home, b.home, c.home) == (Path("/srv/geadmin-a"), tmp_path / "geadmin-b", None)


@pytest.mark.parametrize(("value", "says"), [
    ('"srv/geadmin-a"', "home must be an absolute path"),
    ('""', "home must be a directory path"),
    ("3", "home must be a directory path"),
    ('"/srv/a\\u0000b"', "home must be a directory path"),
])
def test_a_home_that_names_no_workspace_reliably_is_refused(tmp_path: Path, value: str, says: str) -> None:
    file = tmp_path / "servers.toml"
    file.write_text(f'[[server]]\nname = "a"\nurl = "http://127.0.0.1:8000"\nhome = {value}\n')
    with pytest.raises(ConfigError, match=f"server #1: {says}"):
        parse_servers_file(file)


def test_a_configured_member_carries_its_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nname = "a"\nurl = "http://127.0.0.1:1"\nhome = "/srv/geadmin-a"\n'
                    '[[server]]\nname = "b"\nurl = "http://127.0.0.2:1"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "operator"))  # no live stack there
    found = discovery.discover(discovery.fleet_named(None))
    assert {m.name: m.home for m in found.members} == {"a": Path("/srv/geadmin-a"), "b": None}


def test_the_embedded_stack_s_triton_carries_the_stack_s_workspace_unless_its_entry_names_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    operator = tmp_path / "operator"
    operator.mkdir()
    Workspace(operator).write_stack(StackInfo(
        pid=os.getpid(), http_url="http://127.0.0.1:18000", grpc_url="grpc://127.0.0.1:18001",
        metrics_url="http://127.0.0.1:18002/metrics", ports=Ports(18000, 18001, 18002),
        dashboard_url="http://127.0.0.1:18501", triton_log=operator / "logs" / "tritonserver.log",
        repository=operator / "model_repository", home=operator))
    file = tmp_path / "servers.toml"
    file.write_text('[[server]]\nname = "mine"\nurl = "grpc://127.0.0.1:18001"\n'
                    '[[server]]\nname = "other"\nurl = "http://127.0.0.2:18000"\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(file))
    monkeypatch.setenv("GEADMIN_HOME", str(operator))
    found = discovery.discover(discovery.fleet_named(None))
    assert {m.name: m.home for m in found.members} == {"mine": operator, "other": None}
    on_server = ServerAudit(plan(tmp_path / "models"), Actor("ann"), None, 7)
    assert on_server.where(operator) is None  # the operator's own: its rows are there already
