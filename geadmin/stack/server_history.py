"""What happened to the server: the embedded stack's records, told for an on-call operator.

`geadmin up`'s supervisor publishes every exit of Triton and of the dashboard in stack.json
(signal or exit code, when, how long the run lasted, whether it was restarted, whether someone
asked for it). `server_history` turns them into what the Overview shows: the last exits, the
restart counts, and — while Triton is down — whether it is restarting (attempt n) or was
stopped (by whom, when, from where: the Stack page's audit row), instead of "is the URL right?".
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from geadmin import audit, db
from geadmin.domain import format_duration
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.stack_audit import through
from geadmin.stack.supervisor import START_FAILED, Backoff
from geadmin.stack.target import is_stack_server
from geadmin.stack.workspace import StackInfo
from geadmin.triton.logs import is_tritonserver

SHOWN_EXITS = 5
STACK_PAGE = "Stack page"
START_TRITON = "`geadmin stack start triton`, or the Stack page"
RESTART_TRITON = "`geadmin stack restart triton`, or the Stack page"
STOP_MATCH_S = 60.0  # the Stack page's audit row and the supervisor's exit record of one stop
RECENT_CRASH_S = 3600.0  # a crash this recent is said above everything else, not only in the history
STOPPED = frozenset("Tt")  # the kernel's process states: stopped by a signal, stopped by a debugger
GONE = frozenset("ZX")  # exited (the supervisor is about to see it)


def clock(epoch_s: float) -> str:
    """Wall-clock time of an exit, as every geadmin view prints it (UTC)."""
    return datetime.fromtimestamp(epoch_s, timezone.utc).strftime("%H:%M:%S UTC")


def exit_line(record: ExitRecord) -> str:
    """`12:03:04 UTC: killed by SIGKILL after 35 min — restarted`."""
    after = "restarted" if record.restarted else ("stopped on request" if record.requested else "left down")
    note = f" ({record.note})" if record.note else ""
    return f"{clock(record.at)}: {record.how} after {format_duration(record.uptime_s)}{note} — {after}"


def attempt(exits: tuple[ExitRecord, ...], healthy_s: float = Backoff().healthy_s) -> int:
    """Which restart attempt is under way: 1 after a run that lasted, more after quick deaths."""
    count = 0
    for record in reversed(exits):
        if not record.restarted or record.requested:
            break
        count += 1
        if record.uptime_s >= healthy_s:
            break
    return max(count, 1)


@dataclass(frozen=True)
class ServerHistory:
    triton_state: str  # the supervisor's: running, starting, restarting, stopped, exited
    triton_exits: tuple[ExitRecord, ...]  # newest first
    dashboard_exits: tuple[ExitRecord, ...]  # newest first
    triton_restarts: int
    dashboard_restarts: int
    triton_up_s: float | None  # how long the current run has lasted
    down: str = ""  # while Triton is not running: what is going on, in one sentence
    silent: str = ""  # while it runs: what its process is doing, should it not answer

    @property
    def crashed(self) -> bool:
        """The last exit of Triton was not asked for (a crash, a kill, an OOM)."""
        return bool(self.triton_exits) and not self.triton_exits[0].requested

    def to_json(self) -> dict[str, object]:
        return {"triton_state": self.triton_state, "down": self.down,
                "triton_restarts": self.triton_restarts, "dashboard_restarts": self.dashboard_restarts,
                "triton_up_s": self.triton_up_s,
                "triton_exits": [exit_line(r) for r in self.triton_exits],
                "dashboard_exits": [exit_line(r) for r in self.dashboard_exits]}


def _last_stop(home: Path) -> audit.AuditEntry | None:
    """The Stack page's row for the latest stop of Triton (who, when, from where)."""
    try:
        rows = audit.query(action="stop", model="triton", result=audit.Result.OK, limit=1, home=home)
    except db.WorkspaceDatabaseError:
        return None
    return rows[0] if rows else None


def _down(info: StackInfo, state: str, exits: tuple[ExitRecord, ...], home: Path) -> str:
    last = exits[-1] if exits else None
    if state in ("restarting", "starting") and last is not None and last.note.startswith(START_FAILED):
        cause = last.note[len(START_FAILED):].lstrip(": ")
        return (f"Triton does not start again (attempt {attempt(exits)}, last at {clock(last.at)}): "
                f"{cause} — fix that; `geadmin up` keeps trying by itself, with a growing delay "
                f"(the {STACK_PAGE} shows each attempt).")
    if state in ("restarting", "starting") and last is not None:
        verb = "is restarting" if state == "restarting" else "is starting again"
        return (f"Triton {verb} (attempt {attempt(exits)}): it exited at {clock(last.at)}, "
                f"{last.how} after {format_duration(last.uptime_s)}. `geadmin up` starts it again by "
                f"itself; the {STACK_PAGE} shows its progress.")
    if state == "stopped":
        stop = _last_stop(home)
        when = clock(last.at) if last is not None and last.requested else "?"
        if stop is not None and (last is None or abs(stop.at.timestamp() - last.at) <= STOP_MATCH_S):
            return (f"Triton was stopped by {stop.who} ({stop.origin}) at {stop.at:%H:%M:%S} UTC "
                    f"{through(stop.origin)}; it stays down until someone starts it ({START_TRITON}).")
        return (f"Triton was stopped on request at {when} (a stop signal to `geadmin up`, pid {info.pid}); "
                f"it stays down until someone starts it ({START_TRITON}).")
    if state == "exited" and last is not None:
        return (f"Triton exited at {clock(last.at)} ({last.how} after {format_duration(last.uptime_s)}) and "
                f"is not restarted (`geadmin up --no-restart`): start it ({START_TRITON}).")
    if state == "starting":
        return "Triton is starting (`geadmin up`)."
    if state in ("stopping", "restarting on request"):
        verb = "stopping" if state == "stopping" else "restarting"
        return f"Triton is {verb} on request (a stop or restart asked of `geadmin up`, pid {info.pid})."
    return ""


def process_state(pid: int) -> str:
    """The kernel's state letter of process `pid` when it is a tritonserver ("" when it is gone,
    or the pid now belongs to another program)."""
    if not is_tritonserver(pid):
        return ""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    after_name = stat.rpartition(")")[2].split()  # the name in "(...)" may hold spaces
    return after_name[0] if after_name else ""


def _silent(info: StackInfo) -> str:
    """Why a Triton the supervisor says runs would not answer, from its process, or ""."""
    pid = info.triton_pid
    state = process_state(pid) if pid is not None else ""
    if not state or state in GONE:
        return ""
    if state in STOPPED:
        return (f"Triton (pid {pid}) is stopped by a signal (SIGSTOP, or a debugger holds it) and answers "
                f"nothing: `kill -CONT {pid}` lets it go on, or restart it ({RESTART_TRITON}).")
    return (f"Triton (pid {pid}) runs but does not answer: it is hung or overloaded — the end of its log "
            f"({info.triton_log}) says what it was doing; restart it ({RESTART_TRITON}).")


def server_history(info: StackInfo, *, now_s: float | None = None) -> ServerHistory:
    now_s = time.time() if now_s is None else now_s
    state = info.triton_state
    running = state == "running" and info.triton_pid is not None
    exits = info.exits
    if state == "running" and info.triton_pid is None:
        state = "starting"
    return ServerHistory(
        state,
        tuple(reversed(exits[-SHOWN_EXITS:])),
        tuple(reversed(info.dashboard_exits[-SHOWN_EXITS:])),
        sum(1 for r in exits if r.restarted),
        sum(1 for r in info.dashboard_exits if r.restarted),
        now_s - info.triton_started_at if running and info.triton_started_at else None,
        "" if running else _down(info, state, exits, info.home),
        _silent(info) if running else "",
    )


def history_for(url: str, stack: StackInfo | None) -> ServerHistory | None:
    """The history of the server at `url` when it is the embedded stack's Triton, else None."""
    if stack is None or not is_stack_server(url, stack):
        return None
    return server_history(stack)


def outage_for(url: str, stack: StackInfo | None, *, unanswered: bool = False) -> str:
    """Why the stack's Triton does not answer (restarting, stopped by whom, exited) or, when it
    runs but a call went unanswered (`unanswered`), what its process is doing; else ""."""
    history = history_for(url, stack)
    if history is None:
        return ""
    return history.down or (history.silent if unanswered else "")


def recent_crash(history: ServerHistory | None, *, now_s: float | None = None) -> str:
    """One line when Triton crashed in the last hour and came back (the Overview's warning and
    `geadmin status`'s line), else "": serving now does not mean nothing happened."""
    if history is None or history.down or not history.crashed:
        return ""
    last = history.triton_exits[0]
    if (time.time() if now_s is None else now_s) - last.at >= RECENT_CRASH_S:
        return ""
    return (f"Triton crashed and was restarted: {exit_line(last)}. Up again for "
            f"{format_duration(history.triton_up_s or 0)}; restarts since `geadmin up`: "
            f"{history.triton_restarts}.")
