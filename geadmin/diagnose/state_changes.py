"""The models a change moved, found after it: every other model whose state changed, and why.

`snapshot` before the change, `changes` after it: ask Triton again, never assume, and list every
model other than the ones acted on whose state changed, each with Triton's reason: the
index's `reason`, and the failure line Triton logged about it since the snapshot when the log
is readable (the index says only "unloaded"). What a change would do, named before it runs,
is `diagnose.impact`.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from geadmin.diagnose.impact import NEVER, index_states
from geadmin.domain import LogCursor, ModelState
from geadmin.errors import GeAdminError
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource, is_failure, mentions_pattern, parse_log_line

SETTLE_TIMEOUT_S = 15.0  # how long `changes` waits for dependents to stop LOADING / UNLOADING
MOVING = frozenset({ModelState.LOADING, ModelState.UNLOADING})


@dataclass(frozen=True)
class Snapshot:
    """Every model's state (and the log's end) just before a change."""

    states: Mapping[str, tuple[ModelState, str]] = field(default_factory=dict)
    cursor: LogCursor | None = None
    problem: str = ""  # why there is no snapshot ("" when there is)


@dataclass(frozen=True)
class StateChange:
    """A model other than the one acted on whose state changed."""

    model: str
    before: ModelState
    after: ModelState
    reason: str  # Triton's: the failure it logged, else the index's reason
    log_line: str = ""  # the raw log line the reason comes from

    @property
    def lost_ready(self) -> bool:
        return self.before is ModelState.READY and self.after is not ModelState.READY

    def text(self) -> str:
        return f"{self.model}: {self.before.value} → {self.after.value} — {self.reason}"

    def record(self) -> dict[str, Any]:
        return {"model": self.model, "before": self.before.value, "after": self.after.value,
                "reason": self.reason, "log_line": self.log_line}


def snapshot(client: TritonClient, log: LogSource | None) -> Snapshot:
    """Take just before a change; never raises."""
    cursor = None
    try:
        cursor = log.cursor() if log is not None else None
    except OSError:
        cursor = None
    try:
        return Snapshot(index_states(client.repository_index()), cursor)
    except GeAdminError as exc:
        return Snapshot(cursor=cursor, problem=str(exc))


def changes(
    client: TritonClient,
    before: Snapshot,
    acted: Collection[str],
    log: LogSource | None,
    *,
    settle_timeout_s: float = SETTLE_TIMEOUT_S,
) -> list[StateChange]:
    """Every model outside `acted` whose state differs from `before`, once nothing is LOADING
    or UNLOADING (bounded). Never raises: no snapshot, or no answer, gives []."""
    if before.problem:
        return []
    deadline = time.monotonic() + settle_timeout_s
    # Not waited for: a load stuck before the action, and the acted models themselves (a load
    # that timed out stays LOADING: its own state is the action's result, not a side effect).
    settled = {*acted, *(name for name, (state, _) in before.states.items() if state in MOVING)}
    while True:
        try:
            now = index_states(client.repository_index())
        except GeAdminError:
            return []
        moving = any(state in MOVING for name, (state, _) in now.items() if name not in settled)
        if not moving or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    changed = [name for name in sorted(set(before.states) | set(now)) if name not in acted
               and before.states.get(name, NEVER)[0]
               is not now.get(name, NEVER)[0]]
    logged = _logged_reasons(log, before.cursor, changed)
    found = []
    for name in changed:
        old, new = before.states.get(name, NEVER), now.get(name, NEVER)
        message, raw = logged.get(name, ("", ""))
        reason = message or (f"Triton's index says: {new[1]}" if new[1] else "Triton gave no reason")
        found.append(StateChange(name, old[0], new[0], reason, raw))
    return found


def _logged_reasons(log: LogSource | None, cursor: LogCursor | None,
                    names: Sequence[str]) -> dict[str, tuple[str, str]]:
    """{name: (message, raw line)} of the latest failure Triton logged about it since `cursor`
    and after its last successful load (the one right before "successfully unloaded"), else its
    latest "successfully ..." line; nothing else. A failure followed by a successful load is
    history: Triton logs "unable to create stream ...: CUDA driver ..." on every ensemble load
    on a CPU-only server, and a rollback that loads the ensemble again must not quote it."""
    if log is None or cursor is None or not names:
        return {}
    try:
        raw_lines = log.lines_since(cursor)
    except (OSError, GeAdminError):
        return {}
    found: dict[str, tuple[str, str]] = {}
    for name in names:
        pattern = mentions_pattern([name])
        failure = success = None
        for line in (parse_log_line(raw) for raw in raw_lines if pattern.search(raw)):
            if "successfully loaded" in line.message:
                failure, success = None, line
            elif is_failure(line):
                failure = line
            elif "successfully" in line.message:
                success = line
        chosen = failure or success
        if chosen is not None:
            found[name] = (chosen.message.split("\n\n")[0].strip(), chosen.raw)
    return found
