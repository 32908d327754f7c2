"""The embedded stack's model loads: a round into the supervised Triton after each (re)start.

Triton starts with no models (geadmin.stack.embedded says why). Once it is live, the
repository's models load in parallel, LOAD_WORKERS at a time, each bounded by a timeout, so no
model can hold up the start, the others, or the dashboard. A round prints n of N as each load
ends, then a summary, and keeps the outcomes for stack.json. Triton handles one load request at
a time, so a hung load blocks every later one until Triton restarts: the model is left out and
Triton restarted without it (a new round); it stays out until loaded by hand.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from geadmin.access import guard
from geadmin.audit import Origin
from geadmin.errors import TritonError
from geadmin.ops.models.actions import ActionResult, load_in_parallel
from geadmin.repository.trials import is_trial
from geadmin.stack.tritonserver import TritonProcess
from geadmin.stack.workspace import LoadOutcome
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LocalLogFile

LOAD_WORKERS = 4


def load_outcome(result: ActionResult) -> LoadOutcome:
    if result.ok:
        return LoadOutcome(result.name, True, "READY")
    reason = result.explanation.reason if result.explanation else result.message
    return LoadOutcome(result.name, False, reason.splitlines()[0] if reason else "failed")


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
        # Models whose load hung: Triton handles one load request at a time, so a hung load
        # blocks every later one until Triton restarts. They stay out until loaded by hand.
        self.hung: set[str] = set()
        self._round = 0

    def run(self, triton: TritonProcess, names: Sequence[str] | None) -> None:
        """Runs on a thread of its own: prints n of N as each load ends, then a summary."""
        timeout_s = self.timeout_s
        self._round += 1
        this_round = self._round
        with TritonClient(triton.http_url, admin_key=triton.admin_key, load_timeout_s=timeout_s) as client:
            try:
                wanted = list(names) if names is not None else sorted(
                    {e.name for e in client.repository_index() if not is_trial(self.repository, e.name)})
            except TritonError as exc:  # Triton died at once: the supervisor reports that
                self.say(f"cannot list the repository's models: {str(exc).splitlines()[0]}")
                return
            skipped = sorted(self.hung & set(wanted))
            wanted = [name for name in wanted if name not in self.hung]
            if skipped:
                self.say(f"not loading {', '.join(skipped)}: its load hung Triton before (fix it, "
                         "then load it from the Models page or `geadmin models load`)")
            if not wanted:
                self.say(f"no models to load in {self.repository}")
                return
            self.say(f"loading {len(wanted)} models ({LOAD_WORKERS} at a time, at most "
                     f"{timeout_s:.0f}s each) ...")

            def done(count: int, total: int, result: ActionResult) -> None:
                if this_round != self._round:
                    return  # Triton was restarted under this round: its failures mean nothing
                outcome = load_outcome(result)
                self.say(f"  [{count}/{total}] {outcome.name}: "
                         + ("READY" if outcome.ok else f"FAILED — {outcome.message}"))
                stuck = result.explanation is not None and (result.explanation.hung
                                                            or result.explanation.timed_out)
                if stuck:
                    self._restart_without(result.name)

            results = load_in_parallel(client, wanted, log=LocalLogFile(triton.log_path),
                                       repository=self.repository, workers=LOAD_WORKERS, done=done,
                                       auth=guard.os_user(Origin.LOCAL))
        if this_round != self._round:
            return
        self.loads = tuple(load_outcome(result) for result in results)
        failed = [load.name for load in self.loads if not load.ok]
        self.say(f"models: {len(results) - len(failed)} of {len(results)} READY"
                 + (f"; failed: {', '.join(failed)} (reasons above; `geadmin status` shows them again)"
                    if failed else ""))
        self.on_done()

    def _restart_without(self, name: str) -> None:
        """A hung load holds Triton's loader: only a restart frees it for the other models."""
        self.hung.add(name)
        self._round += 1  # what the current round still reports is moot
        self.say(f"{name}'s load hangs, and Triton loads nothing else while it does: restarting "
                 f"Triton and loading the other models without {name}")
        self.restart(f"load of {name} hung")
