"""The Fleet page's rollout: the change asked for in plain widgets (no form: a keyboard submit
in the config's text area starts nothing), then "Start rollout…" shows what would happen —
fleet, servers, waves, the change and its diff, a read-only member's refusal — and only
"Confirm rollout" starts it, with exactly what was shown (geadmin.fleet.preview)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError
from geadmin.fleet import runs
from geadmin.fleet.discovery import Discovery
from geadmin.fleet.gate import GateSettings
from geadmin.fleet.members import Member
from geadmin.fleet.preview import Preview, missing_repository, preview, with_repository
from geadmin.fleet.rollout import Change, RolloutResult, rollout
from geadmin.fleet.versions import roll_version
from geadmin.fleet.wave import Control
from pages.ui import access, keys
from pages.ui.errors import failure_of, show_failure

NEW_VERSION = "new version"  # an apply of version_policy in two gated rollouts (geadmin.fleet.versions)
REPOSITORY_LABEL = "Model repository every server reads (a shared volume)"


@dataclass(frozen=True)
class Pending:
    """A rollout asked for and shown; "Confirm rollout" runs exactly this."""

    fleet: str
    chosen: str  # a Change value or NEW_VERSION
    model: str
    members: tuple[Member, ...]
    wave: int
    gate: GateSettings
    text: str
    version: int
    preview: Preview
    asked: tuple[object, ...]  # the inputs it was made from: an edit after Start drops it

    @property
    def change(self) -> Change:
        return Change.APPLY if self.chosen == NEW_VERSION else Change(self.chosen)


def rollout_form(found: Discovery, models: list[str], fresh: bool) -> None:
    if not models:
        return
    st.subheader("Roll out a change")
    action_col, model_col, wave_col, gate_col, slack_col = st.columns([1, 2, 1, 1, 1])
    chosen = action_col.selectbox("Change", [*(c.value for c in Change), NEW_VERSION], key=keys.FLEET_CHANGE)
    change = Change.APPLY if chosen == NEW_VERSION else Change(chosen)
    model = model_col.selectbox("Model", models, key=keys.FLEET_MODEL)
    wave = int(wave_col.number_input("Wave size", min_value=1, max_value=max(1, len(found.members)), value=1))
    requests = int(gate_col.number_input("Gate requests", min_value=0, max_value=100, value=3,
                                         help="smoke requests per server before and after its wave"))
    slack = float(slack_col.number_input("Latency slack (ms)", min_value=0, max_value=600_000, value=200,
                                         help="the gate requests' median may take twice its time "
                                         "before + this"))
    members, missing = found.members, missing_repository(found.members)
    writes = change is Change.APPLY
    if missing:  # none in [[fleet]], GEADMIN_REPOSITORY, the servers' own or the running stack's
        typed = st.text_input(REPOSITORY_LABEL, key=keys.FLEET_REPOSITORY,
                              help=f"no repository is known for {', '.join(missing)}; an apply or a new "
                              "version writes the config there, as this machine mounts it")
        if typed.strip():
            members = with_repository(members, Path(typed.strip()).expanduser())
    else:
        st.caption("Repository: " + ", ".join(sorted({str(m.repository) for m in members})))
    text = st.text_area("New config.pbtxt (apply)", key=keys.FLEET_CONFIG, height=200)
    version = int(st.number_input("Version (new version)", min_value=1, value=2, key=keys.FLEET_VERSION,
                                  help="its directory must be in every repository; it is loaded beside the "
                                  "served version, warmed by the gate, then the old one is retired"))
    early = preview(members, found.fleet.name, change.value, model, wave_size=wave)
    if early.refused:  # said before Start, in the rollout's own words
        st.error(f"This rollout will be refused: {early.refused}", icon=":material/block:")
    permitted, why_not = access.allowed(GuardedAction(change.value))
    asked = (found.fleet.name, chosen, model, wave, requests, slack, text, version,
             tuple((m.name, str(m.repository)) for m in members))
    pending: Pending | None = st.session_state.get(keys.FLEET_PENDING)
    if pending is not None and pending.asked != asked:  # edited, or another fleet: ask again
        del st.session_state[keys.FLEET_PENDING]
        pending = None
    why = why_not or ("the fleet's last poll failed: wait for it to answer" if not fresh else "")
    if st.button("Start rollout…", key=keys.FLEET_START, type="primary", help=why or "shows what it would "
                 "do and asks first", disabled=not permitted or not fresh or bool(early.refused)
                 or pending is not None):
        missing_now = missing_repository(members) if writes else []
        if missing_now:
            st.error(f"No model repository is known for {', '.join(missing_now)}: type the "
                     f"{REPOSITORY_LABEL[0].lower()}{REPOSITORY_LABEL[1:]} above, as this machine mounts it.",
                     icon=":material/error:")
            return
        shown = preview(members, found.fleet.name, change.value, model, wave_size=wave, writes=writes,
                        subject=f"version {version} of {model}" if chosen == NEW_VERSION else "",
                        new_config=text.encode() if chosen == Change.APPLY.value else None)
        st.session_state[keys.FLEET_PENDING] = Pending(
            found.fleet.name, chosen, model, tuple(members), wave,
            GateSettings(requests=requests, latency_slack_ms=slack), text, version, shown, asked)
        st.rerun()
    if pending is not None:
        confirm(pending)


def confirm(pending: Pending) -> None:
    shown = pending.preview
    st.warning(f"Roll out {shown.headline()}?", icon=":material/help:")
    if shown.repositories:
        st.markdown("**Writes the config in** " + ", ".join(f"`{r}`" for r in shown.repositories))
    if pending.chosen == Change.APPLY.value:
        st.markdown(f"**Change to config.pbtxt:** {shown.added} line(s) added, {shown.removed} removed")
        st.code(shown.diff or "(no difference from the served file)", language="diff")
    if shown.refused:
        st.error(f"This rollout will be refused: {shown.refused}", icon=":material/block:")
    yes, no = st.columns(2)
    if no.button("Cancel", key=keys.FLEET_CANCEL):
        del st.session_state[keys.FLEET_PENDING]
        st.rerun()
    if yes.button("Confirm rollout", key=keys.FLEET_CONFIRM, type="primary", disabled=bool(shown.refused)):
        del st.session_state[keys.FLEET_PENDING]
        start(pending)


def start(pending: Pending) -> None:
    change, model = pending.change, pending.model
    try:
        auth = access.auth_for(GuardedAction(change.value), model=model, server=pending.fleet)

        def work(control: Control, say: Callable[[str], None]) -> RolloutResult:
            common: dict[str, Any] = {"wave_size": pending.wave, "gate": pending.gate, "auth": auth,
                                      "fleet": pending.fleet, "progress": say, "control": control}
            if pending.chosen == NEW_VERSION:
                return roll_version(pending.members, model, pending.version, **common)
            new = pending.text.encode() if change is Change.APPLY else None
            return rollout(pending.members, change, model, new_config=new, **common)

        what = f"{pending.preview.subject} on {len(pending.members)} server(s)"
        runs.start(pending.fleet, what, auth.who.name, work, held=(auth, GuardedAction(change.value)))
    except GeAdminError as exc:
        show_failure(failure_of(exc), title="Rollout not started")
