"""`geadmin bundle`: write the diagnostics bundle (geadmin.ops.bundle) for a ticket."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from geadmin import settings
from geadmin.cli.common import add_connection_args, client_for, number_argument, target_from_args
from geadmin.cli.exit_codes import ExitCode
from geadmin.ops.bundle import DEFAULT_LOG_BYTES, build_bundle, default_bundle_name, write_bundle
from geadmin.stack.compose_logs import compose_for
from geadmin.stack.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    stack_file = Workspace(settings.home()).live_stack_file()
    with client_for(target, args) as client:
        bundle = build_bundle(client, repository=target.repository, log_path=target.log_path,
                              stack_file=stack_file, log_bytes=int(args.log_mb * (1 << 20)),
                              log=target.log(), containers=compose_for(target.spec.url),
                              metrics_url=target.urls().metrics, also=target.urls().known())
    path = write_bundle(bundle, Path(args.output or default_bundle_name()))
    if args.json:
        print(json.dumps({"path": str(path), "files": sorted(bundle.files),
                          "not_collected": bundle.problems}, indent=2))
        return ExitCode.OK
    print(f"wrote {path} ({len(bundle.files)} files)")  # manifest.json is one of them
    for section, why in sorted(bundle.problems.items()):
        print(f"  not collected: {section}: {why}")
    return ExitCode.OK


megabytes = number_argument(float, "number of megabytes", lambda v: math.isfinite(v) and v >= 0,
                            "megabytes must be 0 or more")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bundle", help="write a diagnostics .tar.gz to attach to a ticket",
        description="Server metadata, model index, configs (on disk and normalized), statistics, "
        "the end of Triton's log, geadmin's settings (secrets redacted), `npu-smi info` and, for the "
        "compose project's Triton (GEADMIN_COMPOSE_PROJECT), each container's state and log. Written "
        "even when Triton is down; the manifest says what could not be collected.")
    add_connection_args(parser)
    parser.add_argument("-o", "--output", default=None, metavar="FILE",
                        help="archive to write (default geadmin-bundle-<UTC time>.tar.gz here)")
    parser.add_argument("--log-mb", type=megabytes, default=DEFAULT_LOG_BYTES / (1 << 20),
                        help=f"how much of the end of Triton's log to include (default "
                        f"{DEFAULT_LOG_BYTES >> 20} MB)")
    parser.set_defaults(func=run)
