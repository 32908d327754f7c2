"""geadmin's own work on a server, kept out of the verdict: the tuner's trial copies.

A trial (`geadmin.repository.trials`: `<model>__tune_<run>` with the run's marker in its
directory) is loaded, reloaded with other configs, refused (a max_batch_size above an .om's
gears), unloaded and deleted while `geadmin tune` runs. None of that is the server failing:
the verdict judges the server without them and lists them apart (labelled, never counted).
Triton's strict readiness counts them too — a trial LOADING, UNLOADING or refused makes
Triton "not ready" — so a not-ready Triton with such a trial is not a server problem either.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from geadmin.diagnose.health import ServerSnapshot
from geadmin.domain import ModelEntry, ModelState
from geadmin.repository.trials import is_trial


def split_trials(snapshot: ServerSnapshot,
                 repository: Path | None) -> tuple[ServerSnapshot, tuple[ModelEntry, ...]]:
    """(the snapshot without geadmin's trials, the trials)."""
    trials = tuple(m for m in snapshot.models if is_trial(repository, m.name))
    if not trials:
        return snapshot, ()
    return replace(snapshot, models=tuple(m for m in snapshot.models if m not in trials)), trials


def explain_not_ready(trials: tuple[ModelEntry, ...]) -> bool:
    """A trial that is not READY (loading, unloading, refused) is why Triton says "not ready"."""
    return any(m.state is not ModelState.READY for m in trials)
