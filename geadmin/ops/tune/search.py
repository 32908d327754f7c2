"""`tune`: find the serving config that gets a model its batching gain, without touching the
live model.

Every candidate is served as a trial copy under another name, `<model>__tune_<run>` (the
run's id; its directory carries the marker `.geadmin-trial.json`, its version directories
are linked, not copied), loaded beside the live model with the candidate's config, measured
with perf_analyzer at the load's concurrency, and removed at the end whatever happens (an
error, a timeout, Ctrl-C). The run is journaled (`tune` / `started`) before the copy is
made; a killed run's copy is removed by the next start of the stack, the sampler or a run of
that model (`geadmin.ops.tune.trials`). Nothing is loaded, unloaded or deleted that does not
carry this run's marker: a model named like a trial is an operator's and is never touched.
The live model keeps serving and its file never changes; the winner goes through the config
editor's apply (validated, rolled back if it does not load or answer, audited), on the server
the run measured and only while the file is still the one the run started from
(`geadmin.ops.tune.apply`).

The search (`geadmin.ops.tune.space`): the batch ceiling is found by loading (largest first:
an npu_ge .om refuses a max_batch_size above its largest gear); then batch 1 and the largest
batch are measured, which give the execute's fixed and per-row cost; the model predicts
every other candidate, prunes what cannot win, and only a shortlist is measured, best
predicted first, until the time budget ends. Every trial is reported. The live config (the
baseline every gain is measured against) gets a second try with windows twice as long when
perf_analyzer finds no stable measurement; without it the result says there is no baseline.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from geadmin import audit, settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.errors import BenchBusyError, GeAdminError, TuneBusyError, UnstableMeasurementError
from geadmin.ops.bench.load_test import run_perf_analyzer
from geadmin.ops.bench.params import (
    JUDGED_STABILITY_PERCENTAGE,
    BenchSettings,
    judged_sender_threads,
    server_lock,
)
from geadmin.ops.bench.results import CONCURRENCY, REQUEST_RATE, describe_sent_late
from geadmin.ops.tune import trials as tune_trials
from geadmin.ops.tune.memory import MemoryGuard
from geadmin.ops.tune.outcome import Trial, TuneResult, TuneSettings
from geadmin.ops.tune.results import save_document
from geadmin.ops.tune.space import BATCH_SIZES, Candidate, CostModel, shortlist, space
from geadmin.ops.tune.trials import TrialCopy, make_trial, remove_trial, tune_lock
from geadmin.repository import store, trials
from geadmin.repository.cross_model import direct_users, read_configs
from geadmin.repository.knobs import Knobs, read_knobs, with_knobs
from geadmin.repository.layout import model_dir
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.triton.client import TritonClient

COMPUTE_STAGES = ("compute_input", "compute_infer", "compute_output")
THROUGHPUT_STABILITY_PERCENTAGE = 15.0  # a concurrency trial's throughput is what the search compares
Progress = Callable[[str], None]


@dataclass(frozen=True)
class SearchOutcome:
    """What a search gives `tune`: its notes and winner, and (the objective search) its own
    headline and more of the saved document."""

    notes: list[str]
    best: Trial | None
    summary: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


Search = Callable[["TrialRunner", Candidate, int], SearchOutcome]


def candidate_text(live_text: str, candidate: Candidate, instances_editable: bool = True) -> str:
    batching = candidate.batching
    knobs = Knobs(candidate.max_batch_size, batching, candidate.queue_delay_us if batching else 0,
                  (candidate.max_batch_size,) if batching else (),
                  candidate.instances if instances_editable else None, None)
    return with_knobs(live_text, knobs).text


def ensemble_floor(repository: Path, model: str) -> int:
    """The largest max_batch_size among the ensembles that run `model` (0 when none)."""
    configs = read_configs(repository)
    return max((configs[name].max_batch_size for name in direct_users(model, configs) if name in configs),
               default=0)


class TrialRunner:
    def __init__(self, client: TritonClient, repository: Path, tune: TuneSettings, auth: Authorization,
                 binary: str | None, progress: Progress, cancel: threading.Event | None,
                 admin_key: str | None, metrics_url: str | None = None) -> None:
        self.client, self.repository, self.tune = client, repository, tune
        self.auth, self.binary, self.progress = auth, binary, progress
        self.cancel, self.admin_key = cancel, admin_key
        model_dir(repository, tune.model)  # a clear error for a model that is not there
        live = store.read_config(repository, tune.model)
        self.live_text, self.live_sha256 = live.text, live.sha256
        self.copy: TrialCopy | None = None
        self.deadline = time.monotonic() + tune.budget_s
        self.trials: list[Trial] = []
        self.memory = MemoryGuard(metrics_url)

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline or (self.cancel is not None and self.cancel.is_set())

    def load(self, candidate: Candidate) -> str:
        refusal = self.memory.refusal(candidate)
        if refusal:
            return refusal
        assert self.copy is not None
        self.copy.check()  # RepositoryError: never load what this run did not make
        config = parse_pbtxt(candidate_text(self.live_text, candidate))
        config.name = self.copy.name
        try:
            self.client.load(self.copy.name, config=config)
        except GeAdminError as exc:
            self.copy.refused = True
            return str(exc).splitlines()[0]
        self.copy.refused = False
        self.memory.loaded(candidate)
        return ""

    def measure(self, candidate: Candidate, phase: str, window_ms: int | None = None,
                rate_rps: float | None = None, intervals: Path | None = None) -> Trial:
        """One trial at the settings' concurrency, or at `rate_rps` requests/s (replaying the
        recorded `intervals` file when given: geadmin.ops.bench.intervals)."""
        self.progress(f"trial {len(self.trials) + 1}: {candidate.describe()}"
                      + (f" at {rate_rps:.3g} req/s" if rate_rps else ""))
        error = self.load(candidate)
        if error:
            return self._keep(Trial(candidate, phase, False, error=error, rate_rps=rate_rps))
        assert self.copy is not None
        name, window = self.copy.name, window_ms or self.tune.window_ms
        mode, load = (REQUEST_RATE, rate_rps) if rate_rps else (CONCURRENCY, float(self.tune.concurrency))
        # At a rate the trial is judged by the objective (shortfall), not by perf_analyzer's
        # stability; the throughput search's own judge is that stability.
        stability = JUDGED_STABILITY_PERCENTAGE if rate_rps else THROUGHPUT_STABILITY_PERCENTAGE
        threads = judged_sender_threads(rate_rps, self.tune.max_p99_ms) if rate_rps else None
        try:
            before = self.client.model_statistics(name)[0]
            run = run_perf_analyzer(BenchSettings(
                name, self.client.url, mode=mode, loads=(load,), request_intervals=intervals,
                measurement_interval_ms=window, stability_percentage=stability, max_trials=8,
                max_threads=threads),
                binary=self.binary, auth=self.auth, admin_key=self.admin_key, cancel=self.cancel)
            after = self.client.model_statistics(name)[0]
        except UnstableMeasurementError:
            return self._keep(Trial(candidate, phase, False, error=unstable(window), rate_rps=rate_rps))
        except GeAdminError as exc:
            return self._keep(Trial(candidate, phase, False, error=str(exc).splitlines()[0],
                                    rate_rps=rate_rps))
        point = run.points[0]
        costs = batch_costs(before, after)
        executions = sum(n for _, n, _ in costs)
        failed = after.inference_stats.fail.count - before.inference_stats.fail.count
        succeeded = after.inference_stats.success.count - before.inference_stats.success.count
        return self._keep(Trial(candidate, phase, True, point.throughput_per_s, point.p50_ms, point.p99_ms,
                                sum(b * n for b, n, _ in costs) / executions if executions else None,
                                sum(n * ms for _, n, ms in costs) / executions if executions else None,
                                costs=costs, rate_rps=rate_rps, requests=int(failed + succeeded),
                                failed=int(failed), memory_bytes=self.memory.bytes_for(candidate),
                                sent_late=describe_sent_late(point)))

    def _keep(self, trial: Trial) -> Trial:
        self.trials.append(trial)
        return trial

    def ceiling(self, floor: int) -> int:
        """The largest max_batch_size the model loads with, largest first."""
        for size in sorted((s for s in BATCH_SIZES if floor <= s <= self.tune.max_batch_size), reverse=True):
            if self.out_of_time():
                break
            error = self.load(Candidate(size))
            if not error:
                return size
            self.trials.append(Trial(Candidate(size), "ceiling", False, error=error))
        return max(floor, 1)


def tune(client: TritonClient, repository: Path, tune_settings: TuneSettings, *, auth: object,
         home: Path | None = None, binary: str | None = None, progress: Progress | None = None,
         cancel: threading.Event | None = None, admin_key: str | None = None,
         metrics_url: str | None = None, search: Search | None = None) -> TuneResult:
    """Search `tune_settings.model`'s serving config on trial copies; the live model is never
    changed. Saved and audited (`tune`). `search`: the strategy (default: the throughput search
    below; `geadmin.ops.tune.objective` gives the objective search)."""
    who = require(auth, GuardedAction.TUNE)
    assert isinstance(auth, Authorization)
    workspace = home or settings.home()
    started = time.monotonic()
    say = progress or (lambda text: None)
    model, run = tune_settings.model, trials.new_run_id()
    with tune_lock(workspace, model), measuring_alone(workspace, client.url, model):
        runner = TrialRunner(client, repository, tune_settings, auth, binary, say, cancel, admin_key,
                             metrics_url)
        left = tune_trials.remove_left(repository, client=client, home=workspace, model=model, actor=who)
        for line in (*left.removed, *left.problems):
            say(line)
        live = read_knobs(parse_pbtxt(runner.live_text))
        delay = live.max_queue_delay_us if live.dynamic_batching else 0
        live_candidate = Candidate(live.max_batch_size, delay, live.instance_count or 1)
        marker = trials.new_marker(model, run, client.url, workspace)
        tune_trials.journal_row(model, marker, repository / marker.trial, client.url, who, workspace)
        try:
            runner.copy = make_trial(repository, model, run, server=client.url, home=workspace)
            try:
                found = (search or _search)(runner, live_candidate, ensemble_floor(repository, model))
                found.notes.append(runner.memory.note)
            finally:
                remove_trial(client, runner.copy)
        except BaseException as exc:
            tune_trials.record_cut_short("tuning run", model, run, exc, server=client.url, actor=who,
                                         home=workspace)
            raise
    best = found.best
    best_text = candidate_text(runner.live_text, best.candidate) if best else ""
    result = TuneResult(model, client.url, tune_settings, live_candidate, tuple(runner.trials), best,
                        best_text, tuple(found.notes), time.monotonic() - started, who=who.name, run=run,
                        live_sha256=runner.live_sha256, summary=found.summary, extra=found.extra)
    saved = replace(result, id=save_document(result.model, result.server, result.who, result.to_json(),
                                             home=workspace))
    audit.record_action(tune_trials.ACTION, model, True,
                        f"run {saved.id}: {saved.headline()}\n{tune_trials.RUN}: {run}",
                        server=client.url, actor=who, home=workspace)
    return saved


@contextmanager
def measuring_alone(home: Path, server_url: str, model: str, doing: str = "tune") -> Iterator[None]:
    """The load-test lock of `server_url` (`geadmin.ops.bench.params.server_lock`), held for the
    whole run: a load test and a tuning run (or a capacity sweep) on one server at once would
    measure each other's load. TuneBusyError ("cannot `doing` `model` now: ...") while a load
    test (or another tuning run or sweep) holds it."""
    with ExitStack() as held:
        try:
            held.enter_context(server_lock(home, server_url, model, tuning=True))
        except BenchBusyError as exc:
            raise TuneBusyError(f"cannot {doing} {model} now: {exc}") from exc
        yield


def unstable(window_ms: int) -> str:
    """A trial perf_analyzer could not measure steadily, with the flag that helps."""
    return (f"no stable measurement in windows of {window_ms} ms: give longer windows "
            f"(geadmin tune --window-ms {window_ms * 2}) or run on a quieter machine")


def _search(runner: TrialRunner, live: Candidate, floor: int) -> SearchOutcome:
    tune, notes = runner.tune, []
    if floor:
        notes.append(f"max_batch_size stays at {floor} or more: an ensemble that runs the model batches "
                     "that many")
    if live.max_batch_size == 0:
        candidates = space(0, 0, no_batch_dim=True)
        notes.append("the model has no batch dimension (max_batch_size 0): only its instances are tuned")
        ceiling = 0
    else:
        ceiling = runner.ceiling(max(floor, 1))
        candidates = space(max(floor, 1), ceiling)
        notes.append(f"the model loads with max_batch_size up to {ceiling}")
    measured: dict[Candidate, Trial] = {}
    if tune.exhaustive:
        for candidate in [live, *(c for c in candidates if c != live)]:
            if runner.out_of_time():
                notes.append("the time budget ended before every candidate was measured")
                break
            measured[candidate] = runner.measure(candidate, "sweep")
        return SearchOutcome(notes, _best(measured.values(), tune))
    for anchor in _anchors(live, candidates, ceiling):  # the live config and the two cost points
        if runner.out_of_time():
            break
        measured[anchor] = runner.measure(anchor, "cost")
        if anchor == live:
            measured[anchor] = _baseline(runner, live, measured[anchor], notes)
    model = _cost_model(measured)
    if model is not None:
        notes.append(f"cost model: {model.fixed_ms:.2f} ms per execute + {model.per_row_ms:.3f} ms per row")
        predictions = [model.predict(c, tune.concurrency) for c in candidates if c not in measured]
        for candidate in shortlist(predictions, max_p99_ms=tune.max_p99_ms, keep=tune.shortlist):
            if runner.out_of_time():
                notes.append("the time budget ended before the whole shortlist was measured")
                break
            measured[candidate] = runner.measure(candidate, "shortlist")
    return SearchOutcome(notes, _best(measured.values(), tune))


def _baseline(runner: TrialRunner, live: Candidate, first: Trial, notes: list[str]) -> Trial:
    """The live config's trial is what every gain is measured against: when perf_analyzer found
    no stable measurement, it gets one more try with windows twice as long; without a baseline
    the notes say so and why."""
    if first.ok:
        return first
    retry = first
    if first.error.startswith("no stable measurement") and not runner.out_of_time():
        retry = runner.measure(live, "cost", window_ms=runner.tune.window_ms * 2)
    if not retry.ok:
        notes.append(f"no baseline: the live config ({live.describe()}) was not measured ({retry.error}), "
                     "so no gain over it is known")
    return retry


def _best(trials: Iterable[Trial], tune: TuneSettings) -> Trial | None:
    """The fastest trial under the constraints; ties to fewer instances."""
    return max((t for t in trials if t.meets(tune)),
               key=lambda t: (t.throughput or 0.0, -t.candidate.instances), default=None)


def _anchors(live: Candidate, candidates: list[Candidate], ceiling: int) -> list[Candidate]:
    wanted = [live] + ([Candidate(1), Candidate(ceiling, 0)] if ceiling > 1 else [])
    return list(dict.fromkeys(c for c in wanted if c in candidates or c == live))


def _cost_model(measured: dict[Candidate, Trial]) -> CostModel | None:
    """Fitted over every execute the anchors measured, by batch size (Triton's batch statistics)."""
    return CostModel.fit([cost for trial in measured.values() if trial.ok for cost in trial.costs])


def batch_costs(before: Any, after: Any) -> tuple[tuple[int, int, float], ...]:
    """(batch size, executions, mean execute ms) between two ModelStatistics of one model:
    Triton's batch statistics time each execute by its batch size (the per-request
    statistics count a batch's time once per request in it)."""
    earlier = {b.batch_size: b for b in before.batch_stats}
    found = []
    for now in after.batch_stats:
        then = earlier.get(now.batch_size)
        count = now.compute_infer.count - (then.compute_infer.count if then else 0)
        if count > 0:
            ns = sum(getattr(now, s).ns - (getattr(then, s).ns if then else 0) for s in COMPUTE_STAGES)
            found.append((int(now.batch_size), int(count), ns / count / 1e6))
    return tuple(sorted(found))

