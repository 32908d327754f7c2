"""Nothing outside grows or stays forever: the model states of a server that left the fleet
expire (the exporter's freshness, rows removed at rediscovery), DNS answers are capped with a
note, and the client cache closes what it evicts."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from geadmin.fleet import dns
from geadmin.fleet.discovery import Discovery, Fleet
from geadmin.fleet.members import Found, Member
from geadmin.fleet.probes import FleetProber
from geadmin.telemetry.alerting.exporter import STATE_FRESH_S, GeadminCollector
from geadmin.telemetry.history import watch
from geadmin.triton.client_cache import ClientCache
from geadmin.triton.servers import ServerSpec

GONE = "http://10.9.9.9:8000"
STAYS = "http://10.9.9.8:8000"


def stuck_servers(collector: GeadminCollector) -> set[str]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    families = text_string_to_metric_families(generate_latest(registry).decode())
    return {s.labels["server"] for f in families for s in f.samples
            if s.name == "geadmin_model_state_seconds"}


def test_a_state_not_read_again_within_the_bound_is_no_longer_exported(tmp_path: Path) -> None:
    now = 100_000.0
    watch.record_states(GONE, {"m": ("LOADING", "", False)}, now - 7200, home=tmp_path)  # pod killed
    watch.record_states(STAYS, {"m": ("LOADING", "", False)}, now - 7200, home=tmp_path)
    watch.record_states(STAYS, {"m": ("LOADING", "", False)}, now - 5, home=tmp_path)  # still watched
    assert stuck_servers(GeadminCollector(tmp_path, clock=lambda: now)) == {STAYS}
    before = now - 7200 + STATE_FRESH_S - 1
    assert stuck_servers(GeadminCollector(tmp_path, clock=lambda: before)) == {GONE, STAYS}
    (kept,) = watch.model_states(STAYS, home=tmp_path)
    assert kept.for_s(now) == 7200  # still watched: its since is kept, so its stuck alert holds


def test_rows_nobody_read_again_for_a_day_are_removed_at_the_next_record(tmp_path: Path) -> None:
    watch.record_states(GONE, {"m": ("LOADING", "", False)}, 1.0, home=tmp_path)
    watch.record_states(STAYS, {"m": ("READY", "", False)}, 1.0 + watch.KEEP_STATES_S - 1, home=tmp_path)
    assert {s.server for s in watch.model_states(home=tmp_path)} == {GONE, STAYS}
    watch.record_states(STAYS, {"m": ("READY", "", False)}, 2.0 + watch.KEEP_STATES_S, home=tmp_path)
    assert {s.server for s in watch.model_states(home=tmp_path)} == {STAYS}


def test_forgetting_servers_removes_only_their_rows(tmp_path: Path) -> None:
    watch.record_states(GONE, {"a": ("LOADING", "", False), "b": ("READY", "", False)}, 1.0, home=tmp_path)
    watch.record_states(STAYS, {"a": ("LOADING", "", False)}, 1.0, home=tmp_path)
    assert watch.forget_servers([GONE, "http://never-seen:8000"], home=tmp_path) == 2
    assert [(s.server, s.model) for s in watch.model_states(home=tmp_path)] == [(STAYS, "a")]
    assert watch.forget_servers([], home=tmp_path) == 0


def discovery(*urls: str, error: str = "") -> Discovery:
    members = tuple(Member(ServerSpec(url, url), "dns:triton:8000", {}) for url in urls)
    found = Found("dns:triton:8000", members, error=error)
    return Discovery(Fleet("f", ("dns:triton:8000",)), members, (found,))


def test_a_member_that_left_the_fleet_has_its_states_removed_at_rediscovery(tmp_path: Path) -> None:
    answers = [discovery(GONE, STAYS), discovery(STAYS, error="timed out"), discovery(GONE, STAYS),
               discovery(STAYS)]
    prober = FleetProber(Fleet("f", ("dns:triton:8000",)), home=tmp_path, rediscover_s=0,
                         find=lambda fleet: answers.pop(0))
    try:
        prober._rediscover()
        for server in (GONE, STAYS):
            watch.record_states(server, {"m": ("LOADING", "", False)}, 1.0, home=tmp_path)
        prober._rediscover()  # a source did not answer: absence proves nothing, nothing is removed
        assert {s.server for s in watch.model_states(home=tmp_path)} == {GONE, STAYS}
        prober._rediscover()  # back
        prober._rediscover()  # every source answered without it: it left
        assert {s.server for s in watch.model_states(home=tmp_path)} == {STAYS}
        assert prober.servers == [STAYS]
    finally:
        prober.close()


def test_a_dns_answer_over_the_cap_is_cut_with_a_note() -> None:
    many = [f"10.1.{i // 256}.{i % 256}" for i in range(dns.MAX_ADDRESSES + 36)]
    found = dns.discover("triton:8000", timeout_s=1, resolver=lambda host, port: many)
    assert len(found.members) == dns.MAX_ADDRESSES
    assert found.notes == (f"triton resolves to {len(many)} addresses: only the first {dns.MAX_ADDRESSES} "
                           "are members (geadmin.fleet.dns.MAX_ADDRESSES)",)
    assert dns.discover("triton:8000", timeout_s=1, resolver=lambda host, port: many[:3]).notes == ()


class ClientDouble:
    """A TEST DOUBLE of a TritonClient: records whether it was closed."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


def test_the_least_recently_used_client_is_closed_when_the_cache_is_full() -> None:
    cache: ClientCache[str, ClientDouble] = ClientCache(ClientDouble, capacity=2)
    a, b = cache.get("a"), cache.get("b")
    assert cache.get("a") is a  # a is now the most recent
    c = cache.get("c")
    assert (a.closed, b.closed, c.closed) == (0, 1, 0)
    assert "b" not in cache and len(cache) == 2
    assert cache.get("b") is not b  # made again
    assert a.closed == 1
    cache.close()
    assert (c.closed, cache.get("b").closed) == (1, 0)


def test_a_borrowed_client_is_closed_only_when_given_back() -> None:
    cache: ClientCache[str, ClientDouble] = ClientCache(ClientDouble, capacity=1)
    with cache.borrow("a") as a:
        cache.get("b")  # evicts a while it is in use
        assert a.closed == 0
    assert a.closed == 1


def test_many_threads_never_leave_more_than_the_capacity_open() -> None:
    made: list[ClientDouble] = []
    lock = threading.Lock()

    def make(key: str) -> ClientDouble:
        with lock:
            made.append(ClientDouble(key))
            return made[-1]

    cache: ClientCache[str, ClientDouble] = ClientCache(make, capacity=8)

    def work(worker: int) -> None:
        for i in range(200):
            with cache.borrow(f"{(worker * 7 + i) % 40}"):
                pass

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(1 for c in made if not c.closed) == len(cache) <= 8
    assert all(c.closed <= 1 for c in made)


def test_a_cache_without_room_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one"):
        ClientCache(ClientDouble, capacity=0)
