"""npu_ge instances that can never execute again, read from Triton's /metrics.

npu_ge marks an instance broken (`npu_ge_instance_broken` 1) after a device-lost class of ACL
error, or when more executions are parked than it may keep: it answers every request with the
reason. It also exports `TRITONBACKEND_ModelInstanceReady`, but Triton 2.51 never calls it, so
the model stays READY there; this is where geadmin's verdict learns it instead
(`geadmin.diagnose.verdict`, rule `instance-broken`). Reads only; a page that cannot be read
is no evidence either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from geadmin.errors import TelemetryError
from geadmin.telemetry.sources.scrape import Scrape, scrape

BROKEN = "npu_ge_instance_broken"
PLACED = "npu_ge_instance_device"  # one sample per npu_ge instance (labels model, version, instance)
READ_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class BrokenInstances:
    """The broken instances of one model version, out of all it has."""

    model: str
    version: str
    broken: tuple[str, ...]  # instance names
    instances: int  # every npu_ge instance of the version (0: the page does not say)

    @property
    def none_left(self) -> bool:
        return self.instances <= len(self.broken)

    @property
    def text(self) -> str:
        share = ("no instance left that can execute" if self.none_left
                 else f"{len(self.broken)} of {self.instances} instances cannot execute")
        return (f"{self.model} (v{self.version}): {share} ({', '.join(self.broken)}: a lost device, or "
                "executions nothing could stop); every request they take fails, while Triton 2.51 "
                "still says READY")


def broken_instances(page: Scrape) -> list[BrokenInstances]:
    """Per model version with a broken instance, from one scrape of Triton's /metrics."""
    broken: dict[tuple[str, str], list[str]] = {}
    for sample in page.samples:
        if sample.name == BROKEN and sample.value >= 1:
            key = (sample.label("model") or "?", sample.label("version") or "?")
            broken.setdefault(key, []).append(sample.label("instance") or "?")
    counts: dict[tuple[str, str], int] = {}
    for sample in page.samples:
        if sample.name == PLACED:
            key = (sample.label("model") or "?", sample.label("version") or "?")
            counts[key] = counts.get(key, 0) + 1
    return [BrokenInstances(model, version, tuple(sorted(names)), counts.get((model, version), 0))
            for (model, version), names in sorted(broken.items())]


def read_broken(metrics_url: str) -> tuple[list[BrokenInstances], str]:
    """(`broken_instances` of the page at `metrics_url`, ""); ([], why) when it cannot be read:
    then no instance is judged, and the verdict says so instead of "none failed"."""
    try:
        return broken_instances(scrape(metrics_url, timeout_s=READ_TIMEOUT_S)), ""
    except TelemetryError as exc:
        return [], (f"npu_ge's instance health is not judged: Triton's metrics page could not be read "
                    f"({str(exc).splitlines()[0]})")
