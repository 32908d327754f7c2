"""`geadmin models list|load|unload|reload`: the Models page, for scripts.

Exit 0 when every named model ended as asked, 1 when any action failed (the real reason
is printed, from Triton's log when `--triton-log` / GEADMIN_TRITON_LOG names it), and
3 when Triton is unreachable.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from geadmin.audit import Actor, Origin
from geadmin.cli.common import add_connection_args, client_for, positive_seconds, target_from_args
from geadmin.diagnose.explain import explanation_dict
from geadmin.diagnose.rows import ModelRow, collect_rows
from geadmin.errors import TritonError, TritonUnreachableError
from geadmin.ops.actions import Action, run_action
from geadmin.triton.client import DEFAULT_LOAD_TIMEOUT_S

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3


def run_list(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    try:
        with client_for(target, args) as client:
            rows = collect_rows(client, target.repository, target.log())
    except TritonError as exc:
        print(f"geadmin: error: {exc}", file=sys.stderr)
        return EXIT_UNREACHABLE if isinstance(exc, TritonUnreachableError) else EXIT_FAILED
    if args.json:
        print(json.dumps([row.record() for row in rows], indent=2))
    else:
        print(render_table(rows))
    return EXIT_OK


def render_table(rows: list[ModelRow]) -> str:
    if not rows:
        return "(the model repository is empty)"
    columns = ["name", "versions", "state", "backend/platform", "max batch size", "instances",
               "dynamic batching", "last inference", "reason"]
    records = [{k: "" if v is None else str(v) for k, v in row.record().items()} for row in rows]
    widths = {c: max(len(c), *(len(r[c]) for r in records)) for c in columns[:-1]}
    lines = ["  ".join(c.upper().ljust(widths.get(c, 0)) for c in columns).rstrip()]
    lines += ["  ".join(r[c].ljust(widths.get(c, 0)) for c in columns).rstrip() for r in records]
    return "\n".join(lines)


def run_action_command(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    with client_for(target, args) as client:
        results = run_action(client, Action(args.action), args.names,
                             dependents=getattr(args, "dependents", False),
                             log=target.log(), repository=target.repository,
                             progress=_progress_printer(args), actor=Actor.os_user(Origin.CLI))
    if args.json:
        print(json.dumps([{"name": r.name, "action": r.action.value, "ok": r.ok, "message": r.message,
                           "explanation": explanation_dict(r.explanation) if r.explanation else None}
                          for r in results], indent=2))
    for result in results:
        if result.ok and not args.json:
            print(result.message)
        elif not result.ok:
            print(f"geadmin: error: {result.message}", file=sys.stderr)
    if all(r.ok for r in results):
        return EXIT_OK
    unreachable = all(isinstance(r.error, TritonUnreachableError) for r in results if not r.ok)
    return EXIT_UNREACHABLE if unreachable else EXIT_FAILED


def _progress_printer(args: argparse.Namespace) -> Callable[[int, int, str], None] | None:
    """On a terminal, one line per ~5 s of a long load (elapsed time and Triton's latest line)."""
    if args.json or not sys.stderr.isatty():
        return None
    last = [0.0]

    def show(done: int, total: int, text: str) -> None:
        if text and time.monotonic() - last[0] >= 5:
            last[0] = time.monotonic()
            print(f"  {done + 1}/{total} {text}", file=sys.stderr, flush=True)
    return show


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("models", help="list, load, unload and reload models",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every model in the repository, with its state")
    add_connection_args(listing)
    listing.set_defaults(func=run_list)
    for action, text in ((Action.LOAD, "load models"), (Action.UNLOAD, "unload models"),
                         (Action.RELOAD, "reload models (a failed reload keeps the old version)")):
        sub = actions.add_parser(action.value, help=text)
        add_connection_args(sub)
        sub.add_argument("names", nargs="+", metavar="NAME")
        sub.add_argument("--load-timeout", type=positive_seconds, default=DEFAULT_LOAD_TIMEOUT_S,
                         help="seconds to wait for each load before giving up "
                         f"(default {DEFAULT_LOAD_TIMEOUT_S:g}; a load can hang)")
        if action is Action.UNLOAD:
            sub.add_argument("--dependents", action="store_true",
                             help="also unload models that only these ones use (ensemble steps)")
        sub.set_defaults(func=run_action_command, action=action.value)
