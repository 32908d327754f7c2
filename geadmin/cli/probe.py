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
from collections.abc import Callable
from types import FrameType

from geadmin import settings
from geadmin.cli.common import add_connection_args, client_for, format_table, target_from_args
from geadmin.cli.exit_codes import ExitCode, worst
from geadmin.fleet.discovery import fleet_named
from geadmin.fleet.probes import FleetProber
from geadmin.ops.probe import MIN_INTERVAL_S, Prober, ProbeRound


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
    return ExitCode.UNREACHABLE if round_.error else (ExitCode.FAILED if round_.failed else ExitCode.OK)


def run(args: argparse.Namespace) -> int:
    interval_s = settings.PROBE_INTERVAL_S.get(args.interval)
    if args.fleet is not None:
        fleet = FleetProber(fleet_named(args.fleet), home=settings.home(), interval_s=interval_s)
        try:
            return _probe(lambda force: fleet.run(force=force), f"the {args.fleet} fleet", interval_s, args,
                          unprobed=lambda: fleet.problems)
        finally:
            fleet.close()
    target = target_from_args(args)
    with client_for(target, args) as client:
        prober = Prober(client, home=settings.home(), interval_s=interval_s, repository=target.repository)
        return _probe(lambda force: [prober.run(force=force)], client.url, interval_s, args)


def _probe(rounds: Callable[[bool], list[ProbeRound]], what: str, interval_s: float,
           args: argparse.Namespace, unprobed: Callable[[], list[str]] = list) -> int:
    """`--once`: one forced round, its exit code; else a round every interval until a signal.
    `unprobed`: a fleet's sources that did not answer or left servers out (never OK: 4 at least)."""
    many = args.fleet is not None
    if args.once:
        done = rounds(True)
        missing = unprobed()
        if missing:  # the first line, before the servers that look fine
            print(f"FLEET DEGRADED: not every server was probed — {missing[0]}"
                  + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""), flush=True)
        code = _report(done, args.json, many)
        return worst((code, ExitCode.DEGRADED if missing else ExitCode.OK))
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"probing the READY models of {what} every {max(MIN_INTERVAL_S, interval_s):g}s; Ctrl-C stops",
              flush=True)
        while not stop.is_set():
            done = [r for r in rounds(False) if r.probes or r.error]
            if done:
                _report(done, args.json, many)
            stop.wait(min(interval_s, 5.0))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return ExitCode.OK


def _report(rounds: list[ProbeRound], as_json: bool, many: bool) -> int:
    """One server's round as before; a fleet's one section per server, the worst exit code."""
    if as_json:
        documents = [r.to_json() for r in rounds]
        print(json.dumps(documents if many else documents[0], indent=2), flush=True)
    elif many:
        print("\n\n".join(f"[{r.server}]\n{render(r)}" for r in rounds), flush=True)
    else:
        print(render(rounds[0]), flush=True)
    return worst(exit_code(r) for r in rounds)  # a fleet exits with its worst server's code


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
    parser.add_argument("--fleet", default=None, metavar="NAME",
                        help="every server of a fleet ('default' for GEADMIN_FLEET), in parallel; one "
                        "section per server, the worst exit code")
    parser.add_argument("--interval", type=float, default=None, metavar="SECONDS",
                        help="seconds between two probes of one model (env GEADMIN_PROBE_INTERVAL_S, "
                        "default 30, at least 5)")
    parser.set_defaults(func=run)
