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
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor, Result
from geadmin.errors import GeAdminError

ACTION = "background run"  # the audit action of every run's started and outcome rows
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
    with _lock:  # the slot is taken before the row is written: two starts at once get one run
        current = _runs.get(slot)
        if current is not None and current.running:
            raise kind.busy(f"a {kind.name} of {kind.scope} {key!r} is running ({current.what}, started by "
                            f"{current.who}): wait for it, or abort it on {kind.where}")
        run: Run[T] = Run(kind, key, what, actor, subject)
        _runs[slot] = run
    try:
        audit.record(ACTION, subject, Result.STARTED, actor=actor, server=key, message=f"{kind.name}: {what}",
                     home=home)
    except BaseException:  # not journaled, not run: the slot goes back to what it held
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
                     message=f"{run.kind.name} {state}: {run.what}: {message}", home=home)
    except Exception as exc:  # the run's outcome is what the page reports, audited or not
        run.audit_problem = f"the audit row could not be written: {exc}"
    finally:
        run._ended.set()


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
