"""What the sampler watches besides metrics, kept in the workspace database: each model's
state (and since when) and the synthetic probes' results.

`geadmin.ops.probe` writes them from the sampler's loop; the verdict (a READY model that does
not answer), the Models page, `geadmin status`, the bundle and geadmin's own Prometheus
endpoint (`geadmin.telemetry.alerting.exporter`) read them. A probe result older than `FRESH_S`
no longer counts: a stopped sampler never leaves a stale failure,
or a stale success, standing. The states of a server no longer probed (a fleet member that
left) are removed by `forget_servers` (geadmin.fleet.probes, at each rediscovery), and the
exporter leaves out any state not read again recently.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geadmin import db
from geadmin.domain import same_server, server_keys

KEEP_PROBES_S = 24 * 3600.0  # probe history kept this long
FRESH_S = 300.0  # a probe older than this says nothing about now (the sampler stopped)
# A probe stamped later than "now" by more than this was stamped before the wall clock stepped
# back (NTP): stale, not fresh for as long as the step. Up to it, it is the race between a
# reader's clock read and the sampler's write (a verdict reads its clock before asking Triton).
FUTURE_SLACK_S = 60.0
KEEP_STATES_S = 24 * 3600.0  # a state nobody read again for this long is removed (its server left)


HELD = "held"  # a ProbeRecord's input when none was sent: the previous probe still waits in Triton


@dataclass(frozen=True)
class ProbeRecord:
    """One synthetic request to one model: did it answer, how fast, and what it said if not."""

    server: str
    model: str
    at_s: float
    ok: bool
    latency_ms: float | None = None
    error: str = ""
    input: str = "zeros"  # zeros; saved: the model's saved example request; held: none sent, the
    # previous probe still waits in Triton (geadmin.ops.probe)

    def to_json(self) -> dict[str, Any]:
        return {"server": self.server, "model": self.model, "at": self.at_s, "ok": self.ok,
                "latency_ms": self.latency_ms, "error": self.error, "input": self.input}


@dataclass(frozen=True)
class StateRecord:
    """A model's state as the sampler last read it, and when it entered that state."""

    server: str
    model: str
    state: str
    reason: str
    since_s: float
    seen_s: float
    operator_unload: bool = False

    def for_s(self, now_s: float) -> float:
        return max(0.0, now_s - self.since_s)


def record_probes(records: Sequence[ProbeRecord], *, home: Path | None = None) -> None:
    if not records:
        return
    with db.connect(home) as conn, db.transaction(conn):
        conn.row_factory = sqlite3.Row
        conn.executemany(
            "INSERT INTO probes (server, model, at, ok, latency_ms, error, input) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(r.server, r.model, r.at_s, int(r.ok), r.latency_ms, r.error[:2000], r.input) for r in records])
        oldest = max(r.at_s for r in records) - KEEP_PROBES_S
        conn.execute("DELETE FROM probes WHERE at < ?", (oldest,))


def latest_probes(server: str, *, also: Sequence[str] = (), newer_than_s: float = 0.0,
                  until_s: float | None = None, home: Path | None = None) -> dict[str, ProbeRecord]:
    """model -> its latest probe of `server` (the last recorded: after the wall clock stepped
    back, an earlier probe bears a later stamp), if stamped after `newer_than_s` and, with
    `until_s`, not after it (epoch seconds). The server is looked up under every URL it is known
    by (`also`: its other endpoints; loopback names: `domain.server_keys`), as the sampler records
    one and `geadmin status --url` may name another."""
    keys = server_keys(server, *also) or (server,)
    marks = ", ".join("?" * len(keys))
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(
            f"SELECT p.* FROM probes p JOIN (SELECT MAX(id) AS id FROM probes WHERE server IN ({marks}) "
            "GROUP BY model) last ON p.id = last.id WHERE p.at > ? AND p.at <= ?",
            (*keys, newer_than_s, float("inf") if until_s is None else until_s)).fetchall()
    return {row["model"]: _probe(row) for row in rows}


def causes_first(failed: Sequence[ProbeRecord]) -> list[ProbeRecord]:
    """Failed probes, those whose error names no other failed model first: when an ensemble
    fails because its member does, the member is the cause to read first."""
    names = {p.model for p in failed}
    return sorted(failed, key=lambda p: (any(f"'{other}" in p.error for other in names - {p.model}), p.model))


def fresh_probes(server: str, *, now_s: float, also: Sequence[str] = (), fresh_s: float = FRESH_S,
                 home: Path | None = None) -> dict[str, ProbeRecord]:
    """The latest probe of each model of `server` (known also as `also`) taken in the last
    `fresh_s` (one stamped in the future is stale: see FUTURE_SLACK_S); {} without a workspace
    database (a probe nobody recorded says nothing)."""
    try:
        return latest_probes(server, also=also, newer_than_s=now_s - fresh_s, until_s=now_s + FUTURE_SLACK_S,
                             home=home)
    except db.WorkspaceDatabaseError:
        return {}


def probed_servers(*, home: Path | None = None) -> list[str]:
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        return [row[0] for row in conn.execute("SELECT DISTINCT server FROM probes ORDER BY server")]


def _probe(row: Any) -> ProbeRecord:
    return ProbeRecord(row["server"], row["model"], row["at"], bool(row["ok"]), row["latency_ms"],
                       row["error"], row["input"])


def record_states(server: str, states: Mapping[str, tuple[str, str, bool]], now_s: float, *,
                  home: Path | None = None) -> None:
    """`states`: model -> (state, reason, operator_unload), as read now. A model whose state is
    unchanged keeps its `since`; one that left the index is forgotten, and so is any state of
    any server nobody read again for KEEP_STATES_S (a server that left while nothing watched)."""
    with db.connect(home) as conn, db.transaction(conn):
        conn.row_factory = sqlite3.Row
        known = {row["model"]: row["state"] for row in
                 conn.execute("SELECT model, state FROM model_states WHERE server = ?", (server,))}
        for model, (state, reason, unloaded) in states.items():
            if known.get(model) == state:
                conn.execute("UPDATE model_states SET seen = ?, reason = ?, operator_unload = ? "
                             "WHERE server = ? AND model = ?", (now_s, reason, int(unloaded), server, model))
            else:
                conn.execute("INSERT OR REPLACE INTO model_states VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (server, model, state, reason, now_s, now_s, int(unloaded)))
        gone = set(known) - set(states)
        conn.executemany("DELETE FROM model_states WHERE server = ? AND model = ?",
                         [(server, model) for model in gone])
        conn.execute("DELETE FROM model_states WHERE seen < ?", (now_s - KEEP_STATES_S,))


def model_states(server: str | None = None, *, seen_after_s: float | None = None,
                 home: Path | None = None) -> list[StateRecord]:
    """The recorded states (of `server`, else of every server); with `seen_after_s`, only those
    the sampler read again after that time (epoch seconds)."""
    where, params = db.where([(server is not None, "server = ?", (server,)),
                              (seen_after_s is not None, "seen > ?", (seen_after_s,))])
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute(f"SELECT * FROM model_states{where} ORDER BY server, model", params).fetchall()
    return [StateRecord(r["server"], r["model"], r["state"], r["reason"], r["since"], r["seen"],
                        bool(r["operator_unload"])) for r in rows]


def forget_servers(servers: Iterable[str], *, home: Path | None = None) -> int:
    """Remove the model states of `servers`, which are no longer probed (a member that left
    the fleet): nothing then says they are LOADING, and their alerts resolve. Their probe
    history stays (it ages out with KEEP_PROBES_S). Returns how many rows went."""
    gone = sorted(set(servers))
    if not gone:
        return 0
    with db.connect(home) as conn, db.transaction(conn):
        return sum(conn.execute("DELETE FROM model_states WHERE server = ?", (server,)).rowcount
                   for server in gone)


# -- a model's saved example request (the Playground's "use as the probe's input") ------------
def saved_input(model: str, *, home: Path | None = None) -> dict[str, dict[str, str]] | None:
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT sources FROM probe_inputs WHERE model = ?", (model,)).fetchone()
    return None if row is None else json.loads(row["sources"])


def save_input(model: str, sources: Mapping[str, Mapping[str, str]], who: str, *,
               home: Path | None = None) -> None:
    with db.connect(home) as conn, db.transaction(conn):
        conn.row_factory = sqlite3.Row
        conn.execute("INSERT OR REPLACE INTO probe_inputs VALUES (?, ?, ?, ?)",
                     (model, json.dumps(sources, sort_keys=True), db.format_time(db.utc_now()), who))


# -- geadmin's own traffic: what its probes add to a model's request rate --------------------
PROBE_RATE_WINDOW_S = 300.0


def probe_rates(server: str, *, now_s: float, window_s: float = PROBE_RATE_WINDOW_S,
                home: Path | None = None) -> dict[str, float]:
    """model -> synthetic requests per second geadmin sent to `server` (any URL of it) over the
    last `window_s`: the traffic a bottleneck verdict must not count as users'."""
    rates: dict[str, float] = {}
    for (probed, model), rate in all_probe_rates(now_s=now_s, window_s=window_s, home=home).items():
        if same_server(probed, server):
            rates[model] = rates.get(model, 0.0) + rate
    return rates


def all_probe_rates(*, now_s: float, window_s: float = PROBE_RATE_WINDOW_S,
                    home: Path | None = None) -> dict[tuple[str, str], float]:
    """(server, model) -> geadmin's probe requests per second over the last `window_s` (for
    geadmin's metrics: the alert rules subtract them). {} when the workspace cannot be read."""
    try:
        with db.connect(home) as conn:
            rows = conn.execute("SELECT server, model, COUNT(*) FROM probes WHERE at > ? AND at <= ? "
                                "GROUP BY server, model", (now_s - window_s, now_s)).fetchall()
    except db.WorkspaceDatabaseError:
        return {}
    return {(str(server), str(model)): int(count) / window_s for server, model, count in rows}


def record_queue_delays(server: str, delays: Mapping[str, float], now_s: float, *,
                        home: Path | None = None) -> None:
    """`delays`: model -> its batcher's max_queue_delay in seconds, for the READY dynamically
    batched models of `server` as read now; the server's other rows are forgotten."""
    with db.connect(home) as conn, db.transaction(conn):
        conn.execute("DELETE FROM model_batching WHERE server = ?", (server,))
        conn.executemany("INSERT INTO model_batching VALUES (?, ?, ?, ?)",
                         [(server, model, delay, now_s) for model, delay in delays.items()])


def queue_delays(*, home: Path | None = None) -> dict[tuple[str, str], float]:
    """(server, model) -> max_queue_delay in seconds, as the prober last read it."""
    with db.connect(home) as conn:
        rows = conn.execute("SELECT server, model, max_queue_delay_s FROM model_batching").fetchall()
    return {(str(server), str(model)): float(delay) for server, model, delay in rows}
