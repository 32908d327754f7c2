"""The NPU faults present now and what each model lost to them, per server (workspace SQLite).

The sampler's fault watcher (`geadmin.ops.npu.watch`) replaces a server's rows at each read,
in one transaction: a fault that cleared disappears at the next read, never half a snapshot.
geadmin's exporter (`geadmin.telemetry.alerting.fault_metrics`) reads them at scrape time and
leaves out rows not written again for its freshness window, so a stopped watcher leaves no
alert standing. The fault history itself (first and last seen, cleared) is
`geadmin.telemetry.history.faults`; this is the "now" the alerts need, with its impact.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from geadmin import db


@dataclass(frozen=True)
class FaultNow:
    """One fault present on one chip, as the watcher last read it."""

    node: str
    npu: int
    code: str  # ChipFault.code_hex
    level: str  # FaultLevel value
    counts: bool  # needs action, or the chip is unhealthy
    server: str = ""
    seen_s: float = 0.0


@dataclass(frozen=True)
class ModelLoss:
    """What one fault on one chip took from one model of `server`."""

    node: str
    npu: int
    code: str
    level: str
    model: str
    instances_total: int
    instances_lost: int  # on every faulted chip that counts (the model's loss, the same on each row)
    down: bool  # no healthy instance left
    server: str = ""
    seen_s: float = 0.0
    on_chip: int = 0  # the model's instances on this chip: what this fault took


def replace_server(server: str, faults: Sequence[FaultNow], losses: Sequence[ModelLoss], *, now_s: float,
                   home: Path | None = None) -> None:
    """`server`'s rows become these (stamped `now_s`); WorkspaceDatabaseError when not written."""
    with db.connect(home) as conn, db.transaction(conn):
        conn.execute("DELETE FROM npu_fault_now WHERE server = ?", (server,))
        conn.execute("DELETE FROM npu_fault_loss WHERE server = ?", (server,))
        conn.executemany(
            "INSERT OR REPLACE INTO npu_fault_now (server, node, npu, code, level, counts, seen) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            [(server, f.node, f.npu, f.code, f.level, int(f.counts), now_s) for f in faults])
        conn.executemany(
            "INSERT OR REPLACE INTO npu_fault_loss (server, node, npu, code, level, model, instances_total, "
            "instances_lost, down, seen, instances_on_chip) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(server, x.node, x.npu, x.code, x.level, x.model, x.instances_total, x.instances_lost,
              int(x.down), now_s, x.on_chip) for x in losses])


def faults_now(*, seen_after_s: float, home: Path | None = None) -> list[FaultNow]:
    """Every server's present faults written after `seen_after_s` (epoch seconds)."""
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM npu_fault_now WHERE seen > ? ORDER BY server, node, npu, code",
                            (seen_after_s,)).fetchall()
    return [FaultNow(r["node"], r["npu"], r["code"], r["level"], bool(r["counts"]), r["server"], r["seen"])
            for r in rows]


def losses_now(*, seen_after_s: float, home: Path | None = None) -> list[ModelLoss]:
    """Every server's model losses written after `seen_after_s`."""
    with db.connect(home) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM npu_fault_loss WHERE seen > ? ORDER BY server, node, model, npu",
                            (seen_after_s,)).fetchall()
    return [ModelLoss(r["node"], r["npu"], r["code"], r["level"], r["model"], r["instances_total"],
                      r["instances_lost"], bool(r["down"]), r["server"], r["seen"], r["instances_on_chip"])
            for r in rows]
