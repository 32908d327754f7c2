"""`geadmin stack`: the services of the stack geadmin manages — the running `geadmin up` of
the workspace, or the compose project GEADMIN_COMPOSE_PROJECT names — as the Stack page lists
them, and `restart`, `stop` or `start` of one, audited as the Stack page's are
(`geadmin.stack.drivers.perform`). A change asks first at a terminal; without one it needs
`--yes`. Requests to a service fail while it restarts or is stopped."""

from __future__ import annotations

import argparse
import json
import sys

from geadmin import audit
from geadmin.access import guard
from geadmin.cli.common import format_table
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import StackError
from geadmin.stack.choose import choose_driver
from geadmin.stack.drivers import STACK_ACTIONS, ServiceStatus, StackDriver, perform

NO_STACK = ("no stack to manage here: no `geadmin up` runs on this workspace (GEADMIN_HOME, or --home) "
            "and GEADMIN_COMPOSE_PROJECT names no compose project")


def run(args: argparse.Namespace) -> int:
    driver = choose_driver()
    if driver is None:
        raise StackError(NO_STACK)
    if args.action is None:
        return show(driver, as_json=args.json)
    question = f"{args.action} {args.service}? Requests to it fail until it is back."
    if not args.yes:
        refusal = _ask(question)
        if refusal:
            audit.try_record_action(args.action, args.service, False, f"refused: {refusal}",
                                    server=f"stack:{driver.kind}", actor=guard.os_user().who)
            print(f"geadmin: error: refused: {refusal}. Nothing was done", file=sys.stderr)
            return ExitCode.FAILED
    perform(driver, args.service, args.action, auth=guard.os_user())
    print(f"asked the {driver.kind} stack to {args.action} {args.service}; `geadmin stack` shows when it "
          "is done")
    return ExitCode.OK


def _ask(question: str) -> str:
    """"" when the operator typed y at a terminal, else why not."""
    if not sys.stdin.isatty():
        return "standard input is not a terminal to ask; pass --yes to go ahead"
    answer = input(f"{question} [y/N] ").strip().lower()
    return "" if answer in ("y", "yes") else "declined at the terminal"


def show(driver: StackDriver, *, as_json: bool) -> int:
    services = driver.services()
    if as_json:
        print(json.dumps({"stack": driver.kind, "services": [_record(s) for s in services]}, indent=2))
        return ExitCode.OK
    rows = [["SERVICE", "STATE", "HEALTH", "UPTIME", "RESTARTS", "DETAIL"]]
    rows += [[s.name, s.state, s.health or "", s.uptime(), str(s.restarts), s.detail] for s in services]
    print(f"{driver.kind} stack\n{format_table(rows)}")
    return ExitCode.OK


def _record(service: ServiceStatus) -> dict[str, object]:
    return {"name": service.name, "state": service.state, "health": service.health,
            "started_at": service.started_at, "restarts": service.restarts, "detail": service.detail}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("stack", help="the stack's services (geadmin up, or a compose project); "
                                   "restart, stop or start one", description=__doc__)
    parser.add_argument("action", nargs="?", choices=STACK_ACTIONS, default=None,
                        help="what to do to SERVICE (without it: list the services)")
    parser.add_argument("service", nargs="?", default=None, metavar="SERVICE",
                        help="a service `geadmin stack` lists (triton, dashboard, or the compose service)")
    parser.add_argument("-y", "--yes", action="store_true", help="go ahead without asking")
    parser.add_argument("--json", action="store_true", help="the services as a JSON document")
    parser.add_argument("--home", default=None, metavar="DIR",
                        help="the workspace whose `geadmin up` to manage (env GEADMIN_HOME)")
    parser.set_defaults(func=_checked)


def _checked(args: argparse.Namespace) -> int:
    if args.action is not None and args.service is None:
        print(f"geadmin stack: error: {args.action} needs a SERVICE (`geadmin stack` lists them)",
              file=sys.stderr)
        return ExitCode.USAGE
    return run(args)
