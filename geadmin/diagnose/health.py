"""What is down, and why: server snapshots, and the models sorted for an on-call operator
(ready, failed with the reason, loading, not loaded). `diagnose.verdict` judges on top of it;
the Overview page and `geadmin status` share both.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from geadmin.diagnose import advice
from geadmin.domain import ModelEntry, ModelState, ServerInfo
from geadmin.errors import TritonError
from geadmin.repository.layout import layout_problems
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource, is_failure, parse_log_line

MAX_PARALLEL_POLLS = 8


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


def take_snapshots(clients: Sequence[tuple[str, TritonClient]]) -> list[ServerSnapshot]:
    """Every server at once: one hung server must not hold up the others."""
    if not clients:
        return []
    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL_POLLS, len(clients))) as pool:
        return list(pool.map(lambda named: take_snapshot(*named), clients))


# -- why a model is not serving -------------------------------------------------------
UNLOADED_REASON = "unloaded"


def is_idle(model: ModelEntry) -> bool:
    """Not serving on purpose: never loaded, or unloaded by someone."""
    return model.state is ModelState.NOT_LOADED or (
        model.state is ModelState.UNAVAILABLE and model.reason == UNLOADED_REASON
    )


def log_failures(log: LogSource | None, names: Sequence[str]) -> dict[str, str]:
    """For each model whose latest line in the Triton log is a failure: that line's message.

    This is how a model whose config Triton could not even parse is found: the index shows
    it only as "not loaded", with no reason (FACTS.md); the log says why.
    """
    if log is None or not names:
        return {}
    failures = {}
    for name, raw in log.last_lines(names).items():
        line = parse_log_line(raw)
        if is_failure(line):
            failures[name] = line.message.split("\n\n")[0].strip()
    return failures


def failure_reason(index_reason: str, log_reason: str, problems: Sequence[str]) -> str:
    """The headline for a model that is not serving: most specific finding first, with its fix."""
    return advice.lead(log_reason=advice.best_reason(index_reason, log_reason), layout=problems) \
        or "no reason given by Triton"


def failure_reasons(
    entries: Sequence[ModelEntry], log: LogSource | None, repository: Path | None
) -> dict[str, str]:
    """Headline reasons for the models among `entries` that failed (not idle, not moving)."""
    candidates = [m for m in entries
                  if m.state not in (ModelState.READY, ModelState.LOADING, ModelState.UNLOADING)]
    logged = log_failures(log, [m.name for m in candidates])
    reasons = {}
    for model in candidates:
        if is_idle(model) and model.name not in logged:
            continue
        problems: list[str] = []
        if repository is not None:
            problems = layout_problems(repository, model.name)
        reasons[model.name] = failure_reason(model.reason, logged.get(model.name, ""), problems)
    return reasons


@dataclass(frozen=True)
class Triage:
    """The models of one snapshot, sorted by what an on-call operator must look at."""

    ready: list[ModelEntry]
    failed: list[tuple[ModelEntry, str]]  # (model, headline reason)
    changing: list[ModelEntry]  # LOADING / UNLOADING
    idle: list[ModelEntry]  # never loaded, or unloaded, with no failure logged

    @property
    def failed_reasons(self) -> dict[str, str]:
        return {model.name: reason for model, reason in self.failed}

    @property
    def counts(self) -> dict[str, int]:
        """The Overview's counters: one per group, so counts and captions agree."""
        return {"ready": len(self.ready), "failed": len(self.failed),
                "loading / unloading": len(self.changing), "not loaded": len(self.idle)}


def triage(snapshot: ServerSnapshot, log: LogSource | None = None,
           repository: Path | None = None) -> Triage:
    reasons = failure_reasons(snapshot.models, log, repository)
    ready, failed, changing, idle = [], [], [], []
    order = {ModelState.UNAVAILABLE: 0, ModelState.NOT_LOADED: 1}  # loaded-and-failed first
    for model in sorted(snapshot.models, key=lambda m: (order.get(m.state, 2), m.name)):
        if model.state is ModelState.READY:
            ready.append(model)
        elif model.state in (ModelState.LOADING, ModelState.UNLOADING):
            changing.append(model)
        elif model.name in reasons:
            failed.append((model, reasons[model.name]))
        else:
            idle.append(model)
    return Triage(ready, failed, changing, idle)
