"""The fleet at a glance: the model x server matrix (state and version per cell), skew said
plainly — of state and version, and with `configs` of the config each server serves
(geadmin.fleet.config_skew) — servers that do not answer, and replicas that stand out from
their siblings.

What each member answered (`ServerView`: its snapshot and its figures per model) is gathered by
geadmin.fleet.polling; here it is judged and said: the headline (OK, DEGRADED, DOWN, EMPTY),
a line per reason, the document `geadmin fleet status --json` prints.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from geadmin.diagnose.health import ServerSnapshot, is_idle, triage
from geadmin.diagnose.verdict import not_ready_reason
from geadmin.domain import ModelEntry, ModelState
from geadmin.fleet.config_skew import Compared, ServedConfig
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.members import ASCEND, NODE, READY, Member

# A replica stands out when its figure is this many times its siblings' median, and by at least:
OUTLIER_FACTOR = 2.0
OUTLIER_MIN_MS = 5.0
OUTLIER_MIN_ERROR_RATE = 0.05
OUTLIER_MIN_REQUESTS = 20  # fewer requests (a fresh reload, a few probes) say nothing yet


@dataclass(frozen=True)
class Figures:
    """One model on one server, since it loaded."""

    requests: int
    failures: int
    avg_request_ms: float | None
    p99_ms: float | None  # Triton's summary quantile, when it publishes summaries

    @property
    def error_rate(self) -> float | None:
        return self.failures / self.requests if self.requests else None

    @property
    def latency_ms(self) -> float | None:
        return self.p99_ms if self.p99_ms is not None else self.avg_request_ms


@dataclass(frozen=True)
class ServerView:
    member: Member
    snapshot: ServerSnapshot | None  # None: no answer by the deadline
    figures: dict[str, Figures] = field(default_factory=dict)
    metrics_error: str = ""
    took_s: float = 0.0
    configs: Mapping[str, ServedConfig] = field(default_factory=dict)  # read when configs are compared

    @property
    def name(self) -> str:
        return self.member.name

    @property
    def problem(self) -> str:
        """Why this server is not serving, or ""."""
        if self.snapshot is None:
            return f"no answer within {self.took_s:.0f} s"
        if not self.snapshot.reachable:
            error = self.snapshot.error.splitlines()[0] if self.snapshot.error else "no answer"
            return f"unreachable: {error}"
        if self.snapshot.error:  # it answers, but its models cannot be read (a key): never "0 models, OK"
            return f"its models cannot be read: {self.snapshot.error.splitlines()[0]}"
        serving = any(m.state is ModelState.READY for m in self.snapshot.models)
        if not self.snapshot.ready and not serving:
            return f"{self.snapshot.status} (Triton says it is not ready, and no model is READY)"
        return ""

    @property
    def not_ready_but_serving(self) -> bool:
        """Live, models READY, yet /v2/health/ready false: strict readiness (a model that failed
        to load makes the whole server not ready, FACTS.md). A load balancer that probes
        readiness sends it nothing: the fleet is DEGRADED, by its failed models (FleetStatus.failed)
        or, with none, by FleetStatus.unready."""
        snap = self.snapshot
        return snap is not None and snap.live and not snap.ready and not self.problem

    def entry(self, model: str) -> ModelEntry | None:
        """`model`'s row here: the serving version when one is READY, else the newest."""
        if self.snapshot is None:
            return None
        entries = [m for m in self.snapshot.models if m.name == model]
        if not entries:
            return None
        ready = [m for m in entries if m.state is ModelState.READY]
        return max(ready or entries, key=lambda m: (m.version.isdigit(), int(m.version or 0)
                                                    if m.version.isdigit() else 0))

    def cell(self, model: str) -> tuple[str, str] | None:
        """(state, version) of `model` here."""
        entry = self.entry(model)
        return (entry.state.value, entry.version) if entry else None


@dataclass(frozen=True)
class FleetStatus:
    discovery: Discovery
    servers: tuple[ServerView, ...]
    taken_s: float
    configs_compared: bool = False  # each server's served config read (`fleet status --configs`)

    @property
    def models(self) -> list[str]:
        return sorted({m.name for s in self.servers if s.snapshot for m in s.snapshot.models})

    @property
    def answering(self) -> list[ServerView]:
        return [s for s in self.servers if not s.problem]

    def down(self) -> list[str]:
        return [f"{s.name} ({s.member.url}): {s.problem}" for s in self.servers if s.problem]

    def missing(self) -> list[str]:
        """One line per source that did not answer, and per note of what a source left out: the
        servers behind them are not in this view, so the fleet cannot be OK."""
        found = self.discovery.found
        lines = [f"source {f.source} did not answer, its servers are missing: {f.error}"
                 for f in found if f.error]
        return lines + [f"source {f.source} left servers out: {note}" for f in found for note in f.notes]

    def unready(self) -> list[str]:
        """One line per server that serves but says it is not ready, as `geadmin status` says it
        (a readiness probe sends it nothing; one with a failed model is in failed() instead), and
        per server its own source calls not ready (a Kubernetes pod not Ready, a Prometheus target
        down: traffic does not reach it, whatever Triton answers us)."""
        lines = [f"{s.name} ({s.member.url}): its source says it is not ready ({s.member.source}): it gets "
                 "no traffic there; see why where it runs (`kubectl describe pod`, the target's last error)"
                 for s in self.answering if s.member.labels.get(READY) == "false"]
        for s in self.answering:
            if s.not_ready_but_serving and s.snapshot is not None:
                found = triage(s.snapshot)
                if not found.failed:
                    reason = not_ready_reason(found)
                    lines.append(f"{s.name} ({s.member.url}): {reason.text}; fix: {reason.fix}")
        return lines

    def degraded(self) -> list[str]:
        """Every reason the fleet is not OK, the one the headline leads with first; [] when OK
        (outliers only warn). `geadmin fleet status` exits 4 for any."""
        return [*self.missing(), *self.down(), *self.failed(), *self.unready(), *self.skew(),
                *self.config_skew()]

    def skew(self) -> list[str]:
        """One line per model that is not the same everywhere it is known, e.g.
        "digits: READY on 17 of 20; v3 on 15, v2 on 2; UNAVAILABLE on triton-4"."""
        return list(self._version_skews.values())

    def config_skew(self) -> list[str]:
        """With configs compared, one line per model served with more than one config, naming the
        servers off the most common one and the fields that differ (geadmin.fleet.config_skew)."""
        return [found.line for found in self._compared.skews.values()]

    def configs_not_compared(self) -> list[str]:
        """One line per server (and cause) whose served config could not be read, e.g.
        "config not compared on r: its config API needs the admin key — ...", and per model READY on
        several servers with fewer than two configs read (geadmin.fleet.config_skew.Compared)."""
        return self._compared.not_compared() if self.configs_compared else []

    def cell_text(self, view: ServerView, model: str) -> str:
        """A matrix cell as the CLI and the page show it: "READY v3", plus ", config differs" on a
        server off its model's most common config, ", config not read" where it could not be read,
        ", config not compared" where fewer than two servers' configs were read."""
        if view.problem:
            return "?"
        cell = view.cell(model)
        if cell is None:
            return "-"
        text = f"{cell[0]} v{cell[1]}" if cell[1] else cell[0]
        word = self._compared.word(view.name, model) if self.configs_compared else None
        return text + (f", config {word}" if word and word != "same" else "")

    def _cell_json(self, view: ServerView, model: str) -> dict[str, str] | None:
        """{"state", "version"}, and with configs compared "config": same, differs, not read or not
        compared."""
        cell = view.cell(model)
        if cell is None:
            return None
        found: dict[str, str] = {"state": cell[0], "version": cell[1]}
        word = self._compared.word(view.name, model) if self.configs_compared else None
        if word is not None:
            found["config"] = word
        return found

    @cached_property
    def _compared(self) -> Compared:
        ready = {model: tuple(s.name for s in self.answering
                              if (e := s.entry(model)) is not None and e.state is ModelState.READY)
                 for model in self.models}
        return Compared.of({s.name: s.configs for s in self.answering}, ready)

    @cached_property
    def _version_skews(self) -> dict[str, str]:
        lines = {}
        servers = self.answering
        for model in self.models:
            cells = {s.name: s.cell(model) for s in servers}
            states = Counter(c[0] if c else "NOT LOADED" for c in cells.values())
            versions = Counter(c[1] for c in cells.values() if c and c[0] == "READY")
            if len(states) <= 1 and len(versions) <= 1:
                continue
            line = f"{model}: READY on {states.get('READY', 0)} of {len(servers)}"
            if len(versions) > 1:
                line += "; " + ", ".join(f"v{v} on {n}" for v, n in versions.most_common())
            others = sorted(name for name, c in cells.items() if not c or c[0] != "READY")
            if others:
                line += "; not READY on " + ", ".join(others)
            lines[model] = line
        return lines

    def failed(self) -> list[str]:
        """One line per model that failed (not unloaded on purpose) on some server, even where
        it fails the same everywhere: "npu_resnet: failed on 3 of 3: <Triton's reason>"."""
        lines = []
        servers = self.answering
        for model in self.models:
            failures = [(s.name, e) for s in servers if (e := s.entry(model)) is not None
                        and e.state is ModelState.UNAVAILABLE and not is_idle(e)]
            if failures:
                reason = failures[0][1].reason.splitlines()[0] if failures[0][1].reason else "no reason given"
                where = "" if len(failures) == len(servers) else f" ({', '.join(n for n, _ in failures)})"
                lines.append(f"{model}: failed on {len(failures)} of {len(servers)}{where}: {reason}")
        unready = [s.name for s in servers if s.not_ready_but_serving]
        if unready and lines:  # strict readiness: a readiness probe sends these servers nothing
            lines[-1] += f" (Triton's readiness is false on {', '.join(unready)})"
        return lines

    def outliers(self) -> list[str]:
        lines = []
        for model in self.models:
            figures = {s.name: s.figures[model] for s in self.answering if model in s.figures}
            lines += _stand_out(model, figures)
        return lines

    def trust(self) -> list[str]:
        """One line per member: trusted (keyed) or read-only, and why."""
        return [f"{s.name} ({s.member.url}): {s.member.trust.word} — {s.member.trust.why}"
                for s in self.servers]

    def groups(self, label: str) -> dict[str, list[str]]:
        """Server names by a label (NODE, ASCEND, ...); servers without it under "-"."""
        grouped: dict[str, list[str]] = {}
        for s in self.servers:
            grouped.setdefault(s.member.labels.get(label, "-"), []).append(s.name)
        return dict(sorted(grouped.items()))

    def headline(self) -> str:
        total, down, odd, problems = len(self.servers), self.down(), self.outliers(), self.discovery.problems
        if not total:
            return "FLEET EMPTY: no server found" + (f" ({problems[0]})" if problems else "")
        if not self.answering:  # `geadmin fleet status` exits 3, as for no server at all
            return f"FLEET DOWN: none of {total} servers serving — first: {down[0]}"
        degraded, failed, unready = self.degraded(), self.failed(), self.unready()
        skewed = {*self._version_skews, *self._compared.skews}  # a model skewed both ways counts once
        counts = (f"{len(self.answering)} of {total} servers serving"
                  + (f", {len(unready)} of them not ready" if unready else "")
                  + f"; {len(failed)} model(s) failed, {len(skewed)} skewed")
        missing = self.missing()
        if missing:  # the source first: how many servers it hides is unknown, so no count leads
            return f"FLEET DEGRADED: {missing[0]} — found: {counts}"
        if degraded:
            return f"FLEET DEGRADED: {counts} — first: {degraded[0]}"
        warnings = [*self.configs_not_compared(), *odd]  # unread configs first: they qualify "the same"
        if warnings:
            return f"FLEET OK, with warnings: {warnings[0]}"
        counts = f"{_count(total, 'server')}, {_count(len(self.models), 'model')}"
        if not self.configs_compared:
            return f"FLEET OK: {counts}, the same state and version everywhere (configs not compared)"
        return f"FLEET OK: {counts}, the same everywhere"

    def to_json(self) -> dict[str, Any]:
        return {
            "fleet": self.discovery.fleet.name, "headline": self.headline(),
            "taken_s": round(self.taken_s, 3),
            "sources": [{"source": f.source, "found": len(f.members), "error": f.error,
                         "notes": list(f.notes)} for f in self.discovery.found],
            "servers": [{"name": s.name, "url": s.member.url, "source": s.member.source,
                         "trust": s.member.trust.word, "trusted": s.member.trust.trusted,
                         "why": s.member.trust.why,
                         "labels": dict(s.member.labels), "problem": s.problem,
                         "ready": bool(s.snapshot and s.snapshot.ready),
                         "metrics_error": s.metrics_error, "took_s": round(s.took_s, 3)}
                        for s in self.servers],
            "matrix": {model: {s.name: self._cell_json(s, model) for s in self.servers}
                       for model in self.models},
            "skew": self.skew(), "failed": self.failed(), "down": self.down(), "outliers": self.outliers(),
            "configs_compared": self.configs_compared and self._compared.said_compared(),
            "config_models": self._compared.counted() if self.configs_compared else None,
            "config_skew": self.config_skew(),
            "configs_not_compared": self.configs_not_compared(),
            "not_ready": self.unready(), "missing": self.missing(),
            "by_node": self.groups(NODE), "by_ascend": self.groups(ASCEND),
        }


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _stand_out(model: str, figures: dict[str, Figures]) -> list[str]:
    """Each replica whose latency or error rate is far from the median of its siblings (each
    with at least OUTLIER_MIN_REQUESTS requests counted)."""
    lines = []
    figures = {name: f for name, f in figures.items() if f.requests >= OUTLIER_MIN_REQUESTS}
    for name, mine in figures.items():
        siblings = [f for other, f in figures.items() if other != name]
        latencies = [f.latency_ms for f in siblings if f.latency_ms is not None]
        if mine.latency_ms is not None and latencies:
            typical = statistics.median(latencies)
            if mine.latency_ms > OUTLIER_FACTOR * typical and mine.latency_ms - typical >= OUTLIER_MIN_MS:
                kind = "p99" if mine.p99_ms is not None else "average latency"
                lines.append(f"{model} on {name}: {kind} {mine.latency_ms:.1f} ms, its "
                             f"{len(latencies)} sibling(s) {typical:.1f} ms")
        rates = [f.error_rate for f in siblings if f.error_rate is not None]
        if mine.error_rate is not None and rates:
            typical = statistics.median(rates)
            worse = mine.error_rate - typical >= OUTLIER_MIN_ERROR_RATE
            if worse and mine.error_rate > OUTLIER_FACTOR * typical:
                lines.append(f"{model} on {name}: {mine.error_rate:.0%} of requests failed, its "
                             f"{len(rates)} sibling(s) {typical:.0%}")
    return lines
