"""Load, unload and reload models, audited by their outcome: each action is checked
against what Triton reports afterwards, never assumed done — the model itself, and every
other model whose state changed with it (an ensemble that runs it), each with Triton's reason
and its own audit row (geadmin.diagnose.state_changes).

Each model's row is written where its result is produced, before any progress callback runs
again, and in `try/finally`: a callback that raises (a Streamlit rerun unwinds the page's
script from inside its `st.progress` call) cannot leave an action done and unaudited — an
action cut short that way is audited as failed, "cut short before its outcome was known".
Callbacks get plain values; the core never calls Streamlit."""

from __future__ import annotations

import contextlib
import enum
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from geadmin import audit
from geadmin.access.guard import Authorization, require
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor
from geadmin.diagnose import state_changes
from geadmin.diagnose.ensemble import composing_models
from geadmin.diagnose.explain import explanation_dict
from geadmin.diagnose.health import log_failures
from geadmin.diagnose.state_changes import StateChange
from geadmin.diagnose.stuck import unload_not_ended
from geadmin.diagnose.unloads import SIDE_EFFECT
from geadmin.domain import Explanation, ModelState, Serving
from geadmin.errors import (
    ExplainedLoadError,
    ExplainedLoadTimeoutError,
    ForbiddenError,
    GeAdminError,
    TritonError,
    TritonTimeoutError,
    TritonUnreachableError,
    WrongProtocolError,
)
from geadmin.ops.models.explained_load import LoadProgress, load_explained
from geadmin.telemetry.history import watch
from geadmin.triton.client import TritonClient
from geadmin.triton.logs import LogSource

SETTLE_TIMEOUT_S = 30.0  # how long an action waits for LOADING / UNLOADING to finish


class ModelAction(str, enum.Enum):
    LOAD = "load"
    UNLOAD = "unload"
    RELOAD = "reload"


@dataclass(frozen=True)
class ActionResult:
    name: str
    action: ModelAction
    ok: bool
    message: str
    explanation: Explanation | None = None
    error: GeAdminError | None = None  # what failed, for the next step and exit codes
    side_effects: tuple[StateChange, ...] = ()  # other models whose state changed with it

    def record(self) -> dict[str, Any]:
        """For `--json`."""
        return {"name": self.name, "action": self.action.value, "ok": self.ok, "message": self.message,
                "explanation": explanation_dict(self.explanation) if self.explanation else None,
                "side_effects": [change.record() for change in self.side_effects]}


def run_action(
    client: TritonClient,
    action: ModelAction,
    names: Sequence[str],
    *,
    dependents: bool = False,
    log: LogSource | None = None,
    repository: Path | None = None,
    progress: Callable[[int, int, str], None] | None = None,
    settle_timeout_s: float = SETTLE_TIMEOUT_S,
    auth: Authorization | None = None,
) -> list[ActionResult]:
    """Apply `action` to each model in turn (a failure does not stop the others); after an
    unload, wait (bounded) until the models touched, dependents included, stop UNLOADING.
    `auth` must cover `action` (NotAuthorizedError before anything is asked of Triton)."""
    require(auth, GuardedAction(action.value))
    results = []
    for done, name in enumerate(names):
        report = _load_reporter(progress, done, len(names), name)
        report(0.0, "")  # before the action: a callback that raises here leaves nothing undone
        results.append(_one_audited(client, action, name, names, dependents=dependents, log=log,
                                    repository=repository, report=report,
                                    settle_timeout_s=settle_timeout_s, auth=auth))
    if progress is not None:
        progress(len(names), len(names), "")
    return results


def _one_audited(client: TritonClient, action: ModelAction, name: str, names: Sequence[str], *,
                 dependents: bool, log: LogSource | None, repository: Path | None, report: LoadProgress,
                 settle_timeout_s: float, auth: Authorization | None) -> ActionResult:
    """One model's action, settled (bounded) and audited before this returns; audited as cut
    short if anything unwinds it (the `report` callback raising included)."""
    actor = require(auth, GuardedAction(action.value))
    result: ActionResult | None = None
    try:
        asked = [*names, *(_composing(client, name) if action is ModelAction.UNLOAD and dependents else [])]
        before = state_changes.snapshot(client, log)
        done = _run_one(client, action, name, dependents, log, repository, report, auth)
        side_effects = state_changes.changes(client, before, asked, log, settle_timeout_s=settle_timeout_s)
        done = replace(done, side_effects=tuple(side_effects))
        touched = [*asked[len(names):], *([name] if done.ok else [])]  # a failed model has nothing to settle
        # Triton's unload answers before the model is gone: wait for it (bounded). A load or a
        # reload answers once the new config serves; the versions it retires unload on Triton's time.
        if done.ok and action is ModelAction.UNLOAD and not wait_settled(client, touched, settle_timeout_s):
            done = _still_moving(client, done, settle_timeout_s)
        (result,) = audited(client, [done], actor)
    finally:
        if result is None:
            audit.try_record_action(action.value, name, False, cut_short(action, name), server=client.url,
                                    actor=actor)
    return result


def cut_short(action: ModelAction, name: str) -> str:
    """The audit message of an action unwound before its outcome was known."""
    return (f"{action.value} of {name!r} was cut short before its outcome was known (the caller "
            "stopped, e.g. the dashboard reran): check its state with `geadmin models list`")


def audited(client: TritonClient, results: list[ActionResult], actor: Actor | None) -> list[ActionResult]:
    """Every action is in the audit log; a workspace that cannot take the row does not turn
    an action that happened into a failure (the problem is added to its message instead)."""
    noted = []
    for result in results:
        problem = audit.try_record_action(result.action.value, result.name, result.ok,
                                          with_side_effects(result.message, result.side_effects),
                                          server=client.url, actor=actor)
        problem = problem or audit_side_effects(client.url, result.action.value, result.name,
                                                result.side_effects, actor)
        noted.append(replace(result, message=f"{result.message} (not audited: {problem})")
                     if problem else result)
    return noted


def audit_refusal(server: str, action: str, models: Sequence[str], message: str, actor: Actor | None) -> str:
    """A change refused before it started (not confirmed): one `refused` row per model."""
    for model in models:
        try:
            audit.record(action, model, audit.Result.REFUSED, actor=actor, server=server, message=message)
        except GeAdminError as exc:
            return str(exc)
    return ""




def with_side_effects(message: str, side_effects: Sequence[StateChange]) -> str:
    """`message` with one line per other model that changed state."""
    if not side_effects:
        return message
    return "\n".join([message, "also changed state:", *(f"  {change.text()}" for change in side_effects)])


def audit_side_effects(server: str, action: str, model: str, side_effects: Sequence[StateChange],
                       actor: Actor | None, home: Path | None = None) -> str:
    """One audit row per other model that changed state (failed when it lost READY); "" or why
    a row could not be written. A model an operator's unload took down with it (an ensemble
    that runs the model: both faces name it and ask before they unload) is the operator's
    unload too, recorded as one: never a failure, on every face."""
    for change in side_effects:
        taken_down = action == ModelAction.UNLOAD.value and change.lost_ready
        row = ModelAction.UNLOAD.value if taken_down else SIDE_EFFECT
        problem = audit.try_record_action(
            row, change.model, taken_down or not change.lost_ready,
            f"{change.text()} (after the {action} of {model!r})", server=server, actor=actor, home=home)
        if problem:
            return problem
    return ""


def load_in_parallel(
    client: TritonClient,
    names: Sequence[str],
    *,
    log: LogSource | None = None,
    repository: Path | None = None,
    workers: int = 4,
    done: Callable[[int, int, ActionResult], None] | None = None,
    auth: Authorization | None = None,
    started: Callable[[str], None] | None = None,
) -> list[ActionResult]:
    """Load every model in `names` at once, `workers` at a time: a model that fails or hangs
    (bounded by the client's load timeout, or sooner when the log shows it stuck) is reported
    by name with its reason and never holds up the others. `started(name)` is called as each
    load is sent, `done(n, total, result)` as each one ends; results come back in the order of
    `names`. `auth` must cover `load`."""
    actor = require(auth, GuardedAction.LOAD)
    if not names:
        return []
    quiet: LoadProgress = lambda elapsed_s, latest: None  # noqa: E731

    def load_audited(name: str) -> ActionResult:  # in the worker: audited whatever `done` does
        result: ActionResult | None = None
        if started is not None:
            started(name)
        try:
            done_one = _run_one(client, ModelAction.LOAD, name, False, log, repository, quiet, auth)
            (result,) = audited(client, [done_one], actor)
        finally:
            if result is None:
                audit.try_record_action(ModelAction.LOAD.value, name, False,
                                        cut_short(ModelAction.LOAD, name), server=client.url, actor=actor)
        return result

    finished: dict[str, ActionResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="geadmin-load") as pool:
        futures = {pool.submit(load_audited, name): name for name in names}
        for count, future in enumerate(as_completed(futures), start=1):
            result = future.result()  # _run_one turns every GeAdminError into a result
            finished[result.name] = result
            if done is not None:
                done(count, len(names), result)
    return [finished[name] for name in names]


def _still_moving(client: TritonClient, result: ActionResult, timeout_s: float) -> ActionResult:
    """Triton accepted the action but the model had not settled: not "ended as asked"."""
    message = (f"{result.action.value} of {result.name!r} was accepted, but the model was still "
               f"loading or unloading after {timeout_s:.0f}s (or its state could not be read); "
               "check it again in a moment")
    with contextlib.suppress(TritonError):
        if ModelState.UNLOADING in {e.state for e in client.repository_index() if e.name == result.name}:
            probe = watch.fresh_probes(client.url, now_s=time.time()).get(result.name)
            message = unload_not_ended(result.name, timeout_s, probe)
    return replace(result, ok=False, message=message, error=TritonTimeoutError(message))


def _composing(client: TritonClient, name: str) -> list[str]:
    try:
        return composing_models(client.model_config(name))
    except TritonError:
        return []


def _load_reporter(progress: Callable[[int, int, str], None] | None, done: int, total: int,
                   name: str) -> LoadProgress:
    """Progress text while one model's load runs: its name, seconds so far, latest log line."""
    def report(elapsed_s: float, latest: str) -> None:
        if progress is not None:
            waited = f" ({elapsed_s:.0f}s)" if elapsed_s >= 1 else ""
            progress(done, total, f"{name}{waited}" + (f": {latest.splitlines()[0][:160]}" if latest else ""))
    return report


def _run_one(client: TritonClient, action: ModelAction, name: str, dependents: bool,
             log: LogSource | None, repository: Path | None, report: LoadProgress,
             auth: Authorization | None) -> ActionResult:
    try:
        if action is ModelAction.UNLOAD:
            stuck = _stuck_loading(client, name, log)
            if stuck:
                return ActionResult(name, action, False, stuck, error=TritonTimeoutError(stuck))
            client.unload(name, dependents=dependents)
            extra = " and the models only it used" if dependents else ""
            return ActionResult(name, action, True, f"unloaded {name!r}{extra}")
        load_explained(client, name, log=log, repository=repository, progress=report, auth=auth)
        return ActionResult(name, action, True, f"{action.value}ed {name!r}")
    except (ExplainedLoadError, ExplainedLoadTimeoutError) as exc:
        return ActionResult(name, action, False, str(exc), exc.explanation, exc)
    except GeAdminError as exc:
        return ActionResult(name, action, False, str(exc), error=exc)


def _stuck_loading(client: TritonClient, name: str, log: LogSource | None) -> str:
    """Why `name` cannot be unloaded now ("" when it can): Triton does not unload a model
    while its load runs — the unload call just hangs (FACTS.md)."""
    try:
        states = {e.state for e in client.repository_index() if e.name == name}
    except TritonError:
        return ""  # the unload itself will say what is wrong
    if ModelState.LOADING not in states or ModelState.READY in states:
        return ""
    cause = log_failures(log, [name]).get(name, "")
    if cause:
        return (f"cannot unload {name!r}: it is stuck LOADING after Triton logged: {cause} — Triton "
                "neither finishes nor unloads such a load; fix the cause, then restart Triton to "
                "clear it (stop and start `geadmin up`)")
    return (f"cannot unload {name!r} while it is LOADING: Triton unloads a model only after its load "
            "ends; wait for it, or restart Triton if it never ends")


def wait_settled(client: TritonClient, names: Sequence[str], timeout_s: float) -> bool:
    """Poll the index until none of `names` is LOADING / UNLOADING (Triton's HTTP unload
    answers before the model is gone). False if still moving after `timeout_s`."""
    moving = {ModelState.LOADING, ModelState.UNLOADING}
    deadline = time.monotonic() + timeout_s
    wanted = set(names)
    while True:
        try:
            states = {e.state for e in client.repository_index() if e.name in wanted}
        except TritonError:
            return False
        if not states & moving:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)


FIX_AND_RETRY = "fix the cause in the model repository or Triton, then retry."


def next_step(error: GeAdminError) -> str:
    """What an operator should do about `error` (pages put it under the message)."""
    if isinstance(error, ExplainedLoadTimeoutError) and error.explanation.unfinished:
        watch = ("the previous version serves meanwhile and the Overview names the model until the load "
                 "ends" if error.explanation.serving is Serving.PREVIOUS
                 else "watch its state (it stays LOADING until its initialize returns)")
        return (f"{watch}; if it never ends, fix what the model waits on, then restart Triton from the "
                "Stack page")
    if isinstance(error, (ExplainedLoadError, ExplainedLoadTimeoutError)):
        return "fix the cause above in the model repository, then load the model again"
    if isinstance(error, WrongProtocolError):
        return ("point geadmin at Triton's own ports: http:// with its HTTP port (8000 by default), grpc:// "
                "with its gRPC port (8001)")
    if isinstance(error, TritonUnreachableError):
        return "start Triton (`geadmin up`) or check the server URL (GEADMIN_TRITON_URL)"
    if isinstance(error, ForbiddenError):
        return "set the admin key (GEADMIN_ADMIN_KEY, or admin_key in the servers file)"
    if isinstance(error, TritonTimeoutError):
        return "Triton is slow or stuck: retry, and read its log"
    return "check the message above and Triton's log"


def set_log_verbosity(client: TritonClient, level: int, *,
                      auth: Authorization | None = None) -> dict[str, Any]:
    """Triton's verbose log level, changed live and audited; Triton's settings after it."""
    actor = require(auth, GuardedAction.LOG_LEVEL)
    try:
        updated = client.update_log_settings(log_verbose_level=int(level))
    except GeAdminError as exc:
        audit.try_record_action("log_level", "", False, f"verbose level {level}: {exc}", server=client.url,
                                actor=actor)
        raise
    audit.try_record_action("log_level", "", True, f"verbose level set to {level}", server=client.url,
                            actor=actor)
    return updated
