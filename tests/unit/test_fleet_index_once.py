"""When the rollout's client may keep a repository index (geadmin/fleet/index_once.py): only a
settled one. The reads it saves are counted against real tritonservers in
tests/integration/test_fleet.py (the version rollout) and benchmarks/fleet.py."""

from __future__ import annotations

from geadmin.domain import ModelEntry, ModelState
from geadmin.fleet.index_once import settled

READY, LOADING, UNLOADING, UNAVAILABLE = (ModelState.READY, ModelState.LOADING, ModelState.UNLOADING,
                                          ModelState.UNAVAILABLE)


def index(*entries: tuple[str, str, ModelState]) -> list[ModelEntry]:
    return [ModelEntry(name, version, state, "") for name, version, state in entries]


def test_an_index_with_every_model_at_rest_is_kept() -> None:
    assert settled(index(("a", "1", READY), ("b", "1", UNAVAILABLE)))
    assert settled([])


def test_a_version_loading_is_never_kept_even_beside_a_ready_one() -> None:
    assert not settled(index(("a", "1", READY), ("a", "2", LOADING)))
    assert not settled(index(("a", "1", LOADING)))


def test_a_model_unloading_with_nothing_ready_is_not_kept() -> None:
    assert not settled(index(("a", "1", UNLOADING)))
    assert not settled(index(("a", "1", UNLOADING), ("b", "1", READY)))  # b's READY is not a's


def test_a_retired_version_unloading_beside_a_ready_one_is_kept() -> None:
    assert settled(index(("a", "1", UNLOADING), ("a", "2", READY)))
