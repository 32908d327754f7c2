"""`geadmin audit`: the Audit page for scripts and terminals: who changed what, filtered,
with each row's config diff on request, exported as CSV."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geadmin import audit
from geadmin.audit import AuditEntry
from geadmin.cli.common import format_table, local_time
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import GeAdminError
from geadmin.repository import atomic

MESSAGE_WIDTH = 100


def run_audit(args: argparse.Namespace) -> int:
    try:
        since = audit.parse_since(args.since) if args.since else None
        entries = audit.query(since=since, model=args.model, action=args.action, limit=args.limit)
        if args.csv == "-":
            audit.write_csv(entries, sys.stdout)
            return ExitCode.OK
        if args.csv:
            atomic.atomic_write(Path(args.csv).expanduser(), audit.csv_text(entries).encode("utf-8"))
            print(f"wrote {len(entries)} audit rows to {args.csv}", file=sys.stderr)
            return ExitCode.OK
    except GeAdminError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "kind": type(exc).__name__}, indent=2))
        print(f"geadmin: error: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    if args.json:
        print(json.dumps([entry.record() for entry in entries], indent=2))
    elif not entries:
        filtered = args.since or args.model or args.action
        print("no audit rows match" if filtered else "the audit log is empty")
    else:
        print(render_audit(entries, diffs=args.diff))
    return ExitCode.OK


def render_audit(entries: list[AuditEntry], *, diffs: bool = False) -> str:
    header = ("WHEN", "WHO", "ORIGIN", "MODEL", "ACTION", "RESULT", "SERVER", "MESSAGE")
    rows = [(local_time(e.at), e.who, e.origin, e.model, e.action, e.result, e.server,
             _first_line(e.message)) for e in entries]
    if not diffs:
        return format_table([header, *rows])
    blocks = []
    for entry, row in zip(entries, rows, strict=True):
        block = format_table([header, row])
        if entry.diff:
            block += "\n" + "\n".join(f"    {line}" for line in entry.diff.splitlines())
        blocks.append(block)
    return "\n\n".join(blocks)


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= MESSAGE_WIDTH else line[:MESSAGE_WIDTH - 1] + "…"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("audit", help="who changed what: the audit log (filter, export)",
                                   description="The audit log of the workspace ($GEADMIN_HOME/geadmin.db), "
                                   "newest first.")
    parser.add_argument("--since", default=None, metavar="WHEN",
                        help="a duration (30m, 2h, 7d) or a date / time (2025-01-31, 2025-01-31T14:00)")
    parser.add_argument("--model", default=None, help="only this model's rows")
    parser.add_argument("--action", default=None, help="only this action (apply, rollback, load, ...)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N rows")
    parser.add_argument("--diff", action="store_true", help="print each row's config diff")
    parser.add_argument("--json", action="store_true", help="print a JSON document (diffs included)")
    parser.add_argument("--csv", default=None, metavar="FILE", help="export the rows as CSV ('-': stdout)")
    parser.set_defaults(func=run_audit)
