"""`geadmin npu`: this host's Ascend NPUs, from whichever source it has (geadmin.telemetry.sources.npu),
or from a saved `npu-smi` output (`--npu-smi-file FILE`, `-` for stdin: what support receives
pasted into tickets).

Exit codes: 0 with devices, and 0 with the one calm line when the host has no NPU; 1 when a
source exists but fails (the exporter is down, npu-smi errors, the saved file is not npu-smi
output); 2 for bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

from geadmin import settings
from geadmin.cli.common import add_npu_source_args, format_table, positive_seconds, triton_metrics
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import InvalidArgumentError, TelemetryError
from geadmin.telemetry.sources import npu_smi
from geadmin.telemetry.sources.detect import NpuSources, detect
from geadmin.telemetry.sources.npu import NpuDevice, NpuReport

DEFAULT_TIMEOUT_S = 5.0
GIB = 1 << 30


def report_for(args: argparse.Namespace) -> NpuReport:
    if args.npu_smi_file:
        devices = npu_smi.parse(_read(args.npu_smi_file))
        where = "stdin" if args.npu_smi_file == "-" else args.npu_smi_file
        plural = "NPU" if len(devices) == 1 else "NPUs"
        return NpuReport(tuple(devices), "npu-smi", f"{len(devices)} {plural} (npu-smi output in {where})")
    url, explicit = triton_metrics(args)
    return detect(NpuSources(exporter_url=args.exporter_url or settings.NPU_EXPORTER_URL.get(),
                          triton_metrics_url=url, triton_metrics_explicit=explicit, timeout_s=args.timeout))


def run(args: argparse.Namespace) -> int:
    try:
        report = report_for(args)
    except TelemetryError as exc:
        print(f"geadmin npu: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    if args.json:
        print(json.dumps({"source": report.source, "summary": report.summary, "notes": list(report.notes),
                          "devices": [asdict(d) for d in report.devices]}, indent=2))
        return ExitCode.OK
    print(report.summary)
    for note in report.notes:
        print(f"note: {note}")
    if report.devices:
        print(render_table(report.devices))
    return ExitCode.OK


COLUMNS = ("ID", "NPU/CHIP", "NAME", "HEALTH", "AICORE%", "VECTOR%", "CUBE%", "MEMORY GiB", "TEMP C",
           "POWER W", "HELD BY")


def render_table(devices: tuple[NpuDevice, ...]) -> str:
    return format_table([COLUMNS, *(_row(d) for d in devices)])


def _row(d: NpuDevice) -> tuple[str, ...]:
    used, total = d.device_memory
    memory = "-" if used is None and total is None else f"{_num(used, GIB)} / {_num(total, GIB)}"
    return (str(d.id), f"{_num(d.npu_id)}/{_num(d.chip_id)}", d.chip_name or "-", d.health or "-",
            _num(d.aicore_util_pct), _num(d.vector_util_pct), _num(d.cube_util_pct), memory,
            _num(d.temperature_c), _num(d.power_w), _held_by(d))


def _held_by(d: NpuDevice) -> str:
    if d.models:
        return ", ".join(f"{p.model}:{p.version}" + (f" ({p.instance})" if p.instance else "")
                         for p in d.models)
    if d.processes:
        return ", ".join(f"{p.name or 'pid'} {p.pid}" for p in d.processes)
    if d.models == () or d.processes == ():
        return "nothing"
    return "-"


def _num(value: float | None, scale: float = 1.0) -> str:
    if value is None:
        return "-"
    scaled = value / scale
    return f"{scaled:.0f}" if scale == 1.0 and float(scaled).is_integer() else f"{scaled:.1f}"


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InvalidArgumentError(f"cannot read --npu-smi-file {path}: {exc.strerror or exc}") from exc


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "npu", help="this host's Ascend NPUs: utilization, memory, temperature, power, who holds them",
        description="Tries npu-exporter (--exporter-url), then npu-smi on PATH, then the npu_ge "
        "backend's metrics on Triton's /metrics, and shows the first that has devices. A host with no "
        "NPU gets one line saying what was looked at (exit 0).")
    add_npu_source_args(
        parser,
        npu_smi_file=("parse a saved `npu-smi info` (or `info watch`, `info -t usages -i N`) "
                      "output instead; - reads stdin"),
        metrics_url=("Triton's metrics page (env GEADMIN_TRITON_METRICS_URL; default: the "
                     "running stack's, else http://127.0.0.1:8002/metrics)"))
    parser.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds to wait for each source (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    parser.set_defaults(func=run)
