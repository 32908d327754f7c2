"""The one way a page shows a geadmin error it did not handle itself: the cause (the
error's own message) and the next step, as `st.error` — never a traceback. pages/app.py
calls `show_error` around every page; pages that handle an error in place keep doing so."""

from __future__ import annotations

import streamlit as st

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
    WorkspaceDatabaseError,
)
from geadmin.ops.actions import next_step
from geadmin.ops.infer import input_fix

# (family, next step), the first that matches wins: narrow classes before their bases.
FIXES: tuple[tuple[type[GeAdminError], str], ...] = (
    (SessionExpiredError, "sign in again"),
    (AccessError, "ask an admin for a role that may do this, or sign in as another user"),
    (BenchBusyError, "wait for the running load test to finish (or cancel it), then run again"),
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


def show_error(error: GeAdminError) -> None:
    st.error(f"{error}\n\n**Next step:** {fix_for(error)}.", icon=":material/error:")
