"""`geadmin up` as a subprocess on free ports, and the CLI run against its workspace: as a child
(`geadmin`: the entry point, a fresh process) or in this process (`in_process`: the same `main`
without a Python start-up, about a second of CPU each, for commands that need no process of
their own)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from geadmin.access.token import read_token, sign_in_url
from geadmin.stack.processes import free_ports
from tests.support.processes import OutputCollector, descendants

GEADMIN = [sys.executable, "-m", "geadmin.cli"]
READY_LINE = "Press Ctrl-C to stop."


@dataclass
class Up:
    process: subprocess.Popen[str]
    home: Path
    http: int
    grpc: int
    metrics: int
    dashboard: int
    output: str  # what it had printed when it was handed over
    collector: OutputCollector  # everything it prints, as it prints it

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http}"

    def dashboard_link(self, path: str = "/") -> str:
        """The dashboard's `path` with the sign-in token this `geadmin up` wrote (its default:
        no users, so a token), as the link it printed would open it."""
        value = read_token(self.home)
        assert value is not None, f"`geadmin up` wrote no sign-in token to {self.home}"
        return sign_in_url(f"http://127.0.0.1:{self.dashboard}{path}", value)


@contextlib.contextmanager
def exported(name: str, value: str) -> Iterator[None]:
    """`os.environ[name] = value` for the block, the previous value (or none) put back after:
    for module-scoped fixtures, where pytest's monkeypatch (function-scoped) cannot go."""
    saved = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved


def in_process(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`geadmin(*args, home=home)` in this process: GEADMIN_HOME=home, stdout and stderr caught
    (stdout a text stream over bytes, as a child's: `config history --show` writes bytes)."""
    from geadmin.cli.main import main  # here: a module that only starts stacks needs no CLI

    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
    err = io.StringIO()
    with exported("GEADMIN_HOME", str(home)), contextlib.redirect_stdout(out), \
            contextlib.redirect_stderr(err):
        code = main(list(args))
    printed = out.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]
    return subprocess.CompletedProcess(list(args), code, printed, err.getvalue())


def port_args(http: int, grpc: int, metrics: int, dashboard: int) -> list[str]:
    return ["--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics),
            "--dashboard-port", str(dashboard)]


def geadmin(*args: str, home: Path, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI as a subprocess with GEADMIN_HOME=home."""
    env = {**os.environ, "GEADMIN_HOME": str(home)}
    return subprocess.run([*GEADMIN, *args], capture_output=True, text=True, env=env, timeout=timeout_s)


@contextlib.contextmanager
def running_up(home: Path, *extra: str, wait_for: str = READY_LINE,
               env: Mapping[str, str] | None = None) -> Iterator[Up]:
    """`geadmin up` on free ports, handed over once it printed `wait_for` (`models: ` waits
    until the start-up loads ended); stopped as an operator would (SIGTERM) when the block
    ends, and killed with everything below it if that fails. The workspace is given as
    GEADMIN_HOME=home, or, with `env` (the whole environment), as `--home home`."""
    ports = free_ports(4)
    if env is None:
        env, where = {**os.environ, "GEADMIN_HOME": str(home)}, []
    else:
        env, where = dict(env), ["--home", str(home)]
    env.pop("GEADMIN_AUTH", None)  # `geadmin up`'s real default, not the tests' open dashboards
    process = subprocess.Popen([*GEADMIN, "up", *where, *port_args(*ports), *extra], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env)
    try:
        collector = OutputCollector(process)
        output = collector.wait_for(wait_for, timeout_s=180)
        yield Up(process, home, *ports, output=output, collector=collector)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                for pid in descendants(process.pid):
                    os.kill(pid, signal.SIGKILL)
                process.kill()
                process.wait(10)
