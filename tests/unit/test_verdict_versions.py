"""Triton's repository index has a row per model version: the verdict judges a model by all of
its versions (a version retired beside a READY one is its version policy at work, a failed
version beside a READY one is still a failure, with or without --expect)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from geadmin.diagnose.evidence import EvidenceSources, assess
from geadmin.diagnose.health import ServerSnapshot
from geadmin.diagnose.verdict import Level, VerdictRule
from geadmin.domain import ModelEntry, ModelState, ServerInfo

NOW = datetime(2026, 12, 4, 12, 0, tzinfo=timezone.utc)
INFO = ServerInfo("triton", "2.51.0", ())


def snapshot(*models: ModelEntry) -> ServerSnapshot:
    # As TritonClient.repository_index lists them: sorted by (name, version) as text, v10 before v9.
    rows = tuple(sorted(models, key=lambda m: (m.name, m.version)))
    return ServerSnapshot("s", "http://h:8000", "http", NOW, live=True, ready=True, info=INFO, models=rows)


def test_a_version_retired_beside_a_ready_one_is_the_policy_working_not_a_drop(tmp_path: Path) -> None:
    retired = ModelEntry("a", "9", ModelState.UNAVAILABLE, "unloaded")
    serving = ModelEntry("a", "10", ModelState.READY, "")
    verdict = assess(snapshot(retired, serving), EvidenceSources(home=tmp_path, now=NOW))
    assert verdict.level is Level.OK and verdict.reasons == ()
    assert verdict.headline.startswith("OK: Triton serves; 1 model(s) READY, none failed")
    assert verdict.missing == [] and verdict.to_json()["failed"] == []


@pytest.mark.parametrize("expected", [(), ("a",)])
def test_a_failed_version_beside_a_ready_one_is_a_failure_with_or_without_expect(
        tmp_path: Path, expected: tuple[str, ...]) -> None:
    serving = ModelEntry("a", "1", ModelState.READY, "")
    failed = ModelEntry("a", "2", ModelState.UNAVAILABLE, "failed to load 'a' version 2: out of memory")
    verdict = assess(snapshot(serving, failed), EvidenceSources(home=tmp_path, now=NOW), expected=expected)
    assert verdict.level is Level.DEGRADED and verdict.rules == [VerdictRule.MODEL_FAILED]
    assert verdict.headline == "DEGRADED: model 'a' failed: failed to load 'a' version 2: out of memory"
    rows = {m["version"]: m["failure"] for m in verdict.to_json()["models"]}  # type: ignore[attr-defined]
    assert rows == {"1": "", "2": "failed to load 'a' version 2: out of memory"}


def test_an_expected_model_with_no_ready_version_is_down_once_not_also_failed(tmp_path: Path) -> None:
    failed = ModelEntry("a", "2", ModelState.UNAVAILABLE, "failed to load 'a' version 2: out of memory")
    verdict = assess(snapshot(failed), EvidenceSources(home=tmp_path, now=NOW), expected=("a",))
    assert verdict.rules == [VerdictRule.EXPECTED_NOT_READY] and len(verdict.reasons) == 1
