"""`geadmin npu remedy --chip N [--node NODE] [--apply]`: a faulted chip's plan, dry run by default.

Reads the faults from the same sources as `geadmin npu faults` (geadmin.ops.npu.wiring), picks
the faults present on the chip and runs each plan through `geadmin.ops.npu.remedy.apply_chip_plan`:
without `--apply` it says what each step would do and changes nothing; with it the changing
steps run as the OS user (guarded, audited with the fault named), the reset command is printed.
"""

from __future__ import annotations

import argparse
import json

from geadmin import settings
from geadmin.access import guard
from geadmin.cli.common import (
    add_connection_args,
    add_npu_source_args,
    client_for,
    sub_commands,
    target_from_args,
    triton_metrics,
)
from geadmin.cli.exit_codes import ExitCode, help_text
from geadmin.errors import InvalidArgumentError
from geadmin.ops.npu import wiring
from geadmin.ops.npu.remedy import ChipRemedy, RemedyState, apply_chip_plan
from geadmin.telemetry.history.sampler import default_npu_smi

MARKS = {RemedyState.SAID: "say", RemedyState.WOULD: "would", RemedyState.DONE: "done",
         RemedyState.FAILED: "FAILED", RemedyState.REFUSED: "REFUSED"}


def run(args: argparse.Namespace) -> int:
    if args.chip < 0:
        raise InvalidArgumentError(f"--chip {args.chip}: a chip is a device id, 0 or more")
    target = target_from_args(args)
    metrics_url, _ = triton_metrics(args)
    with client_for(target, args) as client:
        sources = wiring.HostFaultSources(client, metrics_url,
                                          exporter_url=args.exporter_url or settings.NPU_EXPORTER_URL.get(),
                                          npu_smi=None if args.npu_smi_file else default_npu_smi(),
                                          npu_smi_file=args.npu_smi_file, timeout_s=args.timeout)
        report = wiring.current_report(sources)
        done = apply_chip_plan(report, args.chip, guard.os_user(), node=args.node, dry_run=not args.apply,
                               client=client, repository=target.repository, log=target.log(),
                               metrics_url=metrics_url)
    where = f"chip {args.chip}" + (f" of node {args.node}" if args.node else "")
    if args.json:
        print(json.dumps({"chip": args.chip, "node": args.node, "applied": args.apply,
                          "notes": list(report.notes), "faults": [_record(r) for r in done]}, indent=2))
    else:
        _print(done, where, args.apply, report.notes)
    if not done:
        return ExitCode.FAILED
    return ExitCode.OK if all(r.ok for r in done) else ExitCode.FAILED


def _record(remedy: ChipRemedy) -> dict[str, object]:
    impact = remedy.impact
    return {"code": impact.record.fault.code_hex, "level": impact.cls.level.value,
            "meaning": impact.cls.meaning, "counts": impact.counts,
            "models": [{"model": h.model, "instances_total": h.instances_total,
                        "instances_lost": h.instances_lost, "down": h.down, "ensembles": list(h.ensembles)}
                       for h in impact.hits],
            "steps": [o.record() for o in remedy.outcomes]}


def _print(done: list[ChipRemedy], where: str, applied: bool, notes: tuple[str, ...]) -> None:
    for note in notes:
        print(f"note: {note}")
    if not done:
        print(f"no fault present on {where}: nothing to remedy (`geadmin npu faults` lists faulted chips)")
        return
    for remedy in done:
        impact = remedy.impact
        fault, level = impact.record.fault, impact.cls.level.value
        print(f"{where}: code {fault.code_hex}, level {level}: {impact.cls.meaning}")
        for hit in impact.hits:
            share = f"{hit.instances_lost}/{hit.instances_total}"
            down = " — no healthy instance left: DOWN" if hit.down else ""
            above = f" (ensembles: {', '.join(hit.ensembles)})" if hit.ensembles else ""
            print(f"  {hit.model}: {share} instances lost{down}{above}")
        for outcome in remedy.outcomes:
            print(f"  [{MARKS[outcome.state]}] {outcome.step.kind.value}: {outcome.message}")
    if not applied:
        print("dry run: nothing was changed; run again with --apply to make the changes above")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub_commands(subparsers, "npu").add_parser(
        "remedy", help="a faulted chip's plan: what it would change (dry run), or --apply it",
        description="Reads the NPU faults (npu-exporter, npu-smi, npu_ge's device errors), picks those "
        "present on --chip (of --node in a fleet) and runs the plan of each: drain the chip from the "
        "models' device_ids through the safe apply, reload, or move; the reset command is printed, never "
        f"run. Without --apply nothing is changed. {help_text('npu_remedy')}")
    parser.add_argument("--chip", type=int, required=True, metavar="N", help="the faulted chip (device id)")
    parser.add_argument("--node", default="", metavar="NODE", help="the node of the chip ('' : this host)")
    parser.add_argument("--apply", action="store_true",
                        help="make the changes (guarded, audited with the fault named); default: dry run")
    add_npu_source_args(
        parser,
        npu_smi_file=("read the faults from a saved `npu-smi info` output instead of npu-smi"),
        metrics_url=("Triton's metrics page (npu_ge's placements and device errors; env "
                     "GEADMIN_TRITON_METRICS_URL)"))
    add_connection_args(parser)
    parser.set_defaults(func=run)
