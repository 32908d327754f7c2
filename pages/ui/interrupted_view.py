"""Changes cut short: reconciled once per dashboard process and repository (at start), then
shown on the Models page while unresolved, with the way back — the Config editor opened on the
model and the revision to roll back to (its guarded, confirmed rollback). Fleet rollouts cut
short are shown on the Fleet page with what changed where, Restore and Resume.

Views only: `geadmin.ops.models.reconcile.reconcile` closes what a killed apply or create left (and
`rollout_recovery.close_rollouts` what a killed rollout left, `geadmin.ops.runs.close_interrupted`
the audit rows of its background runs), `geadmin.diagnose.interrupted.unresolved` lists
what still waits for an operator; `geadmin.fleet.restore.restore` and
`geadmin.fleet.resume.resume` put a rollout right.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import streamlit as st

from geadmin.access.guard import Authorization
from geadmin.access.roles import GuardedAction
from geadmin.audit import Actor
from geadmin.diagnose import interrupted, rollouts
from geadmin.errors import GeAdminError
from geadmin.fleet import runs
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.members import Member
from geadmin.fleet.restore import restore
from geadmin.fleet.resume import resumable, resume
from geadmin.fleet.rollout import RolloutResult
from geadmin.fleet.wave import Control
from geadmin.ops import runs as background
from geadmin.ops.models import reconcile, rollout_recovery
from pages.ui import access, keys
from pages.ui.context import selected_target
from pages.ui.errors import failure_of, show_failure
from pages.ui.outside_text import defused


@st.cache_resource(show_spinner=False)
def _reconciled(repository: str) -> reconcile.Report:
    """Once per dashboard process and repository: what the last process left is closed."""
    return reconcile.reconcile(Path(repository), actor=Actor.dashboard(None))


@st.cache_resource(show_spinner=False)
def _rollouts_closed() -> list[str]:
    """Once per dashboard process: the rollouts an earlier process left cut short are closed."""
    return rollout_recovery.close_rollouts(actor=Actor.dashboard(None))


@st.cache_resource(show_spinner=False)
def _background_runs_closed() -> int:
    """Once per dashboard process: the load tests and rollouts an earlier (killed) dashboard
    ran in the background get their `interrupted` audit row."""
    try:
        return len(background.close_interrupted(actor=Actor.dashboard(None)))
    except (GeAdminError, OSError):  # an unreadable audit log or locks directory: the next start tries again
        return 0


def reconcile_at_start() -> None:
    """Called by the router on every run; does the work once (cached per repository)."""
    _rollouts_closed()
    _background_runs_closed()
    repository = selected_target().repository
    if repository is not None:
        _reconciled(str(repository))


def notice() -> None:
    """One warning per unresolved interrupted apply, with a button to the rollback."""
    for item in interrupted.unresolved(selected_target().repository):
        text, action = st.columns([6, 2], vertical_alignment="center")
        text.warning(f"**Interrupted change** — {item.reason()}", icon=":material/report:")
        if item.previous_revision is None:
            continue
        if action.button(f"Review rollback to revision {item.previous_revision}",
                         key=f"{keys.INTERRUPTED_OPEN_PREFIX}{item.audit_id}"):
            st.session_state[keys.EDITOR_MODEL] = item.model
            st.session_state[keys.EDITOR_REVISION] = item.previous_revision
            st.session_state.pop(keys.EDITOR_OPENED, None)
            from pages import editor  # the page to open: imported here, as the router does

            st.switch_page(st.Page(editor.render, title="Config editor", url_path="editor"))


def fleet_rollouts(found: Discovery) -> None:
    """Each unresolved rollout of the fleet: what changed where, Restore, and Resume while it can."""
    rollout_recovery.close_rollouts(actor=Actor.dashboard(None))  # one killed since this process started
    fleet = found.fleet.name
    for item in rollouts.unresolved(fleet=fleet):
        st.error(defused(f"Interrupted rollout #{item.id} — {item.reason()}"), icon=":material/report:")
        restore_col, resume_col = st.columns(2)
        permitted, why_not = access.allowed(GuardedAction.ROLLBACK)
        if restore_col.button(f"Restore rollout #{item.id}", key=f"{keys.FLEET_RESTORE_PREFIX}{item.id}",
                              disabled=not permitted, help=why_not or "put back every server it changed: "
                              "configs byte-identical, reloaded"):
            st.session_state[keys.FLEET_JOURNAL_ASKED] = ("restore", item.id)
        cannot = resumable(item)
        if resume_col.button(f"Resume rollout #{item.id}", key=f"{keys.FLEET_RESUME_PREFIX}{item.id}",
                             disabled=bool(cannot) or not permitted,
                             help=cannot or why_not or "run it again as planned, in waves with the "
                             "health gate"):
            st.session_state[keys.FLEET_JOURNAL_ASKED] = ("resume", item.id)
        asked = st.session_state.get(keys.FLEET_JOURNAL_ASKED)
        if asked == ("restore", item.id) and _yes(
                f"Restore rollout #{item.id}: put back {', '.join(item.left_changed)} ({item.what})?"):
            try:
                with st.spinner(f"putting back {', '.join(item.left_changed)}…"):
                    _, _, end = restore(item.id, found.members, auth=access.auth_for(
                        GuardedAction.ROLLBACK, model=item.plan.model, server=fleet))
                (st.success if end.result == "rolled_back" else st.error)(end.headline)
            except GeAdminError as exc:
                show_failure(failure_of(exc), title="Restore refused")
        if asked == ("resume", item.id) and _yes(
                f"Resume rollout #{item.id}: {item.what} on {', '.join(s.name for s in item.plan.servers)}, "
                f"{item.plan.waves} wave(s) with the health gate?"):
            try:
                auth = access.auth_for(GuardedAction(item.plan.change), model=item.plan.model, server=fleet)
                runs.start(fleet, f"resume of rollout #{item.id} ({item.what})", auth.who.name,
                           _resumed(item.id, found.members, auth),
                           held=(auth, GuardedAction(item.plan.change)))
            except GeAdminError as exc:
                show_failure(failure_of(exc), title="Resume refused")


def _resumed(number: int, members: tuple[Member, ...],
             auth: Authorization) -> Callable[[Control, Callable[[str], None]], RolloutResult]:
    def work(control: Control, say: Callable[[str], None]) -> RolloutResult:
        return resume(number, members, auth=auth, progress=say, control=control)
    return work


def _yes(question: str) -> bool:
    """Restore and Resume change servers: asked once more, with what they touch; True on Yes."""
    st.warning(defused(question), icon=":material/help:")  # servers' and models' names: text
    yes, no = st.columns(2)
    if no.button("Cancel", key=keys.FLEET_JOURNAL_NO):
        del st.session_state[keys.FLEET_JOURNAL_ASKED]
        st.rerun()
    if yes.button("Yes", key=keys.FLEET_JOURNAL_YES, type="primary"):
        del st.session_state[keys.FLEET_JOURNAL_ASKED]
        return True
    return False
