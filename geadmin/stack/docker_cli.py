"""The docker CLI, run with a deadline, its failures translated through one table.

Every docker call is an argument list with a timeout; every failure (the CLI missing, no
engine, a denied socket, a container gone, a timeout) goes through `FAILURES` into a
`StackError` whose first line says cause and fix (`TABLE`, read like every boundary's:
`geadmin.failure_table`). tests/unit/test_compose_driver.py walks
every row with recorded docker output (tests/unit/assets/docker/errors/).
"""

from __future__ import annotations

import enum
import shlex
import subprocess
from collections.abc import Sequence

from geadmin.errors import DockerError, DockerUnavailableError, ServiceNotFoundError, StackError
from geadmin.failure_table import FailureTable

READ_TIMEOUT_S = 30.0
ACTION_TIMEOUT_S = 120.0  # `docker stop` waits the container's grace period, then kills


class DockerFailure(enum.Enum):
    NO_CLI = "no docker CLI"
    CLI_NOT_RUNNABLE = "the docker CLI cannot be run"
    NO_ENGINE = "no engine answers"
    SOCKET_DENIED = "no permission on the engine's socket"
    NO_SUCH_CONTAINER = "the container is gone"
    TIMEOUT = "no answer in time"
    OTHER = "any other failure"


# Lower-cased stderr substrings, first match wins; recorded in tests/unit/assets/docker/errors/
# (Docker 20.10 and 28 clients) except the two marked, quoted from public reports.
STDERR_FAILURES: tuple[tuple[str, DockerFailure], ...] = (
    ("permission denied while trying to connect to the docker daemon", DockerFailure.SOCKET_DENIED),
    ("cannot connect to the docker daemon", DockerFailure.NO_ENGINE),
    ("failed to connect to the docker api", DockerFailure.NO_ENGINE),  # quoted: Docker 29 clients
    ("error during connect", DockerFailure.NO_ENGINE),  # quoted: Docker Desktop's named pipe, tcp://
    ("no such container", DockerFailure.NO_SUCH_CONTAINER),
    ("no such object", DockerFailure.NO_SUCH_CONTAINER),  # `docker inspect`'s wording
)
# What running the CLI can raise; first isinstance match wins, so subclasses come first.
EXCEPTION_FAILURES: tuple[tuple[type[BaseException], DockerFailure], ...] = (
    (FileNotFoundError, DockerFailure.NO_CLI),
    (PermissionError, DockerFailure.CLI_NOT_RUNNABLE),
    (subprocess.TimeoutExpired, DockerFailure.TIMEOUT),
    (subprocess.SubprocessError, DockerFailure.OTHER),
    (OSError, DockerFailure.CLI_NOT_RUNNABLE),  # e.g. ENOEXEC: GEADMIN_DOCKER is not a program
)
# {what}: the action; {cli}: the binary; {command}: the command line; {detail}: the CLI's
# error line or the exception; {timeout_s}: the deadline.
FAILURES: dict[DockerFailure, tuple[type[StackError], str]] = {
    DockerFailure.NO_CLI: (DockerUnavailableError, "{what}: no docker CLI '{cli}' on this machine — "
                     "install docker, or set GEADMIN_DOCKER to the docker binary's path"),
    DockerFailure.CLI_NOT_RUNNABLE: (DockerUnavailableError, "{what}: cannot run the docker CLI '{cli}' "
                               "({detail}) — set GEADMIN_DOCKER to the docker binary's path"),
    DockerFailure.NO_ENGINE: (DockerUnavailableError, "{what}: no Docker engine answers ({detail}) — start "
                        "it (`sudo systemctl start docker`), check DOCKER_HOST, or mount "
                        "/var/run/docker.sock into the dashboard's container"),
    DockerFailure.SOCKET_DENIED: (DockerUnavailableError, "{what}: no permission on the Docker socket "
                            "({detail}) — add the user to the docker group (`sudo usermod -aG docker "
                            "USER`, log in again); in a container, add the socket's group (group_add)"),
    DockerFailure.NO_SUCH_CONTAINER: (ServiceNotFoundError, "{what}: the container is gone ({detail}) — it "
                                "was removed or recreated since it was listed: refresh and retry"),
    DockerFailure.TIMEOUT: (DockerError, "{what}: `{command}` did not finish within {timeout_s:g}s — the "
                      "Docker engine may be overloaded or hung: check `docker info` and its log"),
    DockerFailure.OTHER: (DockerError, "{what}: `{command}` failed: {detail}"),
}


TABLE = FailureTable(STDERR_FAILURES, EXCEPTION_FAILURES, FAILURES, DockerFailure.OTHER)
classify = TABLE.classify


def docker_error(failure: DockerFailure, *, what: str, argv: Sequence[str], detail: str,
                 timeout_s: float) -> StackError:
    return TABLE.error(failure, what=what, cli=argv[0], command=shlex.join(argv),
                       detail=detail or "no message", timeout_s=timeout_s)


def run_docker(argv: Sequence[str], *, what: str, timeout_s: float = READ_TIMEOUT_S,
               merge_stderr: bool = False) -> str:
    """The CLI's stdout (with stderr interleaved when `merge_stderr`: one ordered stream)."""
    try:
        done = subprocess.run(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT if merge_stderr else subprocess.PIPE,
                              encoding="utf-8", errors="replace", timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise docker_error(classify(exc), what=what, argv=argv, detail=str(exc),
                           timeout_s=timeout_s) from exc
    if done.returncode != 0:
        text = done.stdout if merge_stderr else done.stderr
        lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
        # The CLI prints its error first on stderr; merged with a log, it comes last.
        detail = (lines[-1] if merge_stderr else lines[0]) if lines else f"exit code {done.returncode}"
        raise docker_error(classify(output=text or ""), what=what, argv=argv, detail=detail,
                           timeout_s=timeout_s)
    return done.stdout or ""
