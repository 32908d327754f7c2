"""The sampler's fault watcher: NPU faults recorded continuously, not only when someone looks.

One `FaultWatcher` per server runs in the sampler's loop (`geadmin.stack.recording`: `geadmin
up`, `geadmin sampler`). At most every `every_s` it asks for the server's fault report (the
faults read from every source, recorded with first / last seen and cleared, and joined with
the model <-> NPU map: `geadmin.ops.npu.wiring.current_report`) and replaces the server's
rows of `geadmin.telemetry.history.fault_impact` with what is present now and what each model
lost, so geadmin's exporter and the alert rules see a fault clear at the next read. A report
that cannot be made raises its GeAdminError: the sampler reports it once and ticks on, and the
exporter drops the rows once they are no longer fresh.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from geadmin.diagnose.npu_faults import FaultReport
from geadmin.telemetry.history import fault_impact
from geadmin.telemetry.history.fault_impact import FaultNow, ModelLoss

FAULT_EVERY_S = 10.0  # npu-smi is a subprocess and the map reads configs: not on every 2 s tick
ReportSource = Callable[[float], FaultReport]  # now (epoch s) -> the server's fault report


def snapshot_rows(report: FaultReport) -> tuple[list[FaultNow], list[ModelLoss]]:
    """The present faults of `report`, and what the ones that count took from each model."""
    faults: list[FaultNow] = []
    losses: list[ModelLoss] = []
    for impact in report.impacts:
        if not impact.record.present:
            continue
        fault, level = impact.record.fault, impact.cls.level.value
        faults.append(FaultNow(fault.node, fault.chip, fault.code_hex, level, impact.counts))
        if not impact.counts:
            continue
        losses.extend(ModelLoss(fault.node, fault.chip, fault.code_hex, level, hit.model, hit.instances_total,
                                hit.instances_lost, hit.down, on_chip=hit.on_chip) for hit in impact.hits)
    return faults, losses


class FaultWatcher:
    """Records one server's fault report every `every_s`; `run` is the sampler's watcher."""

    what = "NPU faults"  # how the sampler names this watcher's trouble

    def __init__(self, server: str, report: ReportSource, *, home: Path | None = None,
                 every_s: float = FAULT_EVERY_S, clock: Callable[[], float] = time.time) -> None:
        self.server = server
        self.report = report
        self.home = home
        self.every_s = every_s
        self.clock = clock
        self._last_s: float | None = None

    def run(self) -> FaultReport | None:
        """One read when due (None when not); GeAdminError when the report or its rows fail."""
        now = self.clock()
        if self._last_s is not None and now - self._last_s < self.every_s:
            return None
        self._last_s = now
        report = self.report(now)
        faults, losses = snapshot_rows(report)
        fault_impact.replace_server(self.server, faults, losses, now_s=now, home=self.home)
        return report
