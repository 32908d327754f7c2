"""`geadmin` command line: routes to one module per sub-command (geadmin/cli/)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from geadmin import __version__, settings
from geadmin.cli import (
    alerts,
    audit_log,
    bundle,
    capacity,
    config,
    config_change,
    fleet,
    models,
    npu_faults,
    npu_remedy,
    objectives,
    probe,
    stack,
    status,
    terminal,
    traffic,
    tune,
    up,
)
from geadmin.cli import bench as bench_command
from geadmin.cli import dashboard as dashboard_command
from geadmin.cli import infer as infer_command
from geadmin.cli import npu as npu_command
from geadmin.cli import sampler as sampler_command
from geadmin.cli import top as top_command
from geadmin.cli import users as users_command
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import GeAdminError

# A module that adds a sub-command under another's command (`npu faults`) comes after that command.
COMMANDS = (up, status, models, config, config_change, audit_log, bundle, infer_command,
            npu_command, npu_faults, npu_remedy, top_command, sampler_command, users_command, bench_command,
            dashboard_command, stack, probe, alerts, objectives, tune, capacity, traffic, fleet)
REPORT_HINT = ("this is a bug in geadmin: please report it, with the file `geadmin bundle` writes "
               "(and the traceback: run again with GEADMIN_DEBUG=1)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geadmin",
        description="Control panel for Triton Inference Server on Ascend NPUs.",
    )
    parser.add_argument("--version", action="version", version=f"geadmin {__version__}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command. `--home DIR` (where a command has it) is the workspace of everything the
    command does (`settings.workspace_for_process`). A reader that leaves early
    (`geadmin audit | head -1`) ends the command quietly with 141, as `cat` would."""
    with terminal.shown_not_obeyed():  # the error lines below too: they carry others' words
        return _run(argv)


def _run(argv: Sequence[str] | None) -> int:
    try:
        args = build_parser().parse_args(argv)
        with settings.workspace_for_process(getattr(args, "home", None)):
            code = int(args.func(args))
        sys.stdout.flush()  # here, not at interpreter exit, so a closed pipe is caught below
        return code
    except BrokenPipeError:
        _silence_stdout()
        return ExitCode.PIPE_CLOSED
    except GeAdminError as exc:
        print(f"geadmin: error: {exc}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED
    except Exception as exc:  # a bug: one line for the operator, the traceback on request
        if settings.debug():
            raise
        print(f"geadmin: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        print(f"geadmin: {REPORT_HINT}", file=sys.stderr)
        return ExitCode.INTERNAL


def _silence_stdout() -> None:
    """The reader of stdout is gone: point stdout at /dev/null, so what is still buffered (and
    the interpreter's flush at exit) goes nowhere instead of raising BrokenPipeError again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real file descriptor (a test's captured stdout)
        pass

if __name__ == "__main__":
    sys.exit(main())
