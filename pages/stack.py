"""Stack: the services running Triton and the dashboard — state, restarts, logs, log level."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

from geadmin.access.roles import GuardedAction
from geadmin.domain import format_duration
from geadmin.errors import GeAdminError
from geadmin.ops.models import actions
from geadmin.stack.choose import choose_driver
from geadmin.stack.drivers import ServiceStatus, StackDriver, perform
from pages.ui import access, keys
from pages.ui.context import selected_client
from pages.ui.outside_text import defused

REFRESH_S = 3
ACTIONS = {"restart": "Restart", "stop": "Stop", "start": "Start"}


def render() -> None:
    st.title("Stack")
    try:
        driver = choose_driver()
    except GeAdminError as exc:
        st.error(f"Cannot manage the stack: {defused(str(exc))}")
        driver = None
    if driver is None:
        st.info("This dashboard manages no stack: it was started against an existing Triton. "
                "Start the stack with `geadmin up`, or in compose set GEADMIN_COMPOSE_PROJECT.")
    else:
        st.caption(f"Driver: {driver.kind}")
        live_services(driver)
        service_action(driver)
        service_logs(driver)
    log_level()


@st.fragment(run_every=REFRESH_S)
def live_services(driver: StackDriver) -> None:
    try:
        services = driver.services()
    except GeAdminError as exc:
        st.error(f"Cannot read the stack: {defused(str(exc))}")
        return
    st.dataframe(pd.DataFrame([service_row(s) for s in services]), hide_index=True, width="stretch")
    for service in services:
        history = driver.history(service.name)
        if history:
            st.caption(f"{defused(service.name)}: {len(history)} exits recorded")  # compose's names
            st.dataframe(pd.DataFrame([{
                "when": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r.at)),
                "how": f"signal {r.signal}" if r.signal else f"exit code {r.exit_code}",
                "ran for": format_duration(r.uptime_s), "restarted": r.restarted,
                "asked for": r.requested, "note": r.note,
            } for r in reversed(history)]), hide_index=True, width="stretch")


def service_row(service: ServiceStatus) -> dict[str, object]:
    return {"service": service.name, "state": service.state, "health": service.health or "",
            "uptime": service.uptime(), "restarts": service.restarts, "detail": service.detail}


def service_action(driver: StackDriver) -> None:
    """Restart / stop / start one service, after a confirmation."""
    names = [s.name for s in _services_or_empty(driver)]
    if not names:
        return
    left, right, go = st.columns([2, 2, 1], vertical_alignment="bottom")
    service = left.selectbox("Service", names, key=keys.STACK_SERVICE)
    action = right.selectbox("Action", list(ACTIONS), format_func=ACTIONS.get, key=keys.STACK_ACTION)
    permitted, why_not = access.allowed(GuardedAction(action))
    if go.button("Apply…", key=keys.STACK_APPLY, disabled=not permitted, help=why_not or None):
        st.session_state[keys.STACK_PENDING] = (service, action)
    pending = st.session_state.get(keys.STACK_PENDING)
    if pending:
        service, action = pending
        st.warning(f"{ACTIONS[action]} **{service}**? Requests to it fail until it is back.")
        yes, no = st.columns(2)
        if yes.button(f"Yes, {action} {service}", key=keys.STACK_CONFIRM, type="primary"):
            st.session_state.pop(keys.STACK_PENDING, None)
            try:
                perform(driver, service, action, auth=access.auth_for(GuardedAction(action), model=service))
            except GeAdminError as exc:
                st.error(f"Cannot {action} {service}: {defused(str(exc))}")
            else:
                st.success(f"Asked to {action} {service}; the table above shows when it is done.")
        if no.button("Cancel", key=keys.STACK_CANCEL):
            st.session_state.pop(keys.STACK_PENDING, None)
            st.rerun()


def _services_or_empty(driver: StackDriver) -> list[ServiceStatus]:
    try:
        return driver.services()
    except GeAdminError:
        return []  # live_services already says why


def service_logs(driver: StackDriver) -> None:
    names = [s.name for s in _services_or_empty(driver)]
    if not names:
        return
    with st.expander("Logs", expanded=False):
        left, middle, right = st.columns([2, 1, 3])
        service = left.selectbox("Service", names, key=keys.STACK_LOG_SERVICE)
        tail = middle.number_input("Lines", min_value=10, max_value=5000, value=200, step=50,
                                   key=keys.STACK_LOG_TAIL)
        wanted = right.text_input("Filter (text, case-insensitive)", key=keys.STACK_LOG_FILTER)
        try:
            lines = driver.logs(service, int(tail))
        except GeAdminError as exc:
            st.error(f"Cannot read the logs of {service}: {defused(str(exc))}")
            return
        if wanted:
            lines = [line for line in lines if wanted.lower() in line.lower()]
        st.caption(f"{len(lines)} lines")
        st.code("\n".join(lines) or "(no lines)", language=None)


def log_level() -> None:
    """Triton's log verbosity, changed live (raise it while reproducing a failure)."""
    client = selected_client()
    with st.expander("Triton log level"):
        try:
            current = client.log_settings()
        except GeAdminError as exc:
            st.error(f"Cannot read Triton's log settings: {defused(str(exc))}")
            return
        st.caption(defused(", ".join(f"{key}: {value}" for key, value in sorted(current.items()))))
        level = st.number_input("Verbose level (0 = off)", min_value=0, max_value=10, step=1,
                                value=int(current.get("log_verbose_level", 0)),
                                key=keys.STACK_LOG_VERBOSE)
        permitted, why_not = access.allowed(GuardedAction.LOG_LEVEL)
        if st.button("Apply log level", key=keys.STACK_LOG_APPLY, disabled=not permitted,
                     help=why_not or None):
            try:
                auth = access.auth_for(GuardedAction.LOG_LEVEL, server=client.url)
                updated = actions.set_log_verbosity(client, int(level), auth=auth)
            except GeAdminError as exc:
                st.error(f"Triton refused the change: {defused(str(exc))}")
                return
            st.success(f"Triton's verbose level is now {updated.get('log_verbose_level')}.")
