"""The embedded stack behind `geadmin up`: a real tritonserver plus the Streamlit dashboard.

Everything it starts runs in its own process group and is stopped on exit (Ctrl-C,
SIGTERM, or either child dying), within 15 s, leaving no processes and no shared memory.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from geadmin.errors import StackError
from geadmin.tritonserver import (
    Ports,
    TritonProcess,
    client_host,
    ensure_port_free,
    free_port,
    http_ok,
    signal_group,
    tail,
    terminate_group,
)
from geadmin.workspace import Workspace

DASHBOARD_APP = Path(__file__).resolve().parents[1] / "pages" / "app.py"

Printer = Callable[[str], None]


class DashboardProcess:
    """`streamlit run pages/app.py`, headless, configured through GEADMIN_* variables."""

    def __init__(
        self,
        *,
        triton_url: str,
        home: Path,
        port: int | None = None,
        host: str = "127.0.0.1",
        triton_log: Path | None = None,
        repository: Path | None = None,
        only_this_triton: bool = False,
        extra_env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> None:
        self.triton_url = triton_url
        self.home = Path(home)
        self.host = host
        self.port = port or free_port(client_host(host))
        self.triton_log = triton_log
        self.repository = repository
        self.only_this_triton = only_this_triton
        self.extra_env = dict(extra_env or {})
        self.log_path = log_path or self.home / "logs" / "dashboard.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://{client_host(self.host)}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        if not DASHBOARD_APP.is_file():
            raise StackError(
                f"dashboard entry script {DASHBOARD_APP} is missing: geadmin up runs the "
                "dashboard from a source checkout (pip install -e .)"
            )
        return [
            sys.executable, "-m", "streamlit", "run", str(DASHBOARD_APP),
            "--server.headless=true",
            f"--server.port={self.port}",
            f"--server.address={self.host}",
            "--browser.gatherUsageStats=false",
            "--server.fileWatcherType=none",
            "--global.developmentMode=false",
            "--client.toolbarMode=minimal",
        ]

    def environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.extra_env)
        env["GEADMIN_TRITON_URL"] = self.triton_url
        if self.only_this_triton:  # the embedded stack's dashboard shows the Triton it started
            env.pop("GEADMIN_TRITON_URLS", None)
            env.pop("GEADMIN_SERVERS_FILE", None)
        env["GEADMIN_HOME"] = str(self.home)
        if self.triton_log is not None:
            env["GEADMIN_TRITON_LOG"] = str(self.triton_log)
        if self.repository is not None:
            env["GEADMIN_REPOSITORY"] = str(self.repository)
        return env

    def start(self, timeout_s: float = 60.0) -> None:
        ensure_port_free(self.host, self.port, "dashboard", "--dashboard-port")
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                self._process = subprocess.Popen(
                    self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self.environment(), start_new_session=True,
                )
        except OSError as exc:
            raise StackError(f"cannot start the dashboard (log {self.log_path}): "
                             f"{exc.strerror or exc}") from exc
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise StackError(f"the dashboard exited with code {code} during start-up:\n"
                                 f"{tail(self.log_path)}")
            if http_ok(f"{self.url}/_stcore/health"):
                return
            time.sleep(0.3)
        self.stop()
        raise StackError(f"the dashboard did not answer within {timeout_s:.0f}s "
                         f"(log: {self.log_path})")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def begin_stop(self) -> None:
        """Ask it to exit without waiting (so Triton can stop at the same time)."""
        if self._process is not None:
            signal_group(self._process)

    def stop(self, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is not None:
            terminate_group(process, timeout_s)


@dataclass(frozen=True)
class StackOptions:
    workspace: Workspace
    repository: Path | None = None  # None: the workspace's copy of the samples
    tritonserver: Path | None = None
    triton_url: str | None = None  # attach to this Triton instead of starting one
    host: str = "127.0.0.1"
    ports: Ports = field(default_factory=lambda: Ports(8000, 8001, 8002))
    dashboard_port: int = 8501


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
            opts.ports.ensure_free(opts.host)
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
        self.say("Press Ctrl-C to stop.")

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
            self._workspace_lock.close()
            self._workspace_lock = None
