"""Synthetic probes across a fleet: every member's READY models get their small real request
(geadmin.ops.probe), so "READY but not answering" on one replica behind a load balancer is
caught even when no user request happens to reach it.

One `Prober` per member (each model's probe-rate bound holds per server), run in parallel and
bounded (a hung replica costs its own probe timeout, never the others'); the members are found
again every `rediscover_s`, so replicas scaled in later are probed too. A round returns one
`ProbeRound` per member, recorded in the workspace like a single server's (the Overview,
`geadmin status` and geadmin's metrics, labelled by server, read them).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from geadmin.errors import FleetError, GeAdminError
from geadmin.fleet.discovery import Discovery, Fleet, discover
from geadmin.ops.probe import DEFAULT_INTERVAL_S, PROBE_TIMEOUT_S, Prober, ProbeRound
from geadmin.telemetry import watch
from geadmin.triton.client import TritonClient

REDISCOVER_S = 60.0
WORKERS = 8  # members probed at once


class FleetProber:
    def __init__(self, fleet: Fleet, *, home: Path | None = None, interval_s: float = DEFAULT_INTERVAL_S,
                 rediscover_s: float = REDISCOVER_S, clock: Callable[[], float] = time.time,
                 find: Callable[[Fleet], Discovery] = discover) -> None:
        self.fleet = fleet
        self.home = home
        self.interval_s = interval_s
        self.rediscover_s = rediscover_s
        self.clock = clock
        self.find = find
        self.problems: list[str] = []  # the sources that did not answer at the last discovery
        self._probers: dict[str, Prober] = {}  # member URL -> its prober (and client)
        self._found_at = float("-inf")

    @property
    def servers(self) -> list[str]:
        return sorted(self._probers)

    def run(self, *, force: bool = False) -> list[ProbeRound]:
        """One round on every member, in parallel. Raises the first GeAdminError a member's
        round raised (the workspace could not record it) after every member has run."""
        if self.clock() - self._found_at >= self.rediscover_s:
            self._rediscover()
        probers = list(self._probers.values())
        if not probers:
            raise FleetError(f"fleet {self.fleet.name!r} has no server to probe: "
                             + ("; ".join(self.problems) or "its sources found none"))
        with ThreadPoolExecutor(max_workers=min(WORKERS, len(probers)), thread_name_prefix="probe") as pool:
            futures = [pool.submit(p.run, force=force) for p in probers]
            rounds, failures = [], []
            for future in futures:
                try:
                    rounds.append(future.result())
                except GeAdminError as exc:
                    failures.append(exc)
        if failures:
            raise failures[0]
        return rounds

    def close(self) -> None:
        for prober in self._probers.values():
            prober.client.close()
        self._probers.clear()

    def _rediscover(self) -> None:
        found = self.find(self.fleet)
        self.problems = found.problems
        self._found_at = self.clock()
        wanted = {m.url: m for m in found.members}
        if not any(f.error for f in found.found):  # every source answered: who is missing left
            watch.forget_servers([u for u in self._probers if u not in wanted], home=self.home)
        for url in [u for u in self._probers if u not in wanted]:  # scaled in, or gone
            self._probers.pop(url).client.close()
        for url, member in wanted.items():
            if url not in self._probers:
                client = TritonClient(url, admin_key=member.spec.admin_key, timeout_s=PROBE_TIMEOUT_S)
                self._probers[url] = Prober(client, home=self.home, interval_s=self.interval_s,
                                            clock=self.clock)
