"""geadmin's exporter's NPU-fault families, read from the workspace database at scrape time
(`geadmin.telemetry.history.fault_impact`, written by the sampler's fault watcher).

- `geadmin_npu_fault{node,npu,code,level}` 1 per fault present on a chip (code `0x%08X`);
- `geadmin_npu_fault_instances_lost{server,model,node,npu,code,level}` the model's instances a fault
  that counts (a level that needs action, or the chip unhealthy) took on that chip;
- `geadmin_model_instances{server,model,node}` a faulted node's model's instances, and
  `geadmin_model_instances_lost{server,model,node}` how many the faults took (all of them when
  no healthy instance is left: the model is DOWN whatever Triton says).

A row the watcher has not written again for `FAULT_FRESH_S` is left out: a stopped sampler
leaves no fault alert standing, and a cleared fault is gone at the watcher's next read.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily, Metric

from geadmin.telemetry.history import fault_impact

FAULT_FRESH_S = 180.0  # the watcher reads every few seconds; three minutes without a read is a stop


def fault_families(home: Path | None, now_s: float, fresh_s: float = FAULT_FRESH_S) -> Iterator[Metric]:
    """The four families (empty when nothing is faulted); WorkspaceDatabaseError when unreadable."""
    since = now_s - fresh_s
    faults = fault_impact.faults_now(seen_after_s=since, home=home)
    losses = fault_impact.losses_now(seen_after_s=since, home=home)
    fault = GaugeMetricFamily("geadmin_npu_fault", "1 for each fault code present on an NPU chip, with "
                              "its level in the fault table (NotHandleFault ... SeparateNPU, unknown)",
                              labels=["node", "npu", "code", "level"])
    for key in sorted({(f.node, str(f.npu), f.code, f.level) for f in faults}):
        fault.add_metric(list(key), 1.0)
    on_chip = GaugeMetricFamily("geadmin_npu_fault_instances_lost", "Instances of the model a fault that "
                                "counts took on this chip", labels=["server", "model", "node", "npu", "code",
                                                                     "level"])
    totals: dict[tuple[str, str, str], int] = {}
    lost: dict[tuple[str, str, str], int] = {}
    for x in losses:
        model_key = (x.server, x.model, x.node)
        totals[model_key] = max(totals.get(model_key, 0), x.instances_total)
        taken = x.instances_total if x.down else x.instances_lost
        lost[model_key] = min(max(lost.get(model_key, 0), taken), totals[model_key])
        if x.on_chip > 0:
            on_chip.add_metric([x.server, x.model, x.node, str(x.npu), x.code, x.level], float(x.on_chip))
    instances = GaugeMetricFamily("geadmin_model_instances", "Instances of a model on a node with a faulted "
                                  "NPU", labels=["server", "model", "node"])
    taken_family = GaugeMetricFamily("geadmin_model_instances_lost", "Instances of the model that NPU faults "
                                     "took (equal to geadmin_model_instances: no healthy instance left)",
                                     labels=["server", "model", "node"])
    for model_key in sorted(totals):
        instances.add_metric(list(model_key), float(totals[model_key]))
        taken_family.add_metric(list(model_key), float(lost[model_key]))
    yield from (fault, on_chip, instances, taken_family)
