"""`tune MODEL --objective`: the serving config that meets the model's objective at the load it
really gets, with the fewest instances and then the least NPU memory.

The plan (`objective_plan`) reads the model's objective (a p99 target, and an error budget;
`geadmin.telemetry.alerting.objectives`) and its recorded load over a window of the history
(`geadmin.telemetry.history.traffic.recorded_load`: the sampler's SQLite, or Prometheus). No
p99 objective, or no requests recorded in the window, refuses before anything is loaded, with
the command that fixes it.

The search (`ObjectiveSearch`, run by `geadmin.ops.tune.search.tune` on the same trial copies,
lock, journal and clean-up as the throughput search) measures each candidate with
perf_analyzer in request-rate mode at the recorded PEAK rate (a rate below MIN_RATE_RPS is
measured at MIN_RATE_RPS, and the notes say so), each window long enough to hold
20 requests (`geadmin.ops.bench.params.judged_window_ms`), judged by the objective rather than
perf_analyzer's stability gate. Candidates go by instance count, fewest first; within a count,
the live batching, no batching and the largest batch the model loads with. The first count
with a candidate that meets the objective ends the search: more instances cannot win.

A trial meets the objective (`shortfall` is "") when it was measured, its p99 is within the
objective, the failed fraction of the requests Triton counted for it is within the error budget
(no budget: no failure), and it served at least KEEP_UP of the offered rate. The winner
(`pick_winner`) is the trial meeting it with the fewest instances, then the least NPU memory
(measured per instance by `geadmin.ops.tune.memory`; unmeasured: equal), then the smaller
max_batch_size (npu_ge preallocates per batch), then the lower p99; a winner that would not fit
beside the other models on its NPUs (the free HBM before the run plus what the live model
holds) is refused, and the notes say so. Without a winner, the nearest trial and what limits
it are named.

The winner's curve: it is measured again at CURVE_STEPS times the rate until it no longer
meets the objective. The highest rate that met it is the measured saturation rate at the
objective (`saturation_rps`; a lower bound when every step met it), saved in the run's
document for `geadmin.ops.tune.results.saturation_from_tune`.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from geadmin.errors import GeAdminError, InvalidArgumentError, TuneRefusedError
from geadmin.ops.bench.intervals import MAX_SPEEDUP, replay_rate_rps, write_request_intervals
from geadmin.ops.bench.params import judged_window_ms
from geadmin.ops.tune.outcome import Trial, TuneResult, TuneSettings
from geadmin.ops.tune.search import Progress, SearchOutcome, TrialRunner, tune
from geadmin.ops.tune.space import Candidate
from geadmin.telemetry.alerting.objectives import Objective, objectives
from geadmin.telemetry.history.arrivals import ArrivalCapture, latest_capture
from geadmin.telemetry.history.reader import HistoryReader
from geadmin.telemetry.history.traffic import RecordedLoad, pick_source, recorded_load, with_live_batch_mix
from geadmin.triton.client import TritonClient

KIND = "objective"  # the document's "kind"
MIN_RATE_RPS = 1.0  # perf_analyzer needs requests in every window to measure a p99
KEEP_UP = 0.9  # a config that serves less of the offered rate is falling behind it
MAX_WINDOW_MS = 30_000
CURVE_STEPS = (1.5, 2.0, 3.0)
BIG_DELAY_US = 2000  # the queue delay the largest batch is tried with


@dataclass(frozen=True)
class ObjectivePlan:
    """What the objective search measures against: the objective and the recorded load."""

    objective: Objective
    load: RecordedLoad
    max_instances: int = 3
    window_ms: int = 1000
    curve_steps: tuple[float, ...] = CURVE_STEPS
    capture: ArrivalCapture | None = None  # recorded arrivals to replay (--request-intervals)

    def __post_init__(self) -> None:
        if not 1 <= self.max_instances <= 16:
            raise InvalidArgumentError(f"--max-instances is 1 to 16, got {self.max_instances}")

    @property
    def p99_ms(self) -> float:
        assert self.objective.p99_ms is not None
        return self.objective.p99_ms

    @property
    def replay_speedup(self) -> float:
        """How much faster than captured the arrivals are replayed: their pattern at the recorded
        peak, never slower than they came (a capture during a burst above the peak stays as is);
        bounded so the curve's fastest step stays within perf_analyzer's replay bound."""
        if self.capture is None:
            return 1.0
        captured = replay_rate_rps(self.capture.intervals_us)
        wanted = max(1.0, (self.load.peak_rate_rps or 0.0) / captured)
        return min(wanted, MAX_SPEEDUP / max(self.curve_steps, default=1.0))

    @property
    def rate_rps(self) -> float:
        """The offered rate: the replayed capture's (at the recorded peak, see `replay_speedup`), else
        the recorded peak; at least MIN_RATE_RPS."""
        if self.capture is not None:
            return replay_rate_rps(self.capture.intervals_us) * self.replay_speedup
        return max(self.load.peak_rate_rps or 0.0, MIN_RATE_RPS)

    def window_for(self, rate_rps: float) -> int:
        return min(judged_window_ms(rate_rps, self.window_ms), MAX_WINDOW_MS)


def objective_plan(model: str, *, history: HistoryReader, since: datetime, until: datetime | None = None,
                   source: str | None = None, home: Path | None = None, max_instances: int = 3,
                   window_ms: int = 1000) -> ObjectivePlan:
    """The model's objective and recorded load; TuneRefusedError without a p99 objective,
    NoRecordedLoadError without requests in the window. `source`: the history source to read
    (a Triton metrics URL); None, or one that holds nothing of the model: the latest that does."""
    objective = objectives(home=home).get(model)
    if objective is None or objective.p99_ms is None:
        raise TuneRefusedError(
            f"{model} has no p99 objective to tune to: set one with `geadmin objectives set {model} "
            "--p99-ms MS [--error-budget 0.1%]` (or tune for throughput without --objective)")
    held = [o.source for o in history.sources() if model in o.models]
    chosen = source if source in held else pick_source(model, history=history)
    load = recorded_load(model, history=history, source=chosen, since=since, until=until).require_traffic()
    capture = latest_capture(model, home=home, since_s=since.timestamp())
    return ObjectivePlan(objective, load, max_instances, window_ms, capture=capture)


def replay_note(plan: ObjectivePlan) -> str:
    """How every candidate was loaded: the recorded arrivals replayed, or the rate range and why."""
    if plan.capture is not None:
        speed = (f", {plan.replay_speedup:.3g}x as fast as captured to reach the recorded peak"
                 if plan.replay_speedup > 1.0 else "")
        return (f"load replayed: {plan.capture.describe()}, their pattern at {plan.rate_rps:.3g} "
                f"req/s{speed}, with perf_analyzer's --request-intervals (recorded load: "
                f"{plan.load.describe()})")
    return (f"every candidate measured at {plan.rate_rps:.3g} req/s (the recorded peak) with perf_analyzer's "
            "--request-rate-range: no capture of the model's arrivals in the window "
            "(`geadmin traffic capture` records one)")


def shortfall(trial: Trial, objective: Objective, rate_rps: float) -> str:
    """What keeps `trial` from meeting the objective at `rate_rps` ("" when it meets it)."""
    if not trial.ok or trial.p99_ms is None or trial.throughput is None:
        return trial.error or "not measured"
    limits = []
    if objective.p99_ms is not None and trial.p99_ms > objective.p99_ms:
        limits.append(f"p99 {trial.p99_ms:.1f} ms is over the {objective.p99_ms:g} ms objective")
    budget = objective.error_budget or 0.0
    if trial.failed_fraction > budget:
        limits.append(f"{trial.failed} of {trial.requests} requests failed ({trial.failed_fraction:.2%}), "
                      f"over the error budget of {budget:.2%}")
    if trial.throughput < KEEP_UP * rate_rps:
        late = f" — {trial.sent_late}" if trial.sent_late else ""
        limits.append(f"it served {trial.throughput:.3g} of the {rate_rps:.3g} req/s offered{late}")
    return "; ".join(limits)


def pick_winner(trials: list[Trial], objective: Objective, rate_rps: float,
                fits: Callable[[Candidate], str] | None = None) -> tuple[Trial | None, list[str]]:
    """The trial at `rate_rps` meeting the objective with the fewest instances, then the least
    NPU memory, the smaller max_batch_size, the lower p99; `fits(candidate) -> str` refuses one
    that would not fit beside the other models (its reason goes to the notes)."""
    notes: list[str] = []
    meeting = [t for t in trials if t.rate_rps == rate_rps and not shortfall(t, objective, rate_rps)]
    fitting = []
    for trial in meeting:
        refusal = fits(trial.candidate) if fits else ""
        if refusal:
            notes.append(f"{trial.candidate.describe()} meets the objective but is refused: {refusal}")
        else:
            fitting.append(trial)
    best = min(fitting, default=None, key=lambda t: (t.candidate.instances, t.memory_bytes or 0,
                                                      t.candidate.max_batch_size, t.p99_ms or 0.0))
    return best, notes


def nearest(trials: list[Trial], objective: Objective, rate_rps: float) -> tuple[Trial, str] | None:
    """The trial nearest to meeting the objective (measured first, then by its worst ratio of
    p99 to the objective and offered to served rate), and what limits it."""
    at_rate = [t for t in trials if t.rate_rps == rate_rps]

    def distance(t: Trial) -> tuple[int, float]:
        if not t.ok or t.p99_ms is None or not t.throughput:
            return (1, 0.0)
        return (0, max(t.p99_ms / (objective.p99_ms or t.p99_ms), rate_rps / t.throughput,
                       1.0 + t.failed_fraction))

    best = min(at_rate, key=distance, default=None)
    return (best, shortfall(best, objective, rate_rps)) if best else None


def live_batch_mix(client: TritonClient, load: RecordedLoad) -> RecordedLoad:
    """`load` with the live model's batch-size mix from Triton's statistics (since it loaded);
    unchanged when Triton has none or does not answer (the description then says not recorded)."""
    try:
        stats = client.model_statistics(load.model)
    except GeAdminError:
        return load
    for entry in stats:
        return with_live_batch_mix(load, json_format.MessageToDict(entry, preserving_proto_field_name=True),
                                   client.url)
    return load


def candidates_for(live: Candidate, ceiling: int, floor: int, instances: int) -> list[Candidate]:
    """The batching variants tried at one instance count: the live one, none, the largest."""
    if live.max_batch_size == 0:
        return [Candidate(0, 0, instances)]
    low = max(floor, 1)
    live_size = min(max(live.max_batch_size, low), max(ceiling, low))
    wanted = [Candidate(live_size, live.queue_delay_us if live_size > 1 else 0, instances),
              Candidate(low, 0, instances)]
    if ceiling > 1:
        wanted.append(Candidate(ceiling, BIG_DELAY_US, instances))
    return list(dict.fromkeys(wanted))


@dataclass
class ObjectiveSearch:
    """The search strategy `tune` runs (see the module docstring)."""

    plan: ObjectivePlan
    curve: list[Trial] = field(default_factory=list)
    scratch: tempfile.TemporaryDirectory[str] | None = None  # the replayed intervals' files

    def __call__(self, runner: TrialRunner, live: Candidate, floor: int) -> SearchOutcome:
        self.plan = replace(self.plan, load=live_batch_mix(runner.client, self.plan.load))
        plan = self.plan
        notes = [replay_note(plan)] if plan.capture else [f"load replayed: {plan.load.describe()}"]
        if plan.capture is None and (plan.load.peak_rate_rps or 0.0) < MIN_RATE_RPS:
            notes.append(f"the recorded peak is below {MIN_RATE_RPS:g} req/s: measured at "
                         f"{MIN_RATE_RPS:g} req/s")
        if plan.capture is None:
            notes.append(replay_note(plan))
        try:  # the replay's files go whatever ends the search
            best, trials = self._search(runner, live, floor, notes)
        finally:
            if self.scratch is not None:
                self.scratch.cleanup()
                self.scratch = None
        return SearchOutcome(notes, best, self.summary(best, trials), self.document(best, trials))

    def _search(self, runner: TrialRunner, live: Candidate, floor: int,
                notes: list[str]) -> tuple[Trial | None, list[Trial]]:
        """The candidates by instance count, fewest first; the winner's curve (module docstring)."""
        plan, rate = self.plan, self.plan.rate_rps
        ceiling = runner.ceiling(max(floor, 1)) if live.max_batch_size > 0 else 0
        trials: list[Trial] = []
        for instances in range(1, max(plan.max_instances, 1) + 1):
            for candidate in candidates_for(live, ceiling, floor, instances):
                if runner.out_of_time():
                    notes.append("the time budget ended before every instance count was measured")
                    break
                trials.append(runner.measure(candidate, KIND, plan.window_for(rate), rate, self._replay(1.0)))
            if runner.out_of_time() or any(not shortfall(t, plan.objective, rate) for t in trials):
                break
        best, refused = pick_winner(trials, plan.objective, rate,
                                    lambda c: runner.memory.replacing_refusal(c, live.instances))
        notes += refused
        if best is not None:
            self._measure_curve(runner, best)
        return best, trials

    def _measure_curve(self, runner: TrialRunner, best: Trial) -> None:
        for step in self.plan.curve_steps:
            if runner.out_of_time():
                break
            rate = self.plan.rate_rps * step
            point = runner.measure(best.candidate, "curve", self.plan.window_for(rate), rate,
                                   self._replay(step))
            self.curve.append(point)
            if shortfall(point, self.plan.objective, rate):
                break

    def _replay(self, speedup: float) -> Path | None:
        """The capture's intervals, `speedup` times as fast, as perf_analyzer's file (None: no capture)."""
        if self.plan.capture is None:
            return None
        if self.scratch is None:
            self.scratch = tempfile.TemporaryDirectory(prefix="geadmin-replay-")
        speedup *= self.plan.replay_speedup
        path = Path(self.scratch.name) / f"intervals-x{speedup:g}.txt"
        return write_request_intervals(path, self.plan.capture.intervals_us, speedup)

    def saturation(self, best: Trial | None) -> tuple[float | None, bool]:
        """(the highest rate the winner met the objective at, whether that is only a lower bound)."""
        if best is None:
            return None, False
        met = [best.rate_rps or 0.0] + [t.rate_rps or 0.0 for t in self.curve
                                        if not shortfall(t, self.plan.objective, t.rate_rps or 0.0)]
        return max(met), len(met) == 1 + len(self.curve)  # no measured rate failed: saturation is above

    def summary(self, best: Trial | None, trials: list[Trial]) -> str:
        plan, rate = self.plan, self.plan.rate_rps
        wanted = f"{plan.objective.describe()} at the recorded peak of {rate:.3g} req/s"
        if best is None:
            near = nearest(trials, plan.objective, rate)
            closest = f"; closest: {near[0].candidate.describe()} ({near[1]})" if near else ""
            return f"no config met {wanted} in {len(trials)} trials{closest}"
        assert best.p99_ms is not None and best.throughput is not None
        saturation, lower = self.saturation(best)
        at = f"; meets it up to {'at least ' if lower else ''}{saturation:.3g} req/s" if saturation else ""
        return (f"meets {wanted}: {best.candidate.describe()} — p99 {best.p99_ms:.1f} ms, "
                f"{best.throughput:.3g}/s served, {best.failed} of {best.requests} failed{at}")

    def document(self, best: Trial | None, trials: list[Trial]) -> dict[str, Any]:
        plan, rate = self.plan, self.plan.rate_rps
        load = plan.load
        saturation, lower = self.saturation(best)
        near = nearest(trials, plan.objective, rate) if best is None else None
        points = ([best] if best else []) + self.curve
        return {
            "kind": KIND,
            "objective": {"p99_ms": plan.objective.p99_ms, "error_budget": plan.objective.error_budget,
                          "text": plan.objective.describe()},
            "load": {"since": load.since.isoformat(), "until": load.until.isoformat(),
                     "mean_rate_rps": load.mean_rate_rps, "peak_rate_rps": load.peak_rate_rps,
                     "mean_batch_size": load.mean_batch_size, "batch_mix": {str(k): v for k, v in
                                                                           load.batch_mix.items()},
                     "source": load.source, "samples": load.samples, "text": load.describe()},
            "rate_rps": rate,
            "curve": [{"rate_rps": t.rate_rps, "p99_ms": t.p99_ms, "throughput": t.throughput, "ok": t.ok,
                       "meets": not shortfall(t, plan.objective, t.rate_rps or 0.0)} for t in points],
            "saturation_rps": saturation, "saturation_lower_bound": lower,
            "nearest": {"candidate": near[0].candidate.describe(), "limit": near[1]} if near else None,
        }


def tune_to_objective(client: TritonClient, repository: Path, plan: ObjectivePlan, *, auth: object,
                      home: Path | None = None, budget_s: float = 180.0, binary: str | None = None,
                      progress: Progress | None = None, cancel: threading.Event | None = None,
                      admin_key: str | None = None, metrics_url: str | None = None) -> TuneResult:
    """`tune` with the objective search (guarded, journaled, saved and audited as `tune`)."""
    settings = TuneSettings(plan.load.model, max_p99_ms=plan.p99_ms, budget_s=budget_s,
                            window_ms=plan.window_ms)
    return tune(client, repository, settings, auth=auth, home=home, binary=binary, progress=progress,
                cancel=cancel, admin_key=admin_key, metrics_url=metrics_url, search=ObjectiveSearch(plan))
