"""Preview a config change before it lands: serve the candidate as a trial copy beside the
live model, replay the model's recorded load against both, and say go or no-go with the
evidence (`geadmin.ops.models.preview_report`). Nothing is applied.

The input is what the safe apply takes (`geadmin.ops.models.apply.apply_config`): a model and
its new config.pbtxt. Steps:

1. Plan it as the apply would (`geadmin.ops.models.change_plan.plan_change`): the validator's
   findings and the loaded ensembles it would take down, from Triton's live configs. A text
   that does not parse is refused (`ConfigParseError`): there is nothing to serve.
2. The rate to replay: `rate_rps` when given, else the model's recorded load over the last
   `window_h` hours of the history (`geadmin.telemetry.history.traffic.recorded_load`, its
   peak or mean); no recorded traffic is `NoRecordedLoadError`, naming `--rate`. With a
   capture of the model's arrivals in that window (`geadmin traffic capture`), its pattern is
   replayed at that rate (perf_analyzer's `--request-intervals`), else even spacing.
3. Under the tuner's lock of the model and the load-test lock of the server (a tune, a load
   test or another preview there is `TuneBusyError` / `BenchBusyError`), remove the trials
   that killed runs of the model left (`geadmin.ops.tune.trials.remove_left`), write the
   `preview` / `started` audit row (the run, the trial, its directory), make the trial copy
   `<model>__tune_<run>` with its marker (`geadmin.ops.tune.trials.make_trial`: the verdict,
   drift and the exporter leave it out as geadmin's own work), and load the candidate into it.
4. Measure the live model and the trial one after the other with perf_analyzer at the rate
   (request-rate mode, the playground's input), each with Triton's statistics around it
   (failed requests) and the memory the trial holds (npu_ge's HBM metrics through the tuner's
   MemoryGuard, else Triton's memory_usage statistics, else "not known here").
5. Remove the trial whatever happens (an error, Ctrl-C, SIGTERM as the CLI maps it, perf_analyzer
   failing, Triton dying: the directory is deleted even when Triton does not answer), then the
   outcome row: `ok` with the verdict's headline, or `failed` with why. A preview killed with
   SIGKILL leaves its trial and an open `started` row: the next preview or tune of the model,
   the sampler's start and `geadmin up` remove the trial and close the row
   (`remove_left`, which reads `preview` rows as it reads `tune` rows).
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from geadmin import audit, settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.errors import (
    BenchSettingsError,
    GeAdminError,
    InvalidArgumentError,
    NoRecordedLoadError,
    TritonUnreachableError,
)
from geadmin.ops.bench.intervals import replay_rate_rps, scaled_intervals, write_request_intervals
from geadmin.ops.bench.load_test import bench_input, run_perf_analyzer
from geadmin.ops.bench.params import (
    JUDGED_STABILITY_PERCENTAGE,
    BenchSettings,
    judged_sender_threads,
    judged_window_ms,
    server_lock,
)
from geadmin.ops.bench.results import REQUEST_RATE, describe_sent_late
from geadmin.ops.models.change_plan import ChangePlan, plan_change
from geadmin.ops.models.preview_report import ImpactPreview, PreviewSide
from geadmin.ops.tune import trials as tune_trials
from geadmin.ops.tune.memory import MemoryGuard
from geadmin.ops.tune.space import Candidate
from geadmin.ops.tune.trials import TrialCopy, make_trial, remove_trial, tune_lock
from geadmin.repository import revisions, store, trials
from geadmin.repository.knobs import read_knobs
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.telemetry.alerting.objectives import objectives
from geadmin.telemetry.history import traffic
from geadmin.telemetry.history.arrivals import ArrivalCapture, latest_capture
from geadmin.telemetry.history.reader import HistoryReader, open_history
from geadmin.triton.client import TritonClient

ACTION = "preview"
DEFAULT_WINDOW_MS = 2000
MAX_TRIALS = 6  # perf_analyzer windows per side before it gives up on a stable one
Progress = Callable[[str], None]


@dataclass(frozen=True)
class PreviewLoad:
    """What to replay: the recorded rate (peak, else mean) over `window_h`, or `rate_rps`."""

    rate_rps: float | None = None  # given: replay this instead of the recorded rate
    peak: bool = True  # the recorded peak (else the mean)
    window_h: float = 1.0
    window_ms: int = DEFAULT_WINDOW_MS  # perf_analyzer's measurement window

    def __post_init__(self) -> None:
        if self.rate_rps is not None and not 0 < self.rate_rps <= 100_000:
            raise InvalidArgumentError(f"--rate is requests/s above 0 and up to 100000, "
                                       f"got {self.rate_rps:g}")
        if not 0 < self.window_h <= 24 * 30:
            raise InvalidArgumentError(f"the history window is above 0 and up to 720 h, "
                                       f"got {self.window_h:g}")
        if not 100 <= self.window_ms <= 60_000:
            raise InvalidArgumentError(f"the measurement window is 100 to 60000 ms, got {self.window_ms}")


def preview_change(
    client: TritonClient,
    repository: Path,
    model: str,
    new: str | bytes,
    *,
    auth: Authorization | None,
    load: PreviewLoad | None = None,
    home: Path | None = None,
    metrics_url: str | None = None,
    history: HistoryReader | None = None,
    backends: frozenset[str] | None = None,
    binary: str | None = None,
    admin_key: str | None = None,
    progress: Progress | None = None,
    cancel: threading.Event | None = None,
) -> ImpactPreview:
    """Preview `new` as `model`'s config (see the module docstring). `auth` must cover `tune`
    (operator): NotAuthorizedError before anything is read. `metrics_url` is Triton's metrics
    page: the history's key for the recorded load, and where npu_ge's HBM figures are read."""
    actor = require(auth, GuardedAction.TUNE)
    assert isinstance(auth, Authorization)
    load = load or PreviewLoad()
    workspace = home or settings.home()
    say = progress or (lambda text: None)
    say(f"planning the change of {model}")
    plan = plan_change(client, repository, model, new=new, backends=backends, home=workspace)
    config = parse_pbtxt(plan.text, f"the new config of {model!r}")
    rate, rate_source = replayed_rate(model, load, metrics_url, history, workspace)
    pattern = pattern_to_replay(model, rate, load, workspace)
    if pattern is not None:
        rate_source += f"; the pattern of {pattern[1].describe()}, at that rate"
    run = trials.new_run_id()
    job = _Preview(client, repository, model, plan, config, auth, actor, workspace, load, rate, rate_source,
                   metrics_url, binary, admin_key, say, cancel, run,
                   tuple(pattern[0]) if pattern is not None else ())
    with ExitStack() as held:
        held.enter_context(tune_lock(workspace, model, purpose="preview"))
        held.enter_context(server_lock(workspace, client.url, model))
        return job.run()


def pattern_to_replay(model: str, rate: float, load: PreviewLoad,
                     home: Path) -> tuple[list[int], ArrivalCapture] | None:
    """The newest capture of `model` in the window, its intervals scaled to offer `rate`; None
    without one, or when the scaling is beyond the replay's bound."""
    capture = latest_capture(model, home=home, since_s=time.time() - load.window_h * 3600)
    if capture is None:
        return None
    try:
        return scaled_intervals(capture.intervals_us, rate / replay_rate_rps(capture.intervals_us)), capture
    except BenchSettingsError:
        return None


def replayed_rate(model: str, load: PreviewLoad, metrics_url: str | None, history: HistoryReader | None,
                  home: Path) -> tuple[float, str]:
    """(requests/s, where it came from): the given rate, else the recorded one. The one call to
    the recorded load (`geadmin.telemetry.history.traffic`)."""
    if load.rate_rps is not None:
        return load.rate_rps, "given with --rate"
    if not metrics_url:
        raise InvalidArgumentError(f"the recorded load of {model} is kept under Triton's metrics URL, which "
                                   "is not known here: pass --metrics-url, or give the rate with --rate")
    now = datetime.now(timezone.utc)
    recorded = traffic.recorded_load(model, history=history or open_history(home), source=metrics_url,
                                     since=now - timedelta(hours=load.window_h), until=now)
    rate = recorded.peak_rate_rps if load.peak else recorded.mean_rate_rps
    if rate is None or rate <= 0:
        raise NoRecordedLoadError(
            f"nothing to replay: {recorded.describe()}. The history keeps a server under its metrics URL "
            f"({metrics_url}: --metrics-url if that is not this server's); run the sampler while the model "
            "serves, look further back (--history-h), or give the rate to replay with --rate")
    return rate, f"the recorded {'peak' if load.peak else 'mean'}; {recorded.describe()}"


@dataclass
class _Preview:
    client: TritonClient
    repository: Path
    model: str
    plan: ChangePlan
    config: Any  # ModelConfig: the candidate
    auth: Authorization
    actor: Actor
    home: Path
    load: PreviewLoad
    rate: float
    rate_source: str
    metrics_url: str | None
    binary: str | None
    admin_key: str | None
    say: Progress
    cancel: threading.Event | None
    run_id: str
    intervals_us: tuple[int, ...] = ()  # the captured pattern at `rate`; (): even spacing

    def run(self) -> ImpactPreview:
        left = tune_trials.remove_left(self.repository, client=self.client, home=self.home, model=self.model,
                                       actor=self.actor)
        for line in (*left.removed, *left.problems):
            self.say(line)
        marker = trials.new_marker(self.model, self.run_id, self.client.url, self.home)
        directory = self.repository / marker.trial
        audit.record(ACTION, self.model, Result.STARTED, actor=self.actor, server=self.client.url,
                     message="\n".join((f"started: preview of a new config of {self.model!r} on the trial "
                                        f"copy {marker.trial}", f"{tune_trials.RUN}: {self.run_id}",
                                        f"{tune_trials.TRIAL}: {marker.trial}",
                                        f"{tune_trials.DIRECTORY}: {directory}")),
                     diff=self.plan_diff(), home=self.home)
        try:
            copy = make_trial(self.repository, self.model, self.run_id, server=self.client.url,
                              home=self.home)
            try:
                found = self.serve_and_measure(copy)
            finally:
                removed = self.remove(copy)
        except BaseException as exc:
            why = str(exc).splitlines()[0] if isinstance(exc, GeAdminError) \
                else f"cut short by {type(exc).__name__}"
            audit.try_record_action(ACTION, self.model, False, f"preview ended without a verdict: {why}\n"
                                    f"{tune_trials.RUN}: {self.run_id}", server=self.client.url,
                                    actor=self.actor, home=self.home)
            raise
        result = ImpactPreview(**found, removed=removed)
        audit.try_record_action(ACTION, self.model, True,
                                f"{result.headline()}\n{tune_trials.RUN}: {self.run_id}",
                                server=self.client.url, actor=self.actor, home=self.home)
        return result

    def plan_diff(self) -> str:
        return revisions.config_diff(store.read_config(self.repository, self.model).data, self.plan.data,
                                     self.model)

    def remove(self, copy: TrialCopy) -> str:
        self.say(f"removing the trial copy {copy.name}")
        try:
            remove_trial(self.client, copy)
        except (OSError, GeAdminError) as exc:
            return f"the trial copy {copy.name} was NOT removed ({exc}); the next preview or tune of " \
                   f"{self.model}, the sampler or `geadmin up` removes it"
        return f"the trial copy {copy.name} was removed"

    def serve_and_measure(self, copy: TrialCopy) -> dict[str, Any]:
        found: dict[str, Any] = {
            "model": self.model, "server": self.client.url, "trial": copy.name, "rate_rps": self.rate,
            "rate_source": self.rate_source, "window_ms": self.measured_window_ms(),
            "findings": self.plan.findings, "impact": self.plan.impact,
            "objective": objectives(home=self.home).get(self.model)}
        copy.check()  # never load what this run did not make
        candidate = type(self.config)()
        candidate.CopyFrom(self.config)
        candidate.name = copy.name
        knobs = read_knobs(candidate)
        guard = MemoryGuard(self.metrics_url)
        self.say(f"loading the new config as {copy.name}")
        try:
            self.client.load(copy.name, config=candidate)
        except TritonUnreachableError:
            raise
        except GeAdminError as exc:
            copy.refused = True
            return found | {"refused": str(exc).splitlines()[0]}
        instances = knobs.instance_count or 1
        guard.loaded(Candidate(knobs.max_batch_size, 0, instances))
        trial_memory = (guard.per_instance * instances, "npu_ge HBM measured as the trial loaded") \
            if guard.per_instance else (None, "")
        live = self.measure(self.model, "the live model")
        trial = self.measure(copy.name, "the trial copy", trial_memory)
        return found | {"live": live, "candidate": trial, "notes": (guard.note,)}

    def measured_window_ms(self) -> int:
        """The asked window, made long enough for a judged p99 at this rate (a window of 10
        requests at 10 req/s never measured stable on a busy host)."""
        return judged_window_ms(self.rate, self.load.window_ms)

    def measure(self, name: str, what: str, memory: tuple[int | None, str] = (None, "")) -> PreviewSide:
        self.say(f"replaying {self.rate:g} requests/s against {what} ({name})")
        try:
            before = self.client.model_statistics(name)[0]
            data, batch = bench_input(self.client, name)
            with tempfile.TemporaryDirectory(prefix="geadmin-preview-") as scratch:
                intervals = (write_request_intervals(Path(scratch) / "intervals.txt", self.intervals_us)
                             if self.intervals_us else None)
                bench = BenchSettings(name, self.client.url, mode=REQUEST_RATE, loads=(self.rate,),
                                      request_intervals=intervals,
                                      measurement_interval_ms=self.measured_window_ms(),
                                      stability_percentage=JUDGED_STABILITY_PERCENTAGE, max_trials=MAX_TRIALS,
                                      max_threads=judged_sender_threads(self.rate, self.objective_p99_ms()))
                run = run_perf_analyzer(bench, input_data=data, batch_size=batch, binary=self.binary,
                                        auth=self.auth, admin_key=self.admin_key, cancel=self.cancel)
            after = self.client.model_statistics(name)[0]
        except TritonUnreachableError:
            raise
        except GeAdminError as exc:
            return PreviewSide(name, False, error=str(exc).splitlines()[0])
        point = run.points[0]
        stats_memory = sum(m.byte_size for m in getattr(after, "memory_usage", ()))
        memory_bytes, memory_source = memory
        if memory_bytes is None and stats_memory:
            memory_bytes, memory_source = stats_memory, "Triton's memory_usage statistics"
        success = after.inference_stats.success.count - before.inference_stats.success.count
        failed = after.inference_stats.fail.count - before.inference_stats.fail.count
        return PreviewSide(name, True, point.throughput_per_s, point.p50_ms, point.p99_ms, int(success),
                           int(failed), memory_bytes, memory_source, sent_late=describe_sent_late(point))

    def objective_p99_ms(self) -> float | None:
        objective = objectives(home=self.home).get(self.model)
        return objective.p99_ms if objective else None
