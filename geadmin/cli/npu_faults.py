"""`geadmin npu faults`: the NPU faults of this host (or of a named fleet, per node), the models
each hits and the share of their instances lost, and the next safe step — in the first lines.

It reads the fault sources (geadmin.telemetry.sources.fault_reading.read_faults: npu-exporter,
npu-smi or a saved output, npu_ge's device errors on Triton's /metrics), stores the reading in
the workspace history (first / last seen, cleared), and prints the report of
geadmin.diagnose.fault_report (a fleet: geadmin.fleet.npu_faults). `--plan` prints every step
of each fault's plan (a dry run: nothing is changed; the reset command is for the operator).
A saved `--npu-smi-file` is shown, not recorded: it is not this host's present.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace

from geadmin import settings
from geadmin.cli.common import (
    add_connection_args,
    add_npu_source_args,
    client_for,
    sub_commands,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode, help_text
from geadmin.diagnose.fault_text import report_json, report_lines
from geadmin.diagnose.npu_faults import FaultReport
from geadmin.errors import FleetError, NpuSmiError, TelemetryError
from geadmin.fleet.discovery import discover, fleet_named
from geadmin.fleet.npu_faults import fleet_faults_now
from geadmin.ops.npu.wiring import HostFaultSources, current_report
from geadmin.telemetry.history.sampler import default_npu_smi


def exit_code(report: FaultReport) -> int:
    if report.models_down:
        return ExitCode.FAILED
    if report.unread:
        return ExitCode.UNREACHABLE
    return ExitCode.DEGRADED if report.needs_action or report.unjudged else ExitCode.OK


def server_report(args: argparse.Namespace) -> FaultReport:
    target = target_from_args(args)
    sources = HostFaultSources(None, args.metrics_url or target.urls().metrics,
                               exporter_url=args.exporter_url or settings.NPU_EXPORTER_URL.get(),
                               npu_smi=None if args.npu_smi_file else default_npu_smi(),
                               npu_smi_file=args.npu_smi_file, table_override=args.fault_table,
                               repository=target.repository, metrics_explicit=bool(args.metrics_url),
                               timeout_s=args.timeout)
    with client_for(target, args) as client:
        return current_report(replace(sources, client=client), home=settings.home(args.home))


def fleet_report(args: argparse.Namespace) -> FaultReport:
    found = discover(fleet_named(args.fleet))
    for problem in found.problems:
        print(f"fleet {args.fleet}: {problem}", file=sys.stderr)
    if not found.members:
        raise FleetError(f"fleet {args.fleet!r} has no server: " + ("; ".join(found.problems) or
                         "its sources found none"))
    return fleet_faults_now(found.members, home=settings.home(args.home), timeout_s=args.timeout,
                            table_override=args.fault_table, not_found=found.problems)


def run(args: argparse.Namespace) -> int:
    try:
        report = fleet_report(args) if args.fleet else server_report(args)
    except NpuSmiError as exc:  # the saved file is not npu-smi output, or cannot be read: the input
        print(f"geadmin npu faults: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except (TelemetryError, FleetError) as exc:
        print(f"geadmin npu faults: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    if args.json:
        print(json.dumps(report_json(report), indent=2))
    else:
        print("\n".join(report_lines(report, plan=args.plan)))
    return exit_code(report)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Adds `faults` under `geadmin npu` (which keeps working on its own)."""
    parser = sub_commands(subparsers, "npu").add_parser(
        "faults", help="NPU faults: which models each hits, the share of capacity lost, the next safe step",
        description="Reads the NPU fault codes (npu-exporter, npu-smi or --npu-smi-file, npu_ge's device "
        "errors on Triton's /metrics), grades each with the fault table, and joins it with the model <-> "
        "NPU map: the first lines name the chip, the code (0x%08X), its level, the models and the share "
        "of their instances lost, and the next safe step. A NotHandleFault is shown, not alarmed.",
        epilog=help_text("npu_faults"))
    add_connection_args(parser, log_and_repository=False)
    add_npu_source_args(
        parser,
        npu_smi_file=("read a saved `npu-smi info` output instead of the live sources "
                      "(shown, not recorded in the history)"),
        metrics_url=("Triton's metrics page: npu_ge's device errors and placements "
                     "(default: the server's)"))
    parser.add_argument("--fleet", default=None, metavar="NAME",
                        help="every server of a fleet ([[fleet]] in the servers file, 'default' for "
                        "GEADMIN_FLEET), each fault on its server's node label")
    parser.add_argument("--fault-table", default=None, metavar="FILE",
                        help="the operator's fault levels (MindCluster's faultCode.json shape), merged "
                        "over the built-in table (env GEADMIN_NPU_FAULT_TABLE)")
    parser.add_argument("--plan", action="store_true",
                        help="print every step of each fault's plan (a dry run: nothing is changed)")
    parser.add_argument("--home", default=None,
                        help="workspace directory, where the fault history is kept (env GEADMIN_HOME, "
                        "default ~/.local/share/geadmin)")
    parser.set_defaults(func=run)
