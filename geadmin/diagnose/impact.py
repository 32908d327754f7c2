"""What a change would do to the loaded ensembles that run a model, named before it runs.

`predict`: from the repository on disk (which ensemble runs which model, directly or
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

`process_backends`, also asked before a change: the backends a local Triton can load (an apply
refuses a config whose backend it lacks). What did change, asked of Triton after the change, is
`diagnose.state_changes`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonclient.grpc.model_config_pb2 import ModelConfig

from geadmin.domain import ModelEntry, ModelState
from geadmin.errors import GeAdminError, TritonError
from geadmin.repository.cross_model import (
    ENSEMBLE,
    check_ensemble,
    installed_backends,
    read_configs,
    users_of,
)
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import is_tritonserver, process_arguments

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
        states = index_states(client.repository_index())
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
    states = index_states(client.repository_index())
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


def index_states(entries: Sequence[ModelEntry]) -> dict[str, tuple[ModelState, str]]:
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
