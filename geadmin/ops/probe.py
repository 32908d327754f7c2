"""Synthetic probes: a small real request to every READY model, so "READY but not answering"
is caught before a user is (health checks say READY while every request fails).

Each probe sends the model's saved example request (the Playground's "Use as the probe's
input") or, without one, zeros shaped from the model's metadata — ensembles end to end, like
any model. One `Prober` per server runs in the sampler's loop (`geadmin up`, `geadmin
sampler`); `geadmin probe` runs one round by hand. Bounds: a model is probed at most once per
`interval_s` (the probe rate per model, GEADMIN_PROBE_INTERVAL_S); a model under a load test
is skipped (its probe would disturb the measurement and say nothing new); a request waits at
most `timeout_s`. A probe that got no answer in time still waits in Triton's queue (a client
timeout does not cancel it): while the model finishes no request, no other probe is sent (it
would only queue behind the first, and a hung model would collect one per interval for ever);
the round says so instead, until the model finishes a request, geadmin loads or reloads it, or
`HOLD_MAX_INTERVALS` intervals have passed. Intervals are timed on the monotonic clock: a wall
clock stepped back (NTP) never holds probes back. Each round also records every model's state and
since when (`geadmin.telemetry.history.watch`), which the alert rules read through geadmin's own
metrics: one state per model, whatever its versions (Triton's index has a row per version; a
model with a READY version is READY). geadmin's own tuning trials are neither probed nor
recorded: a trial is a directory with the run's marker (`geadmin.repository.trials.is_trial`)
where the repository is known; where it is not, only a model with a trial's name while a
tuning run of its base model holds the server's load-test lock (a name alone proves nothing,
and a production model must never go unprobed or unalerted).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit
from geadmin.db import WorkspaceDatabaseError
from geadmin.diagnose.health import UNLOADED_REASON
from geadmin.diagnose.stuck import finished_requests
from geadmin.diagnose.unloads import unloaded_by_operator
from geadmin.domain import ModelEntry, ModelState, format_duration
from geadmin.errors import GeAdminError, InferInputError
from geadmin.ops.bench.params import TUNING, RunningLoadTest, load_test_running
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.request import smoke_request
from geadmin.repository.trials import is_trial, parse_name
from geadmin.telemetry.bottleneck import served_facts
from geadmin.telemetry.history import watch
from geadmin.telemetry.history.watch import ProbeRecord
from geadmin.triton.client import TritonClient

DEFAULT_INTERVAL_S = 30.0
PROBE_TIMEOUT_S = 10.0  # a probe waits this long for an answer (the sampler's client timeout)
MIN_INTERVAL_S = 5.0  # the bound on the probe rate: never more than one probe per model per 5 s
HOLD_MAX_INTERVALS = 10  # an unanswered probe holds the next ones back at most this many intervals
RELEASING_ACTIONS = ("load", "reload", "apply", "rollback")  # geadmin's audited (re)loads of a model
BATCHING_REREAD_S = 300.0  # a READY model's served config is read again this often (max_queue_delay)
SAVED_KINDS = frozenset({SourceKind.ZEROS, SourceKind.ONES, SourceKind.RANDOM, SourceKind.JSON,
                         SourceKind.TEXT, SourceKind.NPY, SourceKind.IMAGE})


@dataclass(frozen=True)
class ProbeRound:
    """One round against one server: what was probed, skipped (and why), and the states seen."""

    server: str
    at_s: float
    probes: tuple[ProbeRecord, ...] = ()
    skipped: dict[str, str] = field(default_factory=dict)  # model -> why
    states: tuple[ModelEntry, ...] = ()
    error: str = ""  # the server did not answer: nothing probed

    @property
    def failed(self) -> list[ProbeRecord]:
        """The failed probes, causes first (a member before the ensemble that fails with it)."""
        return watch.causes_first([p for p in self.probes if not p.ok])

    def to_json(self) -> dict[str, object]:
        return {"server": self.server, "at": self.at_s, "error": self.error,
                "probes": [p.to_json() for p in self.probes], "skipped": self.skipped,
                "states": {name: m.state.value for name, m in per_model(self.states).items()}}


# The row that stands for a model: READY serves; then a move under way; then a failure (any
# reason but "unloaded"); then an unloaded version; then any (NOT_LOADED).
_RANK = {ModelState.READY: 0, ModelState.LOADING: 1, ModelState.UNLOADING: 1, ModelState.UNAVAILABLE: 2}


def per_model(index: Sequence[ModelEntry]) -> dict[str, ModelEntry]:
    """One row per model of Triton's index (a row per version): a model with any version READY
    is READY, and a version unloaded beside it is its version policy at work."""
    def rank(entry: ModelEntry) -> tuple[int, bool]:
        return _RANK.get(entry.state, 3), entry.reason == UNLOADED_REASON
    found: dict[str, ModelEntry] = {}
    for entry in index:
        if entry.name not in found or rank(entry) < rank(found[entry.name]):
            found[entry.name] = entry
    return found


def record_index(server: str, index: Sequence[ModelEntry], now_s: float, *, home: Path | None = None) -> None:
    """Record each model's state as `index` says now (one per model, see `per_model`), and
    whether an operator's unload explains one that is not READY."""
    models = per_model(index)
    not_ready = [name for name, m in models.items() if m.state is not ModelState.READY]
    by_operator = unloaded_by_operator(not_ready, home) if not_ready else set()
    watch.record_states(server, {name: (m.state.value, m.reason.splitlines()[0] if m.reason else "",
                                        name in by_operator) for name, m in models.items()}, now_s, home=home)


def probe_sources(model: str, home: Path | None) -> dict[str, InputSource] | None:
    """The model's saved example request as input sources, or None when it has none."""
    saved = watch.saved_input(model, home=home)
    if not saved:
        return None
    sources = {}
    for name, item in saved.items():
        payload: str | bytes = item.get("payload", "")
        if item.get("encoding") == "base64":
            payload = base64.b64decode(str(payload))
        sources[name] = InputSource(SourceKind(item["kind"]), payload)
    return sources


def source_record(sources: Mapping[str, InputSource]) -> dict[str, dict[str, str]]:
    """What `watch.save_input` keeps of a request's sources (bytes as base64)."""
    record = {}
    for name, source in sources.items():
        if source.kind not in SAVED_KINDS:
            raise InferInputError(f"input {name!r}: a {source.kind.value} source cannot be saved as the "
                                  "probe's input")
        if isinstance(source.payload, bytes):
            record[name] = {"kind": source.kind.value, "payload": base64.b64encode(source.payload).decode(),
                            "encoding": "base64"}
        else:
            record[name] = {"kind": source.kind.value, "payload": source.payload}
    return record


def probe_model(client: TritonClient, server: str, model: str, home: Path | None,
                clock: Callable[[], float] = time.time) -> ProbeRecord:
    """One probe of `model` (its saved request, else zeros), never raising for the model's fault."""
    return _probe(client, server, model, home, clock)[0]


def _probe(client: TritonClient, server: str, model: str, home: Path | None,
           clock: Callable[[], float]) -> tuple[ProbeRecord, bool]:
    """The probe's record, and whether its request got no answer in time."""
    try:
        sources = probe_sources(model, home)
    except (GeAdminError, ValueError, KeyError) as exc:  # an unreadable saved request: say so, send zeros
        sources, problem = None, f"saved probe input unusable ({exc}); "
    else:
        problem = ""
    started = clock()
    result = smoke_request(client, model, sources=sources)
    return ProbeRecord(server, model, started, result.ok, result.latency_ms,
                       (problem + result.reason).strip(), "saved" if sources else "zeros"), result.timed_out


@dataclass(frozen=True)
class Unanswered:
    """A probe that got no answer in time, and the model's finished requests just before it
    was sent: while they stay the same, it has not finished either."""

    sent_s: float
    finished: int
    sent_tick: float  # when it was sent on the prober's interval clock


class Prober:
    """Probes one server's READY models, each at most once per `interval_s`. `clock`: the wall
    clock the records are stamped with; `ticks`: the clock intervals are timed on (monotonic;
    an injected `clock` drives them too when no `ticks` is given, so a test moves both at once);
    `repository`: the server's model repository, where trials' markers are read (see above)."""

    def __init__(self, client: TritonClient, *, home: Path | None = None,
                 interval_s: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.time,
                 ticks: Callable[[], float] | None = None, repository: Path | None = None) -> None:
        self.client = client
        self.server = client.url
        self.home = home
        self.interval_s = max(MIN_INTERVAL_S, interval_s)
        self.clock = clock
        self.ticks = ticks or (time.monotonic if clock is time.time else clock)
        self.repository = repository
        self._last: dict[str, float] = {}  # model -> its last probe, on `ticks`
        self._delays: dict[str, float | None] = {}  # model -> max_queue_delay (s), None: no batcher
        self._read_at: dict[str, float] = {}  # model -> when its served config was last read
        self._unanswered: dict[str, Unanswered] = {}  # model -> its probe still waiting in Triton

    def run(self, *, force: bool = False) -> ProbeRound:
        """A round: read the index, record states, probe the READY models that are due (all of
        them with `force`), record the probes. A server that does not answer is a round with
        `error` (the sampler's metrics gap says the rest)."""
        now = self.clock()
        try:
            index = self.client.repository_index()
        except GeAdminError as exc:
            return ProbeRound(self.server, now, error=str(exc).splitlines()[0])
        busy = load_test_running(self.home, self.server)
        # A trial is under perf_analyzer's load on purpose, and refused or unloaded by the tuner: its
        # state is no alert. Left out of the record, it is also forgotten there (watch.record_states).
        watched = [e for e in index if self.own_trial(e.name, busy) is None]
        record_index(self.server, watched, now, home=self.home)
        self._record_batching(watched, now)
        due, skipped = self.due(index, busy, force=force)
        finished = finished_requests(self.client) if due else {}  # before any probe of this round
        probes = [self._held(name, now, finished.get(name)) or self._sent(name, finished.get(name))
                  for name in due]
        watch.record_probes(probes, home=self.home)
        return ProbeRound(self.server, now, tuple(probes), skipped, tuple(index))

    def due(self, index: Sequence[ModelEntry], busy: RunningLoadTest | None, *,
            force: bool = False) -> tuple[list[str], dict[str, str]]:
        """The READY models to probe now (each once, whatever its versions), and those skipped
        with why; marks the due ones as probed now. `busy`: the load test that holds the server."""
        due, skipped = [], {}
        tick = self.ticks()
        for name, entry in per_model(index).items():
            if entry.state is not ModelState.READY:
                continue
            if (trial := self.own_trial(name, busy)) is not None:
                if trial:
                    skipped[name] = trial
                continue
            if busy is not None and (busy.model in ("", name)):
                skipped[name] = f"a load test runs against it ({busy.holder})"
                continue
            if not force and tick - self._last.get(name, float("-inf")) < self.interval_s:
                continue
            self._last[name] = tick
            due.append(name)
        return due, skipped

    def own_trial(self, name: str, busy: RunningLoadTest | None) -> str | None:
        """None when `name` is not one of geadmin's trial copies; else "" (its marker says so)
        or why it is taken for one (no repository to read a marker in, see the module's docstring)."""
        shape = parse_name(name)
        if shape is None:
            return None
        if self.repository is not None:
            return "" if is_trial(self.repository, name) else None
        if busy is not None and busy.model == shape[0] and TUNING in busy.holder:
            return f"a tuning run of {shape[0]!r} measures it, its trial copy ({busy.holder})"
        return None  # probed: a production model that merely looks like a trial must never go unwatched

    def _sent(self, model: str, finished: int | None) -> ProbeRecord:
        """A probe sent; `finished`: the model's finished requests just before it."""
        tick = self.ticks()
        record, timed_out = _probe(self.client, self.server, model, self.home, self.clock)
        self._unanswered.pop(model, None)
        if timed_out and finished is not None:
            self._unanswered[model] = Unanswered(record.at_s, finished, tick)
        return record

    def _held(self, model: str, now: float, finished: int | None) -> ProbeRecord | None:
        """The round's word on a model whose last probe still waits in Triton, instead of
        another probe behind it; None when a probe is to be sent."""
        waiting = self._unanswered.get(model)
        if waiting is None or self.ticks() - waiting.sent_tick >= HOLD_MAX_INTERVALS * self.interval_s:
            return None
        if finished != waiting.finished or self._reloaded(model, waiting.sent_s):
            return None  # it finished something since (that probe, perhaps), or it was reloaded
        sent = datetime.fromtimestamp(waiting.sent_s, timezone.utc)
        return ProbeRecord(self.server, model, now, False, None, (
            f"no answer to the probe sent at {sent:%H:%M:%S} UTC, and {model!r} has finished no request "
            f"since, so that probe still waits in Triton: its execute is hung, or slower than the probe's "
            f"timeout ({format_duration(self.client.timeout_s)}); no other probe is sent until it finishes a "
            "request or is reloaded"), watch.HELD)

    def _reloaded(self, model: str, since_s: float) -> bool:
        """geadmin loaded or reloaded `model` since `since_s` (its statistics may restart at the
        same count)."""
        since = datetime.fromtimestamp(since_s, timezone.utc)
        try:
            rows = audit.query(model=model, since=since, home=self.home)
        except WorkspaceDatabaseError:
            return True  # cannot tell: probe
        return any(r.action in RELEASING_ACTIONS and r.result == audit.Result.OK.value
                   and r.server == self.server for r in rows)

    def _record_batching(self, index: list[ModelEntry], now: float) -> None:
        """Each READY model's batcher wait, from its served config (re-read every
        `BATCHING_REREAD_S`: a reload can change it), for the alert rules' queue floor."""
        ready = [name for name, m in per_model(index).items() if m.state is ModelState.READY]
        tick = self.ticks()
        due = [name for name in ready if tick - self._read_at.get(name, float("-inf")) >= BATCHING_REREAD_S]
        if due:
            _, delays_ms = served_facts(self.client, due)
            for name in due:
                self._read_at[name] = tick
                self._delays[name] = delays_ms[name] / 1000.0 if name in delays_ms else None
        watch.record_queue_delays(self.server, {name: delay for name in ready
                                                if (delay := self._delays.get(name)) is not None},
                                  now, home=self.home)
