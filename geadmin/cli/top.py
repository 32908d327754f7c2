"""`geadmin top`: per model and version, what Triton is doing now — like `top`.

Every interval it scrapes Triton's /metrics, derives the window since the last scrape
(geadmin.telemetry.derive), judges each model's bottleneck (geadmin.telemetry.bottleneck, with
the npu_ge devices on the same page, and an ensemble pointed at its slowest member when the
configured server is the one measured) and redraws the table. `--once` takes two scrapes one
interval apart and prints one table; `--json` prints the window as JSON (with `--once` one
document, else one line per interval).

Exit codes: 0 (also on Ctrl-C), 1 when Triton's metrics cannot be read, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from geadmin.cli import terminal
from geadmin.cli.common import format_table, positive_seconds, triton_metrics
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import GeAdminError, TelemetryError
from geadmin.repository.trials import is_trial
from geadmin.stack.target import live_stack, resolve
from geadmin.telemetry.bottleneck import Bottleneck, find_bottlenecks, served_facts
from geadmin.telemetry.derive import ModelWindow, Window, derive
from geadmin.telemetry.history import watch
from geadmin.telemetry.sources.npu import devices_from_triton
from geadmin.telemetry.sources.scrape import Scrape, scrape
from geadmin.triton.client import TritonClient

DEFAULT_INTERVAL_S = 2.0
DEFAULT_TIMEOUT_S = 5.0
CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear screen
GIB = 1 << 30
COLUMNS = ("MODEL", "VER", "INFER/S", "REQ/S", "BATCH", "REQUEST ms", "QUEUE ms", "COMPUTE ms", "P99 ms",
           "PENDING", "FAIL/S", "VERDICT")


def run(args: argparse.Namespace) -> int:
    # Ctrl-C ends it, even when started where SIGINT is ignored (a shell's background job, CI):
    # Python keeps an inherited "ignore", and the loop would then never end.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    url, _ = triton_metrics(args)
    facts: Facts | None = None
    try:
        before = scrape(url, timeout_s=args.timeout)
        while True:
            time.sleep(args.interval)
            try:
                after = scrape(url, timeout_s=args.timeout)
            except TelemetryError as exc:
                if args.once:
                    raise
                _show_outage(args, url, exc)  # keep trying, keep the last good scrape
                continue
            if after.timestamp_s <= before.timestamp_s:  # the clock stepped back: a new baseline
                before = after
                continue
            window = derive(before, after)
            if facts is None:  # asked once: which models are ensembles changes only with a load
                facts = facts_for(url, window, args.timeout)
            _show(args, url, after, window, facts)
            if args.once:
                return ExitCode.OK
            before = after
    except TelemetryError as exc:
        print(f"geadmin top: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    except KeyboardInterrupt:
        return ExitCode.OK


# ensembles, queue delays (ms), the server, its repository (where trials' markers are read)
Facts = tuple[dict[str, tuple[str, ...]], dict[str, float], str, Path | None]


def facts_for(url: str, window: Window, timeout_s: float) -> Facts:
    """The ensembles among the window's models (so each points at its slowest member) and their
    batchers' max_queue_delay, asked of the configured server whose metrics `url` is; nothing
    when no configured server has them."""
    try:
        target = resolve(stack=live_stack())
        if target.urls().metrics != url:
            return {}, {}, "", None
        with TritonClient(target.spec.url, admin_key=target.spec.admin_key, timeout_s=timeout_s) as client:
            ensembles, delays = served_facts(client, {m.model for m in window.models})
            return ensembles, delays, target.spec.url, target.repository
    except GeAdminError:
        return {}, {}, "", None


def _show(args: argparse.Namespace, url: str, after: Scrape, window: Window,
          facts: Facts | None = None) -> None:
    ensembles, delays, server, repository = facts or ({}, {}, "", None)
    probes = watch.probe_rates(server, now_s=after.timestamp_s) if server else {}
    trials = {m.model for m in window.models if is_trial(repository, m.model)}  # no repository: by name
    verdicts = find_bottlenecks(window, devices_from_triton(after), ensembles, queue_delay_ms=delays,
                                probe_rates=probes, trials=trials)
    if args.json:
        print(json.dumps(as_json(url, window, verdicts), indent=2 if args.once else None), flush=True)
        return
    frame = render(url, window, verdicts)
    if not args.once:
        terminal.control(CLEAR)
    print(frame, flush=True)


def _show_outage(args: argparse.Namespace, url: str, exc: TelemetryError) -> None:
    if args.json:
        print(json.dumps({"metrics_url": url, "error": str(exc)}), flush=True)
    else:
        terminal.control(CLEAR)
        print(f"geadmin top — {url} — {_now()}\n{exc}\n(retrying every {args.interval:g}s)", flush=True)


# -- the table ----------------------------------------------------------------------------
def render(url: str, window: Window, verdicts: tuple[Bottleneck, ...]) -> str:
    """The frame: a header line, one row per model version (busiest first), then the verdicts."""
    by_key = {(b.model, b.version): b for b in verdicts}
    models = sorted(window.models, key=lambda m: (-(m.requests_per_s or 0.0), m.model, m.version))
    lines = [f"geadmin top — {url} — window {window.window_s:.1f}s — {_now()} — {_server(window)}"]
    if not models:
        lines.append("Triton reports no models.")
        return "\n".join(lines)
    lines.append(format_table([COLUMNS, *(_row(m, by_key.get((m.model, m.version))) for m in models)]))
    busy = [b for b in verdicts if b.has_traffic]
    if not busy:
        lines.append("No traffic in this window.")
    for b in busy:
        lines.append(f"{b.model}:{b.version} {b.verdict.value}: {b.why}")
        if b.fix:
            lines.append(f"    fix: {b.fix}")
        if b.note:
            lines.append(f"    note: {b.note}")
    return "\n".join(lines)


def _row(m: ModelWindow, b: Bottleneck | None) -> tuple[str, ...]:
    compute = [v for v in (m.avg_compute_input_ms, m.avg_compute_infer_ms, m.avg_compute_output_ms)
               if v is not None]
    p99 = m.quantiles_for("request")
    return (m.model, m.version, _num(m.inferences_per_s), _num(m.requests_per_s), _num(m.avg_batch_size),
            _num(m.avg_request_ms, 2), _num(m.avg_queue_ms, 2), _num(sum(compute) if compute else None, 2),
            _num(p99.p99_ms if p99 else None, 2), _num(m.pending_requests, 0), _num(m.failures_per_s),
            b.verdict.value if b else "-")


def _server(window: Window) -> str:
    s = window.server
    cpu = "-" if s.cpu_utilization_pct is None else f"{s.cpu_utilization_pct:.0f}%"
    memory = "-" if s.cpu_memory_used_bytes is None or s.cpu_memory_total_bytes is None else \
        f"{s.cpu_memory_used_bytes / GIB:.1f}/{s.cpu_memory_total_bytes / GIB:.1f} GiB"
    return f"CPU {cpu} · memory {memory}"


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _now() -> str:
    return f"{datetime.now(timezone.utc):%H:%M:%S} UTC"


# -- JSON ---------------------------------------------------------------------------------
def as_json(url: str, window: Window, verdicts: tuple[Bottleneck, ...]) -> dict[str, Any]:
    by_key = {(b.model, b.version): b for b in verdicts}
    models = []
    for m in window.models:
        entry = asdict(m)
        entry["quantiles"] = {stage: asdict(q) for stage, q in m.quantiles}
        entry["failures_by_reason"] = dict(m.failures_by_reason)
        b = by_key.get((m.model, m.version))
        entry["triage"] = None if b is None else {**asdict(b), "verdict": b.verdict.value}
        models.append(entry)
    return {"metrics_url": url, "start_s": window.start_s, "end_s": window.end_s, "window_s": window.window_s,
            "server": asdict(window.server), "models": models,
            "gone": [{"model": model, "version": version} for model, version in window.gone]}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "top", help="per model: throughput, latency breakdown and bottleneck, refreshed like top",
        description="Scrapes Triton's /metrics every --interval seconds and shows, per model and version, "
        "inferences/s, requests/s, average batch, average request / queue / compute latency, p99 (when "
        "Triton runs with summary_latencies=true), pending requests, failures and the bottleneck verdict. "
        "Ctrl-C quits.")
    parser.add_argument("--once", action="store_true",
                        help="take two scrapes one interval apart, print one table and exit")
    parser.add_argument("--interval", type=positive_seconds, default=DEFAULT_INTERVAL_S, metavar="S",
                        help=f"seconds between scrapes (default {DEFAULT_INTERVAL_S:g})")
    parser.add_argument("--json", action="store_true",
                        help="print the window as JSON (one line per interval unless --once)")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="Triton's metrics page (env GEADMIN_TRITON_METRICS_URL; default: the "
                        "running stack's, else http://127.0.0.1:8002/metrics)")
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds to wait for each scrape (default {DEFAULT_TIMEOUT_S:g})")
    parser.set_defaults(func=run)
