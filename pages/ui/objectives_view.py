"""The Metrics page's objectives: each charted model's p99 target and error budget, its burn
rate over 1 h and 6 h, and a form to set them. Views only: the figures come from
`geadmin.telemetry.alerting.objectives`, the change is `geadmin.ops.monitoring.set_objective`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.errors import GeAdminError
from geadmin.ops.monitoring import parse_budget, set_objective
from geadmin.telemetry.alerting.objectives import Objective, burn_rates, objectives
from pages.ui import access, keys
from pages.ui.outside_text import defused


def current_objectives() -> Mapping[str, Objective]:
    try:
        return objectives()
    except GeAdminError:
        return {}  # no workspace database: no objectives to draw


def objective_lines(source: str, models: Sequence[str], found: Mapping[str, Objective]) -> None:
    """One line per charted model that has objectives: targets and burn rates."""
    for model in models:
        objective = found.get(model)
        if objective is None:
            continue
        text = f"**{defused(model)}** objective: {objective.describe()}"
        if objective.error_budget is not None:
            try:
                burns = burn_rates(source, model, objective.error_budget)
            except GeAdminError as exc:
                burns, text = [], text + f" — burn rate not read: {defused(str(exc))}"
            for burn in burns:
                rate = "no requests" if burn.rate is None else f"{burn.rate:.2f}x"
                text += f" · burn {burn.window_h:g} h: {rate}"
        st.caption(text + f" (set by {objective.who}, {objective.set_at})")


def objective_form(models: Sequence[str]) -> None:
    permitted, why_not = access.allowed(GuardedAction.MONITORING)
    with st.form(keys.METRICS_OBJECTIVE_FORM):
        model_col, p99_col, budget_col = st.columns([2, 1, 1])
        model = model_col.selectbox("Model", list(models), key=keys.METRICS_OBJECTIVE_MODEL)
        p99 = p99_col.number_input("p99 target (ms)", min_value=0.0, value=0.0, step=1.0,
                                   help="0: no latency objective")
        budget = budget_col.text_input("Error budget", placeholder="0.1%", help="empty: no error budget")
        submitted = st.form_submit_button("Set objectives", disabled=not permitted, help=why_not or None)
    if not submitted or not model:
        return
    try:
        stored = set_objective(model, p99 or None, parse_budget(budget) if budget.strip() else None,
                               auth=access.auth_for(GuardedAction.MONITORING, model=model))
    except GeAdminError as exc:
        st.error(f"Objectives not set: {defused(str(exc))}")
        return
    st.success(f"{defused(model)}: {stored.describe()} (audited)")
