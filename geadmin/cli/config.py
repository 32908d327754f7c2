"""`geadmin config`: check and change model configs safely (validate, apply, history, rollback).

`config validate PATH... [--json]` checks config.pbtxt files without a Triton
(geadmin.repository.validate): each PATH is a model directory, its config.pbtxt, or a whole
repository — or a config file being edited anywhere else (a copy of the served config): that
one is validated as the model its `name` names in the repository (--repository, else
GEADMIN_REPOSITORY, else the running `geadmin up`'s), as if it stood in that model's directory,
and a line after the verdict says which directory. The first line is the verdict; exit 0 when
nothing is wrong (warnings allowed), 1 when any config has an error, 2 on a usage error (a path
that does not exist).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from geadmin.cli import config_history
from geadmin.cli.exit_codes import ExitCode
from geadmin.repository.validate import summarize, validate_path
from geadmin.stack.target import live_stack, resolve


def run_validate(args: argparse.Namespace) -> int:
    paths = [Path(path) for path in args.paths]
    repository = None
    if any(path.is_file() for path in paths):  # a copy finds its model there
        repository = resolve(repository=args.repository, stack=live_stack()).repository
    reports = [report for path in paths for report in validate_path(path, repository)]
    summary = summarize(reports)
    if args.json:
        print(json.dumps({**summary, "models": [r.to_dict() for r in reports]}, indent=2))
    else:
        print(summary["headline"])
        for report in reports:
            if report.note:
                print(report.note)
        for report in reports:
            for finding in report.findings:
                print(f"{finding}\n    fix: {finding.fix}" if finding.fix else str(finding))
    return ExitCode.FAILED if summary["errors"] else ExitCode.OK


def _register_validate(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    validate = actions.add_parser(
        "validate", help="check configs without a Triton: schema, Triton's rules, npu_ge's rules",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    validate.add_argument("paths", nargs="+", metavar="PATH",
                          help="a model directory, a config.pbtxt, or a model repository")
    validate.add_argument("--repository", default=None, metavar="PATH",
                          help="where a config file outside its model directory finds its model, by "
                          "its `name` (env GEADMIN_REPOSITORY; default: the running `geadmin up`'s)")
    validate.add_argument("--json", action="store_true", help="print a JSON document")
    validate.set_defaults(func=run_validate)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "config", help="validate, apply, list and roll back model configs (atomic, audited)",
        description="Change a model's config.pbtxt safely: validate it without a server, apply with "
        "automatic rollback when Triton rejects it, list its revisions, roll back to one.")
    actions = parser.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    _register_validate(actions)
    config_history.register_config_subcommands(actions)

