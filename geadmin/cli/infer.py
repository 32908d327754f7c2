"""`geadmin infer MODEL`: one test request, its outputs, latency and Triton's breakdown.

Inputs not named by `--input` get random data (seeded by `--seed`). `--print-curl` /
`--print-python` print the same request as a command instead of sending it (a large body
is written beside it, to request.json / request.bin / request_inputs.json in the current
directory). Exit 0 when Triton answered, 1 when it rejected the request, 2 for bad input or
usage, 3 when Triton is unreachable.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import stat
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from geadmin.cli.common import add_connection_args, client_for, fail, protocol_url, target_from_args
from geadmin.cli.exit_codes import ExitCode
from geadmin.disk import next_step
from geadmin.domain import Transport
from geadmin.errors import GeAdminError, InferInputError, TritonError, TritonUnreachableError
from geadmin.ops.infer.images import Normalize
from geadmin.ops.infer.inputs import InputSource, SourceKind
from geadmin.ops.infer.outputs import ClassScore, rank_outputs, tensor_record, top_k_plan
from geadmin.ops.infer.request import InferRequest, InferResult, build_request, prepare, send
from geadmin.ops.infer.snippets import Snippet, curl_command, python_snippet
from geadmin.ops.infer.spec import ModelSpec, read_local_file
from geadmin.stack.target import Target

WRITE_ELSEWHERE = "run the command in a directory you can write"


def run(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    try:
        with client_for(target, args) as client:
            spec = prepare(client, args.model)
            if spec.note:
                print(f"note: {spec.note}", file=sys.stderr)
            plan = top_k_plan(spec, args.top_k, args.output or (), target.repository)
            request = build_request(
                spec, _sources(args, spec), shapes=_shapes(args.shape), batch_size=args.batch_size,
                seed=args.seed, outputs=args.output or (), class_count=plan.class_count)
            if args.print_curl or args.print_python:
                _print_snippet(args, target, request, spec)
                return ExitCode.OK
            result = send(client, request)
        ranked = rank_outputs(result, plan)
    except InferInputError as exc:
        return fail(exc, ExitCode.USAGE)
    except TritonError as exc:
        return fail(exc, ExitCode.UNREACHABLE if isinstance(exc,
                                                             TritonUnreachableError) else ExitCode.FAILED)
    except GeAdminError as exc:
        return fail(exc, ExitCode.USAGE)
    if args.json:
        print(json.dumps(result_record(result, ranked), indent=2))
    else:
        print(render(result, ranked))
    return ExitCode.OK


# -- arguments -----------------------------------------------------------------------------
def _sources(args: argparse.Namespace, spec: ModelSpec) -> dict[str, InputSource]:
    sources = {}
    names = [s.name for s in spec.inputs]
    for text in args.input or ():
        name, sep, rest = text.partition("=")
        if not sep or name not in names:
            if len(names) != 1:
                raise InferInputError(f"--input {text!r}: give NAME=SOURCE, NAME one of {', '.join(names)}")
            name, rest = names[0], text
        source = InputSource.parse(rest, read_file=read_local_file)
        if source.kind is SourceKind.IMAGE:
            source = replace(source, normalize=Normalize(args.normalize))
        sources[name] = source
    return sources


def _shapes(items: list[str] | None) -> dict[str, list[int]]:
    shapes = {}
    for text in items or ():
        name, sep, dims = text.partition("=")
        try:
            if not sep:
                raise ValueError
            shapes[name] = [int(d) for d in dims.split(",")]
        except ValueError as exc:
            raise InferInputError(f"--shape {text!r}: give NAME=D1,D2,... "
                                  "(e.g. INPUT0=1,3,224,224)") from exc
    return shapes


def _print_snippet(args: argparse.Namespace, target: Target, request: InferRequest, spec: ModelSpec) -> None:
    """The server's own HTTP endpoint for curl (geadmin.stack.target.server_urls: the stack's
    port, the servers file's http_url), the URL the request would go to for Python."""
    if args.print_curl:
        urls = target.urls()
        if urls.is_guess(Transport.HTTP):
            print(f"geadmin: note: curl speaks HTTP: the command uses {urls.http}, from GEADMIN_HTTP_PORT on "
                  "the server's host; change it if this Triton listens elsewhere", file=sys.stderr)
        snippet = curl_command(urls.http, request, output_types={o.name: o.datatype for o in spec.outputs})
    else:
        snippet = python_snippet(protocol_url(target, args.protocol, args.url), request)
    _write_files(snippet)
    print(snippet.text)


def _write_files(snippet: Snippet, directory: Path | None = None) -> None:
    """The files the snippet reads, in `directory` (default: the current one). Each goes to a
    temporary file made with O_EXCL|O_NOFOLLOW, renamed over the name: nothing is written
    through a link. A regular file there (the previous run's) is replaced, and said; a link
    (the old write followed it and overwrote its target), a directory or anything else is
    refused; a failed write is one InferInputError with the path and the fix (exit 2)."""
    if directory is None:
        try:
            directory = Path(os.getcwd())
        except OSError as exc:  # removed under the shell, or unreadable
            raise InferInputError(f"cannot write {', '.join(snippet.files)}: the current directory is gone "
                                  f"or unreadable ({exc.strerror or exc}): {WRITE_ELSEWHERE}") from exc
    for name, content in snippet.files.items():
        path = directory / name
        try:
            replaced = _regular_file_or_nothing(path)
            temp = directory / f".{name}.{secrets.token_hex(6)}.tmp"
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(content)
                os.replace(temp, path)  # replaces the name itself: a link raced in is replaced, not followed
            except BaseException:
                temp.unlink(missing_ok=True)
                raise
        except OSError as exc:
            raise InferInputError(f"cannot write {path}: {exc.strerror or exc}: "
                                  f"{next_step(exc, directory, WRITE_ELSEWHERE)}") from exc
        print(f"geadmin: note: wrote {path}{', replacing the file there' if replaced else ''} (the command "
              "reads it)", file=sys.stderr)


def _regular_file_or_nothing(path: Path) -> bool:
    """True when a regular file is at `path` (it will be replaced), False when nothing is;
    InferInputError for a link, a directory or anything else."""
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISREG(found.st_mode):
        return True
    if stat.S_ISLNK(found.st_mode):
        raise InferInputError(f"{path} is a symbolic link: geadmin never writes through a link; remove it, "
                              f"or {WRITE_ELSEWHERE} that has none")
    kind = ("a directory" if stat.S_ISDIR(found.st_mode)
            else "not a regular file (a device, a pipe or a socket)")
    raise InferInputError(f"{path} is {kind}: geadmin writes the snippet's file there; remove or rename it, "
                          f"or {WRITE_ELSEWHERE}")


# -- output --------------------------------------------------------------------------------
def result_record(result: InferResult, ranked: dict[str, list[list[ClassScore]]]) -> dict[str, Any]:
    server = result.server
    return {
        "model": result.model, "version": result.version, "protocol": result.protocol,
        "latency_ms": result.latency_ms,
        "server": None if server is None else {
            "queue_us": server.queue_us, "compute_input_us": server.compute_input_us,
            "compute_infer_us": server.compute_infer_us, "compute_output_us": server.compute_output_us,
            "requests": server.requests, "approximate": server.approximate},
        "server_note": result.server_note,
        "outputs": [tensor_record(t) for t in result.outputs],
        "top_k": {name: [[{"index": c.index, "score": c.score, "label": c.label} for c in row]
                         for row in rows]
                  for name, rows in ranked.items()},
    }


def render(result: InferResult, ranked: dict[str, list[list[ClassScore]]]) -> str:
    lines = [f"{result.model} (version {result.version or '?'}) over {result.protocol}: "
             f"{result.latency_ms:.2f} ms end to end"]
    server = result.server
    if server is not None:
        lines.append(f"server: queue {server.queue_us / 1000:.3f} ms, "
                     f"compute input {server.compute_input_us / 1000:.3f} ms, "
                     f"infer {server.compute_infer_us / 1000:.3f} ms, "
                     f"output {server.compute_output_us / 1000:.3f} ms")
    if result.server_note:
        lines.append(f"note: {result.server_note}")
    with np.printoptions(threshold=200, edgeitems=4, linewidth=100):
        for tensor in result.outputs:
            lines.append(f"{tensor.name}  {tensor.datatype} [{', '.join(map(str, tensor.shape))}]")
            lines += ["  " + line for line in str(tensor.data).splitlines()]
    for name, rows in ranked.items():
        for item, row in enumerate(rows):
            lines.append(f"top {len(row)} of {name}" + (f" (item {item})" if len(rows) > 1 else "") + ":")
            lines += [f"  {rank}. {c.index}{' ' + c.label if c.label else ''}  {c.score:.6g}"
                      for rank, c in enumerate(row, 1)]
    return "\n".join(lines)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("infer", help="send one test request to a model",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL")
    add_connection_args(parser, log_and_repository=False)
    parser.add_argument("--repository", default=None, metavar="PATH",
                        help="the served model repository, to read labels files for --top-k (env "
                        "GEADMIN_REPOSITORY; default: the running stack's; without it Triton's "
                        "classification extension supplies the labels)")
    parser.add_argument("--input", action="append", metavar="NAME=SOURCE",
                        help="random | zeros | ones | @file.npy | @image.png | json:DATA | text:STRING "
                        "(repeat per input; default random)")
    parser.add_argument("--shape", action="append", metavar="NAME=D1,D2,...",
                        help="the full shape of an input, batch included (fills -1 dims)")
    parser.add_argument("--batch-size", type=int, default=1,
                        help="batch size of generated inputs (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    parser.add_argument("--normalize", choices=[n.value for n in Normalize], default=Normalize.NONE.value,
                        help="how image pixels become values (default none: 0..255)")
    parser.add_argument("--output", action="append", metavar="NAME", help="ask for this output (repeat)")
    parser.add_argument("--top-k", type=int, default=0, metavar="K",
                        help="the K best classes of each output, with labels when the model has them")
    snippets = parser.add_mutually_exclusive_group()
    snippets.add_argument("--print-curl", action="store_true", help="print the request as curl, do not send")
    snippets.add_argument("--print-python", action="store_true",
                          help="print the request as a Python tritonclient script, do not send")
    parser.set_defaults(func=run)
