"""The audit log: append, query (since / model / action), who, CSV export, and the `audit` command."""

from __future__ import annotations

import argparse
import csv
import io
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from geadmin import audit
from geadmin.audit import Actor, Origin, Result
from geadmin.cli import audit_log, config, config_change
from geadmin.errors import InvalidArgumentError

DIFF = ("--- m/config.pbtxt (before)\n+++ m/config.pbtxt (after)\n@@ -1 +1 @@\n"
        "-max_batch_size: 8\n+max_batch_size: 16\n")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def run_cli(argv: list[str]) -> int:
    """The `config` actions and the `audit` command, on a parser of our own."""
    parser = argparse.ArgumentParser(prog="geadmin")
    commands = parser.add_subparsers(dest="command", required=True)
    config.register(commands)
    config_change.register(commands)
    audit_log.register(commands)
    args = parser.parse_args(argv)
    return int(args.func(args))


def test_a_recorded_row_comes_back_with_every_field(home: Path) -> None:
    entry = audit.record("apply", "digits", Result.ROLLED_BACK, actor=Actor("ann", Origin.DASHBOARD),
                         server="http://t:8000", message="load failed: KIND_GPU", diff=DIFF)
    (back,) = audit.query()
    assert back == entry
    assert (back.who, back.origin, back.server, back.model, back.action, back.result) == (
        "ann", "dashboard", "http://t:8000", "digits", "apply", "rolled_back")
    assert back.diff == DIFF and back.at.tzinfo is not None
    assert abs(back.at - datetime.now(timezone.utc)) < timedelta(minutes=1)
    assert (home / "geadmin.db").is_file()


def test_rows_come_newest_first_and_filter_by_model_action_result_and_limit(home: Path) -> None:
    for model, action, ok in (("a", "load", True), ("b", "apply", True), ("a", "apply", False)):
        audit.record_action(action, model, ok, "done" if ok else "failed: x", server="http://t:8000")
    assert [e.model for e in audit.query()] == ["a", "b", "a"]
    assert [e.action for e in audit.query(model="a")] == ["apply", "load"]
    assert [e.model for e in audit.query(action="apply")] == ["a", "b"]
    assert [e.result for e in audit.query(result=Result.FAILED)] == ["failed"]
    assert len(audit.query(limit=2)) == 2
    assert audit.query(model="a", action="unload") == []


def test_try_record_action_reports_instead_of_raising(tmp_path: Path) -> None:
    unusable = tmp_path / "home-is-a-file"
    unusable.write_text("")
    problem = audit.try_record_action("load", "m", True, "loaded", server="http://t:8000", home=unusable)
    assert problem.startswith("the audit row could not be written") and str(unusable) in problem
    assert audit.try_record_action("load", "m", True, "loaded", server="", home=tmp_path / "ok") == ""
    assert [e.result for e in audit.query(home=tmp_path / "ok")] == ["ok"]


def test_since_filters_by_time(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    old = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)
    monkeypatch.setattr(audit.db, "utc_now", lambda: old)
    audit.record("apply", "old", Result.OK)
    monkeypatch.undo()
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    audit.record("apply", "new", Result.OK)
    assert [e.model for e in audit.query(since=old + timedelta(seconds=1))] == ["new"]
    assert [e.model for e in audit.query(since=old)] == ["new", "old"]
    assert [e.model for e in audit.query(since=audit.parse_since("1h"))] == ["new"]


@pytest.mark.parametrize(("text", "ago"), [
    ("30m", timedelta(minutes=30)), ("2h", timedelta(hours=2)), ("7d", timedelta(days=7)),
    ("1w", timedelta(weeks=1)), ("90s", timedelta(seconds=90)), (" 1.5h ", timedelta(minutes=90)),
])
def test_since_takes_durations(text: str, ago: timedelta) -> None:
    now = datetime(2025, 3, 1, tzinfo=timezone.utc)
    assert audit.parse_since(text, now) == now - ago


def test_since_takes_dates_in_local_time_unless_they_say_otherwise() -> None:
    assert audit.parse_since("2025-01-31T14:00+00:00") == datetime(2025, 1, 31, 14, tzinfo=timezone.utc)
    local = audit.parse_since("2025-01-31")
    assert local.tzinfo is not None and local.replace(tzinfo=None) == datetime(2025, 1, 31)


@pytest.mark.parametrize("text", ["yesterday", "5 parsecs", "2025-13-01", ""])
def test_a_bad_since_says_what_it_takes(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"use e\.g\. 30m, 2h, 7d"):
        audit.parse_since(text)


def test_who_is_the_os_user_or_the_dashboard_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(audit.getpass, "getuser", lambda: "operator")
    assert Actor.os_user(Origin.CLI) == Actor("operator", Origin.CLI)
    assert Actor.dashboard("alice@example.com") == Actor("alice@example.com", Origin.DASHBOARD)
    assert Actor.dashboard(None) == Actor("operator", Origin.DASHBOARD)  # no sign-in configured


def test_a_uid_without_a_name_is_recorded_by_number(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_name() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")
    monkeypatch.setattr(audit.getpass, "getuser", no_name)
    monkeypatch.setattr(audit.os, "getuid", lambda: 4242)
    assert audit.os_user_name() == "uid 4242"


def test_csv_round_trips_multiline_diffs_and_defuses_formulas(home: Path) -> None:
    audit.record("apply", "m", Result.OK, actor=Actor("=HYPERLINK(\"x\")"), message='said "no", twice',
                 diff=DIFF)
    text = audit.csv_text(audit.query())
    rows = list(csv.DictReader(io.StringIO(text)))
    assert list(rows[0]) == list(audit.CSV_COLUMNS)
    assert rows[0]["who"] == "'=HYPERLINK(\"x\")"  # a spreadsheet shows it, does not run it
    assert rows[0]["diff"] == "'" + DIFF
    assert rows[0]["message"] == 'said "no", twice'
    assert datetime.fromisoformat(rows[0]["at"]).tzinfo is not None


def test_cli_audit_json_text_and_csv(home: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["audit"]) == 0
    assert "the audit log is empty" in capsys.readouterr().out
    audit.record("apply", "m1", Result.ROLLED_BACK, actor=Actor("ann", Origin.CLI), server="http://t:8000",
                 message="load of 'm1' failed: no GPUs\n  more", diff=DIFF)
    audit.record_action("unload", "m2", True, "unloaded 'm2'", server="http://t:8000")
    assert run_cli(["audit", "--json", "--model", "m1"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["result"] == "rolled_back" and row["diff"] == DIFF and row["who"] == "ann"
    assert run_cli(["audit", "--since", "1h"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["WHEN", "WHO", "ORIGIN"] and len(lines) == 3
    assert "load of 'm1' failed: no GPUs" in lines[2] and "more" not in lines[2]
    assert run_cli(["audit", "--diff", "--action", "apply"]) == 0
    assert "+max_batch_size: 16" in capsys.readouterr().out
    export = tmp_path / "out" / "audit.csv"
    export.parent.mkdir()
    assert run_cli(["audit", "--csv", str(export)]) == 0
    assert "wrote 2 audit rows" in capsys.readouterr().err
    assert [r["model"] for r in csv.DictReader(export.open())] == ["m2", "m1"]
    assert run_cli(["audit", "--csv", "-", "--model", "m2"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split(",")[5] == "m2"


def test_cli_audit_bad_since_exits_1_with_the_fix(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["audit", "--since", "last tuesday"]) == 1
    assert "use e.g. 30m" in capsys.readouterr().err


def test_who_filters_by_user_alone_and_with_the_other_filters(home: Path) -> None:
    audit.record("apply", "m1", Result.OK, actor=Actor("ann", Origin.DASHBOARD))
    audit.record("apply", "m1", Result.FAILED, actor=Actor("bob", Origin.CLI))
    audit.record("load", "m2", Result.OK, actor=Actor("ann", Origin.CLI))
    assert [(e.who, e.model) for e in audit.query(who="ann")] == [("ann", "m2"), ("ann", "m1")]
    assert [e.result for e in audit.query(who="bob", model="m1")] == ["failed"]
    assert audit.query(who="ann", result=Result.FAILED) == []
    assert audit.query(who="nobody") == []


def test_summary_counts_rows_and_lists_each_filterable_columns_values(home: Path) -> None:
    assert audit.summary() == audit.LogSummary(0)
    audit.record("reload", "zeta", Result.OK, actor=Actor("bob"))
    audit.record("apply", "alpha", Result.ROLLED_BACK, actor=Actor("ann"), message="first\nsecond")
    audit.record("apply", "alpha", Result.OK, actor=Actor("ann"))
    summary = audit.summary()
    assert summary.total == 3
    assert summary.models == ("alpha", "zeta") and summary.actions == ("apply", "reload")
    assert summary.results == ("ok", "rolled_back") and summary.users == ("ann", "bob")
    assert [e.headline for e in audit.query(result=Result.ROLLED_BACK)] == ["first"]


def test_a_bad_since_is_named_as_the_caller_calls_it() -> None:
    with pytest.raises(InvalidArgumentError, match=r"^Since 'soon' is neither a duration nor a date"):
        audit.parse_since("soon", name="Since")
    with pytest.raises(InvalidArgumentError, match=r"^--since 'soon'"):
        audit.parse_since("soon")
