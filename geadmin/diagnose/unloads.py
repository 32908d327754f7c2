"""Who took a model out of service: an operator's unload (a choice, never a failure: idle, with
who and when) or Triton, behind geadmin's back (a model dropped when an ensemble member changed:
a failure, with the reason from Triton's log or the change just before it). The audit log
decides: a model's latest state-changing row of this server. A row that changed nothing that
serves (a refusal, a config only written to disk by an apply or rollback without --load, a
create, a fleet rollout's journal row) is no such row, nor is a row of another server the
workspace manages: it never turns an operator's unload into a drop. An apply's `started` row
counts until its outcome closes it: a row linked to it (`STARTED_ROW`), a refusal included, or
an unlinked row of the same change that is no refusal.

Triton's index has a row per version: a model with a READY version serves, and a version of it
"unloaded" beside that one is its version policy at work (v1 retired once v2 serves), neither
an unload nor a drop. Without the audit log (an unreadable workspace database) no unload is
known: a failure Triton reports stays a failure, and a model Triton merely calls "unloaded" is
neither called dropped nor an operator's unload, but named (`Unloads.unknown`) for the
verdict's note."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from geadmin import audit, db
from geadmin.diagnose.health import Triage, is_idle
from geadmin.diagnose.interrupted import STARTED_ROW
from geadmin.domain import LogCursor, ModelEntry, ModelState, same_server
from geadmin.triton.logs import LogSource, is_failure, model_log_lines

DROP_LOG_BYTES = 4 << 20  # how far back the log is searched for why a model was dropped
# The audit actions that may change whether a model serves; the latest row of one that did
# (`changed_serving`) decides "operator unload". A create never loads (its load is a "load" row).
STATE_ACTIONS = ("load", "unload", "reload", "apply", "rollback", "side_effect")
# Results that changed nothing that serves, whatever the action: refused before anything was done,
# or a config only written to disk (an apply or rollback of a model that is not loaded, no --load).
NOTHING_SERVED = (audit.Result.REFUSED.value, audit.Result.WRITTEN.value, audit.Result.STEP.value)
# The fact that links an outcome row to the id of its `started` row, as geadmin.ops.models.reconcile
# writes it (a unit test holds the two equal: diagnose/ cannot import ops/).

OPERATOR_UNLOAD = "unload"


DROPPED_MARK = "unloaded (not by an operator)"  # the index reason of a dropped model, as shown


@dataclass(frozen=True)
class Unloads:
    """Who took the models that are not READY out of service, as the audit log says."""

    by_operator: dict[str, str] = field(default_factory=dict)  # model -> "unloaded by NAME at TIME"
    unknown: tuple[str, ...] = ()  # Triton says "unloaded", and the audit log cannot be read


# The rows that leave a model not serving when they fail: a load or reload that failed, or the
# model losing READY with another's change (a side effect), or at a Triton restart.
SIDE_EFFECT = "side_effect"  # the audit action of a model that changed state with another's change
FAILING_ACTIONS = ("load", "reload", SIDE_EFFECT)


# The rows that say whether a model was left serving after Triton restarted (see `with_dropped`):
# an apply or rollback is left out (a row of one written before `Result.WRITTEN` existed may
# say "ok" of a file it only wrote), and a create never loads.
SERVING_ACTIONS = ("load", "unload", "reload", SIDE_EFFECT)


def changed_serving(row: audit.AuditEntry, actions: Sequence[str] = STATE_ACTIONS) -> bool:
    """The row is of `actions` and may have changed whether its model serves: not a refusal,
    not a config only written (`Result.WRITTEN`: `config apply` without --load of a model that
    is not loaded). An apply that loaded (ok), failed to load (rolled back, failed) or had not
    finished loading still counts. A fleet rollout's journal rows (`fleet apply`, its steps) are
    of no such action: the server's own rows say what changed on it."""
    return row.action in actions and row.result not in NOTHING_SERVED


def latest_state_rows(names: Sequence[str], home: Path | None = None, actions: Sequence[str] = STATE_ACTIONS,
                      server: str = "") -> dict[str, audit.AuditEntry]:
    """Each model's latest audit row of `actions` that may have changed whether it serves
    (`changed_serving`; models with none are left out), of `server` when given (a row naming
    another server says nothing of this one's models; a row naming none counts). Raises
    db.WorkspaceDatabaseError when the audit log cannot be read."""
    found = {}
    for name in names:
        rows = [r for r in audit.query(model=name, limit=50, home=home) if _of_server(r, server)]
        latest = next((row for row in _closed_starts_left_out(rows) if changed_serving(row, actions)), None)
        if latest is not None:
            found[name] = latest
    return found


def _of_server(row: audit.AuditEntry, server: str) -> bool:
    return not server or not row.server or same_server(row.server, server)


def _closed_starts_left_out(rows: Sequence[audit.AuditEntry]) -> list[audit.AuditEntry]:
    """`rows` (newest first) without the `started` rows a later row closes: one linked to it
    (`STARTED_ROW`: its outcome, a refusal after its start included), or one of the same model
    and action that is no refusal (an unlinked refusal is another process refused while it ran).
    The outcome says what the change did. A start with nothing after it is a change under way,
    or cut short: it counts."""
    closing: set[tuple[str, str]] = set()
    linked: set[str] = set()
    kept = []
    for row in rows:
        if row.result != audit.Result.STARTED.value:
            link = audit.facts(row.message).get(STARTED_ROW)
            if link is not None:
                linked.add(link)
            if row.result != audit.Result.REFUSED.value:
                closing.add((row.model, row.action))
            kept.append(row)
        elif (row.model, row.action) not in closing and str(row.id) not in linked:
            kept.append(row)
    return kept


def is_operator_unload(row: audit.AuditEntry) -> bool:
    return row.action == OPERATOR_UNLOAD and row.result == audit.Result.OK.value


def is_failure_left(row: audit.AuditEntry) -> bool:
    """The row left its model not serving: nobody has loaded it or unloaded it since."""
    return row.action in FAILING_ACTIONS and row.result == audit.Result.FAILED.value


def is_serving_load(row: audit.AuditEntry) -> bool:
    """The row left its model serving: a load or reload that succeeded."""
    return row.action in ("load", "reload") and row.result == audit.Result.OK.value


def operator_unloads(names: Sequence[str], home: Path | None = None) -> dict[str, str]:
    """The models whose latest state-changing audit row is an operator's successful unload,
    each with who did it and when ("unloaded by alice at 04:45:57 UTC"): an operator's choice,
    never a failure, whatever Triton's index or log said before it. Raises
    db.WorkspaceDatabaseError when the audit log cannot be read."""
    return {name: _unloaded_text(row) for name, row in latest_state_rows(names, home).items()
            if is_operator_unload(row)}


def _unloaded_text(row: audit.AuditEntry) -> str:
    return f"unloaded by {row.who} at {row.at:%Y-%m-%d %H:%M:%S} UTC"


def left_failed(row: audit.AuditEntry) -> str:
    """Why a model Triton has not touched since it started is still a failure."""
    what = "lost READY" if row.action == SIDE_EFFECT else f"its last {row.action} failed"
    return (f"{what} at {row.at:%Y-%m-%d %H:%M:%S} UTC ({row.headline or 'no message'}), and Triton has "
            "not loaded it since it restarted (a restart loads only the models that served)")


def unloaded_by_operator(names: Sequence[str], home: Path | None = None) -> set[str]:
    """The names among `names` an operator unloaded (see `operator_unloads`); none when the
    audit log cannot be read: a failure must never pass for an operator's choice on a guess."""
    try:
        return set(operator_unloads(names, home))
    except db.WorkspaceDatabaseError:
        return set()


def _member_changes(name: str, home: Path | None, server: str) -> str:
    """The latest audited action on any model of `server`, for a dropped model's reason ("after ...")."""
    try:
        rows = [r for r in audit.query(limit=20, home=home) if _of_server(r, server)]
    except db.WorkspaceDatabaseError:
        return ""
    latest = next((r for r in _closed_starts_left_out(rows) if changed_serving(r) and r.model != name), None)
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


def with_dropped(found: Triage, log: LogSource | None, home: Path | None,
                 server: str = "") -> tuple[Triage, Unloads]:
    """The audit log decides between "not loaded" and a failure: a model an operator unloaded
    (its latest state-changing row) is idle, even after a failure of any kind; one that lost
    READY without an operator's unload is a failure, with its reason (Triton's log line, else
    what changed just before); one Triton has not touched since it (re)started whose latest row
    is a failure (a load that hung or failed, READY lost) is still one. A model with a READY
    version is never asked about (see the module's docstring). Also returns the operator's
    unloads, or, when the audit log cannot be read, the models nobody can tell."""
    serving = {m.name for m in found.ready}
    listed = (*found.idle, *(m for m, _ in found.failed))
    untouched = [m for m in found.idle if m.state is ModelState.NOT_LOADED and m.name not in serving]
    asked = sorted({m.name for m in listed if m.name not in serving
                    and (m.state is ModelState.UNAVAILABLE or m.name in found.failed_reasons)}
                   | {m.name for m in untouched})
    if not asked:
        return found, Unloads()
    try:
        latest = latest_state_rows(asked, home, server=server)
    except db.WorkspaceDatabaseError:
        # No unload is known: Triton's own failures stay failures, "unloaded" ones stay idle, named.
        return found, Unloads(unknown=tuple(sorted({m.name for m in _lost(found.idle, serving)})))
    by_operator = {name: _unloaded_text(row) for name, row in latest.items() if is_operator_unload(row)}
    # Unloaded by an operator after its failure: idle now, whatever the log or the index said before.
    found = Triage(found.ready, [(m, r) for m, r in found.failed if m.name not in by_operator],
                   found.changing, [*found.idle, *(m for m, _ in found.failed if m.name in by_operator)])
    # While a load round runs (`geadmin up` loads four at a time) the models queued behind it are
    # listed as never loaded: not yet judged. A row of another server (a workspace that manages
    # several) says nothing of this one's models.
    asked_untouched = [] if found.changing else [m.name for m in untouched]
    here = latest_state_rows(asked_untouched, home, SERVING_ACTIONS, server) if asked_untouched else {}
    still_failed = [(m, left_failed(here[m.name])) for m in untouched
                    if m.name in here and is_failure_left(here[m.name])]
    if still_failed:
        gone = {m for m, _ in still_failed}
        found = Triage(found.ready, [*found.failed, *still_failed], found.changing,
                       [m for m in found.idle if m not in gone])
    # Loaded, and never unloaded since, yet Triton knows nothing of it: it restarted without it
    # (a container restart in explicit mode, a loader that died) — it served, and serves no more.
    restarted_without = {m.name for m in untouched if m.name in here and is_serving_load(here[m.name])}
    lost = [*_lost(found.idle, serving), *(m for m in found.idle if m.name in restarted_without)]
    dropped = [m for m in lost if m.name not in by_operator]
    if not dropped:
        return found, Unloads(by_operator)
    logged = drop_reasons(log, sorted({m.name for m in dropped}))
    failed = list(found.failed)
    for model in dropped:
        why = logged.get(model.name) or ("Triton unloaded it, and no operator's unload of it is in "
                                         "geadmin's audit log" + _member_changes(model.name, home, server))
        if model.name in restarted_without:
            row = latest[model.name]
            why = (f"it served (its {row.action} by {row.who} at {row.at:%Y-%m-%d %H:%M:%S} UTC succeeded) "
                   "and Triton lists it as never loaded now: Triton restarted without loading it again (if "
                   "its loads are under way, wait for them)")
        failed.append((ModelEntry(model.name, model.version, model.state, DROPPED_MARK), why))
    idle = [m for m in found.idle if m not in dropped]
    return Triage(found.ready, failed, found.changing, idle), Unloads(by_operator)


def _lost(idle: Sequence[ModelEntry], serving: set[str]) -> list[ModelEntry]:
    """The idle rows Triton says were unloaded, of models with no READY version."""
    return [m for m in idle if m.state is ModelState.UNAVAILABLE and is_idle(m) and m.name not in serving]
