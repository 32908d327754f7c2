"""A recorded double of the docker CLI (tests/unit/assets/docker/, see its README): replays
real docker outputs in place of `subprocess.run`, for the compose driver's unit tests; the
real engine runs the same driver in tests/integration/test_compose_driver_docker.py."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geadmin.stack.docker_inspect import parse_time_ns

ASSETS = Path(__file__).resolve().parents[1] / "unit" / "assets" / "docker"


def asset(name: str) -> str:
    return (ASSETS / name).read_text()


Handler = Callable[[list[str]], "tuple[int, str, str] | str"]


class FakeDocker:
    """Stands in for `subprocess.run` of the docker CLI: answers each argv from `handler`
    (stdout, or (returncode, stdout, stderr)) and records every call and its arguments."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.calls: list[tuple[list[str], dict[str, Any]]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        assert isinstance(argv, list) and not kwargs.get("shell"), "argument lists only, never a shell"
        assert kwargs.get("timeout"), "every docker call has a timeout"
        self.calls.append((argv, kwargs))
        answer = self.handler(argv)
        code, out, err = (0, answer, "") if isinstance(answer, str) else answer
        if kwargs.get("stderr") is subprocess.STDOUT:
            out, err = out + err, ""
        return subprocess.CompletedProcess(argv, code, out, err)

    def verbs(self) -> list[str]:
        return [" ".join(argv[1:3]) if argv[1] == "container" else argv[1] for argv, _ in self.calls]


def recorded(ps: str, inspect_file: str, **more: str | tuple[int, str, str]) -> Handler:
    """ps -> `ps` file, container inspect -> `inspect_file`, other verbs -> `more[verb]`."""

    def handle(argv: list[str]) -> tuple[int, str, str] | str:
        if argv[1] == "ps":
            return asset(ps)
        if argv[1:3] == ["container", "inspect"]:
            return asset(inspect_file)
        return more.get(argv[1], "")

    return handle


def log_replay(log: str, ps: str = "ps_running.jsonl", inspect_file: str = "inspect_running.json") -> Handler:
    """`docker logs` of the recorded log: `--tail 1` and an inclusive `--since`, as docker does."""

    def handle(argv: list[str]) -> str:
        if argv[1] != "logs":
            return recorded(ps, inspect_file)(argv)  # type: ignore[return-value]
        lines = log.splitlines()
        if "--tail" in argv:
            lines = lines[-int(argv[argv.index("--tail") + 1]):]
        if "--since" in argv:
            seconds, nanos = argv[argv.index("--since") + 1].split(".")
            since = int(seconds) * 10**9 + int(nanos)
            lines = [line for line in lines if (parse_time_ns(line.split(" ")[0]) or 0) >= since]
        return "".join(line + "\n" for line in lines)

    return handle
