"""The operator's monitoring settings, guarded and audited: a model's objectives (p99 target,
error budget; stored by `geadmin.telemetry.alerting.objectives`) and the example request its
synthetic probe sends (`geadmin.telemetry.history.watch`, used by `geadmin.ops.probe`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from geadmin import audit
from geadmin.access.guard import require
from geadmin.access.roles import GuardedAction
from geadmin.errors import InvalidArgumentError
from geadmin.ops.infer.inputs import InputSource
from geadmin.ops.probe import source_record
from geadmin.telemetry.alerting import objectives
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.telemetry.history import watch

MAX_P99_MS = 3_600_000.0


def parse_budget(text: str) -> float:
    """An error budget as typed: `0.1%` or a fraction `0.001`; between 0 and 50 %."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError as exc:
        raise InvalidArgumentError(f"an error budget is a percentage like 0.1% or a fraction like 0.001, got "
                          f"{text!r}") from exc
    if not math.isfinite(value) or not 0 < value <= 0.5:
        raise InvalidArgumentError(f"an error budget is above 0 and at most 50 %, got {text!r}")
    return value


def set_objective(model: str, p99_ms: float | None, error_budget: float | None, *, auth: object,
                  server: str = "", home: Path | None = None) -> Objective:
    """Set (or, with neither figure, clear) `model`'s objectives; audited as `objective`."""
    who = require(auth, GuardedAction.MONITORING)
    if not model.strip():
        raise InvalidArgumentError("name the model the objective is for")
    if p99_ms is not None and (not math.isfinite(p99_ms) or not 0 < p99_ms <= MAX_P99_MS):
        raise InvalidArgumentError(f"a p99 objective is above 0 and at most {MAX_P99_MS:g} ms, got "
                                   f"{p99_ms:g}")
    if error_budget is not None and not 0 < error_budget <= 0.5:
        raise InvalidArgumentError(f"an error budget is above 0 and at most 50 %, got {error_budget:g}")
    before = objectives.objectives(home=home).get(model)
    stored = objectives.store(Objective(model, p99_ms, error_budget), who.name, home=home)
    audit.record_action("objective", model, True, f"{before.describe() if before else 'no objective'} -> "
                        f"{stored.describe()}", server=server, actor=who, home=home)
    return stored


def save_probe_input(model: str, sources: Mapping[str, InputSource], *, auth: object, server: str = "",
                     home: Path | None = None) -> None:
    """Keep `sources` as the request `model`'s probe sends (the Playground's current request)."""
    who = require(auth, GuardedAction.MONITORING)
    watch.save_input(model, source_record(sources), who.name, home=home)
    audit.record_action("probe_input", model, True, "the probe sends the saved request: "
                        + ", ".join(f"{name}={s.kind.value}" for name, s in sorted(sources.items())),
                        server=server, actor=who, home=home)
