"""`geadmin config apply|history|rollback` and `geadmin audit`: the config editor and the
Audit page, for scripts and terminals.

`config apply MODEL FILE` writes FILE as MODEL's config.pbtxt atomically, keeps the old one
in the config history, and reloads the model; if Triton rejects it, the old file is put
back byte for byte and the real reason is printed. `config rollback MODEL [REVISION]`
applies a kept revision the same way. Exit 0 when the config is in place, 1 when it was
refused or rolled back (the reason is printed), 3 when Triton is unreachable.

Both name the loaded ensembles that run the model first, and what the new config does to
them; when it would take one down, a terminal asks and a script is refused without `--yes`.
Afterwards every other model that changed state is printed with Triton's reason, and audited.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import AuditEntry
from geadmin.cli.common import (
    add_connection_args,
    client_for,
    format_table,
    positive_seconds,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.cli.models import (
    add_consent_args,
    consent,
    print_side_effects,
)
from geadmin.diagnose import impact
from geadmin.diagnose.explain import LoadProgress
from geadmin.domain import format_duration
from geadmin.errors import (
    ConfigConflictError,
    ConfigInvalidError,
    GeAdminError,
    RepositoryError,
    TritonUnreachableError,
)
from geadmin.ops.actions import audit_refusal
from geadmin.ops.apply import ApplyResult, apply_config, rollback, rollback_target
from geadmin.repository import atomic, revisions, store
from geadmin.repository.modelconfig import parse_pbtxt
from geadmin.repository.validate import refuse_invalid
from geadmin.stack.target import Target, is_stack_server, live_stack, resolve
from geadmin.triton.client import DEFAULT_LOAD_TIMEOUT_S, TritonClient

SubParsers = argparse._SubParsersAction  # argparse's own type for add_subparsers()
MESSAGE_WIDTH = 100


# -- config apply / rollback ----------------------------------------------------------
def run_apply(args: argparse.Namespace) -> int:
    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        return _fail(RepositoryError(f"cannot read {args.file}: {exc.strerror or exc}"))
    return _run_change(args, data=data)


def run_rollback(args: argparse.Namespace) -> int:
    return _run_change(args, data=None)


def _run_change(args: argparse.Namespace, *, data: bytes | None) -> int:
    """An apply (`data`) or a rollback (`args.revision`), printed; the exit code."""
    target = target_from_args(args)
    try:
        repository = _repository(target)
        expected = _expected_sha256(repository, args.model, args.expect_hash)
        auth, log, progress = guard.os_user(), target.log(), _progress_printer(args)
        actor = auth.who
        with client_for(target, args) as client:
            refusal = _consent(client, repository, args, data)
            if refusal:
                action = "rollback" if data is None else "apply"
                audit_refusal(client.url, action, [args.model], refusal, actor)
                return _fail(RepositoryError(refusal), args)
            if data is None:
                result = rollback(client, repository, args.model, args.revision, expected_sha256=expected,
                                  auth=auth, log=log, progress=progress)
            else:
                result = apply_config(client, repository, args.model, data, expected_sha256=expected,
                                      auth=auth, log=log, progress=progress, load_unloaded=args.load,
                                      validate=args.validate, smoke=args.smoke,
                                      backends=_stack_backends(target))
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


def _consent(client: TritonClient, repository: Path, args: argparse.Namespace, data: bytes | None) -> str:
    """Name what the new config does to the ensembles that run the model; "" to go ahead. A
    config the validator rejects is not asked about: the apply refuses it (audited), with why."""
    action = "apply" if data is not None else "rollback"
    if data is None:
        current = store.read_config(repository, args.model)
        data = rollback_target(repository, args.model, args.revision, current.sha256).data
    try:
        text = data.decode("utf-8")
        if args.validate:
            refuse_invalid(args.model, text, repository / args.model)
        new = parse_pbtxt(text)
    except (UnicodeDecodeError, GeAdminError):
        return ""  # the apply refuses it, with the reason
    return consent(impact.predict(client, action, [args.model], repository=repository,
                                  new_configs={args.model: new}), args)


def _stack_backends(target: Target) -> frozenset[str] | None:
    """The backends of the target when it is this machine's embedded stack, else None."""
    stack = live_stack()
    pid = stack.triton_pid if stack is not None and is_stack_server(target.spec.url, stack) else None
    return impact.process_backends(pid)


def _repository(target: Target) -> Path:
    if target.repository is None:
        raise RepositoryError(
            f"which model repository does {target.spec.url} serve? geadmin writes the config there: "
            "pass --repository PATH or set GEADMIN_REPOSITORY (the embedded stack's is found by itself)")
    return target.repository


def _expected_sha256(repository: Path, model: str, given: str | None) -> str | None:
    """The full hash when `given` is a prefix of the file's (history prints 12 characters)."""
    if not given:
        return None
    current = store.read_config(repository, model).sha256
    return current if len(given) >= 8 and current.startswith(given.lower()) else given


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


# -- config history -------------------------------------------------------------------
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
    rows += [(f"{r.number}{'*' if r.sha256 == current else ''}", _local(r.at), r.who, r.sha256[:12], r.note)
             for r in kept]
    print(format_table(rows))
    print("* = the file on disk now; `--show REV` prints a revision, `geadmin config rollback "
          f"{args.model} REV` applies it")
    return ExitCode.OK


# -- audit ------------------------------------------------------------------------------
def run_audit(args: argparse.Namespace) -> int:
    try:
        since = audit.parse_since(args.since) if args.since else None
        entries = audit.query(since=since, model=args.model, action=args.action, limit=args.limit)
        if args.csv == "-":
            audit.write_csv(entries, sys.stdout)
            return ExitCode.OK
        if args.csv:
            atomic.atomic_write(Path(args.csv).expanduser(), audit.csv_text(entries).encode("utf-8"))
            print(f"wrote {len(entries)} audit rows to {args.csv}", file=sys.stderr)
            return ExitCode.OK
    except GeAdminError as exc:
        return _fail(exc, args)
    if args.json:
        print(json.dumps([entry.record() for entry in entries], indent=2))
    elif not entries:
        filtered = args.since or args.model or args.action
        print("no audit rows match" if filtered else "the audit log is empty")
    else:
        print(render_audit(entries, diffs=args.diff))
    return ExitCode.OK


def render_audit(entries: list[AuditEntry], *, diffs: bool = False) -> str:
    header = ("WHEN", "WHO", "ORIGIN", "MODEL", "ACTION", "RESULT", "SERVER", "MESSAGE")
    rows = [(_local(e.at), e.who, e.origin, e.model, e.action, e.result, e.server,
             _first_line(e.message)) for e in entries]
    if not diffs:
        return format_table([header, *rows])
    blocks = []
    for entry, row in zip(entries, rows, strict=True):
        block = format_table([header, row])
        if entry.diff:
            block += "\n" + "\n".join(f"    {line}" for line in entry.diff.splitlines())
        blocks.append(block)
    return "\n\n".join(blocks)


def _first_line(text: str) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= MESSAGE_WIDTH else line[:MESSAGE_WIDTH - 1] + "…"


def _local(moment: datetime) -> str:
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


# -- registration -----------------------------------------------------------------------
def register_config_subcommands(config_subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add `apply`, `history` and `rollback` to the `config` command's sub-commands."""
    apply = config_subparsers.add_parser(
        "apply", help="write a config and reload the model; roll back if Triton rejects it",
        description=__doc__)
    apply.add_argument("model", metavar="MODEL")
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
    apply.set_defaults(func=run_apply)

    back = config_subparsers.add_parser(
        "rollback", help="apply a kept revision of a config (default: the previous one)")
    back.add_argument("model", metavar="MODEL")
    back.add_argument("revision", metavar="REVISION", type=int, nargs="?", default=None,
                      help="a revision number from `geadmin config history MODEL`")
    back.set_defaults(validate=False)  # a rollback skips the validator: that config served before
    _add_change_args(back)
    back.set_defaults(func=run_rollback)

    listing = config_subparsers.add_parser("history", help="the kept revisions of a model's config")
    listing.add_argument("model", metavar="MODEL")
    listing.add_argument("--show", type=int, default=None, metavar="REV", help="print one revision")
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
    parser.add_argument("--load-timeout", type=positive_seconds, default=DEFAULT_LOAD_TIMEOUT_S,
                        help=f"seconds to wait for the reload (default {DEFAULT_LOAD_TIMEOUT_S:g})")


def register_audit(subparsers: SubParsers[argparse.ArgumentParser]) -> None:
    """Add the top-level `audit` command."""
    parser = subparsers.add_parser("audit", help="who changed what: the audit log (filter, export)",
                                   description="The audit log of the workspace ($GEADMIN_HOME/geadmin.db), "
                                   "newest first.")
    parser.add_argument("--since", default=None, metavar="WHEN",
                        help="a duration (30m, 2h, 7d) or a date / time (2025-01-31, 2025-01-31T14:00)")
    parser.add_argument("--model", default=None, help="only this model's rows")
    parser.add_argument("--action", default=None, help="only this action (apply, rollback, load, ...)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N rows")
    parser.add_argument("--diff", action="store_true", help="print each row's config diff")
    parser.add_argument("--json", action="store_true", help="print a JSON document (diffs included)")
    parser.add_argument("--csv", default=None, metavar="FILE", help="export the rows as CSV ('-': stdout)")
    parser.set_defaults(func=run_audit)


register = register_audit  # `COMMANDS` in geadmin/cli/main.py calls `module.register(subparsers)`
