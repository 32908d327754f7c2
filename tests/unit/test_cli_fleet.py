"""`geadmin fleet status` and `geadmin status --fleet` exit codes: 4 for anything the fleet's
headline calls DEGRADED (a discovery source down or cut too), 3 for no fleet server at all.
The real servers are in tests/integration/test_fleet.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.fleet import exit_code
from geadmin.cli.main import main
from geadmin.cli.status import worst
from geadmin.diagnose.health import ServerSnapshot
from geadmin.domain import ModelEntry, ModelState
from geadmin.fleet.discovery import Discovery, Fleet
from geadmin.fleet.members import Found, Member
from geadmin.fleet.status import FleetStatus, ServerView
from geadmin.triton.servers import ServerSpec
from tests.support.http_doubles import closed_port

UNRESOLVED = "dns:no-such-host.invalid:8000"


def serving(name: str, *, ready: bool = True) -> ServerView:
    snap = ServerSnapshot(name, f"http://{name}:8000", "http", datetime.now(timezone.utc), live=True,
                          ready=ready, models=(ModelEntry("m", "1", ModelState.READY, ""),))
    return ServerView(Member(ServerSpec(name, f"http://{name}:8000"), "servers"), snap)


def status_of(*views: ServerView, found: tuple[Found, ...] = ()) -> FleetStatus:
    sources = (Found("servers", tuple(v.member for v in views)), *found)
    fleet = Fleet("f", tuple(f.source for f in sources))
    return FleetStatus(Discovery(fleet, tuple(v.member for v in views), sources), views, 0.1)


def test_fleet_status_exits_degraded_when_a_source_is_down_cut_or_a_member_not_ready() -> None:
    assert exit_code(status_of(serving("a"))) == ExitCode.OK
    down = Found(UNRESOLVED, error="DNS: 'no-such-host.invalid' does not resolve")
    assert exit_code(status_of(serving("a"), found=(down,))) == ExitCode.DEGRADED
    left_out = Found("kubernetes:ns?selector=app=t", notes=("pod t-1 is Unknown: left out until it runs",))
    assert exit_code(status_of(serving("a"), found=(left_out,))) == ExitCode.DEGRADED
    assert exit_code(status_of(serving("a"), serving("b", ready=False))) == ExitCode.DEGRADED
    assert exit_code(status_of(found=(down,))) == ExitCode.UNREACHABLE


def test_status_fleet_is_at_least_degraded_when_a_source_left_servers_out() -> None:
    assert worst([ExitCode.OK, ExitCode.OK]) == ExitCode.OK
    assert worst([ExitCode.OK], ["dns:x:8000: does not resolve"]) == ExitCode.DEGRADED
    assert worst([ExitCode.OK], ["dns:x:8000: does not resolve"], strict=True) == ExitCode.FAILED
    assert worst([ExitCode.UNREACHABLE], ["dns:x:8000: does not resolve"]) == ExitCode.UNREACHABLE


@pytest.mark.parametrize("argv", [["status", "--fleet", "default"], ["fleet", "status"]])
def test_a_fleet_with_no_server_found_exits_unreachable_with_the_cause(
    argv: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GEADMIN_SERVERS_FILE", raising=False)
    monkeypatch.setenv("GEADMIN_FLEET", UNRESOLVED)
    assert main(argv) == ExitCode.UNREACHABLE
    shown = capsys.readouterr()
    assert "'no-such-host.invalid' does not resolve" in shown.err + shown.out


def test_status_fleet_says_first_that_a_source_left_servers_unjudged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The servers found were printed first, each with its own verdict, and the source that hid
    the others only on stderr: piped to a file, the report read as if every server was there."""
    servers = tmp_path / "servers.toml"
    servers.write_text(f'[[server]]\nname = "a"\nurl = "http://127.0.0.1:{closed_port()}"\n\n'
                       f'[[fleet]]\nname = "prod"\nsources = ["servers", "{UNRESOLVED}"]\n')
    monkeypatch.setenv("GEADMIN_SERVERS_FILE", str(servers))
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    assert main(["status", "--fleet", "prod", "--timeout", "2"]) == ExitCode.UNREACHABLE  # a: nothing answers
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f"FLEET DEGRADED: not every server was judged — {UNRESOLVED}: "), first
    assert first.endswith("; 1 judged below"), first
