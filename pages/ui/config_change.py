"""The Config editor's changes: Apply and the history's Roll back, each planned by the core
(geadmin.ops.models.change_plan, as `geadmin config apply|rollback` plans them), asked about when it
takes an ensemble down (and before every rollback), audited as refused when the answer is
Cancel, then carried out by geadmin.ops.models.apply and reported once under its button."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.diagnose.failure_text import FailureText, from_message
from geadmin.diagnose.state_changes import StateChange
from geadmin.errors import ConfigConflictError, ConfigInvalidError, GeAdminError
from geadmin.ops.models import actions
from geadmin.ops.models.apply import apply_config, rollback
from geadmin.ops.models.apply_result import ApplyOutcome, ApplyResult
from geadmin.ops.models.change_plan import ChangePlan, decline, plan_change
from geadmin.repository import revisions
from geadmin.repository.positions import lost_comments
from geadmin.stack.backends import served_backends
from geadmin.stack.target import Target
from geadmin.triton.client import TritonClient
from pages.ui import access, keys
from pages.ui.context import client_for, log_for
from pages.ui.errors import failure_of, show_failure
from pages.ui.impact_view import show_impact, show_side_effects
from pages.ui.outside_text import defused


@dataclass(frozen=True)
class Opened:
    """The file as the editor read it: the base of the edit and of the conflict check."""

    server: str
    model: str
    sha256: str
    text: str


def plan_apply(target: Target, opened: Opened, text: str) -> ChangePlan | None:
    """The plan of applying `text` (its findings, its impact); None when the file on disk
    cannot be read (said here)."""
    assert target.repository is not None
    try:
        return plan_change(client_for(target), target.repository, opened.model, new=text,
                           backends=served_backends(target))
    except GeAdminError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
        return None


def apply_section(target: Target, opened: Opened, text: str, plan: ChangePlan | None) -> None:
    st.subheader("Apply")
    dropped = lost_comments(opened.text, text)
    if dropped:
        st.warning("This change drops comments from the file: " + "; ".join(f"`{c}`" for c in dropped),
                   icon=":material/comments_disabled:")
    load_col, smoke_col = st.columns(2)
    load = load_col.checkbox("Load the model if it is not loaded", key=keys.EDITOR_LOAD_UNLOADED,
                             help="otherwise a model that is not loaded only gets the file written")
    smoke = smoke_col.checkbox("Send a test request after the reload", key=keys.EDITOR_SMOKE, value=True,
                               help="one request of zeros; if it fails, the previous config is put back "
                                    "and reloaded")
    permitted, why_not = access.allowed(GuardedAction.APPLY)
    errors = plan.errors if plan is not None else []
    reason = (why_not if not permitted else "no changes to apply" if text == opened.text else
              "the file on disk cannot be read" if plan is None else
              f"fix the {len(errors)} error(s) above first" if errors else "")
    if plan is not None and plan.impact is not None and text != opened.text:
        show_impact(plan.impact)
    asked = ("apply", target.spec.name, opened.model, revisions.sha256_of(text.encode()))
    if st.button("Apply", type="primary", key=keys.EDITOR_APPLY, disabled=bool(reason), help=reason or
                 "write atomically, reload in Triton; restored automatically if Triton rejects it"):
        if plan is not None and plan.needs_consent:
            _ask(asked)  # asked below
        else:
            apply_now(target, opened, text, load, smoke)
    if st.session_state.get(keys.EDITOR_CONFIRM) == asked and not reason and plan is not None:
        st.warning(plan.question, icon=":material/help:")
        if confirmed(target, plan):
            apply_now(target, opened, text, load, smoke)
    show_notice("apply")


def apply_now(target: Target, opened: Opened, text: str, load: bool, smoke: bool) -> None:
    run_change("apply", target, f"Applying to {opened.model}: writing, reloading, checking what serves…",
               lambda client, repository: apply_config(
                   client, repository, opened.model, text, expected_sha256=opened.sha256,
                   base_text=opened.text, auth=access.auth_for(GuardedAction.APPLY, model=opened.model,
                                                                 server=target.spec.url),
                   log=log_for(target), load_unloaded=load,
                   smoke=smoke, backends=served_backends(target)))


def confirmed(target: Target, plan: ChangePlan) -> bool:
    """Confirm / Cancel under the plan's question; True when confirmed (the question is then
    dropped). Cancel is a refusal, audited as one, as the CLI audits a "no"."""
    yes, no = st.columns(2)
    no.button("Cancel", key=f"{keys.EDITOR_CONFIRM}.cancel", on_click=_decline, args=(target, plan))
    if yes.button(f"Confirm {plan.action}", type="primary", key=f"{keys.EDITOR_CONFIRM}.{plan.action}"):
        del st.session_state[keys.EDITOR_CONFIRM]
        return True
    return False


def _ask(question: tuple[object, ...]) -> None:
    """Button callback (runs before the rerun): ask `question`."""
    st.session_state[keys.EDITOR_CONFIRM] = question


def _decline(target: Target, plan: ChangePlan) -> None:
    """Cancel's callback: drop the question, audit the refusal, say it once."""
    st.session_state.pop(keys.EDITOR_CONFIRM, None)
    try:
        auth = access.auth_for(GuardedAction(plan.action), model=plan.model, server=target.spec.url)
        refusal = decline(plan, auth)
    except GeAdminError as exc:
        refusal = f"{plan.declined()} (not audited: {exc})"
    st.session_state[keys.EDITOR_NOTICE] = Notice(plan.action, False, refusal, declined=True)


@dataclass(frozen=True)
class Notice:
    """What the last apply or rollback did, shown once under the button that started it."""

    origin: str  # "apply" or "rollback"
    ok: bool
    message: str
    details: tuple[str, ...] = ()
    diff: str = ""
    side_effects: tuple[StateChange, ...] = ()
    failure: FailureText | None = None  # a failed apply or rollback, split for show_failure
    declined: bool = False  # not confirmed: nothing was done
    unfinished: bool = False  # on disk; Triton was still loading it when the apply stopped waiting


def run_change(origin: str, target: Target, doing: str,
               change: Callable[[TritonClient, Path], ApplyResult]) -> None:
    """Run an apply or rollback on `target`'s repository under a spinner saying what it is
    `doing`, keep its notice for the next run, reopen the file it left."""
    repository = target.repository
    assert repository is not None
    client = client_for(target)
    with st.spinner(doing):
        try:
            result = change(client, repository)
        except ConfigInvalidError as exc:
            notice = Notice(origin, False, str(exc), tuple(str(f) for f in exc.findings))
        except ConfigConflictError as exc:
            notice = Notice(origin, False, str(exc), diff=exc.diff())
        except GeAdminError as exc:
            notice = Notice(origin, False, str(exc), failure=failure_of(exc, actions.next_step(exc)))
        else:
            notice = Notice(origin, result.ok, result.message, result.warnings,
                            side_effects=result.side_effects,
                            unfinished=result.outcome is ApplyOutcome.UNFINISHED)
            if result.outcome in (ApplyOutcome.APPLIED, ApplyOutcome.WRITTEN, ApplyOutcome.UNFINISHED):
                st.session_state.pop(keys.EDITOR_OPENED, None)  # the file changed: start from it
            # rejected: the edit stays in the text area, to fix and apply again
    st.session_state[keys.EDITOR_NOTICE] = notice
    st.rerun()


def show_notice(origin: str) -> None:
    notice: Notice | None = st.session_state.get(keys.EDITOR_NOTICE)
    if notice is None or notice.origin != origin:
        return
    del st.session_state[keys.EDITOR_NOTICE]
    show_side_effects(notice.side_effects)
    if notice.declined:
        st.info(notice.message, icon=":material/block:")
    elif notice.ok:
        st.success(notice.message, icon=":material/check_circle:")
    elif notice.unfinished:  # neither failed nor applied yet: Triton's words, kept as written
        st.warning(f"**{notice.origin.capitalize()} did not finish:** {defused(notice.message)}",
                   icon=":material/hourglass_top:")
    else:
        show_failure(notice.failure or from_message(notice.message))
    for line in notice.details:
        st.caption(line)
    if notice.diff:
        st.code(notice.diff, language="diff")


def history_section(target: Target, opened: Opened) -> None:
    assert target.repository is not None
    st.subheader("History")
    try:
        kept = revisions.history(target.repository, opened.model)
    except GeAdminError as exc:
        st.error(f"Cannot read the config history: {defused(str(exc))}", icon=":material/error:")
        return
    if not kept:
        st.caption("No revision kept yet: geadmin keeps one each time it applies a change.")
        return
    st.dataframe(pd.DataFrame([{"revision": r.number, "at": r.at.strftime("%Y-%m-%d %H:%M:%S"), "who": r.who,
                                "note": r.note, "current": r.sha256 == opened.sha256} for r in kept]),
                 hide_index=True, width="stretch")
    numbers = [r.number for r in kept]
    by_number = {r.number: r for r in kept}
    number = st.selectbox("Revision", numbers, key=keys.EDITOR_REVISION, format_func=lambda n: (
        f"revision {n} · {by_number[n].at:%Y-%m-%d %H:%M:%S} · {by_number[n].who} · {by_number[n].note}"))
    chosen = by_number[number]
    st.code(revisions.text_diff(opened.text, chosen.text, f"{opened.model}/config.pbtxt", "on disk",
                                f"revision {number}") or "Same as the file on disk.", language="diff")
    permitted, why_not = access.allowed(GuardedAction.ROLLBACK)
    asked = ("rollback", target.spec.name, opened.model, number)
    st.button(f"Roll back to revision {number}", key=keys.EDITOR_ROLLBACK,
              disabled=chosen.sha256 == opened.sha256 or not permitted, on_click=_ask, args=(asked,),
              help=why_not or "an audited apply of that revision; unapplied edits in the editor are "
              "discarded; asks first")
    if st.session_state.get(keys.EDITOR_CONFIRM) == asked and permitted and chosen.sha256 != opened.sha256:
        ask_rollback(target, opened, number)
    show_notice("rollback")


def ask_rollback(target: Target, opened: Opened, number: int) -> None:
    """The rollback's question, from its plan (what it does to the ensembles), and its answer."""
    assert target.repository is not None
    try:
        # Asked for by the button: a refusal is audited (once: the question is dropped with it)
        plan = plan_change(client_for(target), target.repository, opened.model, revision=number,
                           auth=access.auth_for(GuardedAction.ROLLBACK, model=opened.model,
                                                server=target.spec.url))
    except GeAdminError as exc:
        st.session_state.pop(keys.EDITOR_CONFIRM, None)
        st.session_state[keys.EDITOR_NOTICE] = Notice("rollback", False, f"Cannot roll back to revision "
                                                      f"{number}: {exc}")
        st.rerun()
    st.warning(f"{plan.question} Its config is written and reloaded in Triton like any change (restored "
               "if Triton rejects it); unapplied edits in the editor are discarded.", icon=":material/help:")
    if plan.impact is not None:
        show_impact(plan.impact)
    if confirmed(target, plan):
        rollback_now(target, opened, number)


def rollback_now(target: Target, opened: Opened, number: int) -> None:
    run_change("rollback", target, f"Rolling {opened.model} back to revision {number}…",
               lambda client, repository: rollback(
                   client, repository, opened.model, number, expected_sha256=opened.sha256,
                   auth=access.auth_for(GuardedAction.ROLLBACK, model=opened.model, server=target.spec.url),
                   log=log_for(target)))
