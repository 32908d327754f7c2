"""A load, watched and explained: `load_explained` is `client.load` that says the real reason
when Triton rejects the model, and says so early when Triton keeps it LOADING after a fatal line.

The reading — where the log ended, what was serving, the reason gathered after a failure — is
`geadmin.diagnose.explain`; this module performs the load (guarded: `load`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tritonclient.grpc import model_config_pb2

from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.diagnose.explain import explain, watch
from geadmin.domain import Explanation, LogCursor, LogLine, ModelState
from geadmin.errors import (
    ExplainedLoadError,
    ExplainedLoadTimeoutError,
    LoadFailedError,
    TritonError,
    TritonTimeoutError,
)
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource, is_failure, mentions_pattern, parse_log_line

POLL_S = 0.25  # how often a running load's log is read

# While a load runs: (seconds elapsed, latest line Triton logged about the model or "").
LoadProgress = Callable[[float, str], None]


class _LogFollower:
    """The latest line about one model, read incrementally while its load runs."""

    def __init__(self, log: LogSource | None, cursor: LogCursor | None, name: str) -> None:
        self.log, self.cursor = log, cursor
        self.mentions = mentions_pattern([name])
        self.latest = ""
        self.failure: LogLine | None = None

    def poll(self) -> None:
        if self.log is None or self.cursor is None:
            return
        lines, self.cursor = self.log.read(self.cursor)
        for raw in lines:
            if self.mentions.search(raw):
                line = parse_log_line(raw)
                self.latest = line.message
                if self.failure is None and is_failure(line):
                    self.failure = line


def load_explained(
    client: TritonClient,
    name: str,
    *,
    log: LogSource | None = None,
    repository: Path | None = None,
    config: model_config_pb2.ModelConfig | None = None,
    files: Mapping[str, bytes] | None = None,
    progress: LoadProgress | None = None,
    auth: Authorization | None = None,
) -> None:
    """`client.load`, raising `ExplainedLoadError` with the real reason when Triton rejects
    it, and `ExplainedLoadTimeoutError` when it does not finish within the client's load
    timeout — or as soon as the log shows a failure while Triton keeps the model LOADING.
    `auth` must cover `load` (NotAuthorizedError before Triton is asked anything)."""
    require(auth, GuardedAction.LOAD)
    before = watch(client, name, log)
    follower = _LogFollower(log, before.cursor, name)
    pending = client.start_load(name, config=config, files=files)

    def explained(error: BaseException, hung: bool = False) -> Explanation:
        return explain(client, before, error, log=log, repository=repository, config=config,
                       files_sent=bool(files), hung=hung)

    while not pending.wait(POLL_S):
        follower.poll()
        if progress is not None:
            progress(time.monotonic() - before.started, follower.latest)
        # A load that fails normally answers right after its error line: give it that moment.
        if follower.failure is not None and not pending.wait(POLL_S) and _still_loading(client, name):
            stuck = TritonTimeoutError(f"load model {name!r}: still LOADING after Triton logged: "
                                       f"{follower.failure.message.splitlines()[0]}", url=client.url)
            raise ExplainedLoadTimeoutError(explained(stuck, hung=True), url=client.url) from None
    try:
        pending.result()
    except LoadFailedError as exc:
        raise ExplainedLoadError(explained(exc), url=exc.url, status=exc.status) from exc
    except TritonTimeoutError as exc:
        if before.was_ready is None:
            raise  # Triton did not answer before the load either: no server, not a hung load
        raise ExplainedLoadTimeoutError(explained(exc), url=exc.url, status=exc.status) from exc


def _still_loading(client: TritonClient, name: str) -> bool:
    """Check, don't assume: a fatal line is only a hung load if Triton still says LOADING."""
    try:
        states = {e.state for e in client.repository_index() if e.name == name}
    except TritonError:
        return False
    return ModelState.LOADING in states
