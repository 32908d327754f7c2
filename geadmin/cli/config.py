"""`geadmin config`: check and change model configs safely: validate, apply, history, rollback.
The Config editor's commands, for scripts and terminals; each is one core function
(`geadmin.repository.validate`, `geadmin.ops.models.change_plan` + `geadmin.ops.models.apply`,
`geadmin.repository.revisions`), printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from geadmin.access import guard
from geadmin.cli.common import (
    add_connection_args,
    add_consent_args,
    add_load_timeout_arg,
    client_for,
    consent,
    format_table,
    local_time,
    model_name,
    number_argument,
    print_side_effects,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.domain import format_duration
from geadmin.errors import (
    ConfigConflictError,
    ConfigInvalidError,
    GeAdminError,
    RepositoryError,
    TritonUnreachableError,
)
from geadmin.interrupts import as_interrupts
from geadmin.ops.bench.params import JUDGED_REQUESTS_PER_WINDOW
from geadmin.ops.models.apply import apply_config, rollback
from geadmin.ops.models.apply_result import ApplyResult
from geadmin.ops.models.change_plan import decline, expected_hash, plan_change
from geadmin.ops.models.explained_load import LoadProgress
from geadmin.ops.models.preview import DEFAULT_WINDOW_MS, PreviewLoad, preview_change
from geadmin.ops.models.preview_report import PreviewVerdict
from geadmin.repository import revisions, store
from geadmin.repository.bounded import read_bounded, read_stream
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES
from geadmin.repository.revisions import MAX_REVISION
from geadmin.repository.validate import summarize, validate_path
from geadmin.stack.backends import served_backends
from geadmin.stack.target import Target, live_stack, resolve

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
CHANGES_HELP = """`config apply MODEL FILE` writes FILE as MODEL's config.pbtxt atomically, keeps the old one
in the config history, and reloads the model; if Triton rejects it, the old file is put
back byte for byte and the real reason is printed; a load still running at the load timeout
keeps the new file, which Triton is loading, and names the revision to roll back to.
`config rollback MODEL [REVISION]` applies a kept revision the same way. Exit 0 when the
config is in place, 1 when it was refused, rolled back or its load had not finished (the
reason is printed), 3 when Triton is unreachable.

`config apply MODEL FILE --preview` applies nothing: it serves FILE as a trial copy beside the
live model, replays the model's recorded request rate (its peak over --history-h; --mean, or
--rate to give one) against both with perf_analyzer, and prints GO or NO-GO first, then the
evidence: p99, throughput and memory change, the projected error-budget burn against the
model's objective, and the ensembles the change would break. Exit 0 for GO, 1 for NO-GO.

Both name the loaded ensembles that run the model first, and what the new config does to
them; when it would take one down, a terminal asks and a script is refused without `--yes`.
Afterwards every other model that changed state is printed with Triton's reason, and audited.
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


# -- config apply / rollback ----------------------------------------------------------------
def run_apply(args: argparse.Namespace) -> int:
    fix = "is it the right file? a config.pbtxt is a regular text file of at most 4 MiB"
    try:
        data = (read_stream(sys.stdin.buffer, MAX_CONFIG_BYTES, what="the config on stdin", fix=fix)
                if args.file == "-" else read_bounded(args.file, MAX_CONFIG_BYTES, what="config apply",
                                                      fix=fix))
    except RepositoryError as exc:
        return _fail(exc, args)
    if args.preview:
        return _run_preview(args, data)
    return _run_change(args, data=data)


def _run_preview(args: argparse.Namespace, data: bytes) -> int:
    """`config apply --preview`: the candidate served as a trial beside the live model and
    measured at the recorded (or `--rate`) load; nothing applied (geadmin.ops.models.preview)."""
    target = target_from_args(args)
    try:
        load = PreviewLoad(args.rate, not args.mean, args.history_h, args.window_ms)
        repository = _repository(target)
        with as_interrupts(), client_for(target, args) as client:  # like Ctrl-C: the trial is removed
            found = preview_change(client, repository, args.model, data, auth=guard.os_user(), load=load,
                                   metrics_url=args.metrics_url or target.urls().metrics,
                                   backends=served_backends(target), admin_key=target.spec.admin_key,
                                   progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True))
    except GeAdminError as exc:
        return _fail(exc, args)
    if args.json:
        print(json.dumps(found.record(), indent=2))
    else:
        print(found.headline())
        print("\n".join(found.evidence()))
    return ExitCode.OK if found.verdict is PreviewVerdict.GO else ExitCode.FAILED


def run_rollback(args: argparse.Namespace) -> int:
    return _run_change(args, data=None)


def _run_change(args: argparse.Namespace, *, data: bytes | None) -> int:
    """An apply (`data`) or a rollback (`args.revision`): planned, asked, changed, printed."""
    target = target_from_args(args)
    try:
        repository = _repository(target)
        auth, backends = guard.os_user(), served_backends(target)
        with client_for(target, args) as client:
            revision = args.revision if data is None else None  # only a rollback names one
            plan = plan_change(client, repository, args.model, new=data, revision=revision,
                               validate=args.validate, backends=backends)
            refusal = "" if plan.impact is None or plan.errors else consent(
                plan.impact, args, question=plan.question, declined=plan.declined())
            if refusal:
                return _fail(RepositoryError(decline(plan, auth, refusal)), args)
            expected, log, progress = (expected_hash(plan, args.expect_hash), target.log(),
                                       _progress_printer(args))
            if data is None:
                result = rollback(client, repository, args.model, plan.revision, expected_sha256=expected,
                                  auth=auth, log=log, progress=progress)
            else:
                result = apply_config(client, repository, args.model, data, expected_sha256=expected,
                                      auth=auth, log=log, progress=progress, load_unloaded=args.load,
                                      validate=args.validate, smoke=args.smoke, backends=backends)
    except ConfigInvalidError as exc:
        code = _fail(exc, args)  # the cause first, then every finding
        if not args.json:
            print("\n".join(f"  {f}" for f in exc.findings), file=sys.stderr)
        return code
    except ConfigConflictError as exc:
        if exc.diff() and not args.json:
            print(exc.diff(), end="")
        return _fail(exc, args)
    except GeAdminError as exc:
        return _fail(exc, args)
    return _report(result, args)


def _repository(target: Target) -> Path:
    if target.repository is None:
        raise RepositoryError(
            f"which model repository does {target.spec.url} serve? geadmin writes the config there: "
            "pass --repository PATH or set GEADMIN_REPOSITORY (the embedded stack's is found by itself)")
    return target.repository


def _report(result: ApplyResult, args: argparse.Namespace) -> int:
    if args.json:
        print(json.dumps(result.record(), indent=2))
    else:
        if result.diff:
            print(result.diff, end="")
        stream = sys.stdout if result.ok else sys.stderr
        print(result.message if result.ok else f"geadmin: error: {result.message}", file=stream)
        if result.revision is not None and result.ok:
            print(f"config history: revision {result.revision} (`geadmin config history {result.model}`)")
    print_side_effects(result.side_effects)
    for warning in result.warnings:
        print(f"geadmin: warning: {warning}", file=sys.stderr)
    return ExitCode.OK if result.ok else ExitCode.FAILED


def _fail(error: GeAdminError, args: argparse.Namespace | None = None) -> int:
    if args is not None and args.json:
        document: dict[str, object] = {"ok": False, "error": str(error), "kind": type(error).__name__}
        if isinstance(error, ConfigInvalidError):
            document["findings"] = [f.to_dict() for f in error.findings]
        print(json.dumps(document, indent=2))
    print(f"geadmin: error: {error}", file=sys.stderr)
    return ExitCode.UNREACHABLE if isinstance(error, TritonUnreachableError) else ExitCode.FAILED


def _progress_printer(args: argparse.Namespace) -> LoadProgress | None:
    """On a terminal, one line per ~5 s of a long reload."""
    if args.json or not sys.stderr.isatty():
        return None
    last = [time.monotonic()]

    def show(elapsed_s: float, latest: str) -> None:
        if time.monotonic() - last[0] >= 5:
            last[0] = time.monotonic()
            line = f": {latest.splitlines()[0][:160]}" if latest else ""
            print(f"  reloading {args.model} ({format_duration(elapsed_s)}){line}", file=sys.stderr,
                  flush=True)
    return show


# -- config history ---------------------------------------------------------------------------
def run_history(args: argparse.Namespace) -> int:
    try:
        repository = _repository(resolve(repository=args.repository, stack=live_stack()))
        kept = revisions.history(repository, args.model)
        if args.show is not None:
            sys.stdout.buffer.write(revisions.read_revision(repository, args.model, args.show).data)
            return ExitCode.OK
        current = store.read_config(repository, args.model).sha256
    except GeAdminError as exc:
        return _fail(exc, args)
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
    add_actions(parser.add_subparsers(dest="config_command", required=True, metavar="ACTION"))


def add_actions(actions: Actions) -> None:
    """`validate`, `apply`, `rollback` and `history`, under the `config` command."""
    _register_validate(actions)
    _register_changes(actions)


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


_revision = number_argument(int, "revision number", lambda v: 1 <= v <= MAX_REVISION,
                            "a revision is a number from 1 to 2**63 - 1 (`geadmin config history MODEL` "
                            "lists them)")


def _register_changes(config_subparsers: Actions) -> None:
    apply = config_subparsers.add_parser(
        "apply", help="write a config and reload the model; roll back if Triton rejects it",
        description=CHANGES_HELP)
    apply.add_argument("model", metavar="MODEL", type=model_name)
    apply.add_argument("file", metavar="FILE", help="the new config.pbtxt ('-': standard input)")
    apply.add_argument("--load", action="store_true",
                       help="load the model even if it is not loaded (else the file is only written)")
    apply.add_argument("--smoke", action="store_true",
                       help="after the reload, send one request of zeros; if it fails, put the previous "
                            "config back and reload it")
    apply.add_argument("--no-validate", dest="validate", action="store_false",
                       help="apply even when `geadmin config validate` finds errors (Triton still "
                            "checks it, and a rejected config is rolled back)")
    _add_change_args(apply)
    _add_preview_args(apply)
    apply.set_defaults(func=run_apply)

    back = config_subparsers.add_parser(
        "rollback", help="apply a kept revision of a config (default: the previous one)")
    back.add_argument("model", metavar="MODEL", type=model_name)
    back.add_argument("revision", metavar="REVISION", type=_revision, nargs="?", default=None,
                      help="a revision number from `geadmin config history MODEL`")
    back.set_defaults(validate=False)  # a rollback skips the validator: that config served before
    _add_change_args(back)
    back.set_defaults(func=run_rollback)

    listing = config_subparsers.add_parser("history", help="the kept revisions of a model's config")
    listing.add_argument("model", metavar="MODEL", type=model_name)
    listing.add_argument("--show", type=_revision, default=None, metavar="REV", help="print one revision")
    listing.add_argument("--repository", default=None, metavar="PATH",
                         help="the model repository (env GEADMIN_REPOSITORY; default: the running stack's)")
    listing.add_argument("--json", action="store_true", help="print a JSON document")
    listing.set_defaults(func=run_history)


def _add_change_args(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    add_consent_args(parser)
    parser.add_argument("--expect-hash", default=None, metavar="SHA256",
                        help="apply only if the file on disk still has this sha256 (or a prefix of "
                        "at least 8 characters): what you started editing from")
    add_load_timeout_arg(parser, "the reload")


def _add_preview_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--preview", action="store_true",
                        help="apply nothing: serve FILE as a trial copy beside the live model, replay the "
                        "recorded load against both and print GO or NO-GO with the evidence (p99, "
                        "throughput, memory, error budget, ensembles it breaks); the trial is removed")
    parser.add_argument("--rate", type=float, default=None, metavar="REQ_PER_S",
                        help="--preview: replay this request rate instead of the recorded one")
    parser.add_argument("--mean", action="store_true",
                        help="--preview: replay the recorded mean rate (default: the recorded peak)")
    parser.add_argument("--history-h", type=float, default=1.0, metavar="HOURS",
                        help="--preview: the recorded load's window, in hours back from now (default 1)")
    parser.add_argument("--window-ms", type=int, default=DEFAULT_WINDOW_MS, metavar="MS",
                        help=f"--preview: perf_analyzer's measurement window (default {DEFAULT_WINDOW_MS}), "
                        f"longer when it would hold fewer than {JUDGED_REQUESTS_PER_WINDOW} requests at the "
                        "replayed rate")
    parser.add_argument("--metrics-url", default=None, metavar="URL",
                        help="--preview: Triton's /metrics, the key of its recorded history (default: the "
                        "server's own)")
