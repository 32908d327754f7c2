"""The health gate a rollout passes after each wave (geadmin.fleet.rollout).

Before the rollout, each server that serves the model answers one warm-up request and then
`requests` smoke requests (the model's saved probe input, else zeros: geadmin.ops.probe);
after its wave, the same again (a reloaded model's first request pays for its warm-up). A
server passes when the model is READY there, its failed share of the requests is no worse
than before (+ `error_margin`), and their median latency is no slower than before by more
than `latency_margin` (a fraction) + `latency_slack_ms`. For an unload: the model is gone, and
every other model READY before is READY still (an ensemble that ran it is not taken down).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from geadmin.errors import FleetError, InvalidArgumentError, TritonError
from geadmin.ops.infer.request import smoke_request
from geadmin.ops.probe import probe_sources
from geadmin.triton.client import TritonClient

READY = "READY"


@dataclass(frozen=True)
class GateSettings:
    requests: int = 3  # smoke requests per server and check (after one warm-up); 0: READY only
    latency_margin: float = 1.0  # the median may take (1 + margin) x before ...
    latency_slack_ms: float = 200.0  # ... + this much: a busy host jitters
    error_margin: float = 0.0  # failed share of the gate's requests over before's

    def __post_init__(self) -> None:
        if not 0 <= self.requests <= 100:
            raise InvalidArgumentError(f"gate requests must be 0..100, got {self.requests}")
        if self.latency_margin < 0 or self.latency_slack_ms < 0 or not 0 <= self.error_margin <= 1:
            raise InvalidArgumentError("gate margins must be >= 0 (error margin a fraction 0..1)")


@dataclass(frozen=True)
class Measured:
    failed: int
    sent: int
    median_ms: float | None
    first_error: str = ""

    @property
    def failed_share(self) -> float:
        return self.failed / self.sent if self.sent else 0.0


def compare(before: Measured | None, after: Measured, settings: GateSettings) -> str:
    """Why `after` fails the gate against `before` (None: the model served nowhere before), or ""."""
    allowed = (before.failed_share if before else 0.0) + settings.error_margin
    if after.failed_share > allowed:
        return (f"{after.failed} of {after.sent} smoke requests failed "
                f"(before: {before.failed if before else 0} of {before.sent if before else 0}): "
                f"{after.first_error}")
    if before and before.median_ms is not None and after.median_ms is not None:
        limit = before.median_ms * (1 + settings.latency_margin) + settings.latency_slack_ms
        if after.median_ms > limit:
            return (f"smoke requests take {after.median_ms:.0f} ms (median), before "
                    f"{before.median_ms:.0f} ms (allowed {limit:.0f} ms)")
    return ""


class Gate:
    def __init__(self, clients: Mapping[str, TritonClient], model: str, unload: bool,
                 settings: GateSettings, home: Path | None = None) -> None:
        self.clients, self.model, self.unload, self.settings = clients, model, unload, settings
        self.sources = probe_sources(model, home)
        self.before: dict[str, Measured] = {}
        self.ready_before: dict[str, set[str]] = {}

    def measure_before(self) -> None:
        """FleetError naming the server when one does not answer: nothing has changed yet."""
        for name, client in self.clients.items():
            try:
                ready = self._ready(client)
            except TritonError as exc:
                raise FleetError(f"{name} does not answer, so the rollout did not start (nothing changed): "
                                 f"{str(exc).splitlines()[0]}; bring it back, or leave it out of the "
                                 "fleet") from exc
            self.ready_before[name] = ready
            if self.model in ready and not self.unload:
                self.before[name] = self._measure(client)

    def check(self, name: str) -> str:
        """What fails the gate on server `name`, or ""."""
        client = self.clients[name]
        try:
            ready = self._ready(client)
        except TritonError as exc:
            return f"Triton does not answer after the change: {str(exc).splitlines()[0]}"
        if self.unload:
            return self._check_unload(name, ready)
        if self.model not in ready:
            return f"{self.model} is not READY after the change"
        if self.settings.requests == 0:
            return ""
        return compare(self.before.get(name), self._measure(client), self.settings)

    def lost(self, name: str) -> list[str]:
        """The other models READY on `name` before the rollout that are not READY now."""
        try:
            ready = self._ready(self.clients[name])
        except TritonError:
            return []
        return sorted(self.ready_before.get(name, set()) - ready - {self.model})

    def _check_unload(self, name: str, ready: set[str]) -> str:
        if self.model in ready:
            return f"{self.model} is still READY after the unload"
        lost = sorted(self.ready_before.get(name, set()) - ready - {self.model})
        if lost:
            return f"unloading {self.model} took down {', '.join(lost)} too (they ran it, or failed with it)"
        return ""

    def _measure(self, client: TritonClient) -> Measured:
        smoke_request(client, self.model, sources=self.sources)  # warm-up: not counted
        failed, latencies, first_error = 0, [], ""
        for _ in range(self.settings.requests):
            result = smoke_request(client, self.model, sources=self.sources)
            if not result.ok:
                failed += 1
                first_error = first_error or result.reason.splitlines()[0]
            elif result.latency_ms is not None:
                latencies.append(result.latency_ms)
        median = statistics.median(latencies) if latencies else None
        return Measured(failed, self.settings.requests, median, first_error)

    @staticmethod
    def _ready(client: TritonClient) -> set[str]:
        return {m.name for m in client.repository_index() if m.state.value == READY}
