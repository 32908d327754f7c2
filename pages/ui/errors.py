"""The one way a page shows a failure: the cause in one line, the fix, what still serves,
then Triton's log lines in an expander (`show_failure`, split by
geadmin.diagnose.failure_text) — never a traceback, never one long paragraph. pages/app.py
calls `show_error` around every page; the Models, Overview and editor pages show a failed
load or apply with `show_failure` too."""

from __future__ import annotations

import streamlit as st

from geadmin.diagnose.failure_text import FailureText, from_explanation, from_message
from geadmin.errors import (
    AccessError,
    BenchBusyError,
    ConfigError,
    GeAdminError,
    InferInputError,
    PerfAnalyzerError,
    RepositoryError,
    SessionExpiredError,
    StackError,
    TelemetryError,
    TritonError,
    TuneBusyError,
    WorkspaceDatabaseError,
)
from geadmin.ops.infer.request import input_fix
from geadmin.ops.models.actions import next_step
from pages.ui.outside_text import defused

# (family, next step), the first that matches wins: narrow classes before their bases.
FIXES: tuple[tuple[type[GeAdminError], str], ...] = (
    (SessionExpiredError, "sign in again"),
    (AccessError, "ask an admin for a role that may do this, or sign in as another user"),
    (BenchBusyError, "wait for the running load test to finish (or cancel it), then run again"),
    (TuneBusyError, "wait for the load test or tuning run that holds it to finish (or cancel it), then "
                    "tune again"),
    (PerfAnalyzerError, "change the load test's settings (loads, window, input) and run it again"),
    (ConfigError, "fix the setting the message names (a GEADMIN_* variable, a flag or the servers "
                  "file), then reload the page"),
    (RepositoryError, "fix the file in the model repository the message names, then try again"),
    (WorkspaceDatabaseError, "check that the workspace (GEADMIN_HOME) is writable and not on a full disk"),
    (TelemetryError, "check that the metrics source named above answers (Triton's metrics port, "
                     "npu-exporter, npu-smi)"),
    (StackError, "see the Stack page and the Triton log for what stopped"),
)


def fix_for(error: GeAdminError) -> str:
    """The next step for `error`: Triton's errors as the Models page says them, inputs as the
    Playground says them, the other families from FIXES."""
    if isinstance(error, TritonError):
        return next_step(error)
    if isinstance(error, InferInputError):
        return input_fix(error)
    for family, fix in FIXES:
        if isinstance(error, family):
            return fix
    return "check the message above; if it persists, write `geadmin bundle` and report it"


def failure_of(error: GeAdminError, fix: str = "") -> FailureText:
    """`error` split for `show_failure`; a failed load's explanation when it carries one."""
    explanation = getattr(error, "explanation", None)
    fix = fix or fix_for(error)
    if explanation is not None:
        return from_explanation(explanation, fix=fix)
    return from_message(str(error), fix=fix)


def show_failure(failure: FailureText, *, title: str = "") -> None:
    """The cause (after `title`, bold, when given), the next step, what serves and the other
    details as one short box; Triton's log lines in an expander under it."""
    headline = defused(failure.headline)  # Triton's and the model's words in geadmin's sentence
    parts = [f"**{title}:** {headline}" if title else headline]
    if failure.fix:
        parts.append(f"**Next step:** {failure.fix}.")
    if failure.serving:
        parts.append(f"**Serving:** {defused(failure.serving)}.")
    if failure.details:
        parts.append("\n".join(f"- {defused(line)}" for line in failure.details))
    st.error("\n\n".join(parts), icon=":material/error:")
    if failure.log_lines:
        count = len(failure.log_lines)
        with st.expander(f"{failure.log_title}: {count} line{'s' * (count != 1)}"):
            st.code("\n".join(failure.log_lines), language="text")


def show_error(error: GeAdminError, *, outage: str = "", retry_url: str = "") -> None:
    """The one way a page shows a geadmin error: the cause and its next step. `outage`: the
    stack's Triton is stopped or restarting (`pages.ui.stack_status.outage_for`), said instead;
    `retry_url`: the page asks that server again on the next click, and says so."""
    if outage:
        show_failure(from_message(outage, fix="see the Stack page"))
        return
    fix = fix_for(error)
    if retry_url:
        fix += f". This page tries {retry_url} again on your next click"
    show_failure(failure_of(error, fix))
