"""geadmin.telemetry.history.faults over a real workspace database (SQLite in a temporary
home): faults recorded from readings of the recorded exporter pages (tests/unit/assets/
npu-faults/), first and last seen, cleared when a source that was read no longer reports
them, left alone when their source was not read, and bounded."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from geadmin import db
from geadmin.migrations import MIGRATIONS
from geadmin.telemetry.history import faults as history
from geadmin.telemetry.history.faults import fault_records, record_reading
from geadmin.telemetry.sources.fault_reading import FaultReading
from geadmin.telemetry.sources.npu_faults import (
    SOURCE_EXPORTER,
    SOURCE_NPU_GE,
    SOURCE_NPU_SMI,
    ChipFault,
    faults_from_exporter,
    faults_from_triton,
)
from geadmin.telemetry.sources.scrape import parse

FAULTS = Path(__file__).parent / "assets" / "npu-faults"


def exporter_reading(name: str, node: str = "") -> FaultReading:
    page = parse((FAULTS / name).read_text())
    return FaultReading(tuple(faults_from_exporter(page, node)), (SOURCE_EXPORTER,), (), node)


def test_the_migration_creates_the_table_with_a_nullable_code(tmp_path: Path) -> None:
    assert "npu faults" in [m.name for m in MIGRATIONS]
    with db.connect(tmp_path) as conn:
        columns = {row[1]: row[3] for row in conn.execute("PRAGMA table_info(npu_faults)")}
    assert set(columns) >= {"node", "chip", "code", "source", "healthy", "detail", "first_seen", "last_seen",
                            "present"}
    assert columns["code"] == 0 and columns["healthy"] == 0  # NULL allowed


def test_a_fault_is_recorded_with_first_and_last_seen(tmp_path: Path) -> None:
    reading = exporter_reading("exporter_one_code_synth.txt", "n7")
    records = record_reading(reading, home=tmp_path, now_s=100.0)
    record_reading(exporter_reading("exporter_one_code_synth.txt", "n7"), home=tmp_path, now_s=160.0)
    assert [(r.fault.chip, r.fault.code_hex, r.present) for r in records] == [(1, "0x80E18005", True)]
    (stored,) = fault_records(home=tmp_path)
    assert (stored.first_seen_s, stored.last_seen_s, stored.present) == (100.0, 160.0, True)
    assert stored.fault == ChipFault(1, 0x80E18005, SOURCE_EXPORTER, "n7", False,
                                     "npu_chip_info_health_status 0 (unhealthy)")


def test_a_fault_the_source_no_longer_reports_is_cleared_across_two_readings(tmp_path: Path) -> None:
    record_reading(exporter_reading("exporter_cleared_before_synth.txt"), home=tmp_path, now_s=100.0)
    records = record_reading(exporter_reading("exporter_cleared_after_synth.txt"), home=tmp_path, now_s=130.0)
    assert [(r.fault.code_hex, r.present, r.first_seen_s, r.last_seen_s) for r in records] == [
        ("0x80C98008", False, 100.0, 100.0)]  # last seen: the last read that reported it
    assert fault_records(home=tmp_path, present_only=True) == []
    assert len(fault_records(home=tmp_path)) == 1


def test_a_cleared_fault_that_returns_starts_a_new_occurrence(tmp_path: Path) -> None:
    for now_s, page in ((100.0, "before"), (130.0, "after"), (190.0, "before")):
        record_reading(exporter_reading(f"exporter_cleared_{page}_synth.txt"), home=tmp_path, now_s=now_s)
    (stored,) = fault_records(home=tmp_path)
    assert (stored.first_seen_s, stored.last_seen_s, stored.present) == (190.0, 190.0, True)


def test_a_source_that_was_not_read_leaves_its_faults_as_they_were(tmp_path: Path) -> None:
    record_reading(exporter_reading("exporter_one_code_synth.txt"), home=tmp_path, now_s=100.0)
    npu_ge = ChipFault(1, 507054, SOURCE_NPU_GE, "", None, "3 failed executes with ACL error 507054")
    # the exporter was down at this read: only npu_ge was read
    record_reading(FaultReading((npu_ge,), (SOURCE_NPU_GE,), ("npu-exporter: refused",)), home=tmp_path,
                   now_s=130.0)
    present = fault_records(home=tmp_path, present_only=True)
    assert sorted((r.fault.source, r.fault.code_hex, r.last_seen_s) for r in present) == [
        (SOURCE_EXPORTER, "0x80E18005", 100.0), (SOURCE_NPU_GE, "ACL 507054", 130.0)]


def test_clearing_is_limited_to_the_readings_node(tmp_path: Path) -> None:
    record_reading(exporter_reading("exporter_one_code_synth.txt", "a"), home=tmp_path, now_s=100.0)
    record_reading(exporter_reading("exporter_cleared_after_synth.txt", "b"), home=tmp_path, now_s=130.0)
    assert [r.fault.node for r in fault_records(home=tmp_path, present_only=True)] == ["a"]


def test_unhealthy_without_a_code_is_one_row_per_chip_and_source(tmp_path: Path) -> None:
    unhealthy = ChipFault(0, None, SOURCE_NPU_SMI, "", False, "Health Alarm")
    for now_s in (100.0, 130.0):
        record_reading(FaultReading((unhealthy, unhealthy), (SOURCE_NPU_SMI,)), home=tmp_path, now_s=now_s)
    (stored,) = fault_records(home=tmp_path)
    assert stored.fault.code is None and stored.fault.healthy is False and stored.first_seen_s == 100.0
    with sqlite3.connect(db.db_path(tmp_path)) as conn, pytest.raises(sqlite3.IntegrityError):
        conn.execute("INSERT INTO npu_faults (node, chip, code, source, first_seen, last_seen) "
                     "VALUES ('', 0, NULL, 'npu-smi', 1, 1)")  # the unique key holds for NULL codes too


def test_filters_since_node_and_present(tmp_path: Path) -> None:
    record_reading(exporter_reading("exporter_several_codes_synth.txt", "a"), home=tmp_path, now_s=100.0)
    record_reading(exporter_reading("exporter_unknown_unhealthy_synth.txt", "b"), home=tmp_path, now_s=200.0)
    assert {r.fault.node for r in fault_records(home=tmp_path, since_s=150.0)} == {"b"}
    assert [r.fault.code_hex for r in fault_records(home=tmp_path, node="a")] == [
        "0x80CB8002", "0x80E21007", "0x81AB800D"]
    assert len(fault_records(home=tmp_path)) == 6


def test_a_reading_with_thousands_of_faults_is_capped_and_clears_nothing(tmp_path: Path) -> None:
    record_reading(exporter_reading("exporter_one_code_synth.txt"), home=tmp_path, now_s=100.0)
    flood = tuple(ChipFault(chip, 0x80E21007, SOURCE_EXPORTER) for chip in range(history.MAX_RECORDED + 3000))
    records = record_reading(FaultReading(flood, (SOURCE_EXPORTER,)), home=tmp_path, now_s=130.0)
    assert len(records) == history.MAX_RECORDED
    with db.connect(tmp_path) as conn:
        (rows,) = conn.execute("SELECT COUNT(*) FROM npu_faults").fetchone()
    assert rows == history.MAX_RECORDED + 1
    chip1 = [r for r in fault_records(home=tmp_path) if r.fault.code == 0x80E18005]
    assert chip1[0].present  # what the flood left out is unknown: not cleared


def test_old_cleared_faults_are_removed_and_the_table_has_a_ceiling(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    record_reading(exporter_reading("exporter_cleared_before_synth.txt"), home=tmp_path, now_s=100.0)
    record_reading(exporter_reading("exporter_cleared_after_synth.txt"), home=tmp_path, now_s=130.0)
    record_reading(exporter_reading("exporter_cleared_after_synth.txt"), home=tmp_path,
                   now_s=130.0 + history.KEEP_CLEARED_S + 1)
    assert fault_records(home=tmp_path) == []
    monkeypatch.setattr(history, "MAX_ROWS", 5)
    for node in "abcdefg":
        record_reading(exporter_reading("exporter_one_code_synth.txt", node), home=tmp_path, now_s=200.0)
    assert len(fault_records(home=tmp_path)) == 5


def test_details_are_clipped(tmp_path: Path) -> None:
    long = ChipFault(0, 1, SOURCE_EXPORTER, "", None, "x" * 100_000)
    (record,) = record_reading(FaultReading((long,), (SOURCE_EXPORTER,)), home=tmp_path, now_s=1.0)
    assert len(record.fault.detail) == history.MAX_DETAIL


def npu_ge_reading(failed_executes: float) -> FaultReading:
    """Triton's page with npu_ge's counter of failed executes on device 0 (ACL 507015)."""
    page = parse("# TYPE npu_ge_device_errors_total counter\n"
                 f'npu_ge_device_errors_total{{device="0",code="507015"}} {failed_executes}\n')
    return FaultReading(tuple(faults_from_triton(page)), (SOURCE_NPU_GE,), (), "")


def test_npu_ge_counts_are_present_while_they_rise_and_cleared_once_quiet(tmp_path: Path) -> None:
    """npu_ge counts since Triton started: a chip drained or reset after its errors still shows
    the old count, and used to stay ACTION until Triton restarted."""
    quiet = history.COUNTER_QUIET_S
    (first,) = record_reading(npu_ge_reading(1), home=tmp_path, now_s=1000.0)
    assert first.present
    assert first.fault.detail == "1 failed executes with ACL error 507015 since Triton started"
    (same,) = record_reading(npu_ge_reading(1), home=tmp_path, now_s=1000.0 + quiet - 1)
    assert same.present and same.last_seen_s == 1000.0  # last seen: when the count last changed
    (cleared,) = record_reading(npu_ge_reading(1), home=tmp_path, now_s=1000.0 + quiet)
    assert (cleared.present, cleared.first_seen_s, cleared.last_seen_s) == (False, 1000.0, 1000.0)
    assert fault_records(home=tmp_path, present_only=True) == []
    (still,) = record_reading(npu_ge_reading(1), home=tmp_path, now_s=1000.0 + 3 * quiet)
    assert not still.present
    (again,) = record_reading(npu_ge_reading(4), home=tmp_path, now_s=5000.0)  # it failed again
    assert (again.present, again.first_seen_s, again.last_seen_s) == (True, 5000.0, 5000.0)
    assert again.fault.count == 4
    # Triton restarted and counted anew: a lower count is new failures, not a quiet chip
    (restarted,) = record_reading(npu_ge_reading(2), home=tmp_path, now_s=5000.0 + quiet)
    assert restarted.present and restarted.last_seen_s == 5000.0 + quiet


def test_a_fault_that_says_it_is_there_now_never_clears_by_quiet(tmp_path: Path) -> None:
    reading = exporter_reading("exporter_one_code_synth.txt", "n7")
    record_reading(reading, home=tmp_path, now_s=100.0)
    (later,) = record_reading(reading, home=tmp_path, now_s=100.0 + 10 * history.COUNTER_QUIET_S)
    assert later.present and later.last_seen_s == 100.0 + 10 * history.COUNTER_QUIET_S


def test_counts_of_one_chip_from_two_servers_of_a_node_add_up(tmp_path: Path) -> None:
    one, two = npu_ge_reading(3).faults[0], npu_ge_reading(2).faults[0]
    (record,) = record_reading(FaultReading((one, two), (SOURCE_NPU_GE,), (), ""), home=tmp_path, now_s=1.0)
    assert record.fault.count == 5
