"""The embedded stack behind `geadmin up`: a real tritonserver plus the Streamlit dashboard.

Triton starts with no models and is supervised (geadmin.stack.supervisor): if it exits,
the dashboard stays up and Triton is restarted with backoff. The repository's models load
once Triton is live, after every start (geadmin.stack.startup_loads). Everything runs in its
own process group and is stopped on exit (Ctrl-C, SIGTERM, or the dashboard dying) within
15 s, leaving no processes and no shared memory.

Triton's repository, model-config, logging and trace APIs need the workspace's admin key
(`Workspace.ensure_admin_key`, a 0600 file), whatever address Triton binds: reaching its
ports is not enough to load, unload or reconfigure a model behind the dashboard's sign-in,
roles and audit. The dashboard and CLI read the key from the workspace.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import audit
from geadmin.access.token import new_token, sign_in_url
from geadmin.audit import Actor, Origin
from geadmin.domain import DEFAULT_PORTS, Ports, format_duration
from geadmin.errors import PortInUseError, SamplerLockedError, StackError
from geadmin.ops.probe import DEFAULT_INTERVAL_S
from geadmin.ops.tune import trials as tune_trials
from geadmin.repository.locks import PidLock
from geadmin.stack.dashboard import DashboardProcess
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.processes import client_url_host, ensure_port_free, ensure_ports_free
from geadmin.stack.recording import Recording, RecordingOptions
from geadmin.stack.stack_audit import StackAudit, origin_of_signal
from geadmin.stack.startup_loads import StartupLoads
from geadmin.stack.supervisor import Backoff, TritonSupervisor, exit_record
from geadmin.stack.triton_install import prepare_backend_directory
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import StackInfo, Workspace
from geadmin.telemetry.history.sampler import SamplerOptions, default_npu_smi

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
    restart: bool = True  # supervise Triton: restart it when it exits
    backend_dirs: Mapping[str, Path] = field(default_factory=dict)  # name -> dir with libtriton_<name>.so
    model_timeout_s: float = 300.0  # per model, at start and after a restart
    sample_interval_s: float | None = None  # telemetry sampler for the supervised Triton; None: none
    history_retention_h: float = 24.0
    npu_exporter_url: str | None = None  # for the sampler's NPU figures
    probe_interval_s: float | None = None  # synthetic probes of READY models; None: none
    sampler_metrics_port: int | None = None  # geadmin's /metrics (alerting.exporter); None: off
    sign_in_token: bool = False  # the dashboard signs in with a token: write a new one (access/token.py)


class EmbeddedStack:
    """Start Triton (unless attaching), then the dashboard; stop both together."""

    def __init__(self, options: StackOptions, printer: Printer = print) -> None:
        self.options = options
        self._print = printer
        self.supervisor: TritonSupervisor | None = None
        self.dashboard: DashboardProcess | None = None
        self.recording: Recording | None = None  # the sampler, its probes, geadmin's metrics
        self._workspace_lock: PidLock | None = None
        self._stop = threading.Event()
        self._write_lock = threading.Lock()
        self._first_start = True
        self.started = False  # start() finished: a stop from here on is an ordinary stop
        self._dashboard_backoff = Backoff()
        self.dashboard_exits: list[ExitRecord] = []  # published in stack.json for the Overview
        self._admin_key: str | None = None  # the workspace's, once Triton is ours to start
        self._stop_origin = ""  # why the stack stops (Ctrl-C, a signal, the dashboard died)
        self.audit = StackAudit(options.workspace.home, f"http://127.0.0.1:{options.ports.http}",
                                say=self.say, stopping=self._stop)
        self.startup_loads = StartupLoads(self.repository, options.model_timeout_s, say=self.say,
                                          on_done=self.publish, restart=self.request_triton_restart)

    @property
    def triton(self) -> TritonProcess | None:
        return self.supervisor.triton if self.supervisor else None

    @property
    def repository(self) -> Path:
        return self.options.repository or self.options.workspace.repository

    def say(self, message: str) -> None:
        if not self._stop.is_set():  # nothing about loads or restarts once stopping
            self._print(message)

    def start(self) -> None:
        opts = self.options
        # Check every port before starting anything: never half-start.
        if opts.triton_url is None:
            ensure_ports_free(opts.host, opts.ports)
        ensure_port_free(opts.host, opts.dashboard_port, "dashboard", "--dashboard-port")
        try:
            triton_url = opts.triton_url or self._start_supervised_triton()
            # after the workspace lock: a second `up` refused on it never replaces this one's token
            sign_in = new_token(opts.workspace.home) if opts.sign_in_token else None
            self.dashboard = DashboardProcess(
                triton_url=triton_url, home=opts.workspace.home, port=opts.dashboard_port,
                host=opts.host, log_path=opts.workspace.dashboard_log,
                triton_log=opts.workspace.triton_log if self.supervisor else None,
                repository=self.repository if self.supervisor else None,
                only_this_triton=self.supervisor is not None, dies_with_us=True,
            )
            self.say(f"starting the dashboard on port {opts.dashboard_port} ...")
            self.dashboard.start(cancelled=self._stop.is_set)
        except BaseException:
            self.stop()
            raise
        self.say(f"Triton    {triton_url}" + ("" if self.supervisor else "  (attached)"))
        if self.triton:
            self.say(f"Metrics   {self.triton.metrics_url}")
            self.say(f"Triton log {self.triton.log_path}")
            self.say(f"Admin key {opts.workspace.admin_key_file} (Triton's repository, config, logging "
                     "and trace APIs need it)")
        self.say(f"Dashboard {self.dashboard.url}" if sign_in is None else
                 f"Dashboard {sign_in_url(self.dashboard.url, sign_in)}  (the token signs you in; later: "
                 "`geadmin dashboard --print-url`)")
        if self.supervisor is not None:
            self._start_sampler()
            self.publish()
            self.say(f"Stack file {self.options.workspace.stack_file} (the CLI in another terminal "
                     "talks to this stack)")
        self.say("Press Ctrl-C to stop.")
        self.started = True

    # -- Triton, supervised --------------------------------------------------------------
    def _start_supervised_triton(self) -> str:
        opts = self.options
        self._workspace_lock = opts.workspace.lock()
        if opts.workspace.ensure() and opts.repository is None:
            self.say(f"copied the sample model repository to {self.repository}")
        opts.workspace.rotate_triton_log()
        self._admin_key = opts.workspace.ensure_admin_key()
        for line in tune_trials.at_start(self.repository, home=opts.workspace.home):  # a killed tune's trial
            self.say(line)
        backends = prepare_backend_directory(opts.workspace.backends, opts.backend_dirs)
        for name, directory in opts.backend_dirs.items():
            self.say(f"backend {name}: {directory}")
        self.supervisor = TritonSupervisor(
            lambda cancelled: self._run_triton(backends, cancelled), self.startup_loads.run,
            restart=opts.restart, say=self.say, on_change=self.publish, on_exit=self.audit.exit,
            on_restart=self.audit.restart, origin_of=self.audit.origin_of, on_left_out=self.audit.left_out)
        return self.supervisor.start().http_url

    def _start_sampler(self) -> None:
        """Telemetry history for the Metrics page, while the stack runs (one sampler per workspace)."""
        opts = self.options
        if opts.sample_interval_s is None:
            return
        host = client_url_host(opts.host)  # the same URLs across Triton's restarts
        try:
            recording = Recording(RecordingOptions(
                SamplerOptions(f"http://{host}:{opts.ports.metrics}/metrics", opts.workspace.home,
                               opts.sample_interval_s, opts.history_retention_h, opts.npu_exporter_url,
                               default_npu_smi()),
                probe_url=f"http://{host}:{opts.ports.http}" if opts.probe_interval_s is not None else None,
                admin_key=self._admin_key, probe_interval_s=opts.probe_interval_s or DEFAULT_INTERVAL_S,
                metrics_port=opts.sampler_metrics_port, metrics_host=opts.host,
                dashboard_url=self.dashboard.url if self.dashboard else "",
                fault_url=f"http://{host}:{opts.ports.http}", repository=self.repository), say=self.say)
        except SamplerLockedError as exc:
            self.say(f"not sampling telemetry: {exc}")
            return
        self.recording = recording.start()
        try:
            recording.serve_metrics()
        except PortInUseError as exc:
            self.say(str(exc))
        for line in recording.lines():
            self.say(line)

    def _run_triton(self, backends: Path, cancelled: Callable[[], bool]) -> TritonProcess:
        opts = self.options
        # No models at start (`--load-model` would keep every endpoint closed until the
        # slowest load ends, and a hung one never does): they load afterwards, in parallel.
        triton = TritonProcess(self.repository, binary=opts.tritonserver, backend_dir=backends,
                               log_path=opts.workspace.triton_log, host=opts.host, ports=opts.ports,
                               models=[], admin_key=self._admin_key, trace_file=opts.workspace.trace_file,
                               dies_with_us=True)
        opts.workspace.trace_file.parent.mkdir(parents=True, exist_ok=True)
        verb = "starting" if self._first_start else "restarting"
        self._first_start = False
        self.say(f"{verb} tritonserver ({triton.binary}) on {self.repository} ...")
        last = [0.0]

        def progress(message: str) -> None:
            if time.monotonic() - last[0] >= 5:
                last[0] = time.monotonic()
                self.say(message)

        triton.start(progress=progress, cancelled=lambda: cancelled() or self._stop.is_set())
        return triton

    # -- stack.json --------------------------------------------------------------------
    def stack_info(self) -> StackInfo:
        assert self.supervisor is not None
        triton, dashboard, opts = self.triton, self.dashboard, self.options
        host = client_url_host(opts.host)
        return StackInfo(
            pid=os.getpid(),
            http_url=f"http://{host}:{opts.ports.http}",
            grpc_url=f"grpc://{host}:{opts.ports.grpc}",
            metrics_url=f"http://{host}:{opts.ports.metrics}/metrics",
            ports=opts.ports,
            dashboard_url=dashboard.url if dashboard else "",
            triton_log=opts.workspace.triton_log,
            repository=self.repository,
            home=opts.workspace.home,
            triton_pid=triton.pid if triton else None,
            triton_state=self.supervisor.state,
            triton_started_at=triton.started_at if triton else None,
            restart_enabled=self.supervisor.restart_enabled,
            exits=tuple(self.supervisor.exits),
            loads=self.startup_loads.loads,
            dashboard_pid=dashboard.pid if dashboard else None,
            dashboard_started_at=dashboard.started_at if dashboard else None,
            dashboard_log=dashboard.log_path if dashboard else None,
            dashboard_exits=tuple(self.dashboard_exits),
        )

    def publish(self) -> None:
        """Rewrite stack.json (atomically) with the current state, for the Stack page and CLI."""
        if self.supervisor is None or self.dashboard is None or self._stop.is_set():
            return
        with self._write_lock:
            self.options.workspace.write_stack(self.stack_info())

    # -- running, stopping -------------------------------------------------------------
    def wait(self) -> int:
        """Block until asked to stop (signal) or the dashboard dies; returns the exit code."""
        while not self._stop.wait(0.5):
            if self.supervisor is not None:
                self.supervisor.tick()
            if self.dashboard is not None and not self.dashboard.alive():
                if not self.options.restart:
                    self.say("the dashboard exited unexpectedly; stopping Triton "
                             f"(dashboard log: {self.dashboard.log_path})")
                    self._stop_origin = self._stop_origin or "stopped: the dashboard exited (--no-restart)"
                    return 1
                self._restart_dashboard(self.dashboard)
        return 0

    def _restart_dashboard(self, dashboard: DashboardProcess) -> None:
        """The dashboard died: Triton keeps serving; start it again, with the same backoff."""
        uptime_s = time.time() - (dashboard.started_at or time.time())
        record = exit_record(dashboard.exit_code(), uptime_s, restarted=True)
        self.dashboard_exits = [*self.dashboard_exits, record][-50:]
        delay_s = self._dashboard_backoff.after_exit(uptime_s)
        self.say(f"the dashboard exited ({record.describe()}); starting it again in "
                 f"{format_duration(delay_s)} (log: {dashboard.log_path})")
        audit.try_record_action("restart", "dashboard", False, record.describe(), server="",
                                actor=Actor.os_user(Origin.LOCAL), home=self.options.workspace.home)
        if self._stop.wait(delay_s):
            return
        try:
            dashboard.start(cancelled=self._stop.is_set)
        except StackError as exc:  # e.g. its port is still taken: the next round tries again
            self.say(f"the dashboard did not start again: {exc}")
            return
        self.say(f"Dashboard {dashboard.url} (restarted)")
        self.publish()

    def request_stop(self, signum: int | None = None) -> None:
        """Stop the stack; `signum`: the signal that asked (SIGINT: Ctrl-C), for its audit row."""
        self._stop_origin = self._stop_origin or origin_of_signal(signum)
        self._stop.set()

    def request_triton_restart(self, reason: str = "") -> None:
        """`reason` "": asked by a signal (the Stack page's); else why (a model's load hung)."""
        if self.supervisor is not None:
            self.supervisor.request_restart(reason)

    def request_triton_stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.request_stop()

    def stop(self) -> None:
        """Both stop together, within the 15 s an init system or operator expects."""
        self._stop.set()
        if self.recording is not None:
            self.recording.begin_stop()
        if self.dashboard is not None:
            self.dashboard.begin_stop()
        if self.supervisor is not None:
            state = self.supervisor.state
            origin = self._stop_origin or ("stopped" if self.started else "start-up did not finish")
            self.audit.stack_stopped(origin, self.supervisor.shutdown(timeout_s=9, note=origin), state)
        if self.dashboard is not None:
            self.dashboard.stop(timeout_s=3)
            self.dashboard = None
        if self.recording is not None:
            self.recording.stop(timeout_s=1)  # a daemon thread: the process exit ends it regardless
            self.recording = None
        if self._workspace_lock is not None:
            self.options.workspace.remove_stack()
            self._workspace_lock.close()
            self._workspace_lock = None
