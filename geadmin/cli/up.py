"""`geadmin up`: start the embedded stack (real tritonserver + dashboard) and wait."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType

from geadmin import settings
from geadmin.access.identity import Mode
from geadmin.access.startup import dashboard_sign_in
from geadmin.cli.common import port_number, positive_seconds
from geadmin.cli.exit_codes import ExitCode
from geadmin.domain import DEFAULT_PORTS, Ports
from geadmin.errors import GeAdminError
from geadmin.stack.backends import backend_dirs
from geadmin.stack.embedded import EmbeddedStack, StackOptions
from geadmin.stack.local import RESTART_TRITON, STOP_TRITON
from geadmin.stack.triton_install import find_tritonserver
from geadmin.stack.workspace import Workspace


def options_from_args(args: argparse.Namespace) -> StackOptions:
    """Flags over GEADMIN_* variables over defaults — read when `up` runs, not before."""
    repository = settings.REPOSITORY.get(args.repository)
    attaching = bool(args.triton_url)
    return StackOptions(
        workspace=Workspace(settings.home(args.home)),
        repository=Path(repository).expanduser().resolve() if repository else None,
        tritonserver=None if attaching else find_tritonserver(
            settings.TRITONSERVER.get(args.tritonserver)),
        triton_url=args.triton_url,
        host=settings.HOST.get(args.host),
        ports=Ports(settings.port("http", args.http_port), settings.port("grpc", args.grpc_port),
                    settings.port("metrics", args.metrics_port)),
        dashboard_port=settings.port("dashboard", args.dashboard_port),
        restart=not args.no_restart,
        backend_dirs={} if attaching else backend_dirs(args.backend_dir, say=print),
        model_timeout_s=args.model_timeout,
        sample_interval_s=None if attaching else settings.SAMPLE_INTERVAL_S.get(),
        history_retention_h=settings.HISTORY_RETENTION_H.get(),
        npu_exporter_url=settings.NPU_EXPORTER_URL.get(),
        probe_interval_s=None if attaching or args.no_probes else settings.PROBE_INTERVAL_S.get(),
        sampler_metrics_port=None if attaching else settings.SAMPLER_METRICS_PORT.get(
            args.sampler_metrics_port),
    )


def run(args: argparse.Namespace) -> int:
    options = options_from_args(args)
    # a public bind with no sign-in is refused here; with no users the dashboard asks for a token
    decision = dashboard_sign_in(options.host, Path.cwd(), options.workspace.home)
    options = replace(options, sign_in_token=decision.mode is Mode.TOKEN)  # printed with its address
    stack = EmbeddedStack(options, printer=lambda message: print(message, flush=True))
    interrupted_by: list[int] = []  # a signal that came before the stack was up

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Only a flag, never an exception: one raised here could land between a child's
        # fork and the line that records it, and leave that tritonserver running with
        # nobody to stop it. Start-up checks the flag between its steps and unwinds itself.
        if not stack.started:
            interrupted_by.append(signum)
        stack.request_stop(signum)  # which signal: the stop's audit row names it (Ctrl-C, SIGTERM)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    # The Stack page's local driver asks for these (geadmin.stack.local).
    previous[RESTART_TRITON] = signal.signal(RESTART_TRITON, lambda s, f: stack.request_triton_restart())
    previous[STOP_TRITON] = signal.signal(STOP_TRITON, lambda s, f: stack.request_triton_stop())
    try:
        stack.start()
        code = stack.wait()
    except GeAdminError:
        if not interrupted_by:
            raise
        code = ExitCode.OK  # the start gave up because it was asked to stop: that is not an error
    finally:
        print("stopping ...", file=sys.stderr, flush=True)
        stack.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if interrupted_by:
        print("interrupted during start-up; stopped what had started", file=sys.stderr, flush=True)
        code = 128 + interrupted_by[0]
    return code


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "up",
        help="start Triton with the workspace's model repository, and the dashboard",
        description="Starts a real tritonserver (explicit model control) and the Streamlit "
        "dashboard, then loads every model of the repository in parallel. Triton is restarted "
        "when it exits (SIGHUP restarts it, SIGUSR1 stops it); Ctrl-C stops both, also during "
        "start-up.",
    )
    parser.add_argument("--home", default=None,
                        help="workspace directory (env GEADMIN_HOME, default ~/.local/share/geadmin)")
    parser.add_argument("--repository", default=None,
                        help="serve this model repository instead of the workspace copy "
                        "(env GEADMIN_REPOSITORY)")
    parser.add_argument("--tritonserver", default=None,
                        help="tritonserver binary (env GEADMIN_TRITONSERVER, default: the "
                        "nvidia-pytriton wheel's)")
    parser.add_argument("--triton-url", default=None,
                        help="attach the dashboard to this running Triton instead of starting one")
    parser.add_argument("--host", default=None,
                        help="address to bind (env GEADMIN_HOST, default 127.0.0.1)")
    parser.add_argument("--no-restart", action="store_true",
                        help="do not restart Triton when it exits (the dashboard stays up either way)")
    parser.add_argument("--backend-dir", action="append", default=None, metavar="NAME=DIR",
                        help="add a backend to the embedded Triton: DIR holds libtriton_NAME.so "
                        "(repeatable; env GEADMIN_BACKEND_DIRS; default npu_ge=build/backend/npu_ge "
                        "when it is built)")
    parser.add_argument("--model-timeout", type=positive_seconds, default=300.0, metavar="SECONDS",
                        help="give up on one model's load after this long (default 300); the "
                        "others and the dashboard never wait for it")
    parser.add_argument("--no-probes", action="store_true",
                        help="no synthetic probes of READY models (env GEADMIN_PROBE_INTERVAL_S sets "
                        "how often each is probed, default every 30 s)")
    parser.add_argument("--sampler-metrics-port", type=port_number, default=None, metavar="PORT",
                        help="serve geadmin's own metrics for Prometheus (probes, model states, "
                        "objectives) on this port (env GEADMIN_SAMPLER_METRICS_PORT; default: not served)")
    for name, what in (("http", "Triton HTTP"), ("grpc", "Triton gRPC"),
                       ("metrics", "Triton metrics"), ("dashboard", "dashboard")):
        parser.add_argument(f"--{name}-port", type=port_number, default=None,
                            help=f"{what} port (env GEADMIN_{name.upper()}_PORT, "
                            f"default {DEFAULT_PORTS[name]})")
    parser.set_defaults(func=run)
