"""`geadmin sampler`: record Triton's telemetry into the workspace history (the Metrics page's
data) when `geadmin up` does not — e.g. next to a Triton started some other way.

One sampler per workspace (`geadmin up` runs one for its Triton): a second one is refused,
naming the first (exit 2). SIGTERM or Ctrl-C stops it (exit 0) within one scrape timeout.
Each tick also records the models' states and probes the READY ones (`geadmin.ops.probe`,
off with `--no-probes`); `--metrics-port` serves geadmin's own metrics for Prometheus.
"""

from __future__ import annotations

import argparse
import signal
import threading
import time
from types import FrameType

from geadmin import settings
from geadmin.cli.common import port_number, positive_seconds, triton_metrics
from geadmin.cli.exit_codes import ExitCode
from geadmin.domain import format_duration
from geadmin.fleet.discovery import fleet_named
from geadmin.fleet.probes import FleetProber
from geadmin.ops.probe import PROBE_TIMEOUT_S
from geadmin.ops.tune import trials as tune_trials
from geadmin.stack.recording import Recording, RecordingOptions
from geadmin.stack.target import live_stack, resolve
from geadmin.telemetry.history.sampler import SamplerOptions, default_npu_smi
from geadmin.telemetry.history.store import sources
from geadmin.triton.client import TritonClient


def options_from_args(args: argparse.Namespace) -> SamplerOptions:
    url, _ = triton_metrics(args)
    return SamplerOptions(
        metrics_url=url, home=settings.home(args.home),
        interval_s=settings.SAMPLE_INTERVAL_S.get(args.interval),
        retention_h=settings.HISTORY_RETENTION_H.get(args.retention_h),
        exporter_url=settings.NPU_EXPORTER_URL.get(), npu_smi=default_npu_smi())


def run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    if args.check:
        return check(options)
    stack = live_stack()
    target = resolve(url=args.url, admin_key=args.admin_key, stack=stack)
    # Probe only a Triton that was named (or the running stack's), never a guessed default.
    known = bool(args.url or settings.TRITON_URL.is_set() or stack)
    probe_interval_s = settings.PROBE_INTERVAL_S.get(args.probe_interval)
    fleet = FleetProber(fleet_named(args.fleet), home=options.home, interval_s=probe_interval_s) \
        if args.fleet is not None and not args.no_probes else None
    server = target.spec.url if known and fleet is None else None  # one named server (not a fleet's)
    try:
        recording = Recording(RecordingOptions(
            options, probe_url=None if args.no_probes else server,
            admin_key=target.spec.admin_key, probe_interval_s=probe_interval_s,
            watchers=[fleet.run] if fleet else [],
            watching=f"the READY models of every server of the {args.fleet} fleet" if fleet else "",
            metrics_port=settings.SAMPLER_METRICS_PORT.get(args.metrics_port), metrics_host=args.metrics_host,
            dashboard_url=settings.dashboard_url(), fault_url=server,
            repository=target.repository if server else None),
            say=lambda message: print(message, flush=True))
    except BaseException:  # refused (another sampler): nothing was started
        if fleet is not None:
            fleet.close()
        raise
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        spec = target.spec
        with TritonClient(spec.url, admin_key=spec.admin_key, timeout_s=PROBE_TIMEOUT_S) as client:
            left = tune_trials.at_start(target.repository, client=client if known else None,
                                        home=options.home)
        print("".join(f"{line}\n" for line in left), end="", flush=True)  # killed tuning runs' trial copies
        recording.serve_metrics()
        for line in recording.lines():
            print(line, flush=True)
        if not known and not args.no_probes and fleet is None:
            print("not probing: name the Triton with --url or GEADMIN_TRITON_URL", flush=True)
        print("Ctrl-C stops", flush=True)
        recording.start()
        while not stop.wait(0.5) and recording.alive():
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        recording.stop()
        if fleet is not None:
            fleet.close()
    print("sampler stopped", flush=True)
    return ExitCode.OK


def check(options: SamplerOptions) -> int:
    """For a container healthcheck: 0 when a sample (or a recorded gap) of this workspace is
    newer than three intervals, else 1 with the reason."""
    latest = max((s.last_at for s in sources(home=options.home) if s.last_at), default=None)
    age_s = None if latest is None else time.time() - latest.timestamp()
    if age_s is not None and age_s <= 3 * options.interval_s + 5:
        print(f"sampler: last sample {format_duration(age_s)} ago")
        return ExitCode.OK
    print("sampler: no sample recorded yet" if age_s is None
          else f"sampler: last sample {format_duration(age_s)} ago")
    return ExitCode.FAILED


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "sampler", help="record Triton's metrics into the workspace history (the Metrics page's data)",
        description="Scrapes Triton's /metrics every interval, derives per-model rates and latencies, "
        "and stores them (with server CPU/memory and NPU devices) in $GEADMIN_HOME/geadmin.db. "
        "`geadmin up` runs one for its Triton; run this one for a Triton started otherwise.")
    parser.add_argument("--interval", type=positive_seconds, default=None, metavar="SECONDS",
                        help="seconds between samples (env GEADMIN_SAMPLE_INTERVAL_S, default 2)")
    parser.add_argument("--retention-h", type=positive_seconds, default=None, metavar="HOURS",
                        help="hours of history kept (env GEADMIN_HISTORY_RETENTION_H, default 24)")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="Triton's metrics page (env GEADMIN_TRITON_METRICS_URL; default: the "
                        "running stack's, else http://127.0.0.1:8002/metrics)")
    parser.add_argument("--home", default=None,
                        help="workspace directory (env GEADMIN_HOME, default ~/.local/share/geadmin)")
    parser.add_argument("--url", default=None,
                        help="the Triton whose READY models are probed (default: the running stack's, "
                        "else GEADMIN_TRITON_URL)")
    parser.add_argument("--admin-key", default=None,
                        help="key for Triton's restricted APIs (the repository index the probes read)")
    parser.add_argument("--fleet", default=None, metavar="NAME",
                        help="probe every server of this fleet instead ('default' for GEADMIN_FLEET; "
                        "members found again every minute, so scaled-in replicas are probed too)")
    parser.add_argument("--no-probes", action="store_true",
                        help="record metrics only: no model states, no synthetic requests")
    parser.add_argument("--probe-interval", type=positive_seconds, default=None, metavar="SECONDS",
                        help="seconds between two probes of one model (env GEADMIN_PROBE_INTERVAL_S, "
                        "default 30, at least 5)")
    parser.add_argument("--metrics-port", type=port_number, default=None, metavar="PORT",
                        help="serve geadmin's own metrics (probes, model states, objectives) for "
                        "Prometheus on this port (env GEADMIN_SAMPLER_METRICS_PORT; default: not served)")
    parser.add_argument("--metrics-host", default="127.0.0.1", metavar="ADDRESS",
                        help="address the metrics endpoint binds (default 127.0.0.1; 0.0.0.0 in a container)")
    parser.add_argument("--check", action="store_true",
                        help="exit 0 when this workspace has a sample newer than three intervals (a "
                             "healthcheck), else 1")
    parser.set_defaults(func=run)
