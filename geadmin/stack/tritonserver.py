"""Start and stop a real `tritonserver` process (the binary of the nvidia-pytriton wheel).

Used by `geadmin up` and by the test fixtures. What makes the wheel's server work on a
fresh machine (FACTS.md): a backend directory holding `python/` with the stub built for
the running Python (geadmin.stack.triton_install builds it, and finds the binary), the venv's
`bin` first on PATH (the stub runs isolated and ignores PYTHONPATH), and `nvidia_pytriton.libs`
on LD_LIBRARY_PATH (else the stub dies and the load hangs).

With an `admin_key`, the server's repository, model-config, shared-memory, logging and trace
APIs answer only requests that carry it (`--http-restricted-api` / `--grpc-restricted-protocol`,
the flags compose.yaml passes): whoever reaches Triton's ports without the key can infer, not
load, unload, reconfigure, register a shared-memory region (and read it back through a model)
or read the log settings. The key travels only as those flags:
the server's environment carries none of geadmin's settings (GEADMIN_*), secrets included.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType

from geadmin import settings
from geadmin.binaries import dies_with_parent, terminate_group, wheel_layout
from geadmin.domain import Ports, url_host
from geadmin.errors import TritonStartError
from geadmin.repository.atomic import open_private_log
from geadmin.stack.processes import (
    client_host,
    client_url_host,
    ensure_ports_free,
    free_triton_ports,
    http_ok,
    pid_alive,
    tail,
)
from geadmin.stack.triton_install import find_tritonserver, prepare_backend_directory
from geadmin.telemetry.sources.triton_trace import trace_flags

SHM_DIR = Path("/dev/shm")
# How often start() asks /v2/health/live: a refused connection on loopback costs microseconds,
# and every poll skipped is time a start (`geadmin up`, a restart, each test server) waits idle.
LIVE_POLL_S = 0.1
# Triton's API groups that change the server, reveal its files, or map a caller's memory into it
# (FACTS.md "Trust, faults and devices"); docs/security.md's table says who may call each group.
RESTRICTED_APIS = ("model-repository", "model-config", "shared-memory", "logging", "trace")


def restricted_api_flags(admin_key: str | None) -> list[str]:
    """The flags that put RESTRICTED_APIS behind `admin_key` on both protocols (none: no key)."""
    if not admin_key:
        return []
    if any(c in admin_key for c in ",:= \t\n"):
        raise TritonStartError("the admin key may not hold ',', ':', '=' or spaces (Triton's flag syntax)")
    categories = ",".join(RESTRICTED_APIS)
    return [f"--http-restricted-api={categories}:admin-key={admin_key}",
            f"--grpc-restricted-protocol={categories}:admin-key={admin_key}"]


def http_bind_address(host: str) -> str:
    """`host` as Triton 2.51's HTTP and metrics servers take it: an IPv6 literal needs libevhtp's
    `ipv6:` prefix (a bare `::` binds 255.255.255.255), and binds IPv6 only; gRPC takes the
    literal in brackets and binds both families (docs/development.md)."""
    return f"ipv6:{host}" if ":" in host else host


class TritonProcess:
    """One tritonserver process in explicit model-control mode.

    Starts on free 127.0.0.1 ports unless `ports` is given. `models=None` loads every
    model of the repository at start, a list loads those only, `[]` none.
    """

    def __init__(
        self,
        repository: Path,
        *,
        binary: Path | None = None,
        backend_dir: Path | None = None,
        log_path: Path | None = None,
        host: str = "127.0.0.1",
        ports: Ports | None = None,
        models: Sequence[str] | None = None,
        extra_args: Sequence[str] = (),
        ld_library_path: Sequence[Path] = (),
        env: Mapping[str, str] | None = None,
        exit_timeout_s: int = 5,
        admin_key: str | None = None,
        trace_file: Path | None = None,
        dies_with_us: bool = False,
    ) -> None:
        self.repository = Path(repository)
        self.binary = Path(binary) if binary else find_tritonserver()
        self.host = host
        self.ports = ports or free_triton_ports(client_host(host))
        self.models = models
        self.extra_args = list(extra_args)
        self.ld_library_path = [Path(p) for p in ld_library_path]
        self.extra_env = dict(env or {})
        self.exit_timeout_s = exit_timeout_s
        self.admin_key = admin_key
        # Where Triton may write request traces (only settable at start); tracing stays OFF
        # until a capture turns it on for one model (geadmin.ops.capacity.capture).
        self.trace_file = Path(trace_file) if trace_file else None
        # SIGKILLed by the kernel when the thread that starts it dies with its process (a
        # `geadmin up` killed with -9 or by the OOM killer): start it from a thread that lives
        # as long as the process (geadmin up's main thread)
        self.dies_with_us = dies_with_us
        self._owned_dirs: list[Path] = []
        try:
            self.backend_dir = backend_dir or self._default_backend_dir()
            self.log_path = Path(log_path) if log_path else self._scratch_dir() / "tritonserver.log"
        except BaseException:  # e.g. no stub for this Python: leave no scratch directory behind
            self._remove_owned_dirs()
            raise
        # A prefix of our own so stop() removes exactly this server's shared-memory regions;
        # it names our pid, so a later start can remove what a killed predecessor left.
        self.shm_prefix = f"geadmin_{os.getpid()}_{uuid.uuid4().hex[:8]}_"
        self._process: subprocess.Popen[bytes] | None = None
        self._ended_with: int | None = None  # the exit status `stop` reaped
        self.stopped_by_us = False  # `stop` ended it while it ran (asked), not a crash
        self.started_at: float | None = None  # epoch seconds of the current run

    # -- addresses --------------------------------------------------------------------
    @property
    def http_url(self) -> str:
        return f"http://{client_url_host(self.host)}:{self.ports.http}"

    @property
    def grpc_url(self) -> str:
        return f"{client_url_host(self.host)}:{self.ports.grpc}"

    @property
    def metrics_url(self) -> str:
        return f"http://{client_url_host(self.host)}:{self.ports.metrics}/metrics"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    # -- lifecycle --------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [
            str(self.binary),
            f"--model-repository={self.repository}",
            f"--backend-directory={self.backend_dir}",
            "--model-control-mode=explicit",
            f"--http-address={http_bind_address(self.host)}",
            f"--grpc-address={url_host(self.host)}",
            f"--metrics-address={http_bind_address(self.host)}",
            f"--http-port={self.ports.http}",
            f"--grpc-port={self.ports.grpc}",
            f"--metrics-port={self.ports.metrics}",
            "--metrics-config=summary_latencies=true",
            # A broken model must not keep the server (and the panel that explains it) down.
            "--exit-on-error=false",
            f"--exit-timeout-secs={self.exit_timeout_s}",
            f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}",
        ]
        cmd += restricted_api_flags(self.admin_key)
        if self.trace_file is not None:
            cmd += trace_flags(self.trace_file)
        models = ["*"] if self.models is None else list(self.models)
        cmd += [f"--load-model={name}" for name in models]
        return cmd + self.extra_args

    def environment(self) -> dict[str, str]:
        """The server's environment: ours without geadmin's settings (the admin key, OIDC
        secrets and the rest of GEADMIN_*: Triton and its model code need none of them)."""
        env = settings.without_settings(os.environ)
        env.update(self.extra_env)
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join([venv_bin, env.get("PATH", "")])
        libs = [str(p) for p in self.ld_library_path]
        layout = wheel_layout()
        if layout is not None and layout.libs_dir.is_dir():
            libs.append(str(layout.libs_dir))
        if env.get("LD_LIBRARY_PATH"):
            libs.append(env["LD_LIBRARY_PATH"])
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
        return env

    def start(self, timeout_s: float = 180.0, progress: Callable[[str], None] | None = None,
              cancelled: Callable[[], bool] | None = None) -> None:
        """Run the server and wait until it is live; `cancelled()` true gives up at once."""
        if self._process is not None:
            raise TritonStartError("this TritonProcess is already started")
        if not self.repository.is_dir():
            raise TritonStartError(f"model repository {self.repository} does not exist")
        ensure_ports_free(self.host, self.ports)
        self.remove_stale_shm_regions()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open_private_log(self.log_path) as log:
            try:
                self._process = subprocess.Popen(
                    self.command(),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.environment(),
                    start_new_session=True,  # its own process group: stop() reaches the stubs too
                    preexec_fn=dies_with_parent() if self.dies_with_us else None,
                )
            except OSError as exc:
                raise TritonStartError(
                    f"cannot run {self.binary}: {exc.strerror or exc} — is it a tritonserver "
                    "binary for this machine? (--tritonserver / GEADMIN_TRITONSERVER)"
                ) from exc
        self.started_at = time.time()
        try:
            self._wait_live(timeout_s, progress, cancelled)
        except BaseException:
            self.stop()
            raise

    def _wait_live(self, timeout_s: float, progress: Callable[[str], None] | None,
                   cancelled: Callable[[], bool] | None) -> None:
        # With --load-model the HTTP endpoint opens only after the initial loads finish,
        # so "live" means "start-up done", whatever state each model ended in. The metrics
        # service opens tens of ms after HTTP: started means it answers too (a reader right
        # after the start was refused once).
        deadline = time.monotonic() + timeout_s
        url = f"{self.http_url}/v2/health/live"
        started = time.monotonic()
        while time.monotonic() < deadline:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise TritonStartError(
                    f"tritonserver exited with code {code} during start-up "
                    f"(full log: {self.log_path})",
                    tail(self.log_path),
                )
            if http_ok(url) and http_ok(self.metrics_url):
                return
            if cancelled is not None and cancelled():
                raise TritonStartError("start of tritonserver cancelled: the stack is stopping")
            if progress is not None:
                progress(f"waiting for Triton ({time.monotonic() - started:.0f}s)")
            time.sleep(LIVE_POLL_S)
        raise TritonStartError(
            f"tritonserver was not live after {timeout_s:.0f}s (full log: {self.log_path})",
            tail(self.log_path),
        )

    def alive(self) -> bool:
        process = self._process  # once: `stop` may clear it on another thread
        return process is not None and process.poll() is None

    def ended_within(self, timeout_s: float) -> bool:
        """Whether it has exited, waiting up to `timeout_s`: its sockets close while it exits, so a
        refused connection can come just before its exit can be seen."""
        process = self._process
        if process is None:
            return True
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True

    def exit_code(self) -> int | None:
        """The exit status once it has ended (negative: killed by that signal), else None; kept
        after `stop` reaped it (a load round reads it once the supervisor has)."""
        process = self._process
        return process.poll() if process is not None else self._ended_with

    def stop(self, timeout_s: float = 12.0) -> int | None:
        """SIGTERM the process group, SIGKILL what is left after `timeout_s`; clean /dev/shm."""
        process = self._process
        if process is not None and process.poll() is None:
            self.stopped_by_us = True  # before it is gone: a load it cuts off is not to blame
        self._process = None
        code: int | None = None
        if process is not None:
            code = self._ended_with = terminate_group(process, timeout_s)
        self.remove_shm_regions()
        self._remove_owned_dirs()
        return code

    def _remove_owned_dirs(self) -> None:
        for directory in self._owned_dirs:
            shutil.rmtree(directory, ignore_errors=True)
        self._owned_dirs.clear()

    @staticmethod
    def remove_stale_shm_regions() -> list[str]:
        """Remove regions of geadmin-started servers whose launching process is gone
        (a SIGKILLed `geadmin up` never cleans up; FACTS.md). Returns what was removed."""
        removed = []
        for path in SHM_DIR.glob("geadmin_*_*_*"):
            owner = path.name.split("_")[1]
            if owner.isdigit() and not pid_alive(int(owner)):
                with contextlib.suppress(OSError):
                    path.unlink()
                    removed.append(path.name)
        return removed

    def remove_shm_regions(self) -> None:
        for path in glob.glob(str(SHM_DIR / f"{self.shm_prefix}*")):
            with contextlib.suppress(OSError):
                os.unlink(path)

    def __enter__(self) -> TritonProcess:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- helpers ----------------------------------------------------------------------
    def _scratch_dir(self) -> Path:
        import tempfile

        directory = Path(tempfile.mkdtemp(prefix="geadmin-triton-"))
        self._owned_dirs.append(directory)
        return directory

    def _default_backend_dir(self) -> Path:
        return prepare_backend_directory(self._scratch_dir() / "backends")
