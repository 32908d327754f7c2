"""A short measured sweep: the highest request rate at which a model holds its objective.

Protocol (the tuner's trial machinery, geadmin.ops.tune.trials, unchanged):

1. One run per model and workspace (the tuner's lock: a sweep and a tuning run of one model
   never measure at once), and none while a load test or a tuning run measures the server (the
   load-test lock); trials that killed runs left are removed first.
2. The run is journaled as a tuning run (`tune` / `started`), the trial copy
   `<model>__tune_<run>` is made with the live config, loaded beside the live model, and
   removed at the end whatever happens; a killed sweep's copy is removed by the next start.
3. perf_analyzer offers constant request rates (`--request-rate-range`, the load-test
   machinery of geadmin.ops.bench): doubling from `start_rps` while a step holds, then
   `refine` bisections between the last rate that held and the first that did not. Each
   window holds at least 20 requests, and the step is judged by the rules below, not by
   perf_analyzer's stability gate (`geadmin.ops.bench.params.JUDGED_STABILITY_PERCENTAGE`).
4. A step holds when perf_analyzer measured it stably, its p99 is at most the objective's, the
   throughput kept up with the offered rate (>= KEEP_UP of it: below that, requests queue
   without bound) and the failed share (Triton's statistics of the trial, before and after)
   is within the error budget (0 when the objective has none).

The result is saved in the workspace (geadmin.ops.capacity.saved) and audited (`tune`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit, settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.diagnose.capacity import MEASURED_NOW, SET_OBJECTIVE, Saturation, SweepStep
from geadmin.errors import InvalidArgumentError, TuneRefusedError, UnstableMeasurementError
from geadmin.ops.bench.load_test import run_perf_analyzer
from geadmin.ops.bench.params import (
    JUDGED_STABILITY_PERCENTAGE,
    MAX_REQUEST_RATE,
    BenchSettings,
    judged_sender_threads,
    judged_window_ms,
)
from geadmin.ops.bench.results import REQUEST_RATE, describe_sent_late
from geadmin.ops.capacity import saved
from geadmin.ops.tune import trials as tune_trials
from geadmin.ops.tune.search import measuring_alone
from geadmin.repository import store, trials
from geadmin.repository.knobs import read_knobs
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.telemetry.alerting.objectives import Objective
from geadmin.triton.client import TritonClient

KEEP_UP = 0.9
Progress = Callable[[str], None]


def _check(objective: Objective | None, model: str, start_rps: float, max_steps: int, refine: int,
           rates: Sequence[float]) -> float:
    if objective is None or objective.p99_ms is None:
        raise TuneRefusedError(f"{model} has no p99 objective, so no rate can be said to hold it: set one "
                               f"with `{SET_OBJECTIVE.format(model=model)}`")
    if not 0 < start_rps <= MAX_REQUEST_RATE:
        raise InvalidArgumentError(f"the sweep's first rate is above 0 and up to {MAX_REQUEST_RATE:g} req/s, "
                                   f"got {start_rps:g}")
    if not 1 <= max_steps <= 40 or not 0 <= refine <= 8:
        raise InvalidArgumentError("a sweep has 1 to 40 doubling steps and 0 to 8 refinements")
    if len(rates) > 64 or any(not 0 < r <= MAX_REQUEST_RATE for r in rates):
        raise InvalidArgumentError(f"an exhaustive sweep has up to 64 rates, each above 0 and up to "
                                   f"{MAX_REQUEST_RATE:g} req/s")
    return objective.p99_ms


class _Sweep:
    def __init__(self, client: TritonClient, name: str, p99_ms: float, budget: float, window_ms: int,
                 auth: Authorization, binary: str | None, admin_key: str | None,
                 cancel: threading.Event | None, say: Progress) -> None:
        self.client, self.name, self.p99_ms, self.budget = client, name, p99_ms, budget
        self.window_ms, self.auth, self.binary, self.admin_key = window_ms, auth, binary, admin_key
        self.cancel, self.say = cancel, say
        self.curve: list[SweepStep] = []

    def step(self, rate: float) -> SweepStep:
        self.say(f"step {len(self.curve) + 1}: {rate:.4g} req/s")
        try:
            before = self.client.model_statistics(self.name)[0]
            run = run_perf_analyzer(BenchSettings(
                self.name, self.client.url, mode=REQUEST_RATE, loads=(min(rate, MAX_REQUEST_RATE),),
                measurement_interval_ms=judged_window_ms(rate, self.window_ms),
                stability_percentage=JUDGED_STABILITY_PERCENTAGE, max_trials=5,
                max_threads=judged_sender_threads(rate, self.p99_ms)),
                binary=self.binary, auth=self.auth, admin_key=self.admin_key, cancel=self.cancel)
            after = self.client.model_statistics(self.name)[0]
        except UnstableMeasurementError as exc:  # no window with traffic at this rate
            return self._keep(SweepStep(rate, None, None, None, False, str(exc).splitlines()[0]))
        point = run.points[0]
        failed = after.inference_stats.fail.count - before.inference_stats.fail.count
        done = after.inference_stats.success.count - before.inference_stats.success.count + failed
        errors = failed / done if done else 0.0
        late = describe_sent_late(point)
        short = f"{point.throughput_per_s:.3g}/s does not keep up" + (f" — {late}" if late else "")
        why = "; ".join(x for x in (
            f"p99 {point.p99_ms:.1f} ms over {self.p99_ms:g} ms" if point.p99_ms > self.p99_ms else "",
            short if point.throughput_per_s < KEEP_UP * rate else "",
            f"{errors:.2%} of requests failed" if errors > self.budget else "") if x)
        return self._keep(SweepStep(rate, point.throughput_per_s, point.p99_ms, errors, not why, why))

    def _keep(self, point: SweepStep) -> SweepStep:
        self.curve.append(point)
        self.say(f"  {'holds' if point.ok else 'does not hold'}" + (f": {point.why}" if point.why else ""))
        return point

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def every(self, rates: Sequence[float]) -> float | None:
        """Each rate measured, lowest first (an exhaustive sweep, for the benchmark): the highest
        rate that held below the first that did not."""
        held = None
        for rate in sorted(rates):
            if self.cancelled() or not self.step(rate).ok:
                break
            held = rate
        return held

    def search(self, start_rps: float, max_steps: int, refine: int) -> float | None:
        held: float | None = None
        failed: float | None = None
        rate = start_rps
        for _ in range(max_steps):
            if self.cancelled():
                break
            if self.step(rate).ok:
                held = rate
                if failed is not None:
                    break
                rate *= 2
            else:
                failed = rate
                if held is not None:
                    break
                rate /= 2  # the first rate failed: look lower
        for _ in range(refine if held is not None and failed is not None and failed > held else 0):
            if self.cancelled():
                break
            assert held is not None and failed is not None
            middle = (held + failed) / 2
            if self.step(middle).ok:
                held = middle
            else:
                failed = middle
        return held


def run_saturation_sweep(client: TritonClient, repository: Path, model: str, objective: Objective | None, *,
                       auth: object, home: Path | None = None, start_rps: float = 1.0, max_steps: int = 10,
                       refine: int = 3, window_ms: int = 1000, binary: str | None = None,
                       progress: Progress | None = None, cancel: threading.Event | None = None,
                       admin_key: str | None = None, rates: Sequence[float] = ()) -> Saturation:
    """The highest request rate at which `model`, served as a trial copy with its live config,
    holds `objective` (module docstring); saved and audited. The live model is never changed.
    `rates`: measure each of these instead of searching (an exhaustive sweep)."""
    who = require(auth, GuardedAction.TUNE)
    assert isinstance(auth, Authorization)
    p99_ms = _check(objective, model, start_rps, max_steps, refine, rates)
    budget = (objective.error_budget if objective and objective.error_budget is not None else 0.0)
    workspace = home or settings.home()
    say = progress or (lambda text: None)
    started = time.monotonic()
    run = trials.new_run_id()
    with tune_trials.tune_lock(workspace, model, purpose="capacity sweep"), \
            measuring_alone(workspace, client.url, model, doing="measure the capacity of"):
        live = store.read_config(repository, model)
        instances = read_knobs(parse_pbtxt(live.text)).instance_count or 1
        left = tune_trials.remove_left(repository, client=client, home=workspace, model=model, actor=who)
        for line in (*left.removed, *left.problems):
            say(line)
        marker = trials.new_marker(model, run, client.url, workspace)
        tune_trials.journal_row(model, marker, repository / marker.trial, client.url, who, workspace)
        try:
            copy = tune_trials.make_trial(repository, model, run, server=client.url, home=workspace)
            try:
                copy.check()
                client.load(copy.name)
                sweep = _Sweep(client, copy.name, p99_ms, budget, window_ms, auth, binary, admin_key, cancel,
                               say)
                rate = sweep.every(rates) if rates else sweep.search(start_rps, max_steps, refine)
            finally:
                tune_trials.remove_trial(client, copy)
        except BaseException as exc:
            tune_trials.record_cut_short("capacity sweep", model, run, exc, server=client.url, actor=who,
                                         home=workspace)
            raise
    now = datetime.now(timezone.utc).replace(microsecond=0)
    result = Saturation(model, rate, instances, p99_ms,
                        f"{MEASURED_NOW} (capacity sweep {run} on the trial copy {marker.trial}, "
                        f"{len(sweep.curve)} steps, {instances} instance{'s' if instances != 1 else ''})",
                        now.isoformat(), tuple(sweep.curve), time.monotonic() - started)
    held = f"{rate:.4g} req/s" if rate is not None else "no rate"
    audit.record_action(tune_trials.ACTION, model, True,
                        f"capacity sweep {run}: {held} holds p99 <= {p99_ms:g} ms\n{tune_trials.RUN}: {run}",
                        server=client.url, actor=who, home=workspace)
    saved.save(result, client.url, home=workspace)
    return result
