"""A load test in the background (the Load test page): `geadmin.ops.bench.load_test.load_test` as a run
of the background-run registry (geadmin.ops.runs), with its progress (points measured of
points planned), an abort that kills perf_analyzer and saves nothing, and one outcome the
page says — the saved run (one perf_analyzer cut short is saved with the points it measured,
and ends `stopped`), the cancellation, or the failure with its next step (a crash in the
worker included). `geadmin bench` runs the same `load_test` in the foreground."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.errors import BenchBusyError, BenchCancelledError
from geadmin.ops import runs
from geadmin.ops.bench.load_test import load_test
from geadmin.ops.bench.params import BenchSettings
from geadmin.ops.bench.results import BenchRun
from geadmin.ops.infer.inputs import RANDOM, InputSource
from geadmin.ops.infer.request import InferRequest
from geadmin.ops.models.actions import next_step
from geadmin.ops.runs import Ending, Run, RunKind
from geadmin.triton.client import TritonClient

LOAD_TEST = RunKind("load test", "server", "the Load test page that started it", BenchBusyError,
                 GuardedAction.BENCH,
                 "load_test")


def start_load_test(client: TritonClient, settings: BenchSettings, *, default: InputSource = RANDOM,
                    request: InferRequest | None = None, auth: Authorization | None = None, label: str = "",
                    home: Path | None = None) -> Run[BenchRun]:
    """`load_test` on a thread, one per server (`settings.url`) in this process; `auth` must
    cover `bench` (NotAuthorizedError before anything starts, no row written)."""
    actor = require(auth, GuardedAction.BENCH)

    def work(run: Run[BenchRun]) -> BenchRun:
        run.progress(0, len(settings.loads), "starting perf_analyzer")
        return load_test(client, settings, default=default, request=request, progress=run.progress,
                         cancel=run.aborted, auth=auth, label=label, home=home)

    def ending(saved: BenchRun) -> Ending:
        kept = f"{len(saved.points)} point(s), run #{saved.id or '-'}"
        if saved.cut_short:
            return Ending(False, f"{kept}, cut short: {saved.cut_short}")
        return Ending(True, kept)

    what = f"load test of {settings.model} on {settings.url}"
    return runs.start(LOAD_TEST, settings.url, what, actor, work, ending=ending, subject=settings.model,
                      home=home)


def latest(server_url: str) -> Run[BenchRun] | None:
    return runs.latest(LOAD_TEST, server_url)


@dataclass(frozen=True)
class Outcome:
    """What the page says once a load test ended: one of the three is set."""

    saved_id: int | None = None  # the run, saved
    notice: str = ""  # the user's own stop: said calmly, not as an error
    error: str = ""
    next_step: str = ""
    warning: str = ""  # the run's outcome is not in the audit log, and why


def outcome(run: Run[BenchRun]) -> Outcome:
    """The ended `run` told for the page."""
    said = _told(run)
    return replace(said, warning=run.audit_problem) if run.audit_problem else said


def _told(run: Run[BenchRun]) -> Outcome:
    model = run.subject
    if run.state == "aborted" or isinstance(run.failure, BenchCancelledError):
        return Outcome(notice=f"Load test of {model} cancelled: perf_analyzer was stopped and nothing was "
                              "saved.")
    if run.failure is not None:
        return Outcome(error=run.error, next_step=next_step(run.failure))
    if run.error:  # a crash: a bug in geadmin, not a fault of the server or the settings
        return Outcome(error=run.error, next_step="report it with the traceback from the dashboard's log")
    return Outcome(saved_id=run.result.id if run.result is not None else None)
