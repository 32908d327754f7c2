"""`geadmin models list|load|unload|reload|create`: the Models and New model pages, for scripts.

Exit 0 when every named model ended as asked, 1 when any action failed (the real reason
is printed, from Triton's log when `--triton-log` / GEADMIN_TRITON_LOG names it) or was
refused, and 3 when Triton is unreachable.

Before an unload or reload, the loaded ensembles that run the models are named; when the
change would take one down, a terminal asks, and a script (standard input not a terminal) is
refused unless it passes `--yes` (or `--with-dependents`). After it, every other model that
changed state is printed with Triton's reason, and audited.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable

from geadmin.access import guard
from geadmin.cli.common import (
    add_connection_args,
    add_consent_args,
    add_load_timeout_arg,
    client_for,
    consent,
    format_table,
    model_name,
    number_argument,
    print_side_effects,
    served_repository,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.diagnose import impact
from geadmin.diagnose.rows import ModelRow, collect_rows
from geadmin.errors import GeAdminError, TritonError, TritonUnreachableError
from geadmin.ops.models import create
from geadmin.ops.models.actions import ModelAction, audit_refusal, run_action
from geadmin.repository import paths, templates
from geadmin.repository.bounded import read_bounded


def run_list(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    try:
        with client_for(target, args) as client:
            rows = collect_rows(client, target.repository, target.log())
    except TritonError as exc:
        print(f"geadmin: error: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE if isinstance(exc, TritonUnreachableError) else ExitCode.FAILED
    if args.json:
        print(json.dumps([row.record() for row in rows], indent=2))
    else:
        print(render_table(rows))
    return ExitCode.OK


def render_table(rows: list[ModelRow]) -> str:
    if not rows:
        return "(the model repository is empty)"
    columns = ["name", "versions", "state", "probe", "backend/platform", "max batch size", "instances",
               "dynamic batching", "last inference", "reason"]
    records = [row.table_record() for row in rows]
    return format_table([[c.upper() for c in columns], *([r[c] for c in columns] for r in records)])


def run_action_command(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    auth = guard.os_user()
    actor = auth.who
    with client_for(target, args) as client:
        found = impact.predict(client, args.action, args.names, repository=target.repository)
        refusal = consent(found, args)
        if refusal:
            audit_refusal(client.url, args.action, args.names, refusal, actor)
            return _refused(refusal, found, args)
        results = run_action(client, ModelAction(args.action), args.names,
                             dependents=getattr(args, "dependents", False),
                             log=target.log(), repository=target.repository,
                             progress=_progress_printer(args), auth=auth)
    if args.json:
        print(json.dumps([r.record() for r in results], indent=2))
    for result in results:
        if result.ok and not args.json:
            print(result.message)
        elif not result.ok:
            print(f"geadmin: error: {result.message}", file=sys.stderr)
        print_side_effects(result.side_effects)
    if all(r.ok for r in results):
        return ExitCode.OK
    unreachable = all(isinstance(r.error, TritonUnreachableError) for r in results if not r.ok)
    return ExitCode.UNREACHABLE if unreachable else ExitCode.FAILED


def _refused(refusal: str, found: impact.Impact, args: argparse.Namespace) -> int:
    if args.json:
        document = {"ok": False, "error": refusal, "kind": "refused", "impact": found.record()}
        print(json.dumps(document, indent=2))
    print(f"geadmin: error: {refusal}", file=sys.stderr)
    return ExitCode.FAILED


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


def run_create(args: argparse.Namespace) -> int:
    """`models create`: read the local files (sizes checked first), then the one core function."""
    target = target_from_args(args)
    try:
        repository = served_repository(target, "creates the model")
        params = templates.Params(
            max_batch_size=args.max_batch_size,
            inputs=templates.parse_tensors(args.inputs) if args.inputs else None,
            outputs=templates.parse_tensors(args.outputs) if args.outputs else None,
            device_ids=templates.parse_device_ids(args.device_ids))
        files = read_local_files(args.files, args.template, args.upload_limit)
        with client_for(target, args) as client:
            result = create.create_model(
                client, repository, args.name, args.template, params, files,
                auth=guard.os_user(), load=not args.no_load, limit_bytes=args.upload_limit,
                log=target.log(), progress=_progress_printer(args))
    except GeAdminError as exc:
        if args.json:
            print(json.dumps({"ok": False, "error": str(exc), "kind": type(exc).__name__}, indent=2))
        print(f"geadmin: error: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE if isinstance(exc, TritonUnreachableError) else ExitCode.FAILED
    if args.json:
        print(json.dumps(result.record(), indent=2))
    elif result.ok:
        print(result.message)
    for finding in result.findings:
        print(f"geadmin: {finding.severity.value}: {finding}", file=sys.stderr)
    for warning in result.warnings:
        print(f"geadmin: warning: {warning}", file=sys.stderr)
    if not result.ok:
        print(f"geadmin: error: {result.message}", file=sys.stderr)
        unreachable = isinstance(result.error, TritonUnreachableError)
        return ExitCode.UNREACHABLE if unreachable else ExitCode.FAILED
    return ExitCode.OK


def read_local_files(items: list[str], template: str, limit_bytes: int) -> dict[str, bytes]:
    """`--file REL=LOCALPATH` (or just `LOCALPATH`: the template's model file) -> {REL: bytes};
    a file over the limit, or one that is not a regular file, is refused before more than the
    limit is read (geadmin.repository.bounded)."""
    files: dict[str, bytes] = {}
    for item in items:
        relative, sep, local = item.partition("=")
        if not sep:
            relative, local = templates.expected_files(template)[0], item
        files[relative] = read_bounded(local, limit_bytes, what=f"--file {item!r}", fix=paths.UPLOAD_FIX,
                                       limit="the upload limit (--upload-limit)")
    return files


_byte_count = number_argument(int, "number of bytes", lambda v: v >= 1,
                              "the upload limit must be at least 1 byte")


def _register_create(actions: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sub = actions.add_parser(
        "create", help="create a model from a template, upload its files, validate and load it",
        description="Create model NAME in the repository from a template, with its files; refuse (writing "
        "nothing) a bad name, an existing model, unsafe file names, oversize files or a config the "
        "validator rejects; then load it. Exit 0: created (and READY unless --no-load); 1: refused or "
        "the load failed (the reason is printed); 3: Triton unreachable.")
    add_connection_args(sub)
    sub.add_argument("name", metavar="NAME", type=model_name)
    sub.add_argument("--template", required=True, choices=list(templates.TEMPLATES),
                     help="npu_ge_om: 1/model.om (ATC); npu_ge_onnx: 1/model.onnx (GE, needs CANN); "
                     "python: an identity 1/model.py (CPU)")
    sub.add_argument("--file", dest="files", action="append", default=[], metavar="REL=LOCALPATH",
                     help="a file to put at REL inside the model directory, e.g. 1/model.om=./resnet.om "
                     "(a bare LOCALPATH goes where the template expects its model file); repeatable")
    sub.add_argument("--max-batch-size", type=int, default=8, metavar="N",
                     help="largest batch, 0 for no batching (default 8)")
    sub.add_argument("--device-ids", default="0", metavar="IDS",
                     help="npu_ge: NPUs for the instances, e.g. 0,1 (default 0; one instance per NPU)")
    sub.add_argument("--input", dest="inputs", action="append", default=[], metavar="NAME:DTYPE:DIMS",
                     help="an input, e.g. x:FP32:3,224,224 (dims without the batch); repeatable")
    sub.add_argument("--output", dest="outputs", action="append", default=[], metavar="NAME:DTYPE:DIMS",
                     help="an output, same form; repeatable")
    sub.add_argument("--no-load", action="store_true", help="create the directory only, do not load it")
    sub.add_argument("--upload-limit", type=_byte_count, default=paths.DEFAULT_UPLOAD_LIMIT_BYTES,
                     metavar="BYTES",
                     help=f"largest file accepted (default {paths.DEFAULT_UPLOAD_LIMIT_BYTES}, 1 GiB)")
    add_load_timeout_arg(sub, "the load")
    sub.set_defaults(func=run_create)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("models", help="list, load, unload and reload models",
                                   description=__doc__)
    actions = parser.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every model in the repository, with its state")
    add_connection_args(listing)
    listing.set_defaults(func=run_list)
    for action, text in ((ModelAction.LOAD, "load models"), (ModelAction.UNLOAD, "unload models"),
                         (ModelAction.RELOAD, "reload models (a failed reload keeps the old version)")):
        sub = actions.add_parser(action.value, help=text)
        add_connection_args(sub)
        sub.add_argument("names", nargs="+", metavar="NAME", type=model_name)
        add_load_timeout_arg(sub)
        if action is ModelAction.UNLOAD:
            sub.add_argument("--dependents", action="store_true",
                             help="also unload models that only these ones use (ensemble steps)")
        add_consent_args(sub)
        sub.add_argument("--with-dependents", action="store_true",
                         help="accept that the loaded ensembles that run these models go down (or "
                         "reload) with them; same as --yes for that question")
        sub.set_defaults(func=run_action_command, action=action.value)
    _register_create(actions)
