"""What the commands share: the options of those that talk to a Triton and how they pick it,
a command's sub-commands added by other modules (`geadmin npu remedy`), the one table layout,
the consent asked before a change that takes an ensemble down, and what else changed state
after one. A command module imports only this one of its siblings
(tests/unit/test_architecture.py)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from geadmin import settings
from geadmin.audit import Actor, Origin
from geadmin.cli import terminal
from geadmin.diagnose.impact import Impact
from geadmin.diagnose.state_changes import StateChange
from geadmin.domain import Endpoint, Transport
from geadmin.errors import ConfigInvalidError, GeAdminError, RepositoryError
from geadmin.ops.models import reconcile
from geadmin.repository.layout import is_utf8
from geadmin.repository.revisions import MAX_REVISION
from geadmin.stack.log_discovery import with_found_log
from geadmin.stack.target import Target, live_stack, resolve
from geadmin.triton.client import TritonClient
from geadmin.triton.connection import DEFAULT_TIMEOUT_S
from geadmin.triton.servers import DEFAULT_TRITON_URL

N = TypeVar("N", int, float)


def add_load_timeout_arg(parser: argparse.ArgumentParser, what: str = "each load") -> None:
    parser.add_argument("--load-timeout", type=positive_seconds, default=None, metavar="S",
                        help=f"seconds to wait for {what} before saying it has not finished (env "
                        "GEADMIN_LOAD_TIMEOUT_S, default 120; the load goes on in Triton)")


def add_connection_args(parser: argparse.ArgumentParser, *, log_and_repository: bool = True) -> None:
    target = parser.add_mutually_exclusive_group()
    target.add_argument(
        "--url",
        default=None,
        help="Triton endpoint: http://host:8000 or grpc://host:8001 (env GEADMIN_TRITON_URL; "
        f"default: the workspace's running `geadmin up`, else {DEFAULT_TRITON_URL})",
    )
    target.add_argument(
        "--server",
        default=None,
        metavar="NAME",
        help="a server by name, from GEADMIN_SERVERS_FILE or GEADMIN_TRITON_URLS",
    )
    parser.add_argument(
        "--protocol",
        choices=[t.value for t in Transport],
        default=None,
        help="talk HTTP or gRPC: with --url, to that address whatever its scheme says (a bare "
        "host:port is HTTP); else to the chosen server's endpoint of that protocol (the running "
        "stack's, the servers file's, else GEADMIN_HTTP_PORT / GEADMIN_GRPC_PORT on its host)",
    )
    parser.add_argument(
        "--admin-key",
        default=None,
        help="key for Triton's restricted APIs, sent on those calls only (env GEADMIN_ADMIN_KEY, "
        "for the default server; the running stack's own key is found in its workspace)",
    )
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        default=DEFAULT_TIMEOUT_S,
        help=f"seconds to wait for each answer (default {DEFAULT_TIMEOUT_S:g})",
    )
    parser.add_argument("--json", action="store_true", help="print a JSON document")
    if log_and_repository:
        parser.add_argument("--triton-log", default=None, metavar="PATH",
                            help="Triton's log file, read to explain failures (env GEADMIN_TRITON_LOG, "
                            "for the server it belongs to; default: the running stack's log)")
        parser.add_argument("--repository", default=None, metavar="PATH",
                            help="the served model repository, to check layouts and show configs of "
                            "models that are not loaded (env GEADMIN_REPOSITORY; default: the "
                            "running stack's)")


def sub_commands(subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
                 parent: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    """The sub-commands of command `parent` (registered before), made on first use: a module adds
    `geadmin npu remedy` without importing the `npu` module, and the command alone still runs."""
    parser = subparsers.choices[parent]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return parser.add_subparsers(dest=f"{parent}_command", metavar="SUBCOMMAND", required=False)


def fail(exc: BaseException, code: int) -> int:
    """Print `exc` as one `geadmin: error:` line on stderr (its own line breaks folded) and
    return the exit `code` the command chose for it."""
    print(f"geadmin: error: {' '.join(str(exc).split())}", file=sys.stderr)
    return code


def model_name(text: str) -> str:
    """argparse `type=` for a model name: UTF-8 text. Argv bytes that are not UTF-8 arrive as
    lone surrogates, which no database, URL or Triton takes: a usage error, before anything."""
    if not is_utf8(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not valid UTF-8: a model name is UTF-8 text; "
                                         "rename the model directory to a UTF-8 name")
    return text


def number_argument(convert: Callable[[str], N], noun: str, accepts: Callable[[N], bool],
                    rule: str) -> Callable[[str], N]:
    """An argparse `type=` for a number: `convert` the text, else "not a {noun}: 'text'"; a
    value `accepts` refuses is "{rule}, got text". Every numeric flag reads this way."""

    def parse(text: str) -> N:
        try:
            value = convert(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"not a {noun}: {text!r}") from exc
        if not accepts(value):
            raise argparse.ArgumentTypeError(f"{rule}, got {text}")
        return value

    parse.__name__ = noun.replace(" ", "_")  # argparse names the type by it
    return parse


# `0 < v` is also false for nan, and the bound refuses inf
positive_seconds = number_argument(float, "number of seconds", lambda v: 0 < v < 1e6,
                                   "seconds must be more than 0")
port_number = number_argument(int, "port number", settings.is_port, "a port is between 1 and 65535")


def format_table(rows: Sequence[Sequence[object]], *, right: bool = False) -> str:
    """The CLI's one table layout: rows of cells (the header first) in columns two spaces
    apart, each as wide as its widest cell; text left-aligned with no trailing spaces, or
    figures right-aligned (`right`). A cell is measured as the terminal shows it (escapes of
    others' control characters included: geadmin.cli.terminal)."""
    cells = [[terminal.visible(str(cell)) for cell in row] for row in rows]
    if not cells:
        return ""
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    pad = str.rjust if right else str.ljust
    return "\n".join("  ".join(pad(cell, width) for cell, width in zip(row, widths, strict=True)).rstrip()
                     for row in cells)


def local_time(moment: datetime) -> str:
    """A moment as the CLI's tables print it: local time, to the second."""
    return moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def target_from_args(args: argparse.Namespace) -> Target:
    """The server, log and repository the flags, settings and running stack name; notes
    about settings that do not apply go to stderr, once."""
    target = resolve(url=args.url, server=args.server, admin_key=args.admin_key,
                     triton_log=getattr(args, "triton_log", None),
                     repository=getattr(args, "repository", None), stack=live_stack())
    if hasattr(args, "triton_log"):  # a command that explains failures from the log: find it
        target = with_found_log(target)
    # A change an earlier geadmin left cut short (killed mid-apply / mid-create) is closed and said.
    cut_short = reconcile.at_start(target.repository, actor=Actor.os_user(Origin.CLI))
    for note in [*target.notes, *cut_short]:
        print(f"geadmin: note: {note}", file=sys.stderr)
    return target


def protocol_url(target: Target, protocol: str | None, url_flag: str | None) -> str:
    """The URL a command talks to: the target's, over `--protocol` when given — the same
    address with that scheme for an explicit `--url`, else the server's own endpoint of that
    protocol (geadmin.stack.target.server_urls: e.g. the running stack's gRPC port)."""
    if not protocol:
        return target.spec.url
    transport = Transport(protocol)
    if url_flag:
        return replace(Endpoint.parse(target.spec.url), transport=transport).url
    return target.urls().url(transport)


def client_for(target: Target, args: argparse.Namespace) -> TritonClient:
    url = protocol_url(target, getattr(args, "protocol", None), getattr(args, "url", None))
    return TritonClient(url, admin_key=target.spec.admin_key, timeout_s=args.timeout,
                        load_timeout_s=settings.LOAD_TIMEOUT_S.get(getattr(args, "load_timeout", None)))


def triton_metrics(args: argparse.Namespace) -> tuple[str, bool]:
    """(Triton's /metrics URL, given by the user?): `--metrics-url`, else the default server's
    metrics URL by the one rule the NPU page uses too (geadmin.stack.target.server_urls)."""
    if args.metrics_url:
        return str(args.metrics_url), True
    urls = resolve(stack=live_stack()).urls()
    return urls.metrics, "metrics" in urls.given


def add_consent_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-y", "--yes", action="store_true",
                        help="go ahead even when the change takes down an ensemble that runs the model "
                        "(named first; without a terminal such a change is refused unless --yes)")


def consent(found: Impact, args: argparse.Namespace, *, question: str = "", declined: str = "") -> str:
    """Name the ensembles the change touches (on stderr); "" to go ahead, else why not. A change
    that takes one down needs `--yes` / `--with-dependents`, or a "y" typed at a terminal to
    `question` (else declined with `declined`)."""
    if found.problem:
        print(f"geadmin: warning: {found.problem}", file=sys.stderr)
    if not found.consequences:
        return ""
    print(f"geadmin: {found.action} {', '.join(found.models)}: {found.headline()}", file=sys.stderr)
    for line in found.lines():
        print(f"  {line}", file=sys.stderr)
    if not found.takes_down or args.yes or getattr(args, "with_dependents", False):
        return ""
    down = ", ".join(found.taken_down)
    if sys.stdin.isatty() and not args.json:
        answer = input(f"{question or f'Take down {down} too?'} [y/N] ")
        yes = answer.strip().lower() in ("y", "yes")
        return "" if yes else declined or f"not confirmed: {down} would go down"
    return (f"refused: the {found.action} of {', '.join(found.models)} would take down {down}, and standard "
            "input is not a terminal to ask; pass --yes (or --with-dependents) to go ahead. Nothing was done")


def print_side_effects(side_effects: Sequence[StateChange]) -> None:
    """What else changed state, with Triton's reason (stderr: it is a warning for scripts too)."""
    if side_effects:
        print("geadmin: warning: also changed state (audited as side_effect):", file=sys.stderr)
        for change in side_effects:
            print(f"  {change.text()}", file=sys.stderr)


def add_npu_source_args(parser: argparse.ArgumentParser, *, npu_smi_file: str, metrics_url: str) -> None:
    """--exporter-url, --npu-smi-file and --metrics-url: where the NPU commands read (their help
    says what each command reads there)."""
    parser.add_argument("--exporter-url", default=None, metavar="URL",
                        help="npu-exporter's metrics, e.g. http://host:8082/metrics (env "
                        "GEADMIN_NPU_EXPORTER_URL)")
    parser.add_argument("--npu-smi-file", default=None, metavar="FILE", help=npu_smi_file)
    parser.add_argument("--metrics-url", default=None, metavar="URL", help=metrics_url)


def served_repository(target: Target, does: str) -> Path:
    """The model repository `target` serves, where a command writes (`does`: what it writes)."""
    if target.repository is None:
        raise RepositoryError(
            f"which model repository does {target.spec.url} serve? geadmin {does} there: pass "
            "--repository PATH or set GEADMIN_REPOSITORY (the embedded stack's is found by itself)")
    return target.repository


def fail_with_document(error: GeAdminError, args: argparse.Namespace | None, code: int) -> int:
    """`fail` for a command with --json: the error as a JSON document on stdout too (with a
    config's findings); returns the exit `code` the command chose for it."""
    if args is not None and args.json:
        document: dict[str, object] = {"ok": False, "error": str(error), "kind": type(error).__name__}
        if isinstance(error, ConfigInvalidError):
            document["findings"] = [f.to_dict() for f in error.findings]
        print(json.dumps(document, indent=2))
    print(f"geadmin: error: {error}", file=sys.stderr)
    return code


revision_number = number_argument(int, "revision number", lambda v: 1 <= v <= MAX_REVISION,
                            "a revision is a number from 1 to 2**63 - 1 (`geadmin config history MODEL` "
                            "lists them)")
