"""The workspace: geadmin's own directory (`GEADMIN_HOME`).

    $GEADMIN_HOME/
      model_repository/     served by the embedded stack; a copy of the packaged samples
      logs/tritonserver.log the embedded Triton's log (previous run: tritonserver.log.1)
      backends/             the embedded Triton's --backend-directory (python, npu_ge when built)
      triton-admin-key      the embedded Triton's admin key (0600): it guards Triton's repository,
                            model-config, logging and trace APIs; the dashboard and CLI read it
      stack.json            while `geadmin up` runs: its URLs, ports, log, repository, pid,
                            and the supervisor's state (Triton's pid, restarts, exits, loads)

The samples are copied once, on first use, so edits survive restarts and the packaged
copy stays pristine. The workspace and its logs directory are 0700, the logs and the key
0600: they hold secrets, and logs and the audit database are nobody else's business.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from geadmin import disk
from geadmin.domain import Ports
from geadmin.errors import GeAdminError, RepositoryError, StackError
from geadmin.repository.atomic import (
    SECRET_FILE_MODE,
    atomic_write,
    private_directory,
    write_secret_atomically,
)
from geadmin.repository.locks import PidLock, pid_lock
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.processes import pid_alive

SAMPLES_DIR = Path(__file__).resolve().parents[1] / "samples"
SAMPLE_REPOSITORY = SAMPLES_DIR / "model_repository"
ADMIN_KEY_FILE = "triton-admin-key"
ADMIN_KEY_BYTES = 32


@dataclass(frozen=True)
class LoadOutcome:
    """How one model's load at start-up (or after a restart) ended."""

    name: str
    ok: bool
    message: str


@dataclass(frozen=True)
class StackInfo:
    """What a running `geadmin up` publishes in `stack.json` for the CLI in other terminals
    and for the Stack page: addresses, and the supervisor's view of its processes."""

    pid: int
    http_url: str
    grpc_url: str
    metrics_url: str
    ports: Ports
    dashboard_url: str
    triton_log: Path
    repository: Path
    home: Path
    triton_pid: int | None = None
    triton_state: str = "running"  # see TritonSupervisor
    triton_started_at: float | None = None  # epoch seconds
    restart_enabled: bool = True
    exits: tuple[ExitRecord, ...] = ()
    loads: tuple[LoadOutcome, ...] = ()
    dashboard_pid: int | None = None
    dashboard_started_at: float | None = None
    dashboard_log: Path | None = None
    dashboard_exits: tuple[ExitRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "http_url": self.http_url, "grpc_url": self.grpc_url,
                "metrics_url": self.metrics_url,
                "ports": {"http": self.ports.http, "grpc": self.ports.grpc, "metrics": self.ports.metrics},
                "dashboard_url": self.dashboard_url, "triton_log": str(self.triton_log),
                "repository": str(self.repository), "home": str(self.home),
                "triton": {"pid": self.triton_pid, "state": self.triton_state,
                           "started_at": self.triton_started_at, "restart": self.restart_enabled,
                           "exits": [asdict(record) for record in self.exits],
                           "loads": [asdict(load) for load in self.loads]},
                "dashboard": {"pid": self.dashboard_pid, "started_at": self.dashboard_started_at,
                              "log": str(self.dashboard_log) if self.dashboard_log else None,
                              "exits": [asdict(record) for record in self.dashboard_exits]}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StackInfo:
        ports = data["ports"]
        triton = data.get("triton") or {}
        dashboard = data.get("dashboard") or {}
        return cls(int(data["pid"]), str(data["http_url"]), str(data["grpc_url"]),
                   str(data["metrics_url"]), Ports(int(ports["http"]), int(ports["grpc"]),
                                                   int(ports["metrics"])),
                   str(data["dashboard_url"]), Path(data["triton_log"]), Path(data["repository"]),
                   Path(data["home"]),
                   triton_pid=triton.get("pid"), triton_state=str(triton.get("state", "running")),
                   triton_started_at=triton.get("started_at"),
                   restart_enabled=bool(triton.get("restart", True)),
                   exits=tuple(ExitRecord(**record) for record in triton.get("exits", ())),
                   loads=tuple(LoadOutcome(**load) for load in triton.get("loads", ())),
                   dashboard_pid=dashboard.get("pid"), dashboard_started_at=dashboard.get("started_at"),
                   dashboard_log=Path(dashboard["log"]) if dashboard.get("log") else None,
                   dashboard_exits=tuple(ExitRecord(**record) for record in dashboard.get("exits", ())))


@dataclass(frozen=True)
class Workspace:
    home: Path

    @property
    def repository(self) -> Path:
        return self.home / "model_repository"

    @property
    def logs(self) -> Path:
        return self.home / "logs"

    @property
    def backends(self) -> Path:
        return self.home / "backends"

    @property
    def dashboard_log(self) -> Path:
        return self.logs / "dashboard.log"

    @property
    def triton_log(self) -> Path:
        return self.logs / "tritonserver.log"

    @property
    def trace_file(self) -> Path:
        """Triton's request traces (numbered `trace.json.N`), written only during a capture."""
        return self.home / "traces" / "trace.json"

    @property
    def admin_key_file(self) -> Path:
        return self.home / ADMIN_KEY_FILE

    def admin_key(self) -> str | None:
        """The embedded Triton's admin key, or None when this workspace has none (yet)."""
        try:
            key = self.admin_key_file.read_text().strip()
        except OSError:
            return None
        return key or None

    def ensure_admin_key(self) -> str:
        """The workspace's admin key, generated on first use.

        Written like every secret (`write_secret_atomically`: a temporary file created 0600,
        fsynced, renamed into place, the directory fsynced), so the key is never readable by
        others, not even for a moment, and a crash never leaves half a key. Kept across runs: a CLI or
        dashboard that read it earlier stays valid after a restart.
        """
        existing = self.admin_key()
        if existing is not None:
            return existing
        key = secrets.token_urlsafe(ADMIN_KEY_BYTES)
        try:
            private_directory(self.home)
            write_secret_atomically(self.admin_key_file, (key + "\n").encode())
        except (OSError, RepositoryError) as exc:
            raise StackError(self._unusable(exc)) from exc
        return key

    def ensure(self) -> bool:
        """Create the workspace; copy the sample repository if there is none yet.

        Returns True when the samples were copied now. The copy goes to a temporary
        directory first and is renamed into place, so an interrupted first run never
        leaves a half-copied repository that later runs would mistake for the user's.
        """
        try:
            private_directory(self.home)
            private_directory(self.logs)
            if self.repository.exists():
                return False
            staging = Path(tempfile.mkdtemp(prefix=".model_repository-", dir=self.home))
            try:
                shutil.copytree(SAMPLE_REPOSITORY, staging, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__"))
                staging.rename(self.repository)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        except OSError as exc:
            raise RepositoryError(self._unusable(exc)) from exc
        return True

    @property
    def lock_path(self) -> Path:
        return self.home / ".geadmin-up.lock"

    def lock(self) -> PidLock:
        """Claim the workspace for one `geadmin up`; the claim ends when closed (or at exit).

        Two stacks on one workspace would serve the same repository and write (and rotate)
        the same log, so the second is refused, naming the first.
        """

        def refused(holder: str) -> GeAdminError:
            return StackError(f"another `geadmin up` ({holder}) is using the workspace {self.home}; "
                              "stop it, or give this one its own workspace with --home / GEADMIN_HOME")

        try:
            private_directory(self.home)
            return pid_lock(self.lock_path, refused)
        except OSError as exc:
            raise StackError(self._unusable(exc)) from exc

    @property
    def stack_file(self) -> Path:
        return self.home / "stack.json"

    def write_stack(self, info: StackInfo) -> None:
        """Atomically (temp file + rename): a reader never sees half a file."""
        try:
            data = json.dumps(info.to_json(), indent=2).encode()
            atomic_write(self.stack_file, data, mode=SECRET_FILE_MODE)
        except RepositoryError as exc:
            raise StackError(self._unusable(exc)) from exc

    def remove_stack(self) -> None:
        with contextlib.suppress(OSError):
            self.stack_file.unlink()

    def live_stack(self) -> StackInfo | None:
        """The running `geadmin up` of this workspace, or None (no file, or its process is
        gone: a SIGKILLed stack leaves the file behind)."""
        info = self._stack_file_info()
        return info if info is not None and pid_alive(info.pid) else None

    def gone_stack(self) -> StackInfo | None:
        """The `geadmin up` whose stack.json is left behind while its process is gone (killed, or
        the machine restarted: a stack that stops removes the file), else None."""
        info = self._stack_file_info()
        return info if info is not None and not pid_alive(info.pid) else None

    def _stack_file_info(self) -> StackInfo | None:
        try:
            return StackInfo.from_json(json.loads(self.stack_file.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def live_stack_file(self) -> Path | None:
        """stack.json while its `geadmin up` runs, else None (a stale file describes nothing)."""
        return self.stack_file if self.live_stack() is not None else None

    def rotate_triton_log(self) -> None:
        """Keep the previous run's log as `.1` so this run's log holds only this run."""
        try:
            if self.triton_log.exists():
                self.triton_log.replace(self.triton_log.with_name(self.triton_log.name + ".1"))
        except OSError as exc:
            raise StackError(self._unusable(exc)) from exc

    def _unusable(self, exc: OSError | RepositoryError) -> str:
        cause = exc.__cause__ if isinstance(exc, RepositoryError) and exc.__cause__ else exc
        reason = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
        fix = "set GEADMIN_HOME (or --home) to a writable directory"
        if isinstance(cause, OSError):
            fix = disk.next_step(cause, self.home, fix)
        return f"cannot use the workspace {self.home}: {reason}; {fix}"
