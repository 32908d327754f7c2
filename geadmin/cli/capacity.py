"""`geadmin capacity [MODEL]`: per model, the saturation rate at its objective, the recorded
peak, the headroom, the trend and when it would saturate, and what the forecast peak needs;
per NPU, the memory left. Every figure says where it came from. `--measure` runs a short
sweep on a trial copy (the live model untouched); `--fleet NAME` reads every member."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geadmin.access import guard
from geadmin.cli.common import add_connection_args, client_for, format_table, target_from_args
from geadmin.cli.exit_codes import ExitCode
from geadmin.diagnose.capacity import CapacityReport, Figure, ModelCapacity
from geadmin.errors import TritonUnreachableError
from geadmin.fleet.capacity import fleet_capacity
from geadmin.fleet.discovery import discover, fleet_named
from geadmin.interrupts import as_interrupts
from geadmin.ops.capacity.report import CapacityOptions, capacity_report
from geadmin.telemetry.sources.detect import NpuSources

GIB = float(1 << 30)


def _value(figure: Figure, digits: int = 3) -> str:
    return "-" if figure.value is None else f"{figure.value:.{digits}g} {figure.unit}".strip()


def render_model(m: ModelCapacity) -> list[str]:
    lines = [f"{m.model}: {m.objective}" + (f"  << {m.short}" if m.short else "")]
    if m.without_objective:
        return lines
    rows: list[tuple[str, ...]] = [("figure", "value", "source")]
    for name, figure in (("saturation rate", m.saturation), ("recorded peak", m.peak),
                         ("recorded mean", m.mean),
                         ("headroom", m.headroom), ("trend", m.trend), ("forecast peak", m.forecast_peak)):
        rows.append((name, _value(figure), figure.source))
    if m.needs is not None:
        for name, figure in (("needs instances", m.needs.instances), ("needs NPUs", m.needs.npus),
                             ("needs replicas", m.needs.replicas)):
            rows.append((name, _value(figure, 4), figure.source))
    lines += ["  " + line for line in format_table(rows).splitlines()]
    if m.saturates:
        lines.append(f"  saturates: {m.saturates}")
    lines += [f"  note: {note}" for note in m.notes]
    return lines


def render(report: CapacityReport) -> str:
    lines = [f"capacity on {report.server} (forecast over {report.horizon_days:g} days; headroom wanted "
             f">= {report.min_headroom:g}x)"]
    for m in report.models:
        lines += render_model(m)
    if not report.models:
        lines.append("no READY models")
    if report.npus:
        rows: list[tuple[str, ...]] = [("NPU", "used", "total", "free", "models", "source")]
        for n in report.npus:
            rows.append((str(n.device), "-" if n.used_bytes is None else f"{n.used_bytes / GIB:.1f} GiB",
                         "-" if n.total_bytes is None else f"{n.total_bytes / GIB:.1f} GiB",
                         "-" if n.free_ratio is None else f"{n.free_ratio:.0%}", n.models, n.source))
        lines.append(format_table(rows))
    elif report.npu_source:
        lines.append(f"NPU memory: {report.npu_source}")
    lines += [f"note: {note}" for note in report.notes]
    return "\n".join(lines)


def _options(args: argparse.Namespace) -> CapacityOptions:
    return CapacityOptions(window_h=args.window_h, horizon_days=args.horizon_days,
                           min_headroom=args.min_headroom, measure=args.measure, start_rps=args.start_rps,
                           window_ms=args.window_ms)


def _run_fleet(args: argparse.Namespace) -> int:
    repository = Path(args.repository).expanduser() if args.repository else None
    members = fleet_capacity(discover(fleet_named(args.fleet, (), repository)), model=args.model or None,
                             options=_options(args), timeout_s=args.timeout)
    if args.json:
        print(json.dumps([{"member": m.member, "url": m.url, "error": m.error,
                           "report": m.report.to_json() if m.report else None} for m in members], indent=2))
    else:
        for m in members:
            print(f"== {m.member} ({m.url})")
            print(render(m.report) if m.report else f"not read: {m.error}")
    if not members or all(m.report is None for m in members):
        return ExitCode.UNREACHABLE
    short = any(m.report is None or m.report.short for m in members)
    return ExitCode.DEGRADED if short else ExitCode.OK


def run(args: argparse.Namespace) -> int:
    if args.fleet:
        return _run_fleet(args)
    target = target_from_args(args)
    metrics = args.metrics_url or target.urls().metrics
    try:
        with as_interrupts(), client_for(target, args) as client:  # like Ctrl-C: a sweep's trial is removed
            report = capacity_report(
                client, model=args.model or None, repository=target.repository, options=_options(args),
                source=metrics, npu_sources=NpuSources(triton_metrics_url=metrics, timeout_s=args.timeout),
                auth=guard.os_user() if args.measure else None, admin_key=target.spec.admin_key,
                progress=lambda text: print(text, file=sys.stderr, flush=True))
    except TritonUnreachableError as exc:
        print(f"geadmin: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    print(json.dumps(report.to_json(), indent=2) if args.json else render(report))
    return ExitCode.DEGRADED if report.short else ExitCode.OK


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "capacity", help="headroom at each model's objective: saturation rate, recorded peak, trend, needs",
        description="Per model with a p99 objective: the highest request rate that holds it (a saved sweep, "
        "or --measure: a short sweep with perf_analyzer on a trial copy), the recorded peak and mean over "
        "the window (the sampler's history, or Prometheus with GEADMIN_PROMETHEUS_URL), the headroom, the "
        "least-squares trend with its standard error, when the peak would saturate at that trend, and the "
        "instances, NPUs and replicas the forecast peak needs; per NPU the memory left. Every figure names "
        "its source. Exit 0 when every model has its headroom, 4 when one is under it or forecast to "
        "saturate within the horizon.")
    parser.add_argument("model", nargs="?", default="", help="one model (default: every READY model)")
    add_connection_args(parser)
    parser.add_argument("--fleet", default=None, metavar="NAME",
                        help="every member of a fleet named in the servers file, read only")
    parser.add_argument("--measure", action="store_true",
                        help="measure the saturation rate now: a short sweep on a trial copy (operator)")
    parser.add_argument("--window-h", type=float, default=24.0, help="history window in hours (default 24)")
    parser.add_argument("--horizon-days", type=float, default=30.0,
                        help="how far the trend is carried (default 30 days)")
    parser.add_argument("--min-headroom", type=float, default=1.2,
                        help="saturation / recorded peak below this needs attention (default 1.2)")
    parser.add_argument("--start-rps", type=float, default=1.0,
                        help="the sweep's first rate when no peak is recorded (default 1 req/s)")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="the Triton metrics page its history is recorded under (env "
                        "GEADMIN_TRITON_METRICS_URL; default: the server's own, as `geadmin npu` finds it)")
    parser.add_argument("--home", default=None, metavar="DIR",
                        help="workspace: objectives, history, saved sweeps (env GEADMIN_HOME)")
    parser.add_argument("--window-ms", type=int, default=1000, help="perf_analyzer's window per step (ms)")
    parser.set_defaults(func=run)
