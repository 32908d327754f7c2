"""The Streamlit dashboard as a child process (`streamlit run pages/app.py`)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from geadmin import settings
from geadmin.binaries import dies_with_parent, signal_group, terminate_group
from geadmin.errors import StackError
from geadmin.repository.atomic import open_private_log
from geadmin.stack.processes import (
    client_host,
    client_url_host,
    ensure_port_free,
    free_port,
    http_ok,
    tail,
)

SOURCE_APP = Path(__file__).resolve().parents[2] / "pages" / "app.py"


def dashboard_app() -> Path:
    """The entry script: `pages/app.py` of a source checkout, or of an installed wheel
    (which carries `pages/` as `geadmin_dashboard/pages/`, see pyproject.toml)."""
    if SOURCE_APP.is_file():
        return SOURCE_APP
    spec = importlib.util.find_spec("geadmin_dashboard.pages")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations))) / "app.py"
    return SOURCE_APP


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
        dies_with_us: bool = False,
    ) -> None:
        self.triton_url = triton_url
        # SIGKILLed by the kernel when the thread that starts it dies with its process (a
        # `geadmin up` killed with -9 or by the OOM killer): start it from a thread that lives
        # as long as the process (geadmin up's main thread)
        self.dies_with_us = dies_with_us
        self.home = Path(home)
        self.host = host
        self.port = port or free_port(client_host(host))
        self.triton_log = triton_log
        self.repository = repository
        self.only_this_triton = only_this_triton
        self.extra_env = dict(extra_env or {})
        self.log_path = log_path or self.home / "logs" / "dashboard.log"
        self._process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None  # epoch seconds

    @property
    def url(self) -> str:
        return f"http://{client_url_host(self.host)}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process else None

    def command(self) -> list[str]:
        app = dashboard_app()
        if not app.is_file():
            raise StackError(
                f"dashboard entry script {app} is missing: reinstall geadmin "
                "(`pip install --force-reinstall geadmin-*.whl`, or `pip install -e .` in a checkout)"
            )
        return [
            sys.executable, "-m", "streamlit", "run", str(app),
            "--server.headless=true",
            f"--server.port={self.port}",
            f"--server.address={self.host}",
            "--browser.gatherUsageStats=false",
            "--server.fileWatcherType=none",
            "--global.developmentMode=false",
            "--client.toolbarMode=minimal",
        ]

    def environment(self) -> dict[str, str]:
        values: dict[settings.Setting[Any], str | None] = {
            settings.TRITON_URL: self.triton_url, settings.HOME: str(self.home)}
        if self.only_this_triton:  # the embedded stack's dashboard shows the Triton it started
            values.update({settings.TRITON_URLS: None, settings.SERVERS_FILE: None})
        if self.triton_log is not None:
            values[settings.TRITON_LOG] = str(self.triton_log)
        if self.repository is not None:
            values[settings.REPOSITORY] = str(self.repository)
        return settings.child_environment({**os.environ, **self.extra_env}, values)

    def start(self, timeout_s: float = 60.0, cancelled: Callable[[], bool] = lambda: False) -> None:
        ensure_port_free(self.host, self.port, "dashboard", "--dashboard-port")
        try:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open_private_log(self.log_path) as log:
                self._process = subprocess.Popen(
                    self.command(), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=self.environment(), start_new_session=True,
                    preexec_fn=dies_with_parent() if self.dies_with_us else None,
                )
        except OSError as exc:
            raise StackError(f"cannot start the dashboard (log {self.log_path}): "
                             f"{exc.strerror or exc}") from exc
        self.started_at = time.time()
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and not cancelled():
            if self._process.poll() is not None:
                code = self._process.returncode
                self._process = None
                raise StackError(f"the dashboard exited with code {code} during start-up:\n"
                                 f"{tail(self.log_path)}")
            if http_ok(f"{self.url}/_stcore/health"):
                return
            time.sleep(0.1)  # as TritonProcess.start: a refused loopback connection is cheap
        self.stop()
        raise StackError(f"the dashboard did not answer within {timeout_s:.0f}s "
                         f"(log: {self.log_path})")

    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def exit_code(self) -> int | None:
        """How it ended (negative: killed by that signal); None while it runs or never ran."""
        return None if self._process is None else self._process.poll()

    def begin_stop(self) -> None:
        """Ask it to exit without waiting (so Triton can stop at the same time)."""
        if self._process is not None:
            signal_group(self._process)

    def stop(self, timeout_s: float = 5.0) -> None:
        process, self._process = self._process, None
        if process is not None:
            terminate_group(process, timeout_s)
