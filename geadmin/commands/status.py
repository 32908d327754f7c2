"""`geadmin status`: one-shot health summary; exit 0 only when everything expected is READY."""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field

from geadmin.commands.common import add_connection_args, client_for, server_from_args
from geadmin.logsource import log_source_for
from geadmin.overview import ServerSnapshot, best_reason, log_failures, take_snapshot
from geadmin.servers import ServerSpec, is_default_server, load_servers
from geadmin.triton import ModelEntry, ModelState

EXIT_OK = 0
EXIT_NOT_READY = 1
EXIT_UNREACHABLE = 3


@dataclass(frozen=True)
class StatusReport:
    snapshot: ServerSnapshot
    expected: tuple[str, ...] = ()
    log_reasons: dict[str, str] = field(default_factory=dict)  # from the Triton log, if known

    @property
    def missing(self) -> list[str]:
        """Expected models that are not READY."""
        ready = {m.name for m in self.snapshot.models if m.state is ModelState.READY}
        return [name for name in self.expected if name not in ready]

    @property
    def ok(self) -> bool:
        return self.snapshot.ready and not self.snapshot.error and not self.missing

    def exit_code(self) -> int:
        if not self.snapshot.reachable:
            return EXIT_UNREACHABLE
        return EXIT_OK if self.ok else EXIT_NOT_READY

    def to_json(self) -> dict[str, object]:
        snap = self.snapshot
        return {
            "url": snap.url,
            "ok": self.ok,
            "live": snap.live,
            "ready": snap.ready,
            "version": snap.info.version if snap.info else "",
            "error": snap.error,
            "models": [
                {**asdict(m), "state": m.state.value, "log_reason": self.log_reasons.get(m.name, "")}
                for m in snap.models
            ],
            "expected_not_ready": self.missing,
        }


def render_text(report: StatusReport) -> str:
    snap = report.snapshot
    yes = {True: "yes", False: "no"}
    lines = [
        f"Triton {snap.url}  version {snap.info.version if snap.info else '?'}  "
        f"live: {yes[snap.live]}  ready: {yes[snap.ready]}  ({snap.status})"
    ]
    if snap.error:
        lines.append(f"error: {snap.error}")
    by_state: dict[ModelState, list[ModelEntry]] = defaultdict(list)
    for model in snap.models:
        by_state[model.state].append(model)
    for state in ModelState:
        models = by_state.get(state, [])
        if not models:
            continue
        if state is ModelState.READY:
            lines.append(f"READY ({len(models)}): " + ", ".join(m.name for m in models))
            continue
        lines.append(f"{state.value} ({len(models)}):")
        lines += [f"  {m.name}" + (f" v{m.version}" if m.version else "")
                  + (f": {reason}" if (reason := best_reason(m.reason, report.log_reasons.get(m.name, "")))
                     else "")
                  for m in models]
    if report.missing:
        lines.append("expected but not READY: " + ", ".join(report.missing))
    lines.append("OK" if report.ok else "NOT OK")
    return "\n".join(lines)


def report_for(spec: ServerSpec, args: argparse.Namespace) -> StatusReport:
    log = log_source_for(spec.url, args.triton_log if not args.all or is_default_server(spec.url) else None)
    with client_for(spec, args) as client:
        snapshot = take_snapshot(spec.name, client)
    not_ready = [m.name for m in snapshot.models if m.state is not ModelState.READY]
    return StatusReport(snapshot, tuple(args.expect or ()), log_failures(log, not_ready))


def run(args: argparse.Namespace) -> int:
    if not args.all:
        report = report_for(server_from_args(args), args)
        print(json.dumps(report.to_json(), indent=2) if args.json else render_text(report))
        return report.exit_code()
    reports = [report_for(spec, args) for spec in load_servers()]
    if args.json:
        print(json.dumps([{"server": r.snapshot.name, **r.to_json()} for r in reports], indent=2))
    else:
        print("\n\n".join(f"[{r.snapshot.name}]\n{render_text(r)}" for r in reports))
    return max(r.exit_code() for r in reports)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "status",
        help="one-shot health summary (exit 0 only when ready and expected models are READY)",
        description="Exit codes: 0 ready and every --expect model READY; 1 reachable but not "
        "ready or an expected model not READY; 3 Triton unreachable.",
    )
    add_connection_args(parser)
    parser.add_argument("--all", action="store_true",
                        help="every configured server (GEADMIN_SERVERS_FILE / GEADMIN_TRITON_URLS); "
                        "the exit code is the worst one")
    parser.add_argument("--expect", nargs="+", metavar="NAME", help="models that must be READY")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.add_argument("--triton-log", default=None, metavar="PATH",
                        help="Triton's log file, to give reasons for models whose config Triton "
                        "could not parse (default: GEADMIN_TRITON_LOG, for the GEADMIN_TRITON_URL "
                        "server only)")
    parser.set_defaults(func=run)
