"""`geadmin bench MODEL`: a perf_analyzer load test, saved in the workspace; `--list`, `--compare A B`.

The request is the playground's (`geadmin infer`): `--input NAME=SOURCE` per input, a bare
SOURCE for every input not named, random (seeded by `--seed`) otherwise. Progress goes to
stderr, the figures to stdout. Loads, window and trials are bounded (geadmin.ops.bench.params),
and one load test runs against a server at a time. Exit 0 when the run is measured and saved,
1 when perf_analyzer failed (no stable measurement, rejected input, timeout, missing binary) or
another load test runs against the server, 2 for bad usage or input (loads out of bounds
included), 3 when Triton is unreachable.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from geadmin.access import guard
from geadmin.cli.common import (
    add_connection_args,
    client_for,
    fail,
    format_table,
    positive_seconds,
    protocol_url,
    target_from_args,
)
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import (
    BenchSettingsError,
    GeAdminError,
    InferInputError,
    PerfAnalyzerError,
    TritonError,
    TritonUnreachableError,
)
from geadmin.ops.bench.load_test import SHARED_MEMORY, BenchSettings, load_test, parse_loads
from geadmin.ops.bench.results import (
    CONCURRENCY,
    REQUEST_RATE,
    BenchRun,
    Comparison,
    compare,
    describe_load,
    list_runs,
    load_run,
    sent_late_note,
)
from geadmin.ops.infer.inputs import RANDOM, InputSource
from geadmin.ops.infer.spec import read_local_file

DEFAULT_CONCURRENCY = "1,4,16"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "bench", help="load-test a model with perf_analyzer; list and compare saved runs",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", nargs="?", help="the model to load-test")
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--list", action="store_true", help="list the saved runs (of MODEL, if given)")
    what.add_argument("--compare", nargs=2, type=int, metavar=("A", "B"),
                      help="compare saved runs A and B: A's throughput and p99 over B's, per load")
    loads = parser.add_mutually_exclusive_group()
    loads.add_argument("--concurrency", metavar="N,N,...", default=None,
                       help=f"concurrencies to measure (default {DEFAULT_CONCURRENCY})")
    loads.add_argument("--request-rate", metavar="R,R,...", default=None,
                       help="request rates (requests/s) to measure, instead of concurrencies")
    parser.add_argument("--input", action="append", metavar="NAME=SOURCE",
                        help="data for an input: random, zeros, ones, json:DATA, text:STRING, "
                        "@file.npy (a bare SOURCE applies to every input not named)")
    parser.add_argument("--batch-size", type=int, default=1, help="batch size of each request (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of random inputs (default 0)")
    parser.add_argument("--shared-memory", choices=SHARED_MEMORY, default="none",
                        help="system: tensors travel in POSIX shared memory, not on the wire, so a "
                             "large tensor measures the server rather than the network (perf_analyzer "
                             "and Triton must share /dev/shm: one host); default none")
    parser.add_argument("--label", default="", help='a note kept with the run, e.g. "dynamic batching on"')
    parser.add_argument("--measurement-interval", type=int, default=5000, metavar="MS",
                        help="perf_analyzer's measurement window in ms (default 5000)")
    parser.add_argument("--measurement-mode", choices=("time_windows", "count_windows"),
                        default="time_windows", help="how windows are made (default time_windows)")
    parser.add_argument("--measurement-request-count", type=int, default=50, metavar="N",
                        help="count_windows: requests per window (default 50)")
    parser.add_argument("--stability-percentage", type=float, default=10.0, metavar="PCT",
                        help="how far 3 windows in a row may differ to count as stable (default 10; "
                             "0: no gate, the first 3 windows count, noise and all)")
    parser.add_argument("--max-trials", type=int, default=10, metavar="N",
                        help="windows per point before perf_analyzer gives up on stability (default 10)")
    parser.add_argument("--max-threads", type=int, default=None, metavar="N",
                        help="request rate: perf_analyzer's sending threads, the requests it keeps in flight "
                             "(default its own, 4: a rate times the model's latency above that is sent late)")
    parser.add_argument("--run-timeout", type=positive_seconds, default=None, metavar="S",
                        help="stop perf_analyzer after S seconds (default: enough for every trial)")
    parser.add_argument("--perf-analyzer", default=None, metavar="PATH",
                        help="perf_analyzer binary (default: the venv's, from the tritonclient wheel)")
    parser.add_argument("--home", default=None, metavar="DIR",
                        help="workspace whose database keeps the runs (env GEADMIN_HOME)")
    add_connection_args(parser, log_and_repository=False)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    home = Path(args.home).expanduser() if args.home else None
    try:
        if args.list:
            return _list(args, home)
        if args.compare:
            return _compare(args, home)
        if not args.model:
            raise InferInputError("name the MODEL to load-test (or give --list / --compare A B)")
        return _bench(args, home)
    except TritonError as exc:
        return fail(exc, ExitCode.UNREACHABLE if isinstance(exc,
                                                             TritonUnreachableError) else ExitCode.FAILED)
    except BenchSettingsError as exc:  # loads, window, trials: the user's to fix
        return fail(exc, ExitCode.USAGE)
    except PerfAnalyzerError as exc:
        return fail(exc, ExitCode.FAILED)
    except GeAdminError as exc:
        return fail(exc, ExitCode.USAGE)


# -- running -------------------------------------------------------------------------------
def _bench(args: argparse.Namespace, home: Path | None) -> int:
    target = target_from_args(args)
    mode = REQUEST_RATE if args.request_rate else CONCURRENCY
    loads = parse_loads(args.request_rate or args.concurrency or DEFAULT_CONCURRENCY, mode)
    sources, default = parse_sources(args.input or ())
    url = protocol_url(target, args.protocol, args.url)  # the server's own port of that protocol
    settings = BenchSettings(
        args.model, url, mode, loads, measurement_interval_ms=args.measurement_interval,
        measurement_mode=args.measurement_mode, measurement_request_count=args.measurement_request_count,
        max_trials=args.max_trials, stability_percentage=args.stability_percentage,
        batch_size=args.batch_size, seed=args.seed, timeout_s=args.run_timeout,
        shared_memory=args.shared_memory, max_threads=args.max_threads,
        inputs={name: text for name, text in _source_texts(args.input or ())})
    with client_for(target, args) as client:
        result = load_test(client, settings, sources, default=default, progress=_progress,
                           binary=args.perf_analyzer, auth=guard.os_user(), label=args.label, home=home)
    if args.json:
        print(json.dumps(result.record(), indent=2))
    else:
        print(render_run(result))
    if result.cut_short:  # the points before it are printed and kept; the run did not finish
        print(f"geadmin: error: cut short: {' '.join(result.cut_short.split())}", file=sys.stderr)
        return ExitCode.FAILED
    return ExitCode.OK


def _progress(done: int, total: int, text: str) -> None:
    print(f"[{done}/{total}] {text}", file=sys.stderr, flush=True)


def _source_texts(items: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for text in items:
        name, sep, rest = text.partition("=")
        if not sep or any(c in name for c in ":@"):  # a bare source (json:..., text:a=b, @f.npy)
            pairs.append(("*", text))
        else:
            pairs.append((name, rest))
    return pairs


def parse_sources(items: Sequence[str]) -> tuple[dict[str, InputSource], InputSource]:
    """({input: source}, the source of every other input)."""
    sources: dict[str, InputSource] = {}
    default = RANDOM
    for name, text in _source_texts(items):
        source = InputSource.parse(text, read_file=read_local_file)
        if name == "*":
            default = source
        else:
            sources[name] = source
    return sources, default


# -- showing -------------------------------------------------------------------------------
POINT_HEADER = ("load", "infer/s", "p50 ms", "p90 ms", "p99 ms", "avg ms", "client ms", "queue ms",
                "compute ms")


def render_run(run: BenchRun) -> str:
    rows = [(f"{p.load:g}", f"{p.throughput_per_s:.1f}", f"{p.p50_ms:.2f}", f"{p.p90_ms:.2f}",
             f"{p.p99_ms:.2f}", f"{p.avg_ms:.2f}", f"{p.client_ms:.2f}", f"{p.queue_ms:.2f}",
             f"{p.compute_ms:.2f}") for p in run.points]
    kind = "concurrency" if run.mode == CONCURRENCY else "requests/s"
    saved = f"saved as run #{run.id}" if run.id is not None else "not saved"
    note = f"\nnote: {late}" if (late := sent_late_note(run)) else ""
    if run.cut_short:
        note += f"\ncut short after {len(run.points)} point(s): {run.cut_short.splitlines()[0]}"
    table = format_table([POINT_HEADER, *rows], right=True)
    return f"{run.title()} — {kind}, {run.server}\n{table}\n{saved}{note}"


def _list(args: argparse.Namespace, home: Path | None) -> int:
    runs = list_runs(home, model=args.model)
    if args.json:
        print(json.dumps([r.record() for r in runs], indent=2))
        return ExitCode.OK
    if not runs:
        print("no saved load tests" + (f" of {args.model}" if args.model else ""))
        return ExitCode.OK
    rows = [(str(r.id), r.at.strftime("%Y-%m-%d %H:%M:%S"), r.model, r.label, r.mode,
             ",".join(f"{p.load:g}" for p in r.points) + (" (cut short)" if r.cut_short else ""),
             f"{max((p.throughput_per_s for p in r.points), default=0):.1f}", r.who) for r in runs]
    print(format_table([("id", "at (UTC)", "model", "label", "mode", "loads", "best infer/s", "who"), *rows],
                       right=True))
    return ExitCode.OK


def render_comparison(result: Comparison) -> str:
    rows = [(describe_load(result.a.mode, r.load), f"{r.throughput_a:.1f}", f"{r.throughput_b:.1f}",
             f"{r.throughput_ratio:.2f}x", f"{r.p99_a_ms:.2f}", f"{r.p99_b_ms:.2f}", f"{r.p99_ratio:.2f}x")
            for r in result.rows]
    header = ("load", "A infer/s", "B infer/s", "A/B", "A p99 ms", "B p99 ms", "A/B")
    return (f"A: {result.a.title()}\nB: {result.b.title()}\n{format_table([header, *rows], right=True)}\n"
            f"A has {result.headline()}")


def _compare(args: argparse.Namespace, home: Path | None) -> int:
    first, second = args.compare
    result = compare(load_run(first, home), load_run(second, home))
    if args.json:
        print(json.dumps({"a": result.a.record(), "b": result.b.record(), "headline": result.headline(),
                          "rows": [_finite(asdict(r)) for r in result.rows]}, indent=2))
    else:
        print(render_comparison(result))
    return ExitCode.OK


def _finite(row: dict[str, Any]) -> dict[str, Any]:
    """JSON has no NaN: a ratio over nothing is null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()}
