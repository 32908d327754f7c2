"""`geadmin config`: check and change model configs safely: validate, apply, history, rollback.
The Config editor's commands, for scripts and terminals; each is one core function, printed:
`validate` (geadmin.repository.validate) and `history` (geadmin.repository.revisions) here,
`apply` and `rollback` in geadmin.cli.config_change.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geadmin.cli.common import (
    fail_with_document,
    format_table,
    local_time,
    model_name,
    revision_number,
    served_repository,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import GeAdminError
from geadmin.repository import revisions, store
from geadmin.repository.validate import summarize, validate_path
from geadmin.stack.target import live_stack, resolve

Actions = argparse._SubParsersAction  # argparse's own type for add_subparsers()
VALIDATE_HELP = """`config validate PATH... [--json]` checks config.pbtxt files without a Triton
(geadmin.repository.validate): each PATH is a model directory, its config.pbtxt, or a whole
repository — or a config file being edited anywhere else (a copy of the served config): that
one is validated as the model its `name` names in the repository (--repository, else
GEADMIN_REPOSITORY, else the running `geadmin up`'s), as if it stood in that model's directory,
and a line after the verdict says which directory. The first line is the verdict; exit 0 when
nothing is wrong (warnings allowed), 1 when any config has an error, 2 on a usage error (a path
that does not exist).
"""


# -- config validate ----------------------------------------------------------------------
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


# -- config history ---------------------------------------------------------------------------
def run_history(args: argparse.Namespace) -> int:
    try:
        repository = served_repository(resolve(repository=args.repository, stack=live_stack()),
                                       "keeps the revisions")
        kept = revisions.history(repository, args.model)
        if args.show is not None:
            sys.stdout.buffer.write(revisions.read_revision(repository, args.model, args.show).data)
            return ExitCode.OK
        current = store.read_config(repository, args.model).sha256
    except GeAdminError as exc:
        return fail_with_document(exc, args, ExitCode.FAILED)
    if args.json:
        print(json.dumps([{"revision": r.number, "at": r.at.isoformat(), "who": r.who, "note": r.note,
                           "sha256": r.sha256, "size_bytes": len(r.data), "current": r.sha256 == current}
                          for r in kept], indent=2))
        return ExitCode.OK
    if not kept:
        print(f"no revisions of {args.model!r} kept yet: geadmin keeps one each time it applies a change")
        return ExitCode.OK
    rows: list[tuple[str, ...]] = [("REV", "WHEN", "WHO", "SHA256", "NOTE")]
    rows += [(f"{r.number}{'*' if r.sha256 == current else ''}", local_time(r.at), r.who, r.sha256[:12],
              r.note) for r in kept]
    print(format_table(rows))
    print("* = the file on disk now; `--show REV` prints a revision, `geadmin config rollback "
          f"{args.model} REV` applies it")
    return ExitCode.OK


# -- registration ---------------------------------------------------------------------------
def register(subparsers: Actions) -> None:
    parser = subparsers.add_parser(
        "config", help="validate, apply, list and roll back model configs (atomic, audited)",
        description="Change a model's config.pbtxt safely: validate it without a server, apply with "
        "automatic rollback when Triton rejects it, list its revisions, roll back to one.")
    actions = parser.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    _register_validate(actions)  # `apply` and `rollback`: geadmin.cli.config_change
    _register_history(actions)


def _register_validate(actions: Actions) -> None:
    validate = actions.add_parser(
        "validate", help="check configs without a Triton: schema, Triton's rules, npu_ge's rules",
        description=VALIDATE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    validate.add_argument("paths", nargs="+", metavar="PATH",
                          help="a model directory, a config.pbtxt, or a model repository")
    validate.add_argument("--repository", default=None, metavar="PATH",
                          help="where a config file outside its model directory finds its model, by "
                          "its `name` (env GEADMIN_REPOSITORY; default: the running `geadmin up`'s)")
    validate.add_argument("--json", action="store_true", help="print a JSON document")
    validate.set_defaults(func=run_validate)


def _register_history(actions: Actions) -> None:
    listing = actions.add_parser("history", help="the kept revisions of a model's config")
    listing.add_argument("model", metavar="MODEL", type=model_name)
    listing.add_argument("--show", type=revision_number, default=None, metavar="REV",
                         help="print one revision")
    listing.add_argument("--repository", default=None, metavar="PATH",
                         help="the model repository (env GEADMIN_REPOSITORY; default: the running stack's)")
    listing.add_argument("--json", action="store_true", help="print a JSON document")
    listing.set_defaults(func=run_history)


