"""The load a model really gets, from recorded history (workspace SQLite or Prometheus).

CONTRACT (lead, start of round): the type below is fixed; helper `tune-objective` implements
`recorded_load`; `capacity` and `preview` use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class RecordedLoad:
    """A model's recorded traffic over a window, and where it was read."""

    model: str
    since: datetime
    until: datetime
    mean_rate_rps: float | None  # None: no traffic recorded in the window
    peak_rate_rps: float | None  # the highest rate over one sample interval
    batch_mix: dict[int, float] = field(default_factory=dict)  # batch size -> share of executions
    source: str = ""  # "workspace history (geadmin.db)" or "Prometheus at URL"
    samples: int = 0  # how many rate points the figures rest on

    def describe(self) -> str:
        """One line: which load, from which window and source."""
        raise NotImplementedError  # tune-objective
