"""Background runs: work a page starts on a thread and watches while it runs — a load test
(geadmin.ops.bench.load_test.background, the Load test page) and a fleet rollout (geadmin.fleet.runs,
the Fleet page). The CLI runs the same work in the foreground. One registry, one protocol:

1. `start` refuses a second run of the same kind and key while one runs (the kind's busy
   error, naming who started the first), writes the audit row `started` (action
   `background run`: who, what, where) — a row that cannot be written refuses the run —
   then starts the thread.
2. The work reports through its `Run`: `progress(done, total, text)` for a bar, `say(line)`
   for a log, and checks `aborted` (and `paused`, for a kind that can pause) between steps.
3. However the work ends — a result, a GeAdminError, the user's abort, an exception geadmin
   did not raise on purpose (a bug, a crash in the worker) — the run ends in a state the page
   shows (`done`, `stopped`, `aborted`, `failed`), never a silent thread death: a crash is a
   failed run that names the exception, its traceback kept on the run and written to stderr.
   Its outcome row is then audited (same action; never raises: the run's own state is what
   the page reports).
4. `steer` pauses, resumes or aborts a run as an authorization's holder (the kind's
   right), said in its lines and audited as `<prefix> pause|resume|abort`.

The registry keeps each (kind, key)'s latest run, in this process; across processes the
work's own lock refuses a second run (a load test's server lock, a fleet's rollout lock).

A run whose process died (a killed dashboard) writes no outcome row. Each run therefore holds
a pid-file lock named by a token from before its `started` row to after its outcome row, and
both rows carry the token (`run: TOKEN`); `close_interrupted` (at every `start`, and once per
dashboard process) ends each open `started` row whose lock nobody holds with an `interrupted`
row, so the audit never shows a run as started forever.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from geadmin import audit, disk, settings
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, AuditEntry, Result, facts
from geadmin.errors import GeAdminError, RunLockHeldError, WorkspaceLockError
from geadmin.repository.locks import PidLock, pid_lock

ACTION = "background run"  # the audit action of every run's started and outcome rows
RUN = "run"  # the fact naming a run's token in its rows: "run: TOKEN"
CLOSE_SCAN_ROWS = 2000  # the newest rows of ACTION that `close_interrupted` reads
STEERS = ("pause", "resume", "abort")
T = TypeVar("T")


@dataclass(frozen=True)
class RunKind:
    """What runs in the background, and how it is refused, steered and audited."""

    name: str  # "load test", "rollout": in messages and in the audit rows
    scope: str  # what the key names: "server", "fleet"
    where: str  # where it is watched and aborted: "the Load test page"
    busy: type[GeAdminError]  # raised when one of this kind and key runs already
    steer_right: GuardedAction  # who may pause, resume or abort it
    audit_prefix: str  # steering is audited as "<prefix> abort"
    pausable: bool = False


@dataclass(frozen=True)
class Progress:
    done: int = 0
    total: int = 0
    text: str = "starting"

    @property
    def fraction(self) -> float:
        return min(self.done / self.total, 1.0) if self.total > 0 else 0.0


@dataclass(frozen=True)
class Ending:
    """How a finished work went, for its state and its audit row: `ok` False makes it `stopped`
    (it ran to its end but did not succeed, e.g. a rollout its health gate stopped)."""

    ok: bool
    message: str


@dataclass(eq=False)
class Run(Generic[T]):
    """One background run. The worker writes through `progress`/`say` and its outcome fields;
    a page reads them (each field is replaced whole, so a reader never sees half of one)."""

    kind: RunKind
    key: str  # one run per kind and key at a time: the server's URL, the fleet's name
    what: str  # e.g. "load test of digits on http://127.0.0.1:8000", for the page
    actor: Actor
    subject: str = ""  # the model, for the audit rows
    started_at: float = field(default_factory=time.time)
    paused: threading.Event = field(default_factory=threading.Event)
    aborted: threading.Event = field(default_factory=threading.Event)
    lines: list[str] = field(default_factory=list)
    status: Progress = field(default_factory=Progress)
    result: T | None = None
    ending: Ending | None = None
    failure: GeAdminError | None = None  # the GeAdminError the work ended with
    error: str = ""  # why it failed, "" when it did not
    crash: str = ""  # the traceback of an exception geadmin did not raise on purpose
    audit_problem: str = ""  # why an audit row could not be written, "" when it was
    token: str = ""  # in its audit rows, and the name of the lock it holds while it runs
    _held: PidLock | None = field(default=None, repr=False)
    _ended: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def who(self) -> str:
        return self.actor.name

    @property
    def running(self) -> bool:
        return not self._ended.is_set()

    @property
    def state(self) -> str:
        """running, paused, aborting; then done, stopped, aborted or failed."""
        if self.running:
            if self.aborted.is_set():
                return "aborting"
            return "paused" if self.paused.is_set() else "running"
        return _final_state(self)

    def progress(self, done: int, total: int, text: str) -> None:
        self.status = Progress(done, total, text)

    def say(self, line: str) -> None:
        self.lines.append(line)

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once the run has ended (its state and audit row final)."""
        return self._ended.wait(timeout_s)


Work = Callable[[Run[T]], T]

_lock = threading.Lock()
_runs: dict[tuple[str, str], Run[Any]] = {}  # (kind, key) -> its latest run, running or ended


def start(kind: RunKind, key: str, what: str, actor: Actor, work: Work[T], *,
          ending: Callable[[T], Ending] | None = None, subject: str = "",
          home: Path | None = None) -> Run[T]:
    """Run `work(run)` on a thread (the module's protocol, steps 1-3). `ending` judges its
    result (default: ok, "finished"). The work is guarded itself, under the caller's
    authorization; `actor` is who the audit rows name."""
    slot = (kind.name, key)
    with contextlib.suppress(GeAdminError, OSError):  # what a killed process left; never refuses a run
        close_interrupted(home=home, actor=actor)
    with _lock:  # the slot is taken before the row is written: two starts at once get one run
        current = _runs.get(slot)
        if current is not None and current.running:
            raise kind.busy(f"a {kind.name} of {kind.scope} {key!r} is running ({current.what}, started by "
                            f"{current.who}): wait for it, or abort it on {kind.where}")
        run: Run[T] = Run(kind, key, what, actor, subject, token=secrets.token_hex(8))
        _runs[slot] = run
    try:  # the lock before the row: a row nobody's lock covers is one whose process died
        run._held = _take_lock(run, home)
        audit.record(ACTION, subject, Result.STARTED, actor=actor, server=key,
                     message=f"{kind.name}: {what}\n{RUN}: {run.token}", home=home)
    except BaseException:  # not journaled, not run: the slot goes back to what it held
        _release(run, home)
        with _lock:
            if current is None:
                del _runs[slot]
            else:
                _runs[slot] = current
        raise
    thread = threading.Thread(target=_body, args=(run, work, ending, home), daemon=True,
                              name=f"{kind.name.replace(' ', '-')}-{key}")
    try:
        thread.start()
    except RuntimeError as exc:  # no thread to be had: the run failed before it began
        _end(run, home, error=f"the {kind.name} could not start a thread: {exc}")
    return run


def _body(run: Run[T], work: Work[T], ending: Callable[[T], Ending] | None, home: Path | None) -> None:
    error, crash, failure = "", "", None
    try:
        result = work(run)
        run.result = result
        run.ending = ending(result) if ending is not None else Ending(True, "finished")
    except GeAdminError as exc:
        failure, error = exc, str(exc)
    except BaseException as exc:  # a bug in the work: said, not a silent thread death
        error = (f"the {run.kind.name} crashed: {type(exc).__name__}: {exc} (a bug in geadmin: "
                 "its traceback is in the dashboard's log)")
        crash = "".join(traceback.format_exception(exc))
        print(f"geadmin: {run.kind.name} {run.what!r} crashed\n{crash}", file=sys.stderr, flush=True)
    finally:
        _end(run, home, error=error, crash=crash, failure=failure)


def _end(run: Run[T], home: Path | None, *, error: str = "", crash: str = "",
         failure: GeAdminError | None = None) -> None:
    run.failure, run.error, run.crash = failure, error, crash
    state = _final_state(run)
    if run.error:
        result, message = Result.FAILED, run.error
    else:
        assert run.ending is not None
        result, message = (Result.OK if run.ending.ok else Result.FAILED), run.ending.message
    try:
        audit.record(ACTION, run.subject, result, actor=run.actor, server=run.key,
                     message=f"{run.kind.name} {state}: {run.what}: {message}\n{RUN}: {run.token}", home=home)
    except Exception as exc:  # the run's outcome is what the page reports, audited or not
        run.audit_problem = f"the audit row could not be written: {exc}"
    finally:
        _release(run, home)
        run._ended.set()


def _take_lock(run: Run[Any], home: Path | None) -> PidLock:
    path = _lock_path(run.token, home)
    try:
        return pid_lock(path, run.kind.busy, what=f"{run.kind.name} {run.what}")
    except OSError as exc:
        fix = disk.next_step(exc, path.parent, "check that the workspace is a writable directory "
                             "(GEADMIN_HOME)")
        raise WorkspaceLockError(f"cannot start the {run.kind.name}: its lock file {path} cannot be created "
                                 f"({exc.strerror or exc}) — {fix}") from exc


def _lock_path(token: str, home: Path | None) -> Path:
    return (home or settings.home()) / "locks" / "runs" / f"{token}.lock"


def _release(run: Run[Any], home: Path | None) -> None:
    """Drops the run's lock and its file (a run that never took it has nothing to drop)."""
    held, run._held = run._held, None
    if held is not None:
        with contextlib.suppress(OSError):
            _lock_path(run.token, home).unlink()
        held.close()


def close_interrupted(*, home: Path | None = None, actor: Actor | None = None) -> list[AuditEntry]:
    """Writes an `interrupted` row for each `started` run whose process ended before its outcome
    row (its lock is free), oldest first, and returns them. Rows from before runs carried a
    token are left as they are: nothing tells whether their process lives."""
    rows = audit.query(action=ACTION, limit=CLOSE_SCAN_ROWS, home=home)  # newest first
    ended = {facts(r.message).get(RUN) for r in rows if r.result != Result.STARTED.value}
    closed = []
    for row in reversed(rows):
        token = facts(row.message).get(RUN, "")
        if row.result != Result.STARTED.value or not token.isalnum() or token in ended:
            continue
        path = _lock_path(token, home)
        try:
            with pid_lock(path, RunLockHeldError):
                if _has_outcome(row, token, home):  # another process closed it since the read above
                    continue
                started = f"started at {row.at.isoformat(timespec='seconds')} by {row.who}"
                closed.append(audit.record(
                    ACTION, row.model, Result.INTERRUPTED, actor=actor or Actor.os_user(), server=row.server,
                    message=f"{row.message.splitlines()[0]}: interrupted — the process that ran it ended "
                            f"before its outcome ({started})\n{RUN}: {token}", home=home))
                path.unlink(missing_ok=True)
        except RunLockHeldError:
            continue  # still running, in another process
    return closed


def _has_outcome(started: AuditEntry, token: str, home: Path | None) -> bool:
    later = audit.query(action=ACTION, since=started.at, home=home)
    return any(r.id > started.id and facts(r.message).get(RUN) == token for r in later)


def _final_state(run: Run[T]) -> str:
    """done, stopped, aborted or failed: from the outcome fields, set before `_ended` is."""
    if run.aborted.is_set() and (run.error or not (run.ending and run.ending.ok)):
        return "aborted"
    if run.error:
        return "failed"
    return "done" if run.ending is not None and run.ending.ok else "stopped"


def latest(kind: RunKind, key: str) -> Run[Any] | None:
    """The latest run of `kind` on `key`, running or ended; None when none ran in this process."""
    with _lock:
        return _runs.get((kind.name, key))


def steer(run: Run[T], command: str, auth: Authorization | None, *, home: Path | None = None) -> None:
    """Pause, resume or abort `run`, as `auth`'s holder (the kind's right: NotAuthorizedError
    before anything changes); said in its lines and audited as `<prefix> <command>`."""
    if command not in STEERS:
        raise ValueError(f"unknown command {command!r}: expected one of {', '.join(STEERS)}")
    if command != "abort" and not run.kind.pausable:
        raise ValueError(f"a {run.kind.name} cannot {command}")
    who = require(auth, run.kind.steer_right)
    if command == "pause":
        run.paused.set()
    elif command == "resume":
        run.paused.clear()
    else:
        run.aborted.set()
    run.say(f"{command} by {who.name}")
    audit.record(f"{run.kind.audit_prefix} {command}", run.subject, Result.OK, actor=who, server=run.key,
                 message=run.what, home=home)
