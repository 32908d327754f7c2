"""The Audit page through AppTest, over a real workspace database (SQLite in a temporary
GEADMIN_HOME, rows written by `geadmin.audit`). No tritonserver: the page reads only the log."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest

from geadmin import audit
from geadmin.audit import Actor, Origin, Result
from geadmin.stack.processes import free_port

APP = str(Path(__file__).resolve().parents[2] / "pages" / "app.py")
DIFF = ("--- digits/config.pbtxt (before)\n+++ digits/config.pbtxt (after)\n@@ -1 +1 @@\n"
        "-max_batch_size: 8\n+max_batch_size: 16\n")
SERVER = "http://127.0.0.1:8000"


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("SERVERS_FILE", "TRITON_URLS", "ADMIN_KEY", "STACK", "COMPOSE_PROJECT"):
        monkeypatch.delenv(f"GEADMIN_{name}", raising=False)
    monkeypatch.setenv("GEADMIN_TRITON_URL", f"http://127.0.0.1:{free_port()}")  # nothing listens
    monkeypatch.setenv("GEADMIN_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


@pytest.fixture
def downloads(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, str, str | None]]:
    """(data, mime type, file name) of every file the page hands to Streamlit for download:
    AppTest shows a download button's URL, not its data, so catch the data on its way in."""
    seen: list[tuple[Any, str, str | None]] = []
    original = MemoryMediaFileStorage.load_and_get_id

    def keep(self: MemoryMediaFileStorage, path_or_data: Any, mimetype: str, kind: Any,
             filename: str | None = None) -> str:
        seen.append((path_or_data, mimetype, filename))
        return original(self, path_or_data, mimetype, kind, filename)
    monkeypatch.setattr(MemoryMediaFileStorage, "load_and_get_id", keep)
    return seen


def audit_page(at: AppTest | None = None) -> AppTest:
    if at is None:
        at = AppTest.from_file(APP, default_timeout=30)
        at.switch_page("audit.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def fill_log(monkeypatch: pytest.MonkeyPatch) -> None:
    """Five rows: one three days old, then four now (ids 1..5, oldest first)."""
    with monkeypatch.context() as old:
        three_days_ago = datetime.now(timezone.utc) - timedelta(days=3)
        old.setattr(audit.db, "utc_now", lambda: three_days_ago)
        audit.record_action("load", "old_model", True, "loaded 'old_model'", server=SERVER,
                            actor=Actor("carol", Origin.CLI))
    audit.record("apply", "digits", Result.ROLLED_BACK, actor=Actor("ann", Origin.DASHBOARD), server=SERVER,
                 message="load of 'digits' failed: KIND_GPU\nthe previous config was restored", diff=DIFF)
    audit.record_action("unload", "digits", True, "unloaded 'digits'", server=SERVER,
                        actor=Actor("bob", Origin.CLI))
    audit.record_action("load", "text_normalize", False, "load failed: no such file", server=SERVER,
                        actor=Actor("ann", Origin.DASHBOARD))
    audit.record("rollback", "digits", Result.OK, actor=Actor("bob", Origin.CLI), server=SERVER,
                 message="rolled back to revision 1")


def table(at: AppTest) -> list[dict[str, Any]]:
    assert len(at.dataframe) == 1
    rows: list[dict[str, Any]] = at.dataframe[0].value.to_dict("records")
    return rows


def ids(at: AppTest) -> list[int]:
    return [int(row["id"]) for row in table(at)]


def caption_text(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_rows_are_listed_newest_first_with_their_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    assert not at.error, [e.value for e in at.error]
    assert ids(at) == [5, 4, 3, 2, 1]
    newest, rolled_back = table(at)[0], table(at)[3]
    assert (newest["who"], newest["action"], newest["model"]) == ("bob", "rollback", "digits")
    assert newest["result"] == "ok"
    assert rolled_back["origin"] == "dashboard" and rolled_back["diff"] == "yes"
    assert rolled_back["message"] == "load of 'digits' failed: KIND_GPU"  # first line; the rest below
    assert "showing 5 of 5 matching rows" in caption_text(at)


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("audit.model", "digits", [5, 3, 2]),
    ("audit.action", "load", [4, 1]),
    ("audit.result", "failed", [4]),
    ("audit.who", "ann", [4, 2]),
])
def test_each_filter_narrows_the_rows(key: str, value: str, expected: list[int],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    assert value in at.selectbox(key=key).options  # the choices come from the log
    at.selectbox(key=key).set_value(value)
    at = audit_page(at)
    assert ids(at) == expected
    assert f"showing {len(expected)} of {len(expected)} matching rows" in caption_text(at)


def test_filters_combine_and_since_drops_older_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    at.text_input(key="audit.since").set_value("2d")
    at = audit_page(at)
    assert ids(at) == [5, 4, 3, 2]  # the three-day-old load is gone
    at.selectbox(key="audit.who").set_value("bob")
    at.selectbox(key="audit.action").set_value("unload")
    at = audit_page(at)
    assert ids(at) == [3]
    at.selectbox(key="audit.model").set_value("old_model")
    at = audit_page(at)
    assert not at.dataframe and any("No audit row matches" in i.value for i in at.info)


def test_since_takes_an_iso_date(monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    at.text_input(key="audit.since").set_value((datetime.now() - timedelta(days=1)).strftime("%Y-%m-%d"))
    at = audit_page(at)
    assert ids(at) == [5, 4, 3, 2]


def test_a_bad_since_says_why_with_an_example_and_shows_no_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    at.text_input(key="audit.since").set_value("last tuesday")
    at = audit_page(at)  # asserts no exception
    (error,) = at.error
    assert "Since 'last tuesday' is neither a duration nor a date" in error.value
    assert "use e.g. 30m, 2h, 7d, 2025-01-31" in error.value
    assert not at.dataframe  # unfiltered rows would pass for filtered ones


def test_the_csv_download_holds_exactly_the_filtered_rows(
        monkeypatch: pytest.MonkeyPatch, downloads: list[tuple[Any, str, str | None]]) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    at.selectbox(key="audit.model").set_value("digits")
    downloads.clear()
    at = audit_page(at)
    button = at.get("download_button")
    assert len(button) == 1 and button[0].proto.label == "Download CSV (3 rows)"
    ((data, _, name),) = [d for d in downloads if d[1] == "text/csv"]
    assert name and name.startswith("geadmin-audit-") and name.endswith(".csv")
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    assert text == audit.csv_text(audit.query(model="digits"))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["id"]) for r in rows] == [5, 3, 2] and {r["model"] for r in rows} == {"digits"}
    assert rows[2]["diff"] == "'" + DIFF  # the CSV module's formula guard: a diff starts with "-"
    assert rows[2]["message"].endswith("the previous config was restored")  # whole, not one line


def test_the_row_limit_shows_n_of_m_and_the_csv_keeps_all_m(
        monkeypatch: pytest.MonkeyPatch, downloads: list[tuple[Any, str, str | None]]) -> None:
    for n in range(12):
        audit.record_action("reload", f"m{n}", True, "reloaded", server=SERVER)
    at = audit_page()
    at.number_input(key="audit.limit").set_value(10)
    downloads.clear()
    at = audit_page(at)
    assert ids(at) == list(range(12, 2, -1))
    assert "showing 10 of 12 matching rows" in caption_text(at)
    ((data, _, _),) = [d for d in downloads if d[1] == "text/csv"]
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    assert len(list(csv.DictReader(io.StringIO(text)))) == 12


def test_a_selected_row_shows_its_whole_message_and_its_diff(monkeypatch: pytest.MonkeyPatch) -> None:
    fill_log(monkeypatch)
    at = audit_page()
    assert at.selectbox(key="audit.row").value == 5  # the newest by default
    assert [c.language for c in at.code] == ["text"]  # no diff for a rollback without one
    assert "changed no file" in caption_text(at)
    at.selectbox(key="audit.row").set_value(2)
    at = audit_page(at)
    message, diff = at.code
    assert message.value == "load of 'digits' failed: KIND_GPU\nthe previous config was restored"
    assert diff.language == "diff" and diff.value == DIFF.rstrip("\n")  # st.code drops the last newline
    assert any("**rolled_back**" in m.value and "**ann**" in m.value for m in at.markdown)


def test_an_empty_log_says_what_gets_recorded(home: Path) -> None:
    at = audit_page()
    (info,) = at.info
    assert "The audit log is empty" in info.value
    for recorded in ("apply", "rollback", "load", "unload", "reload", "restart"):
        assert recorded in info.value
    assert not at.dataframe and not at.error and not at.get("download_button")
    assert (home / "geadmin.db").is_file()


def test_an_unreadable_database_shows_the_cause_and_next_step(home: Path) -> None:
    home.mkdir(parents=True)
    (home / "geadmin.db").write_bytes(b"this is not a SQLite file" * 100)
    at = audit_page()
    (error,) = at.error
    assert error.value.startswith("Cannot read the audit log:")
    assert "not a SQLite database: move it aside" in error.value
    assert "Next: fix the workspace database in" in error.value and str(home) in error.value
    assert not at.dataframe and not at.info
