"""The tuner's NPU memory check (`geadmin.ops.tune.search`): a trial that would not fit is not loaded."""

from __future__ import annotations

import time

from geadmin.errors import GeAdminError
from geadmin.ops.tune.space import Candidate
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import scrape

MIB = 1 << 20


def device_hbm(metrics_url: str) -> dict[int, tuple[int, int]]:
    """device -> (used, total) HBM bytes from npu_ge's device metrics on Triton's /metrics;
    {} when the page has none or cannot be read."""
    try:
        page = scrape(metrics_url, timeout_s=5.0)
    except GeAdminError:
        return {}
    return {d.id: (d.hbm_used_bytes, d.hbm_total_bytes) for d in devices_from_triton(page)
            if d.hbm_used_bytes is not None and d.hbm_total_bytes}


class MemoryGuard:
    """Keeps a trial that would not fit in its NPUs' memory from being loaded. The HBM one
    instance holds is measured, not guessed: npu_ge's device metrics (hbm used/total per
    device, on Triton's /metrics) before the first trial load and after it. A candidate
    needing more than the free HBM of those devices (Triton loads a new config before it
    unloads the old) is refused with the figures. Without npu_ge's device metrics (no NPU, or
    no metrics URL) nothing is checked, and the notes say so."""

    SETTLE_S = 3.0  # npu_ge refreshes its device metrics on its own interval

    def __init__(self, metrics_url: str | None) -> None:
        self.metrics_url = metrics_url
        self.before: dict[int, tuple[int, int]] | None = self._read() if metrics_url else None
        self.per_instance = 0  # bytes, once measured
        self.devices: tuple[int, ...] = ()

    @property
    def note(self) -> str:
        if self.per_instance:
            return (f"NPU memory checked: one instance holds {self.per_instance / MIB:.0f} MiB on device(s) "
                    f"{', '.join(map(str, self.devices))}")
        return "NPU memory not checked: no npu_ge device metrics on Triton's /metrics"

    def _read(self) -> dict[int, tuple[int, int]]:
        assert self.metrics_url is not None
        return device_hbm(self.metrics_url)

    def loaded(self, candidate: Candidate) -> None:
        if self.per_instance or not self.before:
            return
        deadline = time.monotonic() + self.SETTLE_S
        while time.monotonic() < deadline:
            after = self._read()
            grown = {d: after[d][0] - self.before[d][0] for d in after if d in self.before
                     and after[d][0] > self.before[d][0]}
            if grown:
                self.devices = tuple(sorted(grown))
                self.per_instance = max(grown.values()) // max(candidate.instances, 1)
                return
            time.sleep(0.1)

    def bytes_for(self, candidate: Candidate) -> int | None:
        """The NPU memory `candidate` would hold (None until one instance was measured)."""
        return self.per_instance * max(candidate.instances, 1) if self.per_instance else None

    def replacing_refusal(self, candidate: Candidate, live_instances: int) -> str:
        """Why `candidate` would not fit on its devices in place of the live model, beside the
        other models there ("" when it fits, or when nothing was measured): the free HBM read
        before the first trial loaded, plus what the live model's instances hold (the same
        per instance), must hold the candidate's instances."""
        if not self.per_instance or not self.before:
            return ""
        free = min((self.before[d][1] - self.before[d][0] for d in self.devices if d in self.before),
                   default=None)
        if free is None:
            return ""
        freed = self.per_instance * max(live_instances, 0)
        needed = self.per_instance * max(candidate.instances, 1)
        if needed > free + freed:
            devices = ", ".join(map(str, self.devices))
            return (f"does not fit beside the other models on device(s) {devices}: it needs about "
                    f"{needed / MIB:.0f} MiB, and {(free + freed) / MIB:.0f} MiB would be free "
                    f"({free / MIB:.0f} MiB free now + {freed / MIB:.0f} MiB the live model's "
                    f"{live_instances} instance(s) hold)")
        return ""

    def refusal(self, candidate: Candidate) -> str:
        if not self.per_instance:
            return ""
        now = self._read()
        free = min((now[d][1] - now[d][0] for d in self.devices if d in now), default=None)
        needed = self.per_instance * candidate.instances
        if free is not None and needed > free:
            return (f"not loaded: it needs about {needed / MIB:.0f} MiB of NPU memory on device(s) "
                    f"{', '.join(map(str, self.devices))}, which have {free / MIB:.0f} MiB free")
        return ""
