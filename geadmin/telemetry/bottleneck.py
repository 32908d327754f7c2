"""Why is model X slow? The bottleneck of each model version over a window (derive.Window).

Triton splits every successful request's server-side time into four stages (FACTS.md):
queue, compute input, compute infer, compute output. Over the window, the stage that takes
the largest share of that time names the bottleneck:

- **queue-bound** — requests wait for a free instance: add instances or batch more;
- **device-bound** — compute-infer dominates and the NPU the model runs on is busy: the
  device is saturated, spread the model over more NPUs (`device_ids`) or make it cheaper;
- **compute-bound** — compute-infer dominates but no busy NPU is known behind it (no NPU
  data, a CPU/python model, or the NPU has headroom): the model itself is slow per
  execution; batch more or look at the model;
- **host-bound** — compute input + output (copies, (de)serialization on the host) dominate;
- **balanced** — no stage takes the dominant share;
- **idle** — no request in the window; **light** — requests, but fewer than `MIN_RATE_PER_S`
  besides geadmin's own probes: too little traffic to name a bottleneck (a lone request waits
  in the dynamic batcher's queue by design, so an idle model looks "queue-bound");
  **no-data** — requests, but no latency figures (every request failed, or Triton publishes
  no duration counters).

Queue time up to the model's configured `max_queue_delay_microseconds` is the dynamic
batcher waiting for company on purpose: only the queue time beyond it counts toward
queue-bound (`queue_delay_ms`, from the served configs: `served_facts`).

An ensemble runs nothing itself: Triton sums its members' stages into the ensemble's, so its
own verdict would give a fix for a model that does not exist. Given the ensembles and their
members (`served_facts` reads them from Triton), the ensemble takes its slowest member's
verdict and fix, and names that member (`Bottleneck.slow_member`).

`find_bottlenecks(window, devices, ensembles)` is pure: the window and, optionally, the NPU devices with
the npu_ge placements (`NpuDevice.models`) that say which devices a model's instances use.
`recent_window` gives a live view (the Overview's card) its window over the last minute
from the scrapes it keeps between refreshes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum

from geadmin.errors import GeAdminError
from geadmin.telemetry.derive import ModelWindow, Window, derive
from geadmin.telemetry.sources.npu import NpuDevice
from geadmin.telemetry.sources.scrape import Scrape
from geadmin.triton.client import TritonClient

ENSEMBLE = "ensemble"

# A stage "dominates" when it takes at least half the server-side time: then speeding up
# every other stage together could at most halve the latency, so it is the one to fix.
DOMINANT_SHARE = 0.5
# An NPU is "busy" above 70 % AI-core utilization: sampled utilization that high leaves no
# room for another instance's executions, so more compute-infer time is waiting on the chip.
NPU_BUSY_PCT = 70.0
# Triton counts whole requests: fewer than one in the window is no traffic.
MIN_REQUESTS = 1.0
# A live view judges "the last minutes": the window reaches back this far over the scrapes it
# kept, so one slow refresh or a short lull does not flip the verdict.
RECENT_SPAN_S = 60.0
# Below a second, counter deltas are a handful of requests: too noisy to judge.
MIN_WINDOW_S = 1.0
# Below one request per second besides geadmin's own probes (one per model every 30 s by
# default) a model is too lightly used to name a bottleneck; the shipped alert rules use the
# same floor (deploy/prometheus/geadmin-alerts.yml, QueueTimeDominating).
MIN_RATE_PER_S = 1.0


class BottleneckKind(str, Enum):
    QUEUE_BOUND = "queue-bound"
    DEVICE_BOUND = "device-bound"
    COMPUTE_BOUND = "compute-bound"
    HOST_BOUND = "host-bound"
    BALANCED = "balanced"
    IDLE = "idle"
    LIGHT = "light"
    NO_DATA = "no-data"


FIXES = {
    BottleneckKind.QUEUE_BOUND: "add instances (instance_group count) or enable / raise dynamic batching",
    BottleneckKind.DEVICE_BOUND: "the NPU is saturated: spread instances over more NPUs (device_ids) or "
                          "lighten the model",
    BottleneckKind.COMPUTE_BOUND: "the model itself is slow per execution: batch more (preferred_batch_size) "
                           "or optimise the model",
    BottleneckKind.HOST_BOUND: "input/output handling on the host dominates: send smaller or fewer tensors, "
                        "use shared memory, or cut host-side pre/post-processing",
    BottleneckKind.BALANCED: "no single stage dominates: scale out (more instances or servers)",
    BottleneckKind.IDLE: "",
    BottleneckKind.LIGHT: "",
    BottleneckKind.NO_DATA: "check the failures: requests arrived but none reported latency",
}


@dataclass(frozen=True)
class Bottleneck:
    """The verdict for one model version, with the numbers behind it."""

    model: str
    version: str
    verdict: BottleneckKind
    why: str  # the numbers, in one line
    fix: str  # what to do, in one line ("" when idle)
    requests_per_s: float | None
    inferences_per_s: float | None
    queue_ms: float | None
    compute_input_ms: float | None
    compute_infer_ms: float | None
    compute_output_ms: float | None
    queue_share: float | None  # of queue + compute time, 0..1
    host_share: float | None  # compute input + output
    infer_share: float | None  # compute infer
    devices: tuple[int, ...]  # NPUs its instances run on (npu_ge placements), () unknown
    npu_util_pct: float | None  # the busiest of those devices; None unknown
    note: str = ""  # e.g. the counters reset inside the window
    slow_member: str = ""  # an ensemble: the member whose verdict and fix it took

    @property
    def has_traffic(self) -> bool:
        """Enough requests to judge (not idle, not under the rate floor)."""
        return self.verdict not in (BottleneckKind.IDLE, BottleneckKind.LIGHT)

    @property
    def server_ms(self) -> float | None:
        """Server-side time per request: queue + the three compute stages."""
        return _sum(self.queue_ms, self.compute_input_ms, self.compute_infer_ms, self.compute_output_ms)


def find_bottlenecks(window: Window, devices: Sequence[NpuDevice] | None = None,
                     ensembles: Mapping[str, Sequence[str]] | None = None, *,
                     queue_delay_ms: Mapping[str, float] | None = None,
                     probe_rates: Mapping[str, float] | None = None,
                     trials: Collection[str] = ()) -> tuple[Bottleneck, ...]:
    """One `Bottleneck` per model version of the window, in the window's order; `ensembles`
    maps each ensemble to its members (see `for_ensemble`), `queue_delay_ms` each model to its
    batcher's configured wait, `probe_rates` each model to geadmin's own probe requests/s.
    `trials`, geadmin's tuning trials loaded under perf_analyzer's load on purpose, get none:
    the caller names them from their markers (`geadmin.repository.trials.is_trial`). A name
    alone proves nothing: a production model named like a trial is judged like any other."""
    delays, probes = queue_delay_ms or {}, probe_rates or {}
    found = tuple(assess(m, devices_of(m.model, m.version, devices or ()), queue_delay_ms=delays.get(m.model),
                         probe_rate_per_s=probes.get(m.model, 0.0)) for m in window.models
                  if m.model not in trials)
    members = ensembles or {}
    return tuple(for_ensemble(b, members[b.model], found) if b.model in members and b.has_traffic else b
                 for b in found)


def for_ensemble(ensemble: Bottleneck, members: Sequence[str], found: Sequence[Bottleneck]) -> Bottleneck:
    """An ensemble's time is its members': it takes the verdict and fix of the member with the
    most server-side time per request, and says so with the numbers."""
    timed = [(b, ms) for b in found
             if b.model in members and b.has_traffic and (ms := b.server_ms) is not None]
    if not timed:
        return replace(ensemble, fix=f"an ensemble's time is its members' ({', '.join(members)}), and none "
                                     "served requests with latency figures in this window: triage them "
                                     "one by one")
    slow, slow_ms = max(timed, key=lambda pair: pair[1])
    total_ms = sum(ms for _, ms in timed)
    return replace(
        ensemble, verdict=slow.verdict, slow_member=slow.model,
        why=f"{ensemble.why} · slowest member {slow.model}: {_ms(slow_ms)} of {_ms(total_ms)} per request",
        fix=f"its time is its members': {slow.model} takes {slow_ms / total_ms:.0%} of it and is "
            f"{slow.verdict.value} — {slow.model}: {slow.fix or 'no fix needed'}")


def served_facts(client: TritonClient, models: Iterable[str]) -> tuple[dict[str, tuple[str, ...]],
                                                                        dict[str, float]]:
    """From the configs Triton serves (one read each): the ensembles among `models` with their
    members, and each dynamically batched model's `max_queue_delay` in ms. A model whose config
    cannot be read (unloaded since, Triton gone, no key for the model-config API) is in neither."""
    ensembles, delays = {}, {}
    for name in sorted(set(models)):
        try:
            config = client.model_config(name)
        except GeAdminError:
            continue
        if config.platform == ENSEMBLE:
            ensembles[name] = tuple(sorted({step.model_name for step in config.ensemble_scheduling.step}))
        if config.HasField("dynamic_batching"):
            delays[name] = config.dynamic_batching.max_queue_delay_microseconds / 1000.0
    return ensembles, delays


def window_label(window_s: float) -> str:
    """The window as the one phrase a view shows for it: "last 58 s", "last 2 min"."""
    return f"last {window_s:.0f} s" if window_s < 120 else f"last {window_s / 60:.0f} min"


def recent_window(kept: Sequence[Scrape], now: Scrape,
                  span_s: float = RECENT_SPAN_S) -> tuple[tuple[Scrape, ...], Window | None]:
    """For a live view that scrapes on every refresh: the scrapes to keep (the last `span_s`
    seconds, `now` included) and the window from the oldest of them to `now` — None until
    they span `MIN_WINDOW_S`. Scrapes of another page (another URL) are dropped."""
    recent = sorted((s for s in kept if s.url == now.url and 0 < now.timestamp_s - s.timestamp_s <= span_s),
                    key=lambda s: s.timestamp_s)
    keep = (*recent, now)
    if not recent or now.timestamp_s - recent[0].timestamp_s < MIN_WINDOW_S:
        return keep, None
    return keep, derive(recent[0], now)


def with_traffic(found: Iterable[Bottleneck]) -> tuple[Bottleneck, ...]:
    return tuple(b for b in found if b.has_traffic)


def devices_of(model: str, version: str, devices: Iterable[NpuDevice]) -> tuple[NpuDevice, ...]:
    """The devices an npu_ge placement puts an instance of this model version on."""
    return tuple(d for d in devices
                 if any(p.model == model and (not p.version or p.version == version) for p in d.models or ()))


def assess(m: ModelWindow, devices: Sequence[NpuDevice] = (), *, queue_delay_ms: float | None = None,
           probe_rate_per_s: float = 0.0) -> Bottleneck:
    """The verdict for one model version; `devices` are the NPUs its instances run on,
    `queue_delay_ms` its batcher's configured wait, `probe_rate_per_s` geadmin's own probes."""
    utils = [d.aicore_util_pct for d in devices if d.aicore_util_pct is not None]
    busiest = max(utils) if utils else None
    ids = tuple(sorted(d.id for d in devices))
    queue, c_in, infer, c_out = stages = (m.avg_queue_ms, m.avg_compute_input_ms, m.avg_compute_infer_ms,
                                          m.avg_compute_output_ms)

    def verdict(kind: BottleneckKind, why: str,
                shares: tuple[float | None, ...] = (None, None, None)) -> Bottleneck:
        return Bottleneck(
            model=m.model, version=m.version, verdict=kind, why=why, fix=FIXES[kind],
            requests_per_s=m.requests_per_s, inferences_per_s=m.inferences_per_s,
            queue_ms=queue, compute_input_ms=c_in, compute_infer_ms=infer, compute_output_ms=c_out,
            queue_share=shares[0], host_share=shares[1], infer_share=shares[2],
            devices=ids, npu_util_pct=busiest,
            note="counters reset in this window (restart or reload): figures since the reset"
            if m.counters_reset else "")

    if (m.requests_per_s or 0.0) * m.window_s < MIN_REQUESTS:
        return verdict(BottleneckKind.IDLE, "no requests in the window")
    users = max(0.0, (m.requests_per_s or 0.0) - probe_rate_per_s)
    if users < MIN_RATE_PER_S:
        probes = f" besides geadmin's probes ({probe_rate_per_s:.2f}/s)" if probe_rate_per_s else ""
        return verdict(BottleneckKind.LIGHT,
                       f"{users:.2f} req/s{probes}: under the {MIN_RATE_PER_S:g} req/s floor, "
                       "too little traffic to name a bottleneck")
    known = [s for s in stages if s is not None]
    total = sum(known)
    if not known or total <= 0:
        return verdict(BottleneckKind.NO_DATA, f"{_rate(m.requests_per_s)} req/s, {_rate(m.failures_per_s)} "
                       "failed/s, no latency figures")
    # The batcher's configured wait is by design: only the queue time beyond it is a bottleneck.
    waited = min(queue or 0.0, queue_delay_ms or 0.0)
    judged = total - waited
    if judged <= 0:
        judged = total
    shares = (((queue or 0.0) - waited) / judged, ((c_in or 0.0) + (c_out or 0.0)) / judged,
              (infer or 0.0) / judged)
    batcher = f", up to {_ms(queue_delay_ms)} of it the batcher's max_queue_delay" if waited else ""
    why = (f"queue {_ms(queue)}{batcher} ({shares[0]:.0%}) · compute input+output {_ms(_sum(c_in, c_out))} "
           f"({shares[1]:.0%}) · compute infer {_ms(infer)} ({shares[2]:.0%}) per request · "
           f"{_rate(m.requests_per_s)} req/s")
    if ids:
        why += f" · NPU {','.join(map(str, ids))} " + (
            f"{busiest:.0f}% busy" if busiest is not None else "utilization unknown")
    return verdict(_verdict(*shares, busiest), why, shares)


def _verdict(queue: float, host: float, infer: float, npu_util_pct: float | None) -> BottleneckKind:
    largest = max(queue, host, infer)
    if largest < DOMINANT_SHARE:
        return BottleneckKind.BALANCED
    if largest == queue:
        return BottleneckKind.QUEUE_BOUND
    if largest == infer:
        busy = npu_util_pct is not None and npu_util_pct >= NPU_BUSY_PCT
        return BottleneckKind.DEVICE_BOUND if busy else BottleneckKind.COMPUTE_BOUND
    return BottleneckKind.HOST_BOUND


def _sum(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f} ms"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
