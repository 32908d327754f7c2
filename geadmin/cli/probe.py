"""`geadmin probe`: send a small real request to every READY model and say which do not answer.

The same probe the sampler runs on its schedule (`geadmin.ops.probe`); results are recorded
in the workspace, so the Overview, `geadmin status` and geadmin's metrics see them. `--once`
is one round (exit 1 when a probe fails, 3 when Triton does not answer); without it, a round
every GEADMIN_PROBE_INTERVAL_S until Ctrl-C, failures printed as they happen.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from types import FrameType

from geadmin import settings
from geadmin.cli.common import add_connection_args, client_for, format_table, target_from_args
from geadmin.ops.probe import Prober, ProbeRound

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3


def headline(round_: ProbeRound) -> str:
    if round_.error:
        return f"DOWN: Triton at {round_.server} does not answer: {round_.error}"
    failed = round_.failed
    if failed:
        first = failed[0]
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return f"FAILED: {first.model} is READY but does not answer: {first.error.splitlines()[0]}{more}"
    if not round_.probes:
        return "OK: no READY model to probe" + (f" ({len(round_.skipped)} skipped)" if round_.skipped else "")
    return f"OK: {len(round_.probes)} READY model(s) answered"


def render(round_: ProbeRound) -> str:
    lines = [headline(round_)]
    rows = [("model", "result", "latency", "input", "error")]
    for probe in round_.probes:
        latency = f"{probe.latency_ms:.1f} ms" if probe.latency_ms is not None else "-"
        rows.append((probe.model, "ok" if probe.ok else "FAILED", latency, probe.input,
                     probe.error.splitlines()[0] if probe.error else ""))
    rows += [(model, "skipped", "-", "-", why) for model, why in sorted(round_.skipped.items())]
    if len(rows) > 1:
        lines.append(format_table(rows))
    return "\n".join(lines)


def exit_code(round_: ProbeRound) -> int:
    return EXIT_UNREACHABLE if round_.error else (EXIT_FAILED if round_.failed else EXIT_OK)


def run(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    interval_s = float(settings.get("PROBE_INTERVAL_S", args.interval))
    with client_for(target, args) as client:
        prober = Prober(client, home=settings.home(), interval_s=interval_s)
        if args.once:
            return _report(prober.run(force=True), args.json)
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            print(f"probing the READY models of {client.url} every {prober.interval_s:g}s; Ctrl-C stops",
                  flush=True)
            while not stop.is_set():
                round_ = prober.run()
                if round_.probes or round_.error:
                    _report(round_, args.json)
                stop.wait(min(prober.interval_s, 5.0))
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return EXIT_OK


def _report(round_: ProbeRound, as_json: bool) -> int:
    print(json.dumps(round_.to_json(), indent=2) if as_json else render(round_), flush=True)
    return exit_code(round_)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "probe", help="send a small real request to every READY model: which are READY but not answering",
        description="Sends each READY model its saved example request (saved from the Playground) or "
        "zeros shaped from its metadata, ensembles end to end, and records the results in the "
        "workspace (the Overview, geadmin status and geadmin's metrics read them). Models under a "
        "load test are skipped. Exit codes with --once: 0 every probe answered; 1 a READY model did "
        "not answer; 3 Triton does not answer; 2 bad usage.")
    add_connection_args(parser, log_and_repository=False)
    parser.add_argument("--once", action="store_true", help="one round, then exit (1 when a probe fails)")
    parser.add_argument("--interval", type=float, default=None, metavar="SECONDS",
                        help="seconds between two probes of one model (env GEADMIN_PROBE_INTERVAL_S, "
                        "default 30, at least 5)")
    parser.set_defaults(func=run)
