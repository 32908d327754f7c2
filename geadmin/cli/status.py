"""`geadmin status`: one-shot health verdict for scripts and on-call pages.

The first line is the verdict and, when it is not OK, the cause with its fix.
"""

from __future__ import annotations

import argparse
import json

from geadmin.cli.common import add_connection_args, client_for, target_from_args
from geadmin.diagnose.health import HealthRule, StatusReport, status_report, take_snapshots
from geadmin.stack.target import Target, configured_targets, live_stack

EXIT_OK = 0
EXIT_NOT_OK = 1
EXIT_UNREACHABLE = 3


def exit_code(report: StatusReport) -> int:
    if not report.snapshot.reachable:
        return EXIT_UNREACHABLE
    return EXIT_OK if report.ok else EXIT_NOT_OK


def verdict(report: StatusReport) -> str:
    """One line: OK, or NOT OK with the cause that decided it."""
    snap, reasons = report.snapshot, report.found.failed_reasons
    if not snap.reachable or snap.error:
        return f"NOT OK: {snap.error}"
    if report.missing:
        name = report.missing[0]
        states = [m.state.value for m in snap.models if m.name == name]
        state = states[0] if states else "not in the repository"
        more = f" (and {len(report.missing) - 1} more expected model(s))" if len(report.missing) > 1 else ""
        cause = f": {reasons[name]}" if name in reasons else ""
        return f"NOT OK: expected model {name!r} is {state}{cause}{more}"
    if not snap.live:
        return "NOT OK: Triton answers but is not live"
    if report.ok:
        ready = len(report.found.ready)
        scope = {HealthRule.EXPECT: f"every expected model READY ({', '.join(report.expected)})",
                 HealthRule.STRICT: "server ready, no model failed",
                 HealthRule.SERVER_READY: "server ready"}[report.rule]
        return f"OK: {scope}; {ready} model(s) READY"
    if report.found.failed:
        model, reason = report.found.failed[0]
        return f"NOT OK: model {model.name!r} failed: {reason}" + (
            f" (and {len(report.found.failed) - 1} more)" if len(report.found.failed) > 1 else "")
    return "NOT OK: Triton is live but not ready"


def render_text(report: StatusReport) -> str:
    snap, found = report.snapshot, report.found
    yes = {True: "yes", False: "no"}
    lines = [verdict(report),
             f"Triton {snap.url}  version {snap.info.version if snap.info else '?'}  "
             f"live: {yes[snap.live]}  ready: {yes[snap.ready]}  ({snap.status})  rule: {report.rule.value}"]
    if found.ready:
        lines.append(f"READY ({len(found.ready)}): " + ", ".join(m.name for m in found.ready))
    if found.failed:
        counted = report.rule is not HealthRule.EXPECT
        lines.append(f"FAILED ({len(found.failed)})" + ("" if counted else
                     ", not among the expected models (reported, not counted; --strict counts them)")
                     + ":")
        lines += [f"  {m.name}" + (f" v{m.version}" if m.version else "") + f" ({m.state.value}): {reason}"
                  for m, reason in found.failed]
    for model in found.changing:
        lines.append(f"{model.state.value}: {model.name}")
    if found.idle:
        lines.append(f"NOT LOADED ({len(found.idle)}): " + ", ".join(m.name for m in found.idle))
    if not snap.models and snap.reachable and not snap.error:
        lines.append("(the model repository is empty)")
    return "\n".join(lines)


def _reports(targets: list[Target], args: argparse.Namespace) -> list[StatusReport]:
    clients = [(t.spec.name, client_for(t, args)) for t in targets]
    try:
        snapshots = take_snapshots(clients)  # in parallel, as on the Overview
    finally:
        for _, client in clients:
            client.close()
    return [status_report(snap, log=t.log(), repository=t.repository, expected=args.expect or (),
                          strict=args.strict)
            for t, snap in zip(targets, snapshots, strict=True)]


def run(args: argparse.Namespace) -> int:
    if not args.all:
        (report,) = _reports([target_from_args(args)], args)
        print(json.dumps(report.to_json(), indent=2) if args.json else render_text(report))
        return exit_code(report)
    reports = _reports(configured_targets(live_stack()), args)
    if args.json:
        print(json.dumps([{"server": r.snapshot.name, **r.to_json()} for r in reports], indent=2))
    else:
        print("\n\n".join(f"[{r.snapshot.name}]\n{render_text(r)}" for r in reports))
    return max(exit_code(r) for r in reports)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="one-shot health verdict (exit 0 OK, 1 not OK, 3 unreachable)",
        description="Without --expect: OK when Triton is ready (its readiness is strict: one failed "
        "model makes it not ready). With --expect A B: OK when Triton is live and A and B are READY; "
        "other failures are printed but not counted (--strict counts them). Exit codes: 0 OK; 1 not "
        "OK; 2 bad usage; 3 Triton unreachable.",
    )
    add_connection_args(parser)
    parser.add_argument("--all", action="store_true",
                        help="every configured server (GEADMIN_SERVERS_FILE / GEADMIN_TRITON_URLS); "
                        "the exit code is the worst one")
    parser.add_argument("--expect", nargs="+", metavar="NAME", help="models that must be READY")
    parser.add_argument("--strict", action="store_true",
                        help="also fail when any model failed to load, expected or not")
    parser.set_defaults(func=run)
