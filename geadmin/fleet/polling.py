"""Every member of a fleet polled at once, each bounded by a deadline: its health, models and
figures, as the fleet status (geadmin.fleet.status) reads them.

Every server is polled at once, each bounded by `timeout_s`: one slow server is reported as
such at the deadline and never delays the view (its thread is left to finish on its own).
Latency and errors per server come from one scrape of its /metrics (totals since the model
loaded, `geadmin.telemetry.derive.since_start`): enough to see one replica out of line.

With `configs` (`geadmin fleet status --configs`), a second round reads the config each server
serves of every model READY on two servers or more (geadmin.fleet.config_skew), one request per
model and server, all servers at once and bounded by its own `timeout_s`: a server slow to answer
it is "config not read" at that deadline, never a server down, and its reader asks for no model
after the deadline (a slow member neither keeps the CLI alive after it printed nor piles threads
up under the page; the call under way ends at the client's own timeout).

Each member is polled as its trust allows (geadmin.fleet.membership): a trusted one with its
key on the restricted calls only (the repository index); a read-only one with no key at all,
through the open endpoints (geadmin.fleet.readonly). One client per server is kept between
polls (a page polls every few seconds), the least recently polled closed beyond MAX_CLIENTS or
the fleet's member count (discovery caps it), whichever is more: the second round reuses the
first round's clients.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from typing import Any

from geadmin.diagnose.health import take_snapshot
from geadmin.domain import ModelState
from geadmin.errors import TelemetryError
from geadmin.fleet.config_skew import CAUSE_CHARS, ServedConfig, read_served, said
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.members import Member, member_metrics_url
from geadmin.fleet.readonly import client_for
from geadmin.fleet.status import Figures, FleetStatus, ServerView
from geadmin.telemetry.derive import since_start
from geadmin.telemetry.sources.scrape import families_only, fetch_text, parse
from geadmin.triton.client import TritonClient
from geadmin.triton.client_cache import ClientCache

POLL_TIMEOUT_S = 5.0
FAMILIES = ("nv_inference_request_success", "nv_inference_request_failure",  # what Figures reads
            "nv_inference_request_duration_us", "nv_inference_request_summary_us")
MAX_PARALLEL = 32


def poll(discovery: Discovery, *, timeout_s: float = POLL_TIMEOUT_S, configs: bool = False) -> FleetStatus:
    """Every member at once; what has not answered by `timeout_s` (+1 s) is reported as such.
    `configs`: then each server's served configs, compared (a second round, as long again at most)."""
    started = time.monotonic()
    members = discovery.members
    _clients.capacity = max(_clients.capacity, len(members))  # both rounds reuse one client per member
    pool = _pool(len(members))
    try:
        futures = [pool.submit(_poll_one, m, timeout_s) for m in members]
        wait(futures, timeout=timeout_s + 1.0)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    views = []
    for member, future in zip(members, futures, strict=True):
        if future.done() and not future.cancelled() and future.exception() is None:
            views.append(future.result())
        else:
            views.append(ServerView(member, None, took_s=time.monotonic() - started))
    if configs:
        views = _with_configs(views, timeout_s)
    return FleetStatus(discovery, tuple(views), time.monotonic() - started, configs_compared=configs)


def _pool(jobs: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=max(1, min(MAX_PARALLEL, jobs)), thread_name_prefix="fleet")


def _with_configs(views: Sequence[ServerView], timeout_s: float) -> list[ServerView]:
    """Each answering view with the configs it serves of the models READY on 2+ of them; what is
    not read by the deadline is "not read", with why."""
    ready = {v.name: sorted({m.name for m in v.snapshot.models if m.state is ModelState.READY})
             for v in views if v.snapshot is not None and not v.problem}
    shared = {m for m, n in Counter(m for models in ready.values() for m in models).items() if n > 1}
    wanted = {name: [m for m in models if m in shared] for name, models in ready.items()}
    read: dict[str, dict[str, ServedConfig]] = {name: {} for name in wanted}
    lock = threading.Lock()
    deadline = time.monotonic() + timeout_s

    def read_one(view: ServerView) -> None:
        with _client(view.member, timeout_s) as client:
            for model in wanted[view.name]:
                if time.monotonic() >= deadline:  # said "no answer within" by the poll: read no more
                    return
                served = read_served(client, view.member, model)
                with lock:
                    read[view.name][model] = served

    jobs = [v for v in views if wanted.get(v.name)]
    pool = _pool(len(jobs))
    try:
        futures = {v.name: pool.submit(read_one, v) for v in jobs}
        wait(futures.values(), timeout=timeout_s + 1.0)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    with lock:
        return [dataclasses.replace(v, configs={m: read[v.name].get(m) or _unread(futures[v.name], timeout_s)
                                                for m in wanted[v.name]})
                if v.name in futures else v for v in views]


def _unread(future: Future[None], timeout_s: float) -> ServedConfig:
    """A config the second round did not read: its deadline passed, or its reading failed."""
    failed = future.done() and not future.cancelled() and future.exception() is not None
    return ServedConfig(not_compared=f"not read: {said(future.exception(), CAUSE_CHARS)}" if failed
                        else f"no answer within {timeout_s:g} s")


MAX_CLIENTS = 64  # one per member; the least recently polled beyond it is closed (members come and go)
_Key = tuple[str, bool, "str | None", str, float]
_members: dict[_Key, Member] = {}  # what each cached client was made for


def _make(key: _Key) -> TritonClient:
    return client_for(_members[key], key[4])


_clients: ClientCache[_Key, TritonClient] = ClientCache(_make, capacity=MAX_CLIENTS)


def close_clients() -> None:
    """For a command about to exit (the dashboard keeps its clients): a client left to the
    interpreter's shutdown prints gevent's "greenlet is being finalized" traceback, because
    its worker threads are gone before atexit runs."""
    _clients.close()


def _key(member: Member, timeout_s: float) -> _Key:
    """One client per server, its trust, key and CA (a TritonClient's HTTP worker threads, each
    with its own event loop, are made once, not at every poll of a page)."""
    key = (member.url, member.trust.trusted, member.spec.admin_key, str(member.tls_ca or ""), timeout_s)
    _members[key] = member
    return key


@contextmanager
def _client(member: Member, timeout_s: float) -> Iterator[TritonClient]:
    key = _key(member, timeout_s)
    try:
        with _clients.borrow(key) as client:  # never closed under a poll that outlives its deadline
            yield client
    finally:
        _members.pop(key, None)  # only what a client is being made for is kept


def _poll_one(member: Member, timeout_s: float) -> ServerView:
    started = time.monotonic()
    with _client(member, timeout_s) as client:
        snapshot = take_snapshot(member.name, client)
    figures, error = {}, ""
    if snapshot.reachable:
        try:
            url = member_metrics_url(member)
            page = parse(families_only(fetch_text(url, timeout_s=timeout_s), FAMILIES), url=url)
            figures = {w.model: _figures(w) for w in since_start(page)}
        except TelemetryError as exc:
            error = str(exc)
    return ServerView(member, snapshot, figures, error, time.monotonic() - started)


def _figures(window: Any) -> Figures:
    request = window.quantiles_for("request")
    return Figures(requests=int(window.requests_per_s or 0), failures=int(window.failures_per_s or 0),
                   avg_request_ms=window.avg_request_ms, p99_ms=request.p99_ms if request else None)
