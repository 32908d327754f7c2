"""`geadmin fleet`: many Triton servers as one (geadmin.fleet).

    geadmin fleet status [--fleet NAME | --source SRC ...] [--configs] [--json]
    geadmin fleet load|unload|reload MODEL [--wave-size N] [gate flags]
    geadmin fleet apply MODEL FILE [--repository DIR] [--wave-size N] [gate flags]
    geadmin fleet version MODEL VERSION [--repository DIR] [--wave-size N] [gate flags]
    geadmin fleet restore ID          put back every server an interrupted rollout changed
    geadmin fleet resume ID [gate flags]   run an interrupted rollout again, as planned

Every rollout is journaled in the audit log (its number: `journal_id`, and `rollout #ID` in
its progress). One cut short — the process killed, an error — is reported by the next
`geadmin fleet status` (DEGRADED, exit 4) with what changed where, until it is restored or
resumed.

Sources: servers (the configured servers), dns:HOST:PORT, prometheus:URL?job=JOB,
kubernetes:NAMESPACE?selector=LABELS. Fleets are named in the servers file ([[fleet]]
tables) or by GEADMIN_FLEET (the "default" fleet).

A discovered member is read-only (no key; a write that includes it is refused) until proven
to belong: workload, trusted_networks or tls_ca_file in its [[fleet]] (GEADMIN_FLEET_WORKLOAD,
GEADMIN_FLEET_TRUSTED_NETWORKS, GEADMIN_FLEET_TLS_CA_FILE). `status` says which and why.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geadmin.access import guard
from geadmin.audit import Actor, Origin
from geadmin.cli.common import format_table
from geadmin.cli.exit_codes import ExitCode
from geadmin.diagnose import rollouts
from geadmin.diagnose.verdict import Reason
from geadmin.errors import ConfigInvalidError, GeAdminError, RepositoryError
from geadmin.fleet.discovery import Discovery, discover, fleet_named
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.members import ASCEND, NODE
from geadmin.fleet.polling import POLL_TIMEOUT_S, close_clients, poll
from geadmin.fleet.restore import journal_servers, restore
from geadmin.fleet.resume import resume
from geadmin.fleet.rollout import Change, RolloutResult, rollout
from geadmin.fleet.status import FleetStatus
from geadmin.fleet.unresolved import fleet_headline, fleet_reasons
from geadmin.fleet.versions import roll_version
from geadmin.ops.models import rollout_recovery


def _discovery(args: argparse.Namespace) -> Discovery:
    repository = Path(args.repository).expanduser() if getattr(args, "repository", None) else None
    return discover(fleet_named(args.fleet, args.source or (), repository))


def _closed_at_start() -> None:
    """A rollout an earlier geadmin left cut short is closed and said
    (geadmin.ops.models.rollout_recovery)."""
    for note in rollout_recovery.close_rollouts(actor=Actor.os_user(Origin.CLI)):
        print(f"geadmin: note: {note}", file=sys.stderr)


def run_status(args: argparse.Namespace) -> int:
    _closed_at_start()
    try:
        status = poll(_discovery(args), timeout_s=args.timeout, configs=args.configs)
    except GeAdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    finally:
        close_clients()
    cut_short = fleet_reasons(status.discovery.fleet.name, [m.url for m in status.discovery.members])
    if args.json:
        document = status.to_json()
        document["headline"] = fleet_headline(document["headline"], cut_short)
        document["interrupted"] = [reason.to_json() for reason in cut_short]
        print(json.dumps(document, indent=2))
    else:
        print(render(status, cut_short))
    return exit_code(status, cut_short)


def exit_code(status: FleetStatus, cut_short: list[Reason] | None = None) -> int:
    """3 when no server is found or none serves; 4 for anything the headline calls DEGRADED
    (a source down or cut, a server down or not ready, a model failed or skewed — its state, version
    or, with --configs, its served config — a rollout cut short)."""
    if not status.servers or not status.answering:
        return ExitCode.UNREACHABLE
    return ExitCode.DEGRADED if status.degraded() or cut_short else ExitCode.OK


def render(status: FleetStatus, cut_short: list[Reason] | None = None) -> str:
    lines = [fleet_headline(status.headline(), cut_short or [])]
    if not status.configs_compared and status.answering:
        lines.append("  configs: not compared (`--configs` reads the config each server serves and "
                     "compares it)")
    for reason in cut_short or []:
        lines += [f"INTERRUPTED: {reason.text}", f"  restore: {reason.fix}"]
    lines += [f"  source {p}" for p in status.discovery.problems]
    lines += ["TRUST (trusted: keyed; read-only: no key, no writes):",
              *(f"  {line}" for line in status.trust())]
    for label, title in ((NODE, "node"), (ASCEND, "Ascend")):
        groups = status.groups(label)
        if groups and set(groups) != {"-"}:  # some source knows it
            lines.append(f"by {title}: " + "; ".join(f"{k}: {', '.join(v)}" for k, v in groups.items()))
    for title, found in (("DOWN", status.down()), ("FAILED", status.failed()),
                         ("NOT READY", status.unready()), ("SKEW", status.skew()),
                         ("CONFIG SKEW", status.config_skew()),
                         ("CONFIG NOT COMPARED", status.configs_not_compared()),
                         ("OUTLIERS", status.outliers())):
        if found:
            lines += [f"{title} ({len(found)}):", *(f"  {line}" for line in found)]
    if status.models:
        header = ["MODEL", *(s.name for s in status.servers)]
        rows = [[model, *(status.cell_text(s, model) for s in status.servers)] for model in status.models]
        lines.append(format_table([header, *rows]))
    return "\n".join(lines)


def run_change(args: argparse.Namespace) -> int:
    version = args.fleet_command == "version"
    change = Change.APPLY if version else Change(args.fleet_command)
    try:
        data = None
        if change is Change.APPLY and not version:
            try:
                data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
            except OSError as exc:
                raise RepositoryError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
        found = _discovery(args)
        for problem in found.problems:
            print(f"note: {problem}", file=sys.stderr)
        gate = GateSettings(requests=args.gate_requests, latency_margin=args.latency_margin,
                            latency_slack_ms=args.latency_slack_ms, error_margin=args.error_margin)
        say = (lambda _: None) if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
        common = {"wave_size": args.wave_size, "gate": gate, "auth": guard.os_user(),
                  "fleet": found.fleet.name, "progress": say, "timeout_s": args.timeout,
                  "validate": getattr(args, "validate", True)}
        if version:
            result = roll_version(found.members, args.model, args.version, **common)
        else:
            result = rollout(found.members, change, args.model, new_config=data, **common)
    except ConfigInvalidError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print("\n".join(f"  {f}" for f in exc.findings), file=sys.stderr)
        return ExitCode.USAGE
    except GeAdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    return _print_result(result, args.json)


def _print_result(result: RolloutResult, as_json: bool) -> int:
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(result.headline)
        print(format_table([["SERVER", "WAVE", "OUTCOME", "DETAIL"],
                            *([r.server, r.wave or "-", r.outcome, r.message] for r in result.rows)]))
    return ExitCode.OK if result.ok else ExitCode.FAILED


def run_restore(args: argparse.Namespace) -> int:
    """`geadmin fleet restore ID` and `geadmin fleet resume ID`: one interrupted rollout, on its
    servers as its journal names them (geadmin.fleet.restore.journal_servers)."""
    _closed_at_start()
    try:
        plan = rollouts.read(args.id).plan
        members = journal_servers(plan, fleet=args.fleet, sources=args.source or ())
        auth = guard.os_user()
        if args.fleet_command == "resume":
            gate = GateSettings(requests=args.gate_requests, latency_margin=args.latency_margin,
                                latency_slack_ms=args.latency_slack_ms, error_margin=args.error_margin)
            say = (lambda _: None) if args.json else (lambda line: print(line, file=sys.stderr, flush=True))
            result = resume(args.id, members, gate=gate, auth=auth, progress=say, timeout_s=args.timeout)
            return _print_result(result, args.json)
        found, problems, end = restore(args.id, members, auth=auth, timeout_s=args.timeout,
                                       gone=args.gone or ())
    except GeAdminError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    rows = [[s.name, s.wave, found.outcome(s.name), problems.get(s.name, "")] for s in found.plan.servers]
    if args.json:
        print(json.dumps({"journal_id": found.id, "ok": end.result == "rolled_back", "headline": end.headline,
                          "servers": [dict(zip(("server", "wave", "outcome", "message"), r, strict=True))
                                      for r in rows]}, indent=2))
    else:
        print(end.headline)
        print(format_table([["SERVER", "WAVE", "OUTCOME", "DETAIL"], *rows]))
    return ExitCode.OK if end.result == "rolled_back" else ExitCode.FAILED


def _add_target_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--fleet", default=None, metavar="NAME",
                        help="a fleet named in the servers file ([[fleet]]); default: GEADMIN_FLEET, "
                        "else the configured servers")
    parser.add_argument("--source", action="append", metavar="SRC",
                        help="an ad-hoc source instead of a named fleet (repeatable): servers, "
                        "dns:HOST:PORT, prometheus:URL?job=JOB, kubernetes:NAMESPACE?selector=LABELS")
    parser.add_argument("--json", action="store_true", help="print a JSON document")


def _add_rollout_args(parser: argparse.ArgumentParser) -> None:
    _add_target_args(parser)
    parser.add_argument("--wave-size", type=int, default=1, metavar="N", help="servers changed at once (1)")
    parser.add_argument("--gate-requests", type=int, default=3, metavar="N",
                        help="smoke requests per server before and after its wave, after one warm-up "
                        "(3; 0: READY only)")
    parser.add_argument("--latency-margin", type=float, default=1.0, metavar="F",
                        help="the gate requests' median may take (1+F) x before ... (1.0)")
    parser.add_argument("--latency-slack-ms", type=float, default=200.0, metavar="MS", help="... + MS (200)")
    parser.add_argument("--error-margin", type=float, default=0.0, metavar="F",
                        help="failed share of the gate requests allowed over before's (0)")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="S",
                        help="per server: a request, a load or an unload (60)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("fleet", help="many Triton servers as one: status, rollouts in waves",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    actions = parser.add_subparsers(dest="fleet_command", required=True, metavar="ACTION")
    status = actions.add_parser("status", help="the model x server matrix, skew, servers down, outliers",
                                description="Exit codes: 0 the same everywhere; 4 a source that did not "
                                "answer or left servers out, a server down or not ready, a model failed or "
                                "skewed (state, version, or with --configs the served config); 3 no server "
                                "found or none answers; 2 bad usage.")
    _add_target_args(status)
    status.add_argument("--configs", action="store_true",
                        help="also read the config each server serves of every model READY on two or more, "
                        "and compare them (config skew: DEGRADED); one request per model and server, so "
                        "off by default (docs: the fleet)")
    status.add_argument("--timeout", type=float, default=POLL_TIMEOUT_S, metavar="S",
                        help=f"per server ({POLL_TIMEOUT_S:g}): a slower one is reported, never waited for")
    status.set_defaults(func=run_status)
    for change in (Change.LOAD, Change.UNLOAD, Change.RELOAD):
        sub = actions.add_parser(change.value, help=f"{change.value} a model on every server, in waves "
                                 "with a health gate; stops and puts back at the first failed gate")
        sub.add_argument("model", metavar="MODEL")
        _add_rollout_args(sub)
        sub.set_defaults(func=run_change)
    apply = actions.add_parser("apply", help="apply a config on every server, in waves (the safe apply "
                               "per server); stops and restores every changed server at the first "
                               "failed gate")
    apply.add_argument("model", metavar="MODEL")
    apply.add_argument("file", metavar="FILE", help="the new config.pbtxt ('-': standard input)")
    apply.add_argument("--repository", default=None, metavar="DIR",
                       help="the model repository every server reads (a shared volume), as mounted here; "
                       "else each [[server]]'s repository")
    apply.add_argument("--no-validate", dest="validate", action="store_false",
                       help="apply even when `geadmin config validate` finds errors (Triton still checks it)")
    _add_rollout_args(apply)
    apply.set_defaults(func=run_change)
    version = actions.add_parser("version", help="serve a new model version everywhere without a gap: load "
                                 "it beside the old in waves (gated), then retire the old in waves")
    version.add_argument("model", metavar="MODEL")
    version.add_argument("version", metavar="VERSION", type=int,
                         help="its directory MODEL/VERSION/ must be in every repository")
    version.add_argument("--repository", default=None, metavar="DIR",
                         help="the model repository every server reads (a shared volume), as mounted here")
    _add_rollout_args(version)
    version.set_defaults(func=run_change)
    restore = actions.add_parser("restore", help="put back every server an interrupted rollout changed "
                                 "(configs byte-identical, reloaded), and end its journal",
                                 description="Exit codes: 0 every server put back; 1 some could not be "
                                 "(named); 2 bad usage, or nothing to restore.")
    restore.add_argument("id", metavar="ID", type=int, help="the rollout's number (`geadmin fleet status`)")
    _add_target_args(restore)
    restore.add_argument("--timeout", type=float, default=60.0, metavar="S",
                         help="per server: a request, a load or an unload (60)")
    restore.add_argument("--gone", action="append", metavar="SERVER",
                         help="a server of the rollout that is gone for good (a replica scaled in; "
                         "repeatable): nothing to reload there, its repository's config is put back "
                         "all the same")
    restore.set_defaults(func=run_restore)
    again = actions.add_parser("resume", help="run an interrupted rollout again as planned, in waves with "
                               "the health gate (an apply: while its config still validates)")
    again.add_argument("id", metavar="ID", type=int, help="the rollout's number (`geadmin fleet status`)")
    _add_rollout_args(again)
    again.set_defaults(func=run_restore)
