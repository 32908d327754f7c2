"""The embedded stack's model loads: a round into the supervised Triton after each (re)start.

Triton starts with no models (geadmin.stack.embedded says why). Once it is live, the
repository's models load in parallel, LOAD_WORKERS at a time, each bounded by a timeout, so no
model can hold up the start, the others, or the dashboard. A round prints n of N as each load
ends, then a summary, and keeps the outcomes for stack.json. Two kinds of load stop every
other and are left out of the restarts that follow, until loaded by hand:

- A hung load: Triton handles one load request at a time, so it blocks every later one until
  Triton restarts: the model is left out and Triton restarted without it (a new round).
- A load that kills Triton (a backend that crashes on the model's file): the supervisor
  restarts Triton, and a round that reloaded the model would crash it again, forever. The
  models whose loads were in flight when Triton exited are suspects, loaded one at a time,
  after the others, in the next round; a suspect that Triton exits under again, alone, is left
  out. Two exits, so that one `kill -9` or OOM kill blames nobody; a stop or restart someone
  asked for blames nobody at all. A model loaded by hand since (READY before a restart) is
  loaded again.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from geadmin import audit
from geadmin.access import guard
from geadmin.audit import Origin
from geadmin.errors import TritonError, TritonUnreachableError
from geadmin.ops.models.actions import ActionResult, load_in_parallel
from geadmin.repository.trials import is_trial
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import LoadOutcome
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile

LOAD_WORKERS = 4
CUT_OFF = "cut off: Triton exited during the load round"
EXIT_SEEN_S = 2.0  # a load refused as Triton exits: how long its exit may take to be seen


def load_outcome(result: ActionResult) -> LoadOutcome:
    if result.ok:
        return LoadOutcome(result.name, True, "READY")
    reason = result.explanation.reason if result.explanation else result.message
    return LoadOutcome(result.name, False, reason.splitlines()[0] if reason else "failed")


def exit_text(code: int | None) -> str:
    """"killed by SIGKILL", "exit code 1" for Triton's exit status."""
    if code is None:
        return "it exited"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Round:
    """One round's loads as they start and end: which were in flight when Triton exited."""

    def __init__(self, loads: StartupLoads, triton: TritonProcess, number: int, total: int) -> None:
        self.loads, self.triton, self.number, self.total = loads, triton, number, total
        self.count = 0
        self.sent_alive: set[str] = set()  # sent while Triton was live: a cause if Triton exits under it
        self.cut: set[str] = set()  # sent while Triton was live, failed once it had exited
        self.results: list[ActionResult] = []
        self._lock = threading.Lock()

    def started(self, name: str) -> None:
        if self.triton.alive():  # a load sent to a Triton already gone caused nothing
            with self._lock:
                self.sent_alive.add(name)

    def done(self, _: int, __: int, result: ActionResult) -> None:
        with self._lock:
            self.count += 1
            count = self.count
            self.results.append(result)
        if self.number != self.loads.current_round:
            return  # Triton was restarted under this round: its failures mean nothing
        if not result.ok and (not self.triton.alive() or (isinstance(result.error, TritonUnreachableError)
                              and self.triton.ended_within(EXIT_SEEN_S))):
            with self._lock:
                if result.name in self.sent_alive:
                    self.cut.add(result.name)
            self.loads.say(f"  [{count}/{self.total}] {result.name}: {CUT_OFF}")
            return
        if result.ok:
            self.loads.suspects.discard(result.name)  # it loaded with Triton alive: not the cause
        outcome = load_outcome(result)
        self.loads.say(f"  [{count}/{self.total}] {outcome.name}: "
                       + ("READY" if outcome.ok else f"FAILED — {outcome.message}"))
        if result.explanation is not None and (result.explanation.hung or result.explanation.timed_out):
            self.loads.restart_without(result.name)


class StartupLoads:
    """The rounds of model loads into one supervised Triton, and what the last round left.

    `say` prints a line, `on_done` runs when a round ends (the stack republishes stack.json),
    `restart(reason)` asks the supervisor to restart Triton."""

    def __init__(self, repository: Path, timeout_s: float, *, say: Callable[[str], None],
                 on_done: Callable[[], None], restart: Callable[[str], None]) -> None:
        self.repository = repository
        self.timeout_s = timeout_s  # per model, at start and after a restart
        self.say = say
        self.on_done = on_done
        self.restart = restart
        self.loads: tuple[LoadOutcome, ...] = ()
        # Models whose load hung or killed Triton, with why: out of every round until loaded by hand.
        self.left_out: dict[str, str] = {}
        self.suspects: set[str] = set()  # in flight when Triton exited: loaded one at a time next round
        self.current_round = 0
        self._one_round = threading.Lock()  # a round's verdict on a crash is in before the next starts

    def run(self, triton: TritonProcess, names: Sequence[str] | None) -> None:
        """Runs on a thread of its own: prints n of N as each load ends, then a summary."""
        with self._one_round:
            self.current_round += 1
            with TritonClient(triton.http_url, admin_key=triton.admin_key,
                              load_timeout_s=self.timeout_s) as client:
                self._run(client, triton, names, self.current_round)

    def _run(self, client: TritonClient, triton: TritonProcess, names: Sequence[str] | None,
             number: int) -> None:
        try:
            wanted = list(names) if names is not None else sorted(
                {e.name for e in client.repository_index() if not is_trial(self.repository, e.name)})
        except TritonError as exc:  # Triton died at once: the supervisor reports that
            self.say(f"cannot list the repository's models: {str(exc).splitlines()[0]}")
            return
        for name in set(names or ()) & set(self.left_out):  # READY before the restart: loaded by hand
            del self.left_out[name]
        for name in sorted(set(self.left_out) & set(wanted)):
            self.say(f"not loading {name}: {self.left_out[name]} (fix it, then load it from the Models "
                     f"page or `geadmin models load {name}`)")
        wanted = [name for name in wanted if name not in self.left_out]
        if not wanted:
            self.say(f"no models to load in {self.repository}")
            return
        one_by_one = [name for name in wanted if name in self.suspects]
        together = [name for name in wanted if name not in self.suspects]
        self.say(f"loading {len(wanted)} models ({LOAD_WORKERS} at a time, at most {self.timeout_s:.0f}s "
                 "each)" + (f"; {', '.join(one_by_one)} one at a time after the others, as Triton exited "
                            "while they loaded" if one_by_one else "") + " ...")
        this = _Round(self, triton, number, len(wanted))
        log, auth = LocalLogFile(triton.log_path), guard.os_user(Origin.LOCAL)
        for batch, workers in [(together, LOAD_WORKERS), *(([name], 1) for name in one_by_one)]:
            if batch and triton.alive() and number == self.current_round:
                load_in_parallel(client, batch, log=log, repository=self.repository, workers=workers,
                                 done=this.done, started=this.started, auth=auth)
        if number != self.current_round:
            return
        self.loads = tuple(load_outcome(result) if result.name not in this.cut
                           else LoadOutcome(result.name, False, CUT_OFF) for result in this.results)
        if not triton.alive():
            self._crashed_under(this, triton, client.url, auth.who)
        else:
            failed = [load.name for load in self.loads if not load.ok]
            self.say(f"models: {len(self.loads) - len(failed)} of {len(self.loads)} READY"
                     + (f"; failed: {', '.join(failed)} (reasons above; `geadmin status` shows them "
                        "again)" if failed else ""))
        self.on_done()

    def _crashed_under(self, this: _Round, triton: TritonProcess, server: str, actor: audit.Actor) -> None:
        """Triton exited during the round: the loads in flight then are its suspects."""
        ready = sum(1 for load in self.loads if load.ok)
        if triton.stopped_by_us:
            self.say(f"the load round was cut off: tritonserver was stopped as asked, with {ready} of "
                     f"{this.total} models READY")
            return
        how = exit_text(triton.exit_code())
        self.say(f"the load round was cut off: tritonserver {how} with {ready} of {this.total} models READY")
        if len(this.cut) == 1 and this.cut <= self.suspects:  # the second exit under it, alone
            (name,) = this.cut
            why = f"its load killed Triton ({how})"
            self.left_out[name] = why
            self.suspects.discard(name)
            self.say(f"{name}: {why}; Triton restarts without it, and it stays out until loaded by hand")
            audit.try_record_action("load", name, False, f"{why}: left out of Triton's restarts until "
                                    "loaded by hand", server=server, actor=actor)
        elif this.cut:
            self.suspects |= this.cut
            then = ("them one at a time, after the others, to find which one it was" if len(this.cut) > 1
                    else "it alone, after the others, to see whether it was the cause")
            self.say(f"Triton exited while {', '.join(sorted(this.cut))} loaded: the next round loads {then}")

    def restart_without(self, name: str) -> None:
        """A hung load holds Triton's loader: only a restart frees it for the other models."""
        self.left_out[name] = "its load hung Triton before"
        self.current_round += 1  # what the current round still reports is moot
        self.say(f"{name}'s load hangs, and Triton loads nothing else while it does: restarting "
                 f"Triton and loading the other models without {name}")
        self.restart(f"load of {name} hung")
