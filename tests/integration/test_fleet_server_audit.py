"""A fleet change audited where it happened: three real tritonservers (tests/support/fleet_lab.py),
a and b reading one repository, c its own; each names its geadmin workspace (`home`) in the
servers file, and the rollouts run from a third workspace, the operator's. Each server's own
`geadmin audit` and `geadmin config history` show the change made to it; c's workspace cannot
be written (its database is not a database), which its rollout row says while the rollout goes on."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.access import guard
from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.rollout import Change, rollout
from geadmin.fleet.wave import Control
from tests.support.fleet_lab import BASE, MODEL, FleetLab, config, fleet_lab
from tests.support.stack import GEADMIN, in_process

pytestmark = pytest.mark.integration

NEW = config("v1.1")
LOOSE = GateSettings(requests=0, latency_slack_ms=10_000)  # READY only: the cores are shared in CI
FLAGS = ("--fleet", "lab", "--wave-size", "1", "--gate-requests", "0", "--latency-slack-ms", "10000")
NOT_A_DATABASE = b"this file stands where c's geadmin.db should be, and is no SQLite database\n" * 64


@dataclass
class Homes:
    lab: FleetLab
    operator: Path
    servers: dict[str, Path]  # a, b: workspaces; c: one whose database cannot be written


def run(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (the killed rollout below is a child: it must die alone)."""
    return in_process(*args, home=home)


def rows(home: Path) -> list[dict[str, str]]:
    result = run("audit", "--model", MODEL, "--json", home=home)
    assert result.returncode == 0, result.stderr
    found: list[dict[str, str]] = json.loads(result.stdout)
    return found


def history(home: Path, repository: Path) -> list[dict[str, object]]:
    result = run("config", "history", MODEL, "--repository", str(repository), "--json", home=home)
    assert result.returncode == 0, result.stderr
    found: list[dict[str, object]] = json.loads(result.stdout)
    return found


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FleetLab]:
    # Each server's workspace, as the lab's servers file names it: home-<name> beside it.
    with fleet_lab(tmp_path_factory.mktemp("server_audit"), export=True, homes=True) as started:
        yield started


@pytest.fixture
def homes(lab: FleetLab, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Homes]:
    servers = {name: lab.servers_file.parent / f"home-{name}" for name in lab.servers}
    for home in servers.values():  # fresh workspaces for each test
        if home.exists():
            for file in home.iterdir():
                file.unlink()
        home.mkdir(exist_ok=True)
    for name in ("a", "b"):  # workspaces their geadmin keeps (`geadmin up` there made the database)
        assert run("audit", home=servers[name]).returncode == 0
    (servers["c"] / "geadmin.db").write_bytes(NOT_A_DATABASE)
    operator = tmp_path / "operator"
    monkeypatch.setenv("GEADMIN_HOME", str(operator))
    yield Homes(lab, operator, servers)
    lab.put_back()


def test_each_server_s_own_audit_and_config_history_show_the_fleet_apply_made_to_it(homes: Homes,
                                                                                      tmp_path: Path) -> None:
    lab, a, b, c = homes.lab, homes.servers["a"], homes.servers["b"], homes.servers["c"]
    new_file = tmp_path / "new.pbtxt"
    new_file.write_text(NEW)
    result = run("fleet", "apply", MODEL, str(new_file), *FLAGS, "--json", home=homes.operator)
    assert result.returncode == 0, result.stdout + result.stderr
    done = json.loads(result.stdout)
    number, by_server = done["journal_id"], {s["server"]: s for s in done["servers"]}
    assert done["ok"] and lab.files() == (NEW.encode(), NEW.encode())
    assert [by_server[n]["outcome"] for n in "abc"] == ["changed", "changed", "changed"]
    assert by_server["a"]["message"] == "" and by_server["b"]["message"] == ""
    assert by_server["c"]["message"].startswith(f"not recorded in c's workspace {c}: "), by_server["c"]
    assert "not a database" in by_server["c"]["message"]
    assert c.joinpath("geadmin.db").read_bytes() == NOT_A_DATABASE  # left as it was

    who = audit.os_user_name()
    for name, home in (("a", a), ("b", b)):
        (row,) = rows(home)  # its own change, and nobody else's
        assert (row["action"], row["result"], row["who"], row["origin"], row["server"]) == (
            "apply", "ok", who, "cli", lab.servers[name].http_url)
        assert row["message"].startswith(f"fleet apply of 'echo' on {name} (rollout #{number} of fleet "
                                         f"'lab', run by {who} (cli) on "), row["message"]
        assert f"workspace {homes.operator.resolve()})" in row["message"] and "+" in row["diff"]
        kept = history(home, lab.shared)
        assert [(r["revision"], r["current"]) for r in kept] == [(2, True), (1, False)]
        assert f"rollout #{number}" in str(kept[0]["note"])
    assert "written once for the servers that read it" in rows(b)[0]["message"]
    shown = run("config", "history", MODEL, "--repository", str(lab.shared), "--show", "1", home=a)
    assert shown.stdout == BASE  # `config rollback echo 1` there would put this back

    mine = rows(homes.operator)  # the whole rollout: the journal, and each server's apply
    assert [r["result"] for r in mine if r["action"] == "fleet apply"] == ["ok", *["step"] * 6, "started"]
    assert {r["server"] for r in mine if r["action"] == "apply" and r["result"] == "ok"} == {
        lab.servers["a"].http_url, lab.servers["c"].http_url}  # b reads a's repository: reloaded
    assert lab.servers["b"].http_url in {r["server"] for r in mine if r["action"] == "reload"}

    again = run("fleet", "reload", MODEL, *FLAGS, home=homes.operator)
    assert again.returncode == 0, again.stdout + again.stderr
    newest = rows(a)[0]
    assert (newest["action"], newest["result"]) == ("reload", "ok")
    assert newest["message"].startswith("fleet reload of 'echo' on a (rollout #")


def test_a_stopped_rollout_records_the_put_back_where_it_happened(homes: Homes) -> None:
    lab, a = homes.lab, homes.servers["a"]
    control = Control()

    def progress(line: str) -> None:
        if line.startswith("wave 1: health gate"):  # a changed; the operator aborts before b
            control.aborted.set()

    members = list(discover(fleet_named("lab")).members)
    assert {m.name: m.home for m in members} == homes.servers
    result = rollout(members, Change.APPLY, MODEL, new_config=NEW.encode(), gate=LOOSE, auth=guard.os_user(),
                     fleet="lab", progress=progress, control=control)
    assert not result.ok and result.headline.startswith("ROLLOUT STOPPED at wave 2 of 3: aborted")
    assert lab.files() == (BASE.encode(), BASE.encode())
    put_back, applied = rows(a)
    assert (applied["action"], applied["result"], put_back["action"], put_back["result"]) == (
        "apply", "ok", "rollback", "ok")
    assert put_back["message"].endswith(f"fleet rollout #{result.journal_id} stopped: put back")
    kept = history(a, lab.shared)
    assert [(r["revision"], r["current"]) for r in kept] == [(3, True), (2, False), (1, True)]
    assert rows(homes.servers["b"]) == []  # never reached


def test_a_restore_after_a_killed_rollout_is_recorded_in_the_server_s_workspace(homes: Homes,
                                                                               tmp_path: Path) -> None:
    lab, a = homes.lab, homes.servers["a"]
    new_file = tmp_path / "new.pbtxt"
    new_file.write_text(NEW)
    env = {**os.environ, "GEADMIN_HOME": str(homes.operator), "GEADMIN_FAULT_POINT": "rollout.changed.1"}
    killed = subprocess.run([*GEADMIN, "fleet", "apply", MODEL, str(new_file), *FLAGS], env=env, text=True,
                            capture_output=True, timeout=300, check=False)
    assert killed.returncode != 0 and lab.files()[0] == NEW.encode()
    assert [r["action"] for r in rows(a)] == ["apply"]
    number = next(r["id"] for r in rows(homes.operator)
                  if (r["action"], r["result"]) == ("fleet apply", "started"))
    restored = run("fleet", "restore", str(number), "--json", home=homes.operator)
    assert restored.returncode == 0, restored.stdout + restored.stderr
    assert lab.files() == (BASE.encode(), BASE.encode())
    back = rows(a)[0]
    assert (back["action"], back["result"]) == ("rollback", "ok")
    assert back["message"].endswith(f"restore of fleet rollout #{number}")
