"""Snapshots of a server's health and model states: what the Overview page and `status` show."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from geadmin.errors import TritonError
from geadmin.explain import parse_log_line
from geadmin.logsource import LogCursor, LogSource
from geadmin.triton import ModelEntry, ModelState, ServerInfo, TritonClient


@dataclass(frozen=True)
class ServerSnapshot:
    name: str
    url: str
    transport: str
    taken_at: datetime
    live: bool = False
    ready: bool = False
    info: ServerInfo | None = None
    models: tuple[ModelEntry, ...] = field(default_factory=tuple)
    error: str = ""

    @property
    def reachable(self) -> bool:
        return self.live or self.info is not None

    @property
    def status(self) -> str:
        """One word for the server: what the Overview's table and `status` print."""
        if not self.reachable:
            return "UNREACHABLE"
        if self.ready:
            return "READY"
        return "LIVE, NOT READY" if self.live else "NOT LIVE"

    @property
    def counts(self) -> dict[ModelState, int]:
        counted = Counter(model.state for model in self.models)
        return {state: counted.get(state, 0) for state in ModelState}

    @property
    def not_ready(self) -> list[ModelEntry]:
        """Models that should be serving but are not: loaded-and-failed first."""
        order = {ModelState.UNAVAILABLE: 0, ModelState.LOADING: 1, ModelState.UNLOADING: 2,
                 ModelState.NOT_LOADED: 3}
        waiting = [m for m in self.models if m.state is not ModelState.READY]
        return sorted(waiting, key=lambda m: (order.get(m.state, 9), m.name))


def take_snapshot(name: str, client: TritonClient) -> ServerSnapshot:
    """Never raises for Triton trouble: an unreachable server is a snapshot with an error."""
    empty = ServerSnapshot(name, client.url, client.transport.value, datetime.now(timezone.utc))
    try:
        live = client.is_live()
        ready = client.is_ready()
        info = client.server_info()
    except TritonError as exc:
        return replace(empty, error=str(exc))
    reached = replace(empty, live=live, ready=ready, info=info)
    try:
        return replace(reached, models=tuple(client.repository_index()))
    except TritonError as exc:  # e.g. restricted repository API without the key
        return replace(reached, error=str(exc))


# -- why a model is not serving -------------------------------------------------------
UNLOADED_REASON = "unloaded"


def is_idle(model: ModelEntry) -> bool:
    """Not serving on purpose: never loaded, or unloaded by someone."""
    return model.state is ModelState.NOT_LOADED or (
        model.state is ModelState.UNAVAILABLE and model.reason == UNLOADED_REASON
    )


def log_failures(log: LogSource | None, names: list[str]) -> dict[str, str]:
    """For each model whose latest line in the Triton log is an error: that error.

    This is how a model whose config Triton could not even parse is found: the index shows
    it only as "not loaded", with no reason (FACTS.md); the log says why. One pass over the
    log; a line belongs to the first of `names` it mentions (Triton names the model a line is
    about first, e.g. an ensemble before the step it waits for).
    """
    if log is None or not names:
        return {}
    alternatives = "|".join(re.escape(name) for name in sorted(names, key=len, reverse=True))
    mentions = re.compile(rf"(?<![\w.-])({alternatives})(?:_\d+_\d+)?(?![\w.-])")
    last_line: dict[str, str] = {}
    for raw in log.read_since(LogCursor(0, datetime.now(timezone.utc))).splitlines():
        match = mentions.search(raw)
        if match:
            last_line[match.group(1)] = raw
    failures = {}
    for name, raw in last_line.items():
        line = parse_log_line(raw)
        if line.severity == "E":
            failures[name] = line.message
    return failures


def best_reason(index_reason: str, log_reason: str) -> str:
    """The log's line is usually the fuller one; keep the index's reason when it adds something."""
    if not log_reason:
        return index_reason
    if index_reason and index_reason not in log_reason:
        return f"{index_reason} — Triton log: {log_reason}"
    return log_reason


@dataclass(frozen=True)
class Triage:
    """The models of one snapshot, sorted by what an on-call operator must look at."""

    failed: list[tuple[ModelEntry, str]]  # (model, best reason), failures first
    changing: list[ModelEntry]  # LOADING / UNLOADING
    idle: list[ModelEntry]  # not loaded, or unloaded, with no error logged

    @property
    def failed_reasons(self) -> dict[str, str]:
        return {model.name: reason for model, reason in self.failed}


def triage(snapshot: ServerSnapshot, log: LogSource | None = None) -> Triage:
    idle_or_failed = [m for m in snapshot.models if m.state is not ModelState.READY]
    logged = log_failures(log, [m.name for m in idle_or_failed])
    failed, changing, idle = [], [], []
    for model in snapshot.not_ready:
        if model.state in (ModelState.LOADING, ModelState.UNLOADING):
            changing.append(model)
        elif not is_idle(model) or model.name in logged:
            reason = best_reason(model.reason, logged.get(model.name, ""))
            failed.append((model, reason or "no reason given by Triton"))
        else:
            idle.append(model)
    return Triage(failed, changing, idle)
