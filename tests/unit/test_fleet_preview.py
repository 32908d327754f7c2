"""What the Fleet page says before a rollout starts (geadmin.fleet.preview): the servers, the
waves, the diff of an apply, and a read-only member's refusal in the rollout's own words."""

from __future__ import annotations

from pathlib import Path

from geadmin.fleet.members import Member, Trust
from geadmin.fleet.preview import missing_repository, preview, waves, with_repository
from geadmin.triton.servers import ServerSpec

OLD = 'name: "echo"\nbackend: "python"\nmax_batch_size: 0\n'
NEW = 'name: "echo"\nbackend: "python"\nmax_batch_size: 8\n'


def member(name: str, repository: Path | None = None, trusted: bool = True) -> Member:
    why = "configured server (servers file)" if trusted else "no proof configured: set trusted_networks"
    source = "servers" if trusted else "dns:x:8000"
    return Member(ServerSpec(name, f"http://127.0.0.{len(name)}:8000"), source, repository=repository,
                  trust=Trust(trusted, why))


def test_waves_cut_the_servers_in_order_as_the_rollout_does() -> None:
    members = [member(n) for n in ("a", "b", "c")]
    assert [[m.name for m in w] for w in waves(members, 2)] == [["a", "b"], ["c"]]
    shown = preview(members, "lab", "reload", "echo", wave_size=2)
    assert shown.waves == (("a", "b"), ("c",)) and shown.refused == ""
    assert shown.headline() == ("reload echo on fleet 'lab': 3 server(s) in 2 wave(s) "
                                "(wave 1: a, b; wave 2: c)")


def test_an_apply_is_shown_as_its_diff_against_the_served_file(tmp_path: Path) -> None:
    (tmp_path / "echo").mkdir()
    (tmp_path / "echo" / "config.pbtxt").write_text(OLD)
    shown = preview([member("a", tmp_path), member("b", tmp_path)], "lab", "apply", "echo", wave_size=1,
                    new_config=NEW.encode(), writes=True)
    assert (shown.added, shown.removed) == (1, 1)
    assert "-max_batch_size: 0" in shown.diff and "+max_batch_size: 8" in shown.diff
    assert shown.repositories == (str(tmp_path),)


def test_a_read_only_member_refuses_the_rollout_before_start_naming_it_and_the_setting() -> None:
    shown = preview([member("a"), member("wild", trusted=False)], "lab", "apply", "echo", wave_size=1)
    assert shown.refused.startswith("fleet apply echo refused before anything changed: 1 member(s)")
    assert "wild" in shown.refused and "trusted_networks" in shown.refused
    assert "a (" not in shown.refused


def test_a_typed_repository_fills_only_the_servers_without_one(tmp_path: Path) -> None:
    own = tmp_path / "own"
    members = [member("a", own), member("b")]
    assert missing_repository(members) == ["b"]
    filled = with_repository(members, tmp_path / "shared")
    assert [m.repository for m in filled] == [own, tmp_path / "shared"] and missing_repository(filled) == []
