"""The config a version rollout's way back writes (geadmin.fleet.pinning), without a server: the
old config pinned to the versions that served when, with the new directory present, it would serve
another set (no version_policy, `latest N`, `all`), kept as it is when it pins them already; the
plan keeps both, round-trips them, and a restore or resume takes either for the config before."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from geadmin.diagnose.rollout_plan import Previous, RetireStep, RolloutPlan
from geadmin.fleet import journal, restore
from geadmin.fleet.members import Member, Trust
from geadmin.fleet.pinning import pinned_config, pinned_note, served_by_policy
from geadmin.repository import revisions
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.triton.servers import ServerSpec

BASE = 'name: "echo"\nbackend: "python"\n# the operator\'s note\n'
RETIRE = RetireStep(2, (1,), BASE + "version_policy { specific { versions: [2] } }\n")


def repository(tmp_path: Path, text: str, versions: tuple[int, ...] = (1, 2)) -> Path:
    for version in versions:
        (tmp_path / "repo" / "echo" / str(version)).mkdir(parents=True)
    (tmp_path / "repo" / "echo" / "config.pbtxt").write_text(text)
    return tmp_path / "repo"


@pytest.mark.parametrize(("policy", "serves"), [
    ("", {3}), ("version_policy { latest { num_versions: 2 } }", {2, 3}),
    ("version_policy { all { } }", {1, 2, 3}), ("version_policy { specific { versions: [1] } }", None)])
def test_what_a_policy_serves_out_of_the_version_directories(policy: str, serves: set[int] | None) -> None:
    assert served_by_policy(BASE + policy, {1, 2, 3}) == serves


def test_an_unpinned_config_is_pinned_to_the_old_versions_once_the_new_directory_is_there(
    tmp_path: Path
) -> None:
    text = pinned_config(BASE, repository(tmp_path, BASE) / "echo", RETIRE)
    assert text is not None and "the operator's note" in text  # comments kept
    assert list(parse_pbtxt(text).version_policy.specific.versions) == [1]


@pytest.mark.parametrize(("policy", "retire"), [
    ("version_policy { specific { versions: [1] } }", RETIRE),  # pins already: as it was
    ("", replace(RETIRE, version=1, old=(2,))),  # back to an older version: the latest still serves
    ("version_policy { all { } }", replace(RETIRE, old=(1, 2)))])
def test_a_config_that_serves_the_old_versions_with_the_new_directory_is_put_back_as_it_is(
    tmp_path: Path, policy: str, retire: RetireStep
) -> None:
    assert pinned_config(BASE + policy, repository(tmp_path, BASE + policy) / "echo", retire) is None


def test_the_plan_keeps_the_pinned_config_and_a_put_back_may_write_over_the_file_before_or_the_new(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("GEADMIN_HOME", str(home))
    repo = repository(tmp_path, BASE)
    member = Member(ServerSpec("a", "http://127.0.0.1:1"), "test", repository=repo, trust=Trust(True, "test"))
    both = BASE + "version_policy { specific { versions: [1, 2] } }\n"
    plan = journal.make_plan([member], "apply", "echo", both.encode(), 1, "lab", who="ann", home=home,
                             retire=RETIRE)
    (previous,) = plan.previous
    assert previous.sha256 == revisions.sha256_of(BASE.encode())  # the file before, as it was
    pinned = revisions.read_revision(repo.resolve(), "echo", previous.back_revision, home=home)
    assert previous.pinned == (1,) and pinned.sha256 == previous.back_sha256 != previous.sha256
    assert list(parse_pbtxt(pinned.text).version_policy.specific.versions) == [1]
    assert RolloutPlan.from_json(plan.to_json()) == plan
    assert "the config put back pins v1 (version_policy `versions: [1]`): echo/2/" in pinned_note(plan)
    config = repo / "echo" / "config.pbtxt"
    for text in (BASE, both, pinned.text):  # the file before, the new one, the pinned one: not an edit
        config.write_text(text)
        assert restore.changed_since(plan, repo.resolve(), previous)[1] == ""
    config.write_text(BASE + "# edited by hand\n")
    assert "changed since the rollout" in restore.changed_since(plan, repo.resolve(), previous)[1]


def test_a_plan_journaled_without_a_pin_reads_back_as_before() -> None:
    plan = RolloutPlan("lab", "apply", "echo", (), 1, previous=(Previous("/r", "ab" * 32, 3),), retire=RETIRE)
    raw = json.loads(plan.to_json())
    assert raw["previous"] == [{"repository": "/r", "sha256": "ab" * 32, "revision": 3}]
    assert RolloutPlan.from_json(plan.to_json()) == plan and pinned_note(plan) == ""
    assert plan.previous[0].back_revision == 3 and plan.previous[0].back_sha256 == "ab" * 32
