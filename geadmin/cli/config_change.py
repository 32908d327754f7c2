"""`geadmin config apply | rollback`: a config change, planned, asked, made and printed.

Each is one core function: `geadmin.ops.models.change_plan` (validation, rollback target,
impact, the question and the refusal audit, as the Config editor) then
`geadmin.ops.models.apply`; `apply --preview` serves the file as a trial and measures it
(`geadmin.ops.models.preview`). They register under `geadmin config` (geadmin.cli.config)
without importing it.
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
    fail_with_document,
    model_name,
    print_side_effects,
    revision_number,
    served_repository,
    sub_commands,
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
from geadmin.ops.models.change_plan import MIN_HASH_PREFIX, decline, expected_hash, plan_change
from geadmin.ops.models.explained_load import LoadProgress
from geadmin.ops.models.preview import DEFAULT_WINDOW_MS, PreviewLoad, preview_change
from geadmin.ops.models.preview_report import PreviewVerdict
from geadmin.repository.bounded import read_bounded, read_stream
from geadmin.repository.modelconfig import MAX_CONFIG_BYTES
from geadmin.stack.backends import served_backends

Actions = argparse._SubParsersAction  # argparse's own type for add_subparsers()
CHANGES_HELP = """`config apply MODEL FILE` writes FILE as MODEL's config.pbtxt atomically, keeps the old one
in the config history, and reloads the model; if Triton rejects it, the old file is put
back byte for byte and the real reason is printed; a load still running at the load timeout
keeps the new file, which Triton is loading, and names the revision to roll back to.
When Triton's live config shows it did not load the file (every changed field still at its
old value: --repository is not the repository it serves), the file is put back too.
Ctrl-C (or SIGTERM) during the change puts the previous file back and says so (exit 130).
Applying the same file again finishes an apply that was cut short after writing it.
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


# -- config apply / rollback ----------------------------------------------------------------
def run_apply(args: argparse.Namespace) -> int:
    fix = "is it the right file? a config.pbtxt is a regular text file of at most 4 MiB"
    try:
        data = (read_stream(sys.stdin.buffer, MAX_CONFIG_BYTES, what="the config on stdin", fix=fix)
                if args.file == "-" else read_bounded(args.file, MAX_CONFIG_BYTES, what="config apply",
                                                      fix=fix))
    except RepositoryError as exc:
        return _failed(exc, args)
    if args.preview:
        return _run_preview(args, data)
    return _run_change(args, data=data)


def _run_preview(args: argparse.Namespace, data: bytes) -> int:
    """`config apply --preview`: the candidate served as a trial beside the live model and
    measured at the recorded (or `--rate`) load; nothing applied (geadmin.ops.models.preview)."""
    target = target_from_args(args)
    try:
        load = PreviewLoad(args.rate, not args.mean, args.history_h, args.window_ms)
        repository = served_repository(target, "writes the config")
        with as_interrupts(), client_for(target, args) as client:  # like Ctrl-C: the trial is removed
            found = preview_change(client, repository, args.model, data, auth=guard.os_user(), load=load,
                                   metrics_url=args.metrics_url or target.urls().metrics,
                                   backends=served_backends(target), admin_key=target.spec.admin_key,
                                   progress=lambda text: print(f"  {text}", file=sys.stderr, flush=True))
    except GeAdminError as exc:
        return _failed(exc, args)
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
        repository = served_repository(target, "writes the config")
        auth, backends = guard.os_user(), served_backends(target)
        # SIGTERM ends it as Ctrl-C does (and Ctrl-C works in a job started with it ignored): the
        # apply puts the previous file back and says so before the command ends (exit 130)
        with as_interrupts(), client_for(target, args) as client:
            revision = args.revision if data is None else None  # only a rollback names one
            plan = plan_change(client, repository, args.model, new=data, revision=revision,
                               validate=args.validate, backends=backends, auth=auth)
            refusal = "" if plan.impact is None or plan.errors else consent(
                plan.impact, args, question=plan.question, declined=plan.declined())
            if refusal:
                return _failed(RepositoryError(decline(plan, auth, refusal)), args)
            expected, log, progress = (expected_hash(plan, args.expect_hash), target.log(),
                                       _progress_printer(args))
            said = _cut_short_printer(args)
            if data is None:
                result = rollback(client, repository, args.model, plan.revision, expected_sha256=expected,
                                  auth=auth, log=log, progress=progress, on_cut_short=said)
            else:
                result = apply_config(client, repository, args.model, data, expected_sha256=expected,
                                      auth=auth, log=log, progress=progress, load_unloaded=args.load,
                                      validate=args.validate, smoke=args.smoke, backends=backends,
                                      on_cut_short=said)
    except ConfigInvalidError as exc:
        code = _failed(exc, args)  # the cause first, then every finding
        if not args.json:
            print("\n".join(f"  {f}" for f in exc.findings), file=sys.stderr)
        return code
    except ConfigConflictError as exc:
        if exc.diff() and not args.json:
            print(exc.diff(), end="")
        return _failed(exc, args)
    except GeAdminError as exc:
        return _failed(exc, args)
    return _report(result, args)


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


def _cut_short_printer(args: argparse.Namespace) -> Callable[[ApplyResult], None]:
    """What an apply cut short by Ctrl-C or SIGTERM did on its way back: its one line (its
    document with --json), before the command ends with the interrupt's exit code."""
    def say(result: ApplyResult) -> None:
        if args.json:
            print(json.dumps(result.record(), indent=2), flush=True)
        print(f"geadmin: error: {result.message}", file=sys.stderr, flush=True)
        for warning in result.warnings:
            print(f"geadmin: warning: {warning}", file=sys.stderr, flush=True)
    return say


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


def register(subparsers: Actions) -> None:
    """`apply` and `rollback` under `geadmin config` (registered before, geadmin.cli.config)."""
    config_subparsers = sub_commands(subparsers, "config")
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
    back.add_argument("revision", metavar="REVISION", type=revision_number, nargs="?", default=None,
                      help="a revision number from `geadmin config history MODEL`")
    back.set_defaults(validate=False)  # a rollback skips the validator: that config served before
    _add_change_args(back)
    back.set_defaults(func=run_rollback)


def sha256_prefix(text: str) -> str:
    """--expect-hash: a sha256 in hex, or a prefix of at least MIN_HASH_PREFIX characters of one
    (`abc` had read as "changed since you opened it", and an empty value turned the check off)."""
    value = text.strip().lower()
    if not (MIN_HASH_PREFIX <= len(value) <= 64 and all(c in "0123456789abcdef" for c in value)):
        raise argparse.ArgumentTypeError(
            f"not a sha256: {text!r} — give the 64 hex digits `geadmin config history` shows, or at least "
            f"the first {MIN_HASH_PREFIX}")
    return value


def _add_change_args(parser: argparse.ArgumentParser) -> None:
    add_connection_args(parser)
    add_consent_args(parser)
    parser.add_argument("--expect-hash", default=None, metavar="SHA256", type=sha256_prefix,
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


def _failed(error: GeAdminError, args: argparse.Namespace) -> int:
    code = ExitCode.UNREACHABLE if isinstance(error, TritonUnreachableError) else ExitCode.FAILED
    return fail_with_document(error, args, code)
