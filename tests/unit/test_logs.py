"""Triton's log: line parsing, per-model lines, and incremental reading of a log file."""

from __future__ import annotations

import os
from pathlib import Path

from geadmin.domain import LogLine
from geadmin.triton.logs import LocalLogFile, is_failure, model_log_lines, parse_log_line

POLL_FAILED = ('E1202 15:32:37.818934 7152 model_repository_manager.cc:1460] "Poll failed for model '
               "directory 'digits_classifier': unexpected platform type 'graph_executor' for "
               'digits_classifier"')
INIT_FAILED = ('E1202 15:33:03.426784 7152 model_lifecycle.cc:642] "failed to load \'text_normalize\' '
               'version 1: Internal: RuntimeError: boom\\n\\nAt:\\n  /tmp/x/1/model.py(4): initialize\\n"')


def test_parse_default_format_unescapes_the_message() -> None:
    line = parse_log_line(INIT_FAILED)
    assert line.severity == "E"
    assert line.message.startswith(
        "failed to load 'text_normalize' version 1: Internal: RuntimeError: boom\n")


def test_parse_iso8601_format() -> None:
    line = parse_log_line('2024-12-02T15:32:37Z W 7152 backend_model.cc:10] "slow start for m"')
    assert (line.severity, line.message) == ("W", "slow start for m")


def test_unformatted_line_is_kept_verbatim() -> None:
    line = parse_log_line("Error: Failed to initialize NVML")
    assert line.severity == "" and line.message == "Error: Failed to initialize NVML"


def test_model_lines_match_the_name_and_its_instances_only() -> None:
    text = ([
        POLL_FAILED,
        'I1202 15:33:03.0 7152 python_be.cc:2249] "TRITONBACKEND_ModelInstanceInitialize: '
        'digits_classifier_0_1 (CPU device 0)"',
        'I1202 15:33:03.0 7152 model_lifecycle.cc:472] "loading: digits_classifier_v2:1"',
        'E1202 15:33:03.0 7152 model_lifecycle.cc:642] "failed to load \'digits\'"',
    ])
    lines = model_log_lines(text, "digits_classifier")
    assert len(lines) == 2
    assert "digits_classifier_v2" not in "".join(line.raw for line in lines)


def test_logline_is_a_value() -> None:
    assert parse_log_line(POLL_FAILED) == LogLine("E", parse_log_line(POLL_FAILED).message, POLL_FAILED)


def test_the_python_stub_failure_counts_as_a_failure_though_logged_as_info() -> None:
    line = parse_log_line("I1203 06:34:21.357305 5467 pb_stub.cc:2105]  Failed to preinitialize Python "
                          "stub: Python model file not found in '/r/hung/1/model.py'")
    assert line.severity == "I" and is_failure(line)
    assert not is_failure(parse_log_line('I1203 07:00:00.0 1 a.cc:1] "loading: hung:1"'))


def test_read_returns_only_what_was_written_after_the_cursor(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    path.write_text("old line about m\n")
    log = LocalLogFile(path)
    cursor = log.cursor()
    with path.open("a") as file:
        file.write("new line about m\nhalf a li")
    lines, after = log.read(cursor)
    assert lines == ["new line about m"]  # the line still being written waits for its end
    with path.open("a") as file:
        file.write("ne\n")
    assert log.read(after)[0] == ["half a line"]
    path.write_text("truncated\n")  # shorter than the cursor: read from the start
    assert log.lines_since(cursor) == ["truncated"]


def test_a_rotated_log_is_read_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    path.write_text("x" * 100 + "\n")
    log = LocalLogFile(path)
    cursor = log.cursor()
    path.rename(tmp_path / "triton.log.1")
    path.write_text("y" * 200 + "\nnew run\n")  # longer than the old one: only the inode tells
    assert log.lines_since(cursor) == ["y" * 200, "new run"]


def test_a_missing_log_reads_as_empty(tmp_path: Path) -> None:
    log = LocalLogFile(tmp_path / "missing.log")
    cursor = log.cursor()
    assert cursor.offset == 0 and log.lines_since(cursor) == [] and log.last_lines(["m"]) == {}


def test_last_lines_reads_only_new_bytes_after_the_first_pass(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    filler = 'I1203 07:00:00.0 1 a.cc:1] "verbose noise"\n' * 50_000  # ~1.5 MB, more than one chunk
    path.write_text('E1203 07:00:00.0 1 a.cc:1] "failed to load \'m\': early"\n' + filler)
    log = LocalLogFile(path)
    first = log.last_lines(["m", "other"])
    assert "early" in first["m"] and "other" not in first
    read_once = log.bytes_read
    assert read_once == path.stat().st_size
    with path.open("a") as file:
        file.write('E1203 07:00:00.0 1 a.cc:1] "failed to load \'other\': late"\n')
    assert "late" in log.last_lines(["m", "other"])["other"]
    assert log.bytes_read - read_once < 100  # O(new bytes), not O(log size)
    assert "early" in log.last_lines(["m"])["m"]  # a subset asks nothing new of the file


def test_last_lines_gives_a_line_to_the_first_name_it_mentions_never_a_prefix(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    path.write_text('E1203 07:00:00.0 1 a.cc:1] "failed to load \'digits_pipeline\': step digits failed"\n')
    lines = LocalLogFile(path).last_lines(["digits", "digits_pipeline"])
    assert set(lines) == {"digits_pipeline"}


def test_last_lines_starts_over_after_rotation(tmp_path: Path) -> None:
    path = tmp_path / "triton.log"
    path.write_text('E1203 07:00:00.0 1 a.cc:1] "failed to load \'m\': old run"\n')
    log = LocalLogFile(path)
    assert "old run" in log.last_lines(["m"])["m"]
    os.replace(path, tmp_path / "triton.log.1")
    path.write_text('I1203 07:00:00.0 1 a.cc:1] "nothing about it yet"\n')
    assert log.last_lines(["m"]) == {}
