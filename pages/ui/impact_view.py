"""What else a change touches: named before it is confirmed, reported after it ran
(geadmin.diagnose.impact, geadmin.diagnose.state_changes). Shared by the Models page and the config editor."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from geadmin.diagnose.impact import Impact
from geadmin.diagnose.state_changes import StateChange

ICON = ":material/account_tree:"


def show_impact(found: Impact) -> None:
    """The loaded ensembles the change touches, each with what happens to it and why."""
    if found.problem:
        st.caption(f"Could not check what else this touches: {found.problem}")
    if not found.consequences:
        return
    show = st.error if found.takes_down else st.info
    headline = found.headline()
    show(f"**{headline[0].upper() + headline[1:]}.**\n\n" + "\n".join(f"- {line}" for line in found.lines()),
         icon=ICON)


def show_side_effects(side_effects: Sequence[StateChange]) -> None:
    """What else changed state with a change, each with Triton's reason (each is audited)."""
    if side_effects:
        st.warning("**Also changed state** (each is in the audit log as `side_effect`):\n\n"
                   + "\n".join(f"- {change.text()}" for change in side_effects), icon=ICON)
