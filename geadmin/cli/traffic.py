"""`geadmin traffic capture MODEL`: record a model's real request arrivals from Triton's trace
API (TIMESTAMPS only) for `tune --objective` to replay with perf_analyzer's --request-intervals."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from types import FrameType

from geadmin import settings
from geadmin.access import guard
from geadmin.cli.common import add_connection_args, client_for, number_argument, target_from_args
from geadmin.cli.exit_codes import ExitCode
from geadmin.errors import TraceFileError, TritonUnreachableError
from geadmin.ops.capacity.capture import MAX_REQUESTS, MAX_SECONDS, capture_arrivals


def run(args: argparse.Namespace) -> int:
    target = target_from_args(args)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()  # ends the wait: tracing is turned off and what was traced is kept

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with client_for(target, args) as client:
            print(f"capturing the arrivals of {args.model} on {client.url} for up to {args.seconds:g} s "
                  "(Ctrl-C ends it early and keeps what was traced)", file=sys.stderr, flush=True)
            capture = capture_arrivals(client, args.model, auth=guard.os_user(), seconds=args.seconds,
                                       max_requests=args.max_requests, home=settings.home(args.home),
                                       cancel=stop)
    except TritonUnreachableError as exc:
        print(f"geadmin traffic capture: {exc}", file=sys.stderr)
        return ExitCode.UNREACHABLE
    except TraceFileError as exc:
        print(f"geadmin traffic capture: {exc}", file=sys.stderr)
        return ExitCode.FAILED
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if args.json:
        print(json.dumps({"server": capture.server, "model": capture.model, "count": capture.count,
                          "window_start_s": capture.window_start_s, "window_end_s": capture.window_end_s,
                          "text": capture.describe()}, indent=2))
    else:
        print(f"{capture.model}: {capture.describe()}")
        if capture.count < 2:
            print(f"no replay possible: fewer than 2 requests arrived; send traffic to {capture.model} while "
                  "capturing")
    return ExitCode.OK if capture.count >= 2 else ExitCode.FAILED


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "traffic", help="record a model's real request arrivals (Triton's trace API) for tuning to replay",
        description="capture MODEL: turn Triton's TIMESTAMPS tracing on for MODEL only (never TENSORS: no "
        "request data is written), wait --seconds (Ctrl-C ends it early), turn it off, and record the "
        "inter-arrival times in the workspace. `geadmin tune MODEL --objective` then replays the newest "
        "capture in its history window with perf_analyzer's --request-intervals. Triton must have been "
        "started with a trace file readable here (geadmin up does; otherwise "
        "--trace-config=triton,file=DIR/trace.json --trace-config=level=OFF). Exit 0 with at least 2 "
        "arrivals recorded, 1 with fewer or no usable trace file, 3 when Triton does not answer.")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    capture = actions.add_parser("capture", help="record MODEL's arrivals for --seconds")
    capture.add_argument("model", help="the model whose requests are traced")
    capture.add_argument("--seconds", type=number_argument(float, "number", lambda v: 1.0 <= v <= MAX_SECONDS,
                                                                 f"1 to {MAX_SECONDS:g} s"), default=60.0,
                         help=f"how long to trace (1 to {MAX_SECONDS:g}; default 60)")
    requests = number_argument(int, "whole number", lambda v: 2 <= v <= MAX_REQUESTS, f"2 to {MAX_REQUESTS}")
    capture.add_argument("--max-requests", type=requests, default=MAX_REQUESTS,
                         help=f"Triton stops tracing after this many requests (2 to {MAX_REQUESTS})")
    add_connection_args(capture)
    capture.add_argument("--home", default=None, metavar="DIR",
                         help="the workspace the capture is recorded in (env GEADMIN_HOME)")
    capture.set_defaults(func=run)
