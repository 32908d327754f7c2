"""`geadmin up`: start the embedded stack (real tritonserver + dashboard) and wait."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from geadmin import settings
from geadmin.stack import EmbeddedStack, StackOptions
from geadmin.tritonserver import Ports, find_tritonserver
from geadmin.workspace import Workspace


def run(args: argparse.Namespace) -> int:
    options = StackOptions(
        workspace=Workspace(Path(args.home).expanduser() if args.home else settings.home()),
        repository=Path(args.repository).expanduser().resolve() if args.repository else None,
        tritonserver=None if args.triton_url else find_tritonserver(args.tritonserver),
        triton_url=args.triton_url,
        host=args.host,
        ports=Ports(args.http_port, args.grpc_port, args.metrics_port),
        dashboard_port=args.dashboard_port,
    )
    stack = EmbeddedStack(options, printer=lambda message: print(message, flush=True))

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stack.request_stop()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stack.start()
        code = stack.wait()
    finally:
        print("stopping ...", file=sys.stderr, flush=True)
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start Triton with the workspace's model repository, and the dashboard",
        description="Starts a real tritonserver (explicit model control, every model loaded) "
        "and the Streamlit dashboard; Ctrl-C stops both.",
    )
    parser.add_argument("--home", default=None,
                        help="workspace directory (env GEADMIN_HOME, default ~/.local/share/geadmin)")
    parser.add_argument("--repository", default=settings.env("REPOSITORY"),
                        help="serve this model repository instead of the workspace copy "
                        "(env GEADMIN_REPOSITORY)")
    parser.add_argument("--tritonserver", default=settings.env("TRITONSERVER"),
                        help="tritonserver binary (env GEADMIN_TRITONSERVER, default: the "
                        "nvidia-pytriton wheel's)")
    parser.add_argument("--triton-url", default=None,
                        help="attach the dashboard to this running Triton instead of starting one")
    parser.add_argument("--host", default=settings.env("HOST", "127.0.0.1"),
                        help="address to bind (env GEADMIN_HOST, default 127.0.0.1)")
    parser.add_argument("--http-port", type=int, default=settings.env_int("HTTP_PORT", 8000),
                        help="Triton HTTP port (env GEADMIN_HTTP_PORT, default 8000)")
    parser.add_argument("--grpc-port", type=int, default=settings.env_int("GRPC_PORT", 8001),
                        help="Triton gRPC port (env GEADMIN_GRPC_PORT, default 8001)")
    parser.add_argument("--metrics-port", type=int, default=settings.env_int("METRICS_PORT", 8002),
                        help="Triton metrics port (env GEADMIN_METRICS_PORT, default 8002)")
    parser.add_argument("--dashboard-port", type=int,
                        default=settings.env_int("DASHBOARD_PORT", 8501),
                        help="dashboard port (env GEADMIN_DASHBOARD_PORT, default 8501)")
    parser.set_defaults(func=run)
