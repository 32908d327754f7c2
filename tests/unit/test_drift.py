"""Drift between a model's file and the config Triton serves (diagnose.drift), on protobuf
values: the served side is the file as Triton normalizes it (name, defaults filled in)."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2

from geadmin import audit
from geadmin.diagnose.drift import Drift, drift_of, file_verdict, served_file, unfinished_change
from geadmin.repository import revisions
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.stack.workspace import SAMPLE_REPOSITORY

MODEL = "digits_classifier"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    shutil.copytree(SAMPLE_REPOSITORY / MODEL, repo / MODEL, ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def served(repository: Path) -> model_config_pb2.ModelConfig:
    """What Triton serves after loading the file: the file plus fields Triton fills in."""
    config = parse_pbtxt((repository / MODEL / "config.pbtxt").read_text())
    config.version_policy.latest.num_versions = 1  # a default Triton adds: never drift
    config.instance_group[0].name = f"{MODEL}_0"
    return config


def edit(repository: Path, old: str, new: str) -> None:
    path = repository / MODEL / "config.pbtxt"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_the_file_triton_loaded_is_no_drift(repository: Path) -> None:
    assert drift_of(repository, MODEL, served(repository)) is None


def test_a_hand_edited_field_is_drift_with_the_field_and_a_valid_file(repository: Path) -> None:
    live = served(repository)
    edit(repository, "max_queue_delay_microseconds: 1000", "max_queue_delay_microseconds: 5000")
    drift = drift_of(repository, MODEL, live)
    assert drift is not None and drift.loads
    assert drift.differing == ("dynamic_batching.max_queue_delay_microseconds",)
    assert drift.headline.startswith("on disk: valid, but not what Triton serves")
    assert "serving the previous config since " in drift.headline and drift.changed_at is not None
    assert drift.fix.startswith("apply it (reload the model)")


def test_a_file_that_does_not_parse_is_drift_with_the_line(repository: Path) -> None:
    live = served(repository)
    edit(repository, "data_type: TYPE_FP32", "data_type: TYPE_FOO")
    drift = drift_of(repository, MODEL, live)
    assert drift is not None and not drift.loads and drift.differing == ()
    assert drift.on_disk.startswith("does not parse, line 6: ")
    assert "TYPE_FOO" in drift.on_disk
    assert drift.fix.startswith("open it in the Config editor and fix it")


def test_file_verdict_counts_further_errors(repository: Path) -> None:
    edit(repository, "max_batch_size: 32", "max_batch_size: -3")
    verdict, loads = file_verdict(repository / MODEL)
    assert not loads and "max_batch_size" in verdict


def test_no_file_in_this_repository_is_not_drift(tmp_path: Path, repository: Path) -> None:
    assert drift_of(tmp_path / "elsewhere", MODEL, served(repository)) is None


def test_put_back_prefers_the_kept_revision_that_serves(repository: Path, tmp_path: Path) -> None:
    original = (repository / MODEL / "config.pbtxt").read_bytes()
    live = served(repository)
    revisions.record_revision(repository, MODEL, original, who="alice", home=tmp_path)
    edit(repository, "max_batch_size: 32", "max_batch_size: 16")
    assert served_file(repository, MODEL, live, home=tmp_path) == original  # comments and all
    # With no matching revision kept, the served config itself is written out.
    other_home = tmp_path / "empty"
    written = served_file(repository, MODEL, live, home=other_home).decode()
    assert parse_pbtxt(written).max_batch_size == 32


URL = "http://127.0.0.1:8000"


def test_an_apply_that_stopped_waiting_names_the_drift_until_someone_writes_the_file_again(
    tmp_path: Path,
) -> None:
    """A reload still running looks like drift; geadmin's own unfinished apply of the file on
    disk says so, for this server only, and not once another change or a hand edit followed."""
    home = tmp_path / "home"
    row = audit.record("apply", MODEL, audit.Result.UNFINISHED, server=URL, message="load ...", home=home)
    before, after = row.at - timedelta(seconds=1), row.at + timedelta(seconds=1)
    assert unfinished_change(URL, MODEL, before, home) == row
    assert unfinished_change("http://127.0.0.2:8000", MODEL, before, home) is None  # another server
    assert unfinished_change(URL, "other", before, home) is None
    assert unfinished_change(URL, MODEL, after, home) is None  # the file was written after it: by hand
    drift = Drift(MODEL, ("parameters",), "valid, but not what Triton serves", True, before, unfinished=row)
    assert drift.headline.startswith(f"the apply by {row.who} at {row.at:%H:%M} UTC stopped waiting for "
                                     "Triton's load of this file (parameters differ)")
    assert drift.fix.startswith("wait: this clears when the load ends")
    audit.record("apply", MODEL, audit.Result.STARTED, server=URL, home=home)  # a newer apply, running
    assert unfinished_change(URL, MODEL, before, home) == row  # its started row is not an outcome
    audit.record("apply", MODEL, audit.Result.OK, server=URL, home=home)
    assert unfinished_change(URL, MODEL, before, home) is None  # that one loaded: a drift now is new
