"""What a tuning run asks for and what it produces: its settings, each trial's measurement,
and the result saved as a document (`geadmin.ops.tune.results`); the same types for the
throughput search (`geadmin.ops.tune.search`) and the objective search
(`geadmin.ops.tune.objective`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from geadmin.errors import InvalidArgumentError
from geadmin.ops.tune.space import Candidate
from geadmin.repository import trials


@dataclass(frozen=True)
class TuneSettings:
    model: str
    max_p99_ms: float | None = None
    min_throughput: float | None = None
    budget_s: float = 180.0
    concurrency: int = 16
    window_ms: int = 1000
    max_batch_size: int = 64  # the largest max_batch_size tried
    shortlist: int = 3  # candidates measured after the two that fit the cost model
    exhaustive: bool = False  # measure every candidate (a sweep: slow, for certainty and the benchmark)

    def __post_init__(self) -> None:
        if not 1 <= self.concurrency <= 256:
            raise InvalidArgumentError(f"the tuning load is 1 to 256 concurrent requests, got "
                                       f"{self.concurrency}")
        if not 10 <= self.budget_s <= 3600:
            raise InvalidArgumentError(f"the time budget is 10 s to 1 h, got {self.budget_s:g} s")
        if self.max_p99_ms is not None and self.max_p99_ms <= 0:
            raise InvalidArgumentError("--max-p99-ms must be above 0")
        if self.min_throughput is not None and self.min_throughput <= 0:
            raise InvalidArgumentError("--min-throughput must be above 0")


@dataclass(frozen=True)
class Trial:
    candidate: Candidate
    phase: str  # ceiling, cost, shortlist
    ok: bool
    throughput: float | None = None  # inferences/s
    p50_ms: float | None = None
    p99_ms: float | None = None
    avg_batch: float | None = None
    exec_ms: float | None = None  # compute time per execute (Triton's statistics)
    error: str = ""
    costs: tuple[tuple[int, int, float], ...] = ()  # (batch size, executions, mean execute ms)
    rate_rps: float | None = None  # measured at this request rate (None: at the settings' concurrency)
    requests: int = 0  # requests Triton counted for the trial while it was measured
    failed: int = 0  # ... of which failed
    memory_bytes: int | None = None  # NPU memory it would hold (measured per instance x instances)
    sent_late: str = ""  # perf_analyzer's own lateness at the rate (results.describe_sent_late)

    @property
    def failed_fraction(self) -> float:
        return self.failed / self.requests if self.requests else 0.0

    def meets(self, tune: TuneSettings) -> bool:
        return (self.ok and self.throughput is not None and self.p99_ms is not None
                and (tune.max_p99_ms is None or self.p99_ms <= tune.max_p99_ms)
                and (tune.min_throughput is None or self.throughput >= tune.min_throughput))

    def to_json(self) -> dict[str, Any]:
        c = self.candidate
        return {"max_batch_size": c.max_batch_size, "queue_delay_us": c.queue_delay_us,
                "instances": c.instances, "phase": self.phase, "ok": self.ok, "throughput": self.throughput,
                "p50_ms": self.p50_ms, "p99_ms": self.p99_ms, "avg_batch": self.avg_batch,
                "exec_ms": self.exec_ms, "error": self.error, "costs": [list(c) for c in self.costs],
                "rate_rps": self.rate_rps, "requests": self.requests, "failed": self.failed,
                "memory_bytes": self.memory_bytes, "sent_late": self.sent_late}


@dataclass(frozen=True)
class TuneResult:
    model: str
    server: str
    settings: TuneSettings
    live: Candidate
    trials: tuple[Trial, ...]
    best: Trial | None
    best_text: str  # the live config file with the winner's knobs (comments kept); "" without a winner
    notes: tuple[str, ...] = ()
    seconds: float = 0.0
    id: int | None = None
    who: str = ""
    run: str = ""  # the trial's run id (its name is `<model>__tune_<run>`)
    live_sha256: str = ""  # the config file the run started from: applying the winner expects it
    summary: str = ""  # the headline, when the search writes its own (the objective search)
    extra: Mapping[str, Any] = field(default_factory=dict)  # more of the document (the objective search)

    @property
    def live_trial(self) -> Trial | None:
        return next((t for t in self.trials if t.ok and t.candidate == self.live), None)

    def headline(self) -> str:
        if self.summary:
            return self.summary
        if self.best is None:
            wanted = self.settings
            limits = ", ".join(x for x in (
                f"p99 <= {wanted.max_p99_ms:g} ms" if wanted.max_p99_ms else "",
                f"throughput >= {wanted.min_throughput:g}/s" if wanted.min_throughput else "") if x)
            return f"no config met the constraints ({limits or 'none'}) in {len(self.trials)} trials"
        base = self.live_trial
        gain = f", {self.best.throughput / base.throughput:.1f}x the live config" \
            if base and base.throughput and self.best.throughput else \
            "; no baseline: the live config was not measured (see the notes)"
        return (f"best: {self.best.candidate.describe()} — {self.best.throughput:.0f} inferences/s at p99 "
                f"{self.best.p99_ms:.1f} ms{gain}")

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "model": self.model, "server": self.server, "who": self.who,
                "settings": self.settings.__dict__, "live": self.live.__dict__,
                "trials": [t.to_json() for t in self.trials],
                "best": self.best.to_json() if self.best else None, "best_text": self.best_text,
                "headline": self.headline(), "notes": list(self.notes), "seconds": self.seconds,
                "run": self.run, "trial": trials.trial_name(self.model, self.run) if self.run else "",
                "live_sha256": self.live_sha256, **self.extra}


