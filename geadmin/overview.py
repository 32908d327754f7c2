"""Snapshots of a server's health and model states: what the Overview page and `status` show."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from geadmin.errors import TritonError
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
