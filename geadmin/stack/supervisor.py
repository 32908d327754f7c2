"""Keep the embedded tritonserver running, the way a process manager does.

When Triton exits (crash, OOM kill, `kill -9`), the exit is recorded, the dashboard stays
up, and Triton is started again after a backoff delay (1 s, doubling to 30 s, back to 1 s
after a run that lasted a healthy minute); then the models that were READY before are
loaded again. `restart=False` (`geadmin up --no-restart`) records the exit and leaves
Triton down. The Stack page asks for a restart or a stop through `geadmin up`'s signals
(SIGHUP, SIGUSR1), which land in `request_restart` / `request_stop`; a signal carries no
sender, so `origin_of` (the embedded stack's audit lookup) says who asked: the Stack page's
user, or a signal from elsewhere.

What it reports (`on_exit` with each ExitRecord, `on_restart` when a restart ends): a crash is
an exit, and the restart that follows is its own outcome, "live again" or "did not start";
a stop someone asked for is a stop with its origin, and Triton exiting when asked is no failure.
`on_left_out` gets the models that were in the index but not serving when Triton went (a failed
load, a model dropped behind geadmin's back, an operator's unload): the restart does not load
them, and the new Triton lists them like models never loaded, so whoever keeps the record of
why (the audit log) must hear of them then.

Everything here runs on the one thread that calls `tick()` (the stack's wait loop), so
there are no races on the state; only model loading runs on a thread of its own.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from geadmin.domain import ModelState, format_duration
from geadmin.errors import GeAdminError, TritonError
from geadmin.stack.drivers import ExitRecord
from geadmin.stack.tritonserver import TritonProcess
from geadmin.triton.client import TritonClient

Printer = Callable[[str], None]
READY_POLL_S = 5.0  # how often the set of READY models is noted, to reload it after a crash
MAX_EXITS_KEPT = 50
STOPPED_NOTE = "stopped from the Stack page"
START_FAILED = "failed to start"  # the note of the record of a restart that did not start


@dataclass
class Backoff:
    """Delay before the next restart: doubles per exit, resets after a healthy run."""

    initial_s: float = 1.0
    cap_s: float = 30.0
    healthy_s: float = 60.0
    _next_s: float = field(init=False, default=0.0)

    def __post_init__(self) -> None:
        self._next_s = self.initial_s

    def after_exit(self, uptime_s: float) -> float:
        if uptime_s >= self.healthy_s:
            self._next_s = self.initial_s
        delay = self._next_s
        self._next_s = min(self.cap_s, self._next_s * 2)
        return delay


def exit_record(code: int | None, uptime_s: float, restarted: bool, note: str = "",
                requested: bool = False) -> ExitRecord:
    """Popen's negative return codes are signals: -9 is "killed by SIGKILL". `requested`: a stop
    or restart someone asked for (audited as such, not as a crash)."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return ExitRecord(time.time(), None, name, uptime_s, restarted, note, requested)
    return ExitRecord(time.time(), code, None, uptime_s, restarted, note, requested)


# Starts a new tritonserver (same ports, repository, log); `cancelled()` aborts the wait.
StartTriton = Callable[[Callable[[], bool]], TritonProcess]
# Loads models into a started server: None means every model of its repository.
LoadModels = Callable[[TritonProcess, Sequence[str] | None], None]
# Who asked for a "stop" or a "restart" whose signal arrived at `at` (epoch s): a note such as
# "stopped from the Stack page by alice"; "" when nobody can tell.
OriginOf = Callable[[str, float], str]


class TritonSupervisor:
    """Owns the running TritonProcess and its restart history. States: starting, running,
    restarting (waiting out the backoff), exited (left down: --no-restart), stopping and
    restarting on request (while Triton stops when asked), stopped (on request, until a restart
    request)."""

    def __init__(self, start_triton: StartTriton, load_models: LoadModels, *, restart: bool = True,
                 say: Printer = print, on_change: Callable[[], None] = lambda: None,
                 backoff: Backoff | None = None,
                 on_exit: Callable[[ExitRecord], None] = lambda record: None,
                 on_restart: Callable[[bool, str], None] = lambda ok, message: None,
                 origin_of: OriginOf = lambda action, at: "",
                 on_left_out: Callable[[dict[str, str]], None] = lambda reasons: None) -> None:
        self._start_triton = start_triton
        self._load_models = load_models
        self.restart_enabled = restart
        self.say = say
        self.on_change = on_change
        self.backoff = backoff or Backoff()
        self.on_exit = on_exit  # e.g. the audit log
        self.on_restart = on_restart  # (ok, what happened) when a restart ends: the audit log
        self.origin_of = origin_of
        self.on_left_out = on_left_out  # {model: Triton's last word on it} at each restart
        self.triton: TritonProcess | None = None
        self.state = "starting"
        self.exits: list[ExitRecord] = []
        self._restart_at: float | None = None
        self._ready_models: list[str] | None = None
        self._not_serving: dict[str, str] = {}  # model -> its index reason, at the last poll
        self._next_ready_poll = 0.0
        self._stopping = threading.Event()
        self._restart_requested = threading.Event()
        self._stop_requested = threading.Event()
        self._loading = threading.Event()  # set while a round of model loads runs
        self._restart_reason = ""
        self._requested_at = 0.0  # when the last stop / restart request arrived (epoch s)
        self._restart_origin = ""  # why the restart under way happens ("" after a crash)

    @property
    def restarts(self) -> int:
        return sum(1 for record in self.exits if record.restarted)

    # -- the first start --------------------------------------------------------------
    def start(self) -> TritonProcess:
        """Start Triton with no models (so no model can hold the start up), then load the
        repository's models in the background. Raises when Triton itself cannot start."""
        self.triton = self._start_triton(self._stopping.is_set)
        self.state = "running"
        self._begin_loading(None)
        self.on_change()
        return self.triton

    # -- requests (safe from signal handlers: they only set flags) -----------------------
    def request_restart(self, reason: str = "") -> None:
        """`reason` "": asked by a signal (the Stack page's, or another's: `origin_of` tells)."""
        self._restart_reason = reason
        self._requested_at = time.time()
        self._restart_requested.set()

    def request_stop(self) -> None:
        self._requested_at = time.time()
        self._stop_requested.set()

    # -- the loop ---------------------------------------------------------------------
    def tick(self) -> None:
        """Call every half second or so: notices exits, restarts when due, acts on requests."""
        if self._stop_requested.is_set():
            self._stop_requested.clear()
            self._stop_on_request()
        if self._restart_requested.is_set():
            self._restart_requested.clear()
            self._restart_on_request()
        if self.triton is not None and not self.triton.alive():
            self._record_exit()
        if self.state == "restarting" and self._restart_at is not None \
                and time.monotonic() >= self._restart_at:
            self._restart()
        if self.state == "running":
            self._note_ready_models()

    def shutdown(self, timeout_s: float = 9.0, note: str = "") -> ExitRecord | None:
        """Stop for good (the stack is exiting): no restart after this. Returns the record of
        Triton's stop (`note`: why, e.g. "stopped by Ctrl-C"), None when it was not running."""
        self._stopping.set()
        triton, self.triton = self.triton, None
        record = None
        if triton is not None:
            started = triton.started_at
            code = triton.stop(timeout_s=timeout_s)
            record = exit_record(code, time.time() - started if started else 0.0, False, note,
                                 requested=True)
            self.exits = [*self.exits, record][-MAX_EXITS_KEPT:]
        self.state = "stopped"
        return record

    # -- internals --------------------------------------------------------------------
    def _uptime(self) -> float:
        started = self.triton.started_at if self.triton is not None else None
        return time.time() - started if started else 0.0

    def _remember(self, record: ExitRecord) -> None:
        self.exits = [*self.exits, record][-MAX_EXITS_KEPT:]
        self.on_exit(record)

    def _record_exit(self) -> None:
        assert self.triton is not None
        code, uptime = self.triton.exit_code(), self._uptime()
        self.triton.stop(timeout_s=2)  # reap its process group and shared memory
        self.triton = None
        record = exit_record(code, uptime, self.restart_enabled)
        self._remember(record)
        if self.restart_enabled:
            delay = self.backoff.after_exit(uptime)
            self._restart_at = time.monotonic() + delay
            self.state = "restarting"
            self.say(f"tritonserver {record.describe()}; restarting it in {format_duration(delay)} "
                     "(the dashboard stays up)")
        else:
            self.state = "exited"
            self.say(f"tritonserver {record.describe()}; not restarting it (--no-restart); "
                     "the dashboard stays up — restart it from the Stack page or restart geadmin up")
        self.on_change()

    def _stop_on_request(self) -> None:
        if self.triton is None:
            self.state = "stopped"
            self.on_change()
            return
        self.state = "stopping"  # said before the stop's wait: it is not a hung Triton
        self.on_change()
        uptime, code = self._uptime(), self.triton.stop(timeout_s=9)
        self.triton = None
        note = self.origin_of("stop", self._requested_at) or STOPPED_NOTE
        record = exit_record(code, uptime, False, note, requested=True)
        self._remember(record)
        self.state = "stopped"
        self.say(f"tritonserver {record.describe()}; it stays down until restarted")
        self.on_change()

    def _restart_on_request(self) -> None:
        stopped = None
        if self.triton is not None:
            self.state = "restarting on request"  # said before the stop's wait: not a hung Triton
            self.on_change()
            stopped = self._uptime(), self.triton.stop(timeout_s=9)
            self.triton = None
        # Asked after the stop: the Stack page writes its row right after its signal.
        reason = self._restart_reason or self.origin_of("restart", self._requested_at) \
            or "restart requested"
        if stopped is not None:
            self._remember(exit_record(stopped[1], stopped[0], True, reason, requested=True))
        self.say(f"restarting tritonserver ({reason})")
        self._restart_origin = reason
        self._restart()

    def _restart(self) -> None:
        self._restart_at = None
        self.state = "starting"
        self.on_change()
        try:
            self.triton = self._start_triton(self._stopping.is_set)
        except GeAdminError as exc:
            if self._stopping.is_set():
                return
            delay = self.backoff.after_exit(0.0)
            self._remember(exit_record(None, 0.0, True, f"{START_FAILED}: {str(exc).splitlines()[0]}"
                                       + (f"; {self._restart_origin}" if self._restart_origin else "")))
            self._restart_at = time.monotonic() + delay
            self.state = "restarting"
            self.say(f"tritonserver did not start: {str(exc).splitlines()[0]}; retrying in "
                     f"{format_duration(delay)}")
            self.on_change()
            return
        self.state = "running"
        self.on_restart(True, f"tritonserver is live again (restart {self.restarts}"
                        + (f"; {self._restart_origin})" if self._restart_origin else ")"))
        self._restart_origin = ""
        if self._not_serving:
            self.on_left_out(dict(self._not_serving))
        self.say(f"tritonserver is live again (restart {self.restarts}); reloading "
                 + (f"{len(self._ready_models)} models" if self._ready_models is not None
                    else "the repository's models"))
        self._begin_loading(self._ready_models)
        self.on_change()

    def _begin_loading(self, names: Sequence[str] | None) -> None:
        assert self.triton is not None
        triton = self.triton
        self._loading.set()

        def run() -> None:
            try:
                self._load_models(triton, names)
            finally:
                self._loading.clear()

        threading.Thread(target=run, name="geadmin-model-loads", daemon=True).start()

    def _note_ready_models(self) -> None:
        """What to reload after a crash: the models READY a moment ago, not the whole
        repository (a model an operator unloaded stays unloaded)."""
        if self.triton is None or self._loading.is_set() or time.monotonic() < self._next_ready_poll:
            return  # mid-load the set is incomplete: keep the last full one
        self._next_ready_poll = time.monotonic() + READY_POLL_S
        try:
            with TritonClient(self.triton.http_url, admin_key=self.triton.admin_key, timeout_s=2.0) as client:
                index = client.repository_index()
        except TritonError:
            return  # keep the last known set
        self._ready_models = sorted({e.name for e in index if e.state is ModelState.READY})
        self._not_serving = {e.name: e.reason or e.state.value for e in index
                             if e.state is ModelState.UNAVAILABLE and e.name not in self._ready_models}
