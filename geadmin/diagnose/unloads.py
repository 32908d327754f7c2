"""Who took a model out of service: an operator's unload (a choice, never a failure: idle, with
who and when) or Triton, behind geadmin's back (a model dropped when an ensemble member changed:
a failure, with the reason from Triton's log or the change just before it). The audit log
decides: a model's latest state-changing row."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from geadmin import audit, db
from geadmin.diagnose.health import Triage, is_idle
from geadmin.domain import LogCursor, ModelEntry, ModelState
from geadmin.triton.logs import LogSource, is_failure, model_log_lines

DROP_LOG_BYTES = 4 << 20  # how far back the log is searched for why a model was dropped
# The audit actions that change whether a model serves; the latest one decides "operator unload".
STATE_ACTIONS = ("load", "unload", "reload", "apply", "rollback", "create", "side_effect")
OPERATOR_UNLOAD = "unload"


DROPPED_MARK = "unloaded (not by an operator)"  # the index reason of a dropped model, as shown


def operator_unloads(names: Sequence[str], home: Path | None = None) -> dict[str, str]:
    """The models whose latest state-changing audit row is an operator's successful unload,
    each with who did it and when ("unloaded by alice at 04:45:57 UTC"): an operator's choice,
    never a failure, whatever Triton's index or log said before it."""
    found: dict[str, str] = {}
    for name in names:
        try:
            rows = audit.query(model=name, limit=50, home=home)
        except db.WorkspaceDatabaseError:
            found[name] = "no audit log to ask"  # do not call it a failure on a guess
            continue
        latest = next((row for row in rows if row.action in STATE_ACTIONS), None)
        if latest is not None and latest.action == OPERATOR_UNLOAD and latest.result == audit.Result.OK.value:
            found[name] = f"unloaded by {latest.who} at {latest.at:%Y-%m-%d %H:%M:%S} UTC"
    return found


def unloaded_by_operator(names: Sequence[str], home: Path | None = None) -> set[str]:
    """The names among `names` an operator unloaded (see `operator_unloads`)."""
    return set(operator_unloads(names, home))


def _member_changes(name: str, home: Path | None) -> str:
    """The latest audited action on any model, for a dropped model's reason ("after ...")."""
    try:
        rows = audit.query(limit=20, home=home)
    except db.WorkspaceDatabaseError:
        return ""
    latest = next((r for r in rows if r.action in STATE_ACTIONS and r.model != name), None)
    if latest is None:
        return ""
    return f"; the last change before it: {latest.action} of {latest.model!r} by {latest.who} at " \
           f"{latest.at:%H:%M:%S} UTC ({latest.result})"


def drop_reasons(log: LogSource | None, names: Sequence[str]) -> dict[str, str]:
    """For each dropped model: the last failure line about it in the end of Triton's log."""
    if log is None or not names:
        return {}
    end = log.cursor()
    lines, _ = log.read(LogCursor(max(0, end.offset - DROP_LOG_BYTES), end.at, end.inode))
    reasons = {}
    for name in names:
        failure = None
        for line in model_log_lines(lines, name):
            if "successfully loaded" in line.message:
                failure = None  # a failure before its last good load is history
            elif is_failure(line):
                failure = line
        if failure is not None:
            reasons[name] = failure.message.split("\n\n")[0].strip()
    return reasons


def with_dropped(found: Triage, log: LogSource | None, home: Path | None) -> tuple[Triage, dict[str, str]]:
    """The audit log decides between "not loaded" and a failure: a model an operator unloaded
    (its latest state-changing row) is idle, even after a failure of any kind; one that lost
    READY without an operator's unload is a failure, with its reason (Triton's log line, else
    what changed just before). Also returns the operator's unloads (model -> who and when)."""
    listed = (*found.idle, *(m for m, _ in found.failed))
    asked = [m.name for m in listed if m.state is ModelState.UNAVAILABLE or m.name in found.failed_reasons]
    if not asked:
        return found, {}
    by_operator = operator_unloads(asked, home)
    # Unloaded by an operator after its failure: idle now, whatever the log or the index said before.
    found = Triage(found.ready, [(m, r) for m, r in found.failed if m.name not in by_operator],
                   found.changing, [*found.idle, *(m for m, _ in found.failed if m.name in by_operator)])
    dropped = [m for m in found.idle if m.state is ModelState.UNAVAILABLE and is_idle(m)
               and m.name not in by_operator]
    if not dropped:
        return found, by_operator
    logged = drop_reasons(log, [m.name for m in dropped])
    failed = list(found.failed)
    for model in dropped:
        why = logged.get(model.name) or ("Triton unloaded it, and no operator's unload of it is in "
                                         "geadmin's audit log" + _member_changes(model.name, home))
        failed.append((ModelEntry(model.name, model.version, model.state, DROPPED_MARK), why))
    idle = [m for m in found.idle if m not in dropped]
    return Triage(found.ready, failed, found.changing, idle), by_operator
