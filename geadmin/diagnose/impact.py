"""What else a change does: the ensembles that run a model, before the change, and the models
that changed state because of it, after.

Before (`predict`): from the repository on disk (which ensemble runs which model, directly or
through another ensemble) and Triton (the index says which of them are READY; the live configs
are what Triton checks a reloaded ensemble against), name each loaded ensemble the change
touches and what happens to it. Triton 2.51, checked on the sample stack
(tests/integration/test_consequences.py):

- unloading a model unloads every loaded ensemble that runs it ("ensemble E contains models
  that are not available or ambiguous: M"), with or without `unload_dependents`;
- reloading a model reloads those ensembles too, and re-checks them: a new config the ensemble
  does not accept (geadmin.repository.cross_model.check_ensemble: a smaller max_batch_size, a
  tensor it no longer has, another type or shape) leaves the model loaded and the ensemble
  UNLOADED, while the model's own load "succeeds".

After (`snapshot` before, `changes` after): ask Triton again, never assume, and list every
model other than the ones acted on whose state changed, each with Triton's reason: the
index's `reason`, and the failure line Triton logged about it since the snapshot when the log
is readable (the index says only "unloaded").
"""

from __future__ import annotations

import enum
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.domain import LogCursor, ModelEntry, ModelState
from geadmin.errors import GeAdminError, TritonError
from geadmin.repository.cross_model import (
    ENSEMBLE,
    check_ensemble,
    installed_backends,
    read_configs,
    users_of,
)
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import (
    LogSource,
    is_failure,
    is_tritonserver,
    mentions_pattern,
    parse_log_line,
    process_arguments,
)

SETTLE_TIMEOUT_S = 15.0  # how long `changes` waits for dependents to stop LOADING / UNLOADING
MOVING = frozenset({ModelState.LOADING, ModelState.UNLOADING})
NEVER = (ModelState.NOT_LOADED, "")  # a model the index does not list


class Effect(str, enum.Enum):
    UNLOADED = "unloaded with it"
    REFUSED = "refused by Triton, so unloaded"
    RELOADED = "reloaded with it"

    @property
    def takes_down(self) -> bool:
        return self is not Effect.RELOADED


@dataclass(frozen=True)
class Consequence:
    """A loaded ensemble the change touches."""

    model: str  # the ensemble
    effect: Effect
    reason: str  # why, in Triton's words where it has them
    chain: tuple[str, ...]  # from the ensemble down to the changed model

    def text(self) -> str:
        via = f" (through {' → '.join(self.chain[1:-1])})" if len(self.chain) > 2 else ""
        return f"{self.model}: {self.effect.value}{via} — {self.reason}"

    def record(self) -> dict[str, Any]:
        return {"model": self.model, "effect": self.effect.name.lower(), "takes_down": self.effect.takes_down,
                "reason": self.reason, "chain": list(self.chain)}


@dataclass(frozen=True)
class Impact:
    """What a change of `models` would do to the ensembles that run them."""

    action: str
    models: tuple[str, ...]
    consequences: tuple[Consequence, ...] = ()
    problem: str = ""  # why the prediction is incomplete ("" when it is not)

    @property
    def taken_down(self) -> list[str]:
        return [c.model for c in self.consequences if c.effect.takes_down]

    @property
    def takes_down(self) -> bool:
        return bool(self.taken_down)

    def headline(self) -> str:
        """One sentence for a confirmation ("" when nothing else is touched)."""
        down = self.taken_down
        reloaded = [c.model for c in self.consequences if not c.effect.takes_down]
        parts = []
        if down:
            parts.append(f"this also takes down {_names(down)}: Triton unloads "
                         f"{'it' if len(down) == 1 else 'them'} with {_names(self.models)}")
        if reloaded:
            it = "it" if len(self.models) == 1 else "them"
            parts.append(f"Triton reloads {_names(reloaded)} with {it}")
        return "; ".join(parts)

    def lines(self) -> list[str]:
        return [c.text() for c in self.consequences]

    def record(self) -> dict[str, Any]:
        return {"action": self.action, "models": list(self.models), "takes_down": self.taken_down,
                "consequences": [c.record() for c in self.consequences], "problem": self.problem}


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


# -- before ---------------------------------------------------------------------------
def predict(
    client: TritonClient,
    action: str,
    models: Sequence[str],
    *,
    repository: Path | None = None,
    new_configs: Mapping[str, ModelConfig] | None = None,
) -> Impact:
    """What `action` ("unload", "reload", "load", "apply", "rollback") of `models` does to the
    loaded ensembles that run them. `new_configs`: the configs an apply or rollback puts in
    place (checked against each ensemble as Triton will). Never raises: a Triton that does not
    answer gives an Impact with `problem` set."""
    try:
        states = _states(client.repository_index())
        configs = _structure(client, repository, states)
    except GeAdminError as exc:
        return Impact(action, tuple(models), problem=f"could not tell which ensembles run "
                      f"{_names(models)}: {exc}")
    found: dict[str, Consequence] = {}
    for model in models:
        for consequence in _for_model(client, action, model, configs, states, new_configs or {}):
            kept = found.get(consequence.model)
            if consequence.model not in models and (kept is None or _rank(consequence) > _rank(kept)):
                found[consequence.model] = consequence
    return Impact(action, tuple(models), tuple(sorted(found.values(), key=lambda c: c.model)))


def ensembles_above(client: TritonClient, models: Sequence[str], *,
                    repository: Path | None = None) -> dict[str, tuple[str, ...]]:
    """{model: the loaded ensembles that run it, directly or through another ensemble} — what
    also loses a model when its NPU faults. Raises what the client raises (a GeAdminError)."""
    states = _states(client.repository_index())
    configs = _structure(client, repository, states)
    return {model: tuple(sorted(name for name in users_of(model, configs)
                                if states.get(name, NEVER)[0] is ModelState.READY)) for model in models}


def _rank(consequence: Consequence) -> int:
    return {Effect.REFUSED: 3, Effect.UNLOADED: 2, Effect.RELOADED: 1}[consequence.effect]


def _for_model(client: TritonClient, action: str, model: str, configs: Mapping[str, ModelConfig],
               states: Mapping[str, tuple[ModelState, str]], new_configs: Mapping[str, ModelConfig]
               ) -> list[Consequence]:
    users = {name: chain for name, chain in users_of(model, configs).items()
             if states.get(name, NEVER)[0] is ModelState.READY}
    if not users or states.get(model, NEVER)[0] is not ModelState.READY:
        return []  # nothing loaded runs it, or it is not loaded (a write alone changes nothing)
    if action == "unload":
        return [Consequence(name, Effect.UNLOADED, f"it runs {model}, and Triton unloads an ensemble whose "
                            "model is unloaded", chain) for name, chain in users.items()]
    refused = _refusals(client, model, configs, states, new_configs, users)
    found = []
    for name, chain in users.items():
        inner = next((r for r in chain[1:-1] if r in refused), None)
        if name in refused:
            found.append(Consequence(name, Effect.REFUSED, refused[name], chain))
        elif inner is not None:
            found.append(Consequence(name, Effect.UNLOADED, f"it runs {inner}, which Triton refuses", chain))
        else:
            found.append(Consequence(name, Effect.RELOADED, f"it runs {model}; Triton reloads an ensemble "
                                     "when a model it runs is reloaded", chain))
    return found


def _refusals(client: TritonClient, model: str, configs: Mapping[str, ModelConfig],
              states: Mapping[str, tuple[ModelState, str]], new_configs: Mapping[str, ModelConfig],
              users: Mapping[str, tuple[str, ...]]) -> dict[str, str]:
    """{direct user: Triton's reason} for the users that refuse `model`'s new config."""
    new = new_configs.get(model)
    if new is None:
        return {}
    refused = {}
    for name, chain in users.items():
        if len(chain) != 2:
            continue
        members: dict[str, ModelConfig | None] = {}
        for step in configs[name].ensemble_scheduling.step:
            members[step.model_name] = new if step.model_name == model else _live_or_disk(
                client, step.model_name, configs, states)
        reasons = [m.message for m in check_ensemble(configs[name], members) if m.involves(model)]
        if reasons:
            refused[name] = "; ".join(reasons)
    return refused


def _live_or_disk(client: TritonClient, name: str, configs: Mapping[str, ModelConfig],
                  states: Mapping[str, tuple[ModelState, str]]) -> ModelConfig | None:
    """The config Triton checks an ensemble against: the loaded model's (completed) one."""
    if states.get(name, NEVER)[0] is ModelState.READY:
        try:
            return client.model_config(name)
        except TritonError:
            pass
    return configs.get(name)


def _structure(client: TritonClient, repository: Path | None,
               states: Mapping[str, tuple[ModelState, str]]) -> dict[str, ModelConfig]:
    """Which ensemble runs what: the configs on disk, else the live configs of loaded models."""
    if repository is not None:
        configs = read_configs(repository)
        if configs:
            return configs
    live = {}
    for name, (state, _) in states.items():
        if state is ModelState.READY:
            config = client.model_config(name)
            if config.platform == ENSEMBLE:
                live[name] = config
    return live


def _states(entries: Sequence[ModelEntry]) -> dict[str, tuple[ModelState, str]]:
    """name -> (state, reason): READY if any version is, else the first version's."""
    states: dict[str, tuple[ModelState, str]] = {}
    for entry in entries:
        if entry.name not in states or entry.state is ModelState.READY:
            states[entry.name] = (entry.state, entry.reason)
    return states


def process_backends(pid: int | None) -> frozenset[str] | None:
    """The backends a tritonserver running here as `pid` can load: those in the
    `--backend-directory` of its command line (None: not a local Triton, or no such flag)."""
    if pid is None or not is_tritonserver(pid):
        return None
    argv = process_arguments(pid)
    for i, arg in enumerate(argv):
        if arg.startswith("--backend-directory="):
            return installed_backends(Path(arg.split("=", 1)[1]))
        if arg == "--backend-directory" and i + 1 < len(argv):
            return installed_backends(Path(argv[i + 1]))
    return None


# -- after ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Snapshot:
    """Every model's state (and the log's end) just before a change."""

    states: Mapping[str, tuple[ModelState, str]] = field(default_factory=dict)
    cursor: LogCursor | None = None
    problem: str = ""  # why there is no snapshot ("" when there is)


@dataclass(frozen=True)
class StateChange:
    """A model other than the one acted on whose state changed."""

    model: str
    before: ModelState
    after: ModelState
    reason: str  # Triton's: the failure it logged, else the index's reason
    log_line: str = ""  # the raw log line the reason comes from

    @property
    def lost_ready(self) -> bool:
        return self.before is ModelState.READY and self.after is not ModelState.READY

    def text(self) -> str:
        return f"{self.model}: {self.before.value} → {self.after.value} — {self.reason}"

    def record(self) -> dict[str, Any]:
        return {"model": self.model, "before": self.before.value, "after": self.after.value,
                "reason": self.reason, "log_line": self.log_line}


def snapshot(client: TritonClient, log: LogSource | None) -> Snapshot:
    """Take just before a change; never raises."""
    cursor = None
    try:
        cursor = log.cursor() if log is not None else None
    except OSError:
        cursor = None
    try:
        return Snapshot(_states(client.repository_index()), cursor)
    except GeAdminError as exc:
        return Snapshot(cursor=cursor, problem=str(exc))


def changes(
    client: TritonClient,
    before: Snapshot,
    acted: Collection[str],
    log: LogSource | None,
    *,
    settle_timeout_s: float = SETTLE_TIMEOUT_S,
) -> list[StateChange]:
    """Every model outside `acted` whose state differs from `before`, once nothing is LOADING
    or UNLOADING (bounded). Never raises: no snapshot, or no answer, gives []."""
    if before.problem:
        return []
    deadline = time.monotonic() + settle_timeout_s
    # Not waited for: a load stuck before the action, and the acted models themselves (a load
    # that timed out stays LOADING: its own state is the action's result, not a side effect).
    settled = {*acted, *(name for name, (state, _) in before.states.items() if state in MOVING)}
    while True:
        try:
            now = _states(client.repository_index())
        except GeAdminError:
            return []
        moving = any(state in MOVING for name, (state, _) in now.items() if name not in settled)
        if not moving or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    changed = [name for name in sorted(set(before.states) | set(now)) if name not in acted
               and before.states.get(name, NEVER)[0]
               is not now.get(name, NEVER)[0]]
    logged = _logged_reasons(log, before.cursor, changed)
    found = []
    for name in changed:
        old, new = before.states.get(name, NEVER), now.get(name, NEVER)
        message, raw = logged.get(name, ("", ""))
        reason = message or (f"Triton's index says: {new[1]}" if new[1] else "Triton gave no reason")
        found.append(StateChange(name, old[0], new[0], reason, raw))
    return found


def _logged_reasons(log: LogSource | None, cursor: LogCursor | None,
                    names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """{name: (message, raw line)} of the latest failure Triton logged about it since `cursor`
    and after its last successful load (the one right before "successfully unloaded"), else its
    latest "successfully ..." line; nothing else. A failure followed by a successful load is
    history: Triton logs "unable to create stream ...: CUDA driver ..." on every ensemble load
    on a CPU-only server, and a rollback that loads the ensemble again must not quote it."""
    if log is None or cursor is None or not names:
        return {}
    try:
        raw_lines = log.lines_since(cursor)
    except (OSError, GeAdminError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        pattern = mentions_pattern([name])
        failure = success = None
        for line in (parse_log_line(raw) for raw in raw_lines if pattern.search(raw)):
            if "successfully loaded" in line.message:
                failure, success = None, line
            elif is_failure(line):
                failure = line
            elif "successfully" in line.message:
                success = line
        chosen = failure or success
        if chosen is not None:
            found[name] = (chosen.message.split("\n\n")[0].strip(), chosen.raw)
    return found
