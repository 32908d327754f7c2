"""Why did a load fail? The real reason, not "failed to poll from model repository".

Over the API Triton often says only that (FACTS.md); the reason is in its log. So a load
is watched: before it, note where the log ends and whether the model was serving; while
it runs, follow the log (a load Triton keeps LOADING after a fatal line — a python model
without model.py — is reported as soon as that line appears, not at the timeout); after a
failure, gather

1. the model's lines from what Triton logged since (a `LogSource`),
2. the repository layout problems visible on disk (`geadmin.repository.layout`),
3. whether the previously loaded version still serves — checked with the repository index
   and a readiness call, never assumed,

and lead with the most specific of them, with its fix (`geadmin.diagnose.advice`).

Reads only: the load itself, watched and explained with these, is
`geadmin.ops.models.explained_load.load_explained`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2

from geadmin.diagnose import advice
from geadmin.domain import Explanation, LogCursor, LogLine, ModelState, Serving, format_duration
from geadmin.errors import TritonError, TritonTimeoutError
from geadmin.repository.layout import layout_problems
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource, is_failure, mentions_pattern, parse_log_line

LOG_SETTLE_S = 1.0  # how long to wait for Triton to flush the lines of a failed load


@dataclass(frozen=True)
class LoadWatch:
    """Taken just before a load: where the log ended and what was serving."""

    name: str
    cursor: LogCursor | None
    was_ready: bool | None  # None: could not tell
    version: str
    started: float = 0.0  # time.monotonic()


def log_reason(lines: tuple[LogLine, ...] | list[LogLine]) -> str:
    """The first failure (else warning) Triton logged about the model, without its traceback."""
    for wanted in (is_failure, lambda line: line.severity == "W"):
        for line in lines:
            if wanted(line):
                return line.message.split("\n\n")[0].strip()
    return ""


def headline(lines: tuple[LogLine, ...], layout: tuple[str, ...], error: str) -> str:
    return advice.lead(log_reason=log_reason(lines), layout=layout, api=error)


# -- around a load -------------------------------------------------------------------
def watch(client: TritonClient, name: str, log: LogSource | None) -> LoadWatch:
    """Call just before loading `name`."""
    cursor = log.cursor() if log else None
    started = time.monotonic()
    try:
        entries = [e for e in client.repository_index() if e.name == name]
        # Not listed, yet loaded: its directory went away while it serves (geadmin.diagnose.drift)
        unlisted_ready = not entries and client.model_ready(name)
    except TritonError:
        return LoadWatch(name, cursor, None, "", started)
    ready = [e for e in entries if e.state is ModelState.READY]
    return LoadWatch(name, cursor, bool(ready) or unlisted_ready, ready[-1].version if ready else "", started)


def explain(
    client: TritonClient,
    before: LoadWatch,
    error: BaseException,
    *,
    log: LogSource | None = None,
    repository: Path | None = None,
    config: model_config_pb2.ModelConfig | None = None,
    files_sent: bool = False,
    hung: bool = False,
) -> Explanation:
    """Gather the real reason of a failed load of `before.name`."""
    name = before.name
    lines = tuple(_read_model_lines(log, before.cursor, name))
    problems: tuple[str, ...] = ()
    if repository is not None and not files_sent:
        problems = tuple(layout_problems(repository, name, config))
    serving, version, serving_error = check_serving(client, before)
    timed_out = isinstance(error, TritonTimeoutError)
    answer = still_running(client.load_timeout_s, lines, reload=before.was_ready is True) \
        if timed_out and not hung else str(error)
    return Explanation(
        model=name,
        error=str(error),
        reason=headline(lines, problems, answer),
        log_lines=lines,
        layout_problems=problems,
        serving=serving,
        serving_version=version,
        serving_error=serving_error,
        log_description=log.description if log else "",
        timed_out=timed_out,
        hung=hung,
        elapsed_s=time.monotonic() - before.started,
    )


def still_running(load_timeout_s: float, lines: Sequence[LogLine], *, reload: bool = False) -> str:
    """A load Triton had not answered at the client's load timeout, in words: it has not
    failed, it has not finished (Triton did not time out: geadmin stopped waiting). A `reload`
    (the model was READY) goes on beside the previous version, which the index still shows."""
    last = f"; its last line about the model: \"{lines[-1].message}\"" if lines else ""
    waited = format_duration(load_timeout_s)
    return f"Triton had not answered the {'re' if reload else ''}load after the load timeout ({waited}){last}"


def _read_model_lines(log: LogSource | None, cursor: LogCursor | None, name: str) -> list[LogLine]:
    if log is None or cursor is None:
        return []
    mentions = mentions_pattern([name])
    deadline = time.monotonic() + LOG_SETTLE_S
    while True:
        lines = [parse_log_line(raw) for raw in log.lines_since(cursor) if mentions.search(raw)]
        if any(is_failure(line) or line.severity == "W" for line in lines) or time.monotonic() >= deadline:
            return lines
        time.sleep(0.1)


def check_serving(client: TritonClient, before: LoadWatch) -> tuple[Serving, str, str]:
    """Ask Triton (index + readiness) what serves the model now: (serving, version, error)."""
    try:
        entries = [e for e in client.repository_index() if e.name == before.name]
        ready = [e for e in entries if e.state is ModelState.READY]
        # a model the index does not list may still serve: its directory is gone
        answering = (bool(ready) or not entries) and client.model_ready(before.name)
    except TritonError as exc:
        return Serving.UNKNOWN, "", str(exc)
    if answering:
        return Serving.PREVIOUS, ready[-1].version if ready else "", ""
    return (Serving.NEVER_LOADED if before.was_ready is False else Serving.NOTHING), "", ""


def explanation_dict(explanation: Explanation) -> dict[str, Any]:
    """For `--json` output."""
    return {
        "model": explanation.model,
        "reason": explanation.reason,
        "error": explanation.error,
        "layout_problems": list(explanation.layout_problems),
        "serving": explanation.serving.name,
        "serving_version": explanation.serving_version,
        "timed_out": explanation.timed_out,
        "hung": explanation.hung,
        "elapsed_s": round(explanation.elapsed_s, 1),
        "log_lines": [line.raw for line in explanation.log_lines],
    }

