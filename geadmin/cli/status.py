"""`geadmin status`: one-shot verdict for scripts and on-call pages — OK, DEGRADED or DOWN.

The verdict is `geadmin.stack.server_verdict.server_verdict` (`geadmin.diagnose.evidence.assess`
with the embedded stack's account of its Triton), the same function behind the Overview's
banner and the sidebar. The first line is the verdict and what put it there; the exit code
says which one (documented in `--help`).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from geadmin.cli.common import add_connection_args, client_for, target_from_args
from geadmin.cli.exit_codes import ExitCode, help_text
from geadmin.cli.exit_codes import worst as worst_code
from geadmin.diagnose.evidence import EvidenceSources
from geadmin.diagnose.health import take_snapshots
from geadmin.diagnose.verdict import Level, Verdict, VerdictRule
from geadmin.errors import FleetError
from geadmin.fleet import readonly
from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.members import Member
from geadmin.stack.server_verdict import ServerVerdict, server_verdict
from geadmin.stack.target import Target, configured_targets, live_stack
from geadmin.stack.workspace import StackInfo


def exit_code(verdict: Verdict, strict: bool = False) -> int:
    if verdict.level is Level.OK:
        return ExitCode.OK
    if VerdictRule.UNREACHABLE in verdict.rules:
        return ExitCode.UNREACHABLE
    if verdict.level is Level.DEGRADED and not strict:
        return ExitCode.DEGRADED
    return ExitCode.FAILED


def render_text(verdict: Verdict, outage: str = "", crash: str = "") -> str:
    snap, found = verdict.snapshot, verdict.found
    yes = {True: "yes", False: "no"}
    # The cause first, as the Overview's banner says it (ServerVerdict.headline); then the call that failed.
    lines = [f"{verdict.level.value}: {outage}", f"  {verdict.headline.split(': ', 1)[-1]}"] if outage \
        else [verdict.headline]
    if crash:
        lines.append(f"CRASHED: {crash}")  # right under the verdict: what happened to the server
    first = verdict.reasons[0] if verdict.reasons else None
    if first is not None and first.fix and not outage and first.rule is not VerdictRule.DRIFT:
        lines.append(f"  fix: {first.fix}")  # as the Overview's banner; a drift's fix is in its own lines
    lines.append(f"Triton {snap.url}  version {snap.info.version if snap.info else '?'}  "
                 f"live: {yes[snap.live]}  ready: {yes[snap.ready]}  ({snap.status})  "
                 f"rules: {', '.join(r.value for r in verdict.rules) or 'none broken'}")
    if len(verdict.reasons) > 1:
        lines.append(f"{verdict.level.value} because ({len(verdict.reasons)}):")
        lines += [f"  [{r.rule.value}] {r.text}" for r in verdict.reasons]
    silent = [(m.name, verdict.probes[m.name]) for m in found.ready
              if m.name in verdict.probes and not verdict.probes[m.name].ok]
    answering = [m.name for m in found.ready if m.name not in dict(silent)]  # each model counted once
    if answering:
        lines.append(f"READY ({len(answering)}): " + ", ".join(answering))
    if silent:
        lines.append(f"READY, NOT ANSWERING ({len(silent)}):")
        lines += [f"  {name}: " + (probe.error.splitlines()[0] if probe.error else "no answer")
                  for name, probe in silent]
    if found.failed:
        lines.append(f"FAILED ({len(found.failed)}):")
        lines += [f"  {m.name}" + (f" v{m.version}" if m.version else "") + f" ({m.state.value}): {reason}"
                  for m, reason in found.failed]
    for drift in verdict.drift:
        lines.append(f"DRIFT: {drift.model}: {drift.headline}")
        lines.append(f"  fix: {drift.fix}")
    for model in found.changing:
        stuck = " (stuck)" if model.name in verdict.stuck else ""
        lines.append(f"{model.state.value}{stuck}: {model.name}")
    if found.idle:
        shown = [m.name + (f" ({verdict.unloaded[m.name]})" if verdict.unloaded.get(m.name) else "")
                 for m in found.idle]
        lines.append(f"NOT LOADED ({len(found.idle)}): " + ", ".join(shown))
    if verdict.trials:
        lines.append("TUNING TRIALS (geadmin tune's own copies, not judged): "
                     + ", ".join(f"{m.name} ({m.state.value})" for m in verdict.trials))
    if not snap.models and snap.reachable and not snap.error:
        lines.append("(the model repository is empty)")
    return "\n".join(lines)


def _verdicts(targets: list[Target], args: argparse.Namespace, stack: StackInfo | None,
              members: Sequence[Member] | None = None) -> list[ServerVerdict]:
    """`members`: the fleet members behind `targets` (`--fleet`): each polled as its trust
    allows (geadmin.fleet.readonly: a read-only one from Triton's open endpoints, no key, no
    drift check), never DEGRADED for an index it may not read."""
    if members is None:
        clients = [(t.spec.name, client_for(t, args)) for t in targets]
        trusted = [True] * len(targets)
    else:
        clients = [(t.spec.name, readonly.client_for(m, args.timeout)) for t, m in zip(targets, members,
                                                                                       strict=True)]
        trusted = [m.trust.trusted for m in members]
    try:
        snapshots = take_snapshots(clients)  # in parallel, as on the Overview
        return [server_verdict(snap, EvidenceSources(client if keyed else None, t.log(), t.repository,
                                                     metrics_url=t.urls().metrics, also=t.urls().known()),
                               stack,
                               expected=args.expect or ())
                for t, (_, client), snap, keyed in zip(targets, clients, snapshots, trusted, strict=True)]
    finally:
        for _, client in clients:
            client.close()


def fleet_targets(name: str) -> tuple[list[Target], list[Member], list[str]]:
    """Every member of a named fleet (geadmin.fleet.discovery), each with its repository, and
    the problems of its sources: one that does not answer is said on stderr and its servers are
    left out (FleetError when no server is found at all)."""
    found = discover(fleet_named(name))
    for problem in found.problems:
        print(f"fleet {name}: {problem}", file=sys.stderr)
    if not found.members:
        raise FleetError(f"fleet {name!r} has no server: " + ("; ".join(found.problems) or
                         "its sources found none") + "; check the fleet's sources ([[fleet]] in the servers "
                         "file, or GEADMIN_FLEET)")
    members = list(found.members)
    targets = [Target(m.spec, repository=m.repository, source=f"fleet {name}") for m in members]
    return targets, members, found.problems


def worst(codes: Sequence[int], missing: Sequence[str] = (), strict: bool = False) -> int:
    """The worst of the servers' exit codes; a fleet source that did not answer or left servers
    out makes it at least DEGRADED (1 with --strict): servers nobody judged are never OK."""
    if missing:
        codes = [*codes, ExitCode.FAILED if strict else ExitCode.DEGRADED]
    return worst_code(codes)


def run(args: argparse.Namespace) -> int:
    stack = live_stack()
    many = args.all or args.fleet is not None
    members: list[Member] | None = None
    missing: list[str] = []
    if args.fleet is not None:
        try:
            targets, members, missing = fleet_targets(args.fleet)
        except FleetError as exc:  # no fleet server at all: nothing answers (3), not bad usage (2)
            print(f"geadmin: error: {exc}", file=sys.stderr)
            return ExitCode.UNREACHABLE
    else:
        targets = configured_targets(stack) if args.all else [target_from_args(args)]
    verdicts = _verdicts(targets, args, stack, members)
    if args.json:
        documents = [v.to_json() for v in verdicts]
        if many:
            print(json.dumps([{"server": v.verdict.snapshot.name, **doc}
                              for v, doc in zip(verdicts, documents, strict=True)], indent=2))
        else:
            print(json.dumps(documents[0], indent=2))
    elif many:
        if missing:  # the first line: servers nobody judged, before the ones that look fine
            print(f"FLEET DEGRADED: not every server was judged — {missing[0]}; "
                  f"{len(verdicts)} judged below\n")
        print("\n\n".join(f"[{v.verdict.snapshot.name}]\n{render_text(v.verdict, v.outage, v.crash)}"
                          for v in verdicts))
    else:
        print(render_text(verdicts[0].verdict, verdicts[0].outage, verdicts[0].crash))
    return worst([exit_code(v.verdict, args.strict) for v in verdicts], missing, args.strict)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="one-shot verdict: OK (exit 0), DEGRADED (4), DOWN (1; 3 unreachable)",
        description="The server's verdict, the same one the dashboard's Overview and sidebar show. "
        "OK: Triton serves, no model failed, none lost READY without an operator's unload, none is "
        "stuck, none serves a config that differs from its file. Triton's own readiness is not "
        "trusted for this: in explicit model-control mode a failed load does not make it not ready. "
        + help_text("status"),
    )
    add_connection_args(parser)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--all", action="store_true",
                       help="every configured server (GEADMIN_SERVERS_FILE / GEADMIN_TRITON_URLS); "
                       "the exit code is the worst one")
    group.add_argument("--fleet", default=None, metavar="NAME",
                       help="every server of a fleet ([[fleet]] in the servers file, 'default' for "
                       "GEADMIN_FLEET), each with its own verdict; the exit code is the worst one")
    parser.add_argument("--expect", nargs="+", metavar="NAME",
                        help="models that must be READY: one that is not makes the verdict DOWN (exit 1)")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 (DOWN) for DEGRADED too, for scripts that know only zero and non-zero")
    parser.set_defaults(func=run)
