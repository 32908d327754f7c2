"""`geadmin objectives`: per-model objectives (p99 target, error budget) that the alert rules,
the Metrics page and the triage card judge by. Setting one is audited."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

from geadmin import settings
from geadmin.access import guard
from geadmin.cli.common import format_table, triton_metrics
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import InvalidArgumentError
from geadmin.ops.monitoring import parse_budget, set_objective
from geadmin.telemetry.alerting.objectives import burn_rates, objectives


def run(args: argparse.Namespace) -> int:
    home = settings.home()
    if args.action in ("set", "clear"):
        if args.action == "set" and args.p99_ms is None and args.error_budget is None:
            raise InvalidArgumentError("give --p99-ms and/or --error-budget (or use `geadmin objectives "
                                       "clear MODEL`)")
        budget = parse_budget(args.error_budget) if args.action == "set" and args.error_budget else None
        stored = set_objective(args.model, args.p99_ms if args.action == "set" else None, budget,
                               auth=guard.os_user(), home=home)
        print(f"{args.model}: {stored.describe()}")
        return ExitCode.OK
    source = triton_metrics(args)[0]
    now = datetime.now(timezone.utc)
    found = [(o, burn_rates(source, o.model, o.error_budget, home=home, now=now))
             for o in objectives(home=home).values()]
    if args.json:
        print(json.dumps([{"model": o.model, "p99_ms": o.p99_ms, "error_budget": o.error_budget,
                           "set_at": o.set_at, "who": o.who,
                           "burn": {f"{b.window_h:g}h": b.rate for b in burns}} for o, burns in found],
                         indent=2))
        return ExitCode.OK
    if not found:
        print("no objectives set: geadmin objectives set MODEL --p99-ms 50 --error-budget 0.1%")
        return ExitCode.OK
    windows = [f"burn {b.window_h:g}h" for b in found[0][1]]
    table: list[tuple[str, ...]] = [("model", "p99 target", "error budget", *windows, "set by")]
    for o, burns in found:
        table.append((o.model, f"{o.p99_ms:g} ms" if o.p99_ms else "-",
                      f"{o.error_budget * 100:g} %" if o.error_budget else "-",
                      *(_burn(b.rate) for b in burns), f"{o.who} {o.set_at}"))
    print(format_table(table))
    return ExitCode.OK


def _burn(rate: float | None) -> str:
    return "-" if rate is None else f"{rate:.2f}x"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "objectives", help="per-model objectives: p99 target and error budget (alerts, charts, triage)",
        description="list: every objective with its error-budget burn rate over 1 h and 6 h (from the "
        "sampler's history; 1.0 spends the budget exactly). set MODEL --p99-ms X --error-budget 0.1%: "
        "set them (audited). clear MODEL: remove them.")
    parser.add_argument("action", choices=["list", "set", "clear"], nargs="?", default="list")
    parser.add_argument("model", nargs="?", default="")
    parser.add_argument("--p99-ms", type=float, default=None, metavar="MS", help="the p99 latency target")
    parser.add_argument("--error-budget", default=None, metavar="PCT",
                        help="the fraction of requests that may fail: 0.1%% or 0.001")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="the Triton whose history the burn rate reads (default: the running stack's)")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.set_defaults(func=run)
