"""Synthetic probes across a fleet: every member's READY models get their small real request
(geadmin.ops.probe), so "READY but not answering" on one replica behind a load balancer is
caught even when no user request happens to reach it.

One `Prober` per member (each model's probe-rate bound holds per server), run in parallel and
bounded (a hung replica costs its own probe timeout, never the others'); the members are found
again every `rediscover_s`, so replicas scaled in later are probed too. A round returns one
`ProbeRound` per member, recorded in the workspace like a single server's (the Overview,
`geadmin status` and geadmin's metrics, labelled by server, read them).

A member's prober holds the key only when the member is trusted (geadmin.fleet.membership);
a read-only member is probed with no key, its models read from the open statistics API
(geadmin.fleet.readonly). A member whose trust changes gets a new prober and client.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from geadmin.errors import FleetError, GeAdminError
from geadmin.fleet.discovery import Discovery, Fleet, discover
from geadmin.fleet.members import Member
from geadmin.fleet.readonly import client_for
from geadmin.ops.probe import DEFAULT_INTERVAL_S, PROBE_TIMEOUT_S, Prober, ProbeRound
from geadmin.telemetry.history import watch

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
        self._probers: dict[tuple[str, ...], Prober] = {}  # _identity(member) -> its prober (and client)
        self._found_at = float("-inf")

    @property
    def servers(self) -> list[str]:
        return sorted(key[0] for key in self._probers)

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
        wanted = {_identity(m): m for m in found.members}
        gone = [k for k in self._probers if k not in wanted]  # scaled in, gone, or its trust changed
        if not any(f.error for f in found.found):  # every source answered: who is missing left
            left = {self._probers[k].server for k in gone} - {self._probers[k].server for k in self._probers
                                                             if k in wanted}
            watch.forget_servers(sorted(left), home=self.home)
        for key in gone:
            self._probers.pop(key).client.close()
        for key, member in wanted.items():
            if key not in self._probers:
                client = client_for(member, PROBE_TIMEOUT_S)
                self._probers[key] = Prober(client, home=self.home, interval_s=self.interval_s,
                                            clock=self.clock, repository=member.repository)


def _identity(member: Member) -> tuple[str, ...]:
    """What a prober's client was made for: the address, the trust, the key and the CA."""
    return (member.url, member.trust.word, member.spec.admin_key or "", str(member.tls_ca or ""))
