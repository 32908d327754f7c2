"""The embedded stack behind `geadmin up`: a real tritonserver plus the Streamlit dashboard.

Everything it starts runs in its own process group and is stopped on exit (Ctrl-C,
SIGTERM, or either child dying), within 15 s, leaving no processes and no shared memory.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from geadmin.domain import DEFAULT_PORTS, Ports
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.processes import ensure_port_free, ensure_ports_free
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace

Printer = Callable[[str], None]


@dataclass(frozen=True)
class StackOptions:
    workspace: Workspace
    repository: Path | None = None  # None: the workspace's copy of the samples
    tritonserver: Path | None = None
    triton_url: str | None = None  # attach to this Triton instead of starting one
    host: str = "127.0.0.1"
    ports: Ports = field(default_factory=lambda: Ports(
        DEFAULT_PORTS["http"], DEFAULT_PORTS["grpc"], DEFAULT_PORTS["metrics"]))
    dashboard_port: int = DEFAULT_PORTS["dashboard"]


class EmbeddedStack:
    """Start Triton (unless attaching), then the dashboard; stop both together."""

    def __init__(self, options: StackOptions, printer: Printer = print) -> None:
        self.options = options
        self.say = printer
        self.triton: TritonProcess | None = None
        self.dashboard: DashboardProcess | None = None
        self._workspace_lock: IO[str] | None = None
        self._stop = threading.Event()

    def start(self) -> None:
        opts = self.options
        # Check every port before starting anything: never half-start.
        if opts.triton_url is None:
            ensure_ports_free(opts.host, opts.ports)
        ensure_port_free(opts.host, opts.dashboard_port, "dashboard", "--dashboard-port")
        try:
            triton_url = opts.triton_url or self._start_triton()
            self.dashboard = DashboardProcess(
                triton_url=triton_url, home=opts.workspace.home, port=opts.dashboard_port,
                host=opts.host,
                triton_log=self.triton.log_path if self.triton else None,
                repository=self.triton.repository if self.triton else None,
                only_this_triton=self.triton is not None,
            )
            self.say(f"starting the dashboard on port {opts.dashboard_port} ...")
            self.dashboard.start()
        except BaseException:
            self.stop()
            raise
        self.say(f"Triton    {triton_url}" + ("" if self.triton else "  (attached)"))
        if self.triton:
            self.say(f"Metrics   {self.triton.metrics_url}")
            self.say(f"Triton log {self.triton.log_path}")
        self.say(f"Dashboard {self.dashboard.url}")
        if self.triton is not None:
            self.options.workspace.write_stack(self.stack_info())
            self.say(f"Stack file {self.options.workspace.stack_file} (the CLI in another terminal "
                     "talks to this stack)")
        self.say("Press Ctrl-C to stop.")

    def stack_info(self) -> StackInfo:
        assert self.triton is not None and self.dashboard is not None
        return StackInfo(
            pid=os.getpid(),
            http_url=self.triton.http_url,
            grpc_url=f"grpc://{self.triton.grpc_url}",
            metrics_url=self.triton.metrics_url,
            ports=self.triton.ports,
            dashboard_url=self.dashboard.url,
            triton_log=self.triton.log_path,
            repository=self.triton.repository,
            home=self.options.workspace.home,
        )

    def _start_triton(self) -> str:
        opts = self.options
        self._workspace_lock = opts.workspace.lock()
        created = opts.workspace.ensure()
        repository = opts.repository or opts.workspace.repository
        if created:
            self.say(f"copied the sample model repository to {repository}")
        opts.workspace.rotate_triton_log()
        self.triton = TritonProcess(
            repository, binary=opts.tritonserver, log_path=opts.workspace.triton_log,
            host=opts.host, ports=opts.ports,
        )
        self.say(f"starting tritonserver ({self.triton.binary}) on {repository} ...")
        last = [0.0]

        def progress(message: str) -> None:
            if time.monotonic() - last[0] >= 5:
                last[0] = time.monotonic()
                self.say(message)

        self.triton.start(progress=progress)
        return self.triton.http_url

    def wait(self) -> int:
        """Block until asked to stop (signal) or a child dies; returns the exit code."""
        while not self._stop.wait(0.5):
            if self.triton is not None and not self.triton.alive():
                self.say("tritonserver exited unexpectedly; stopping the dashboard")
                return 1
            if self.dashboard is not None and not self.dashboard.alive():
                self.say("the dashboard exited unexpectedly; stopping Triton")
                return 1
        return 0

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self) -> None:
        """Both stop together, within the 15 s an init system or operator expects."""
        if self.dashboard is not None:
            self.dashboard.begin_stop()
        if self.triton is not None:
            self.triton.stop(timeout_s=9)
            self.triton = None
        if self.dashboard is not None:
            self.dashboard.stop(timeout_s=3)
            self.dashboard = None
        if self._workspace_lock is not None:
            self.options.workspace.remove_stack()
            self._workspace_lock.close()
            self._workspace_lock = None
