"""Which finding leads, and the fix that goes with it: one headline per failed model.

Three sources say why a model does not serve: Triton's API answer, its log, and the
repository on disk. The most specific one leads: Triton's generic lines ("failed to poll
from model repository", "failed to read text proto") lose to what the protobuf parser or
the layout check says; otherwise the log's error leads, then the layout, then the API.
A reason Triton words without a way out gets its fix from one table (`KNOWN_FIXES`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# Triton lines that only say *that* something failed; a layout finding says what.
GENERIC_MARKERS = (
    "failed to poll from model repository",
    "failed to read text proto",
    "unexpected platform type",
    "failed to load all models",
    "no version is available",
    "model not found in any model repository",
)

# (pattern on the reason, fix). First match wins; `{0}` in a fix is the pattern's group.
KNOWN_FIXES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"unable to find backend library for backend '?npu_ge'?", re.I),
     "the npu_ge backend is not installed in this Triton: build it with `make backend` and give "
     "Triton a backend directory holding npu_ge/libtriton_npu_ge.so (docs/backend/index.md, \"Building\")"),
    (re.compile(r"unable to find backend library for backend '?([\w.-]+)'?", re.I),
     "backend '{0}' is not installed in this Triton's --backend-directory: install it there, or "
     "change the model's backend"),
    (re.compile(r"Python model file not found", re.I),
     "add model.py to the model's version directory; Triton keeps this load stuck, so restart "
     "Triton (stop and start `geadmin up`) after adding it"),
    (re.compile(r"has kind KIND_GPU but no GPUs are available", re.I),
     "this Triton has no GPU: use instance_group [{ kind: KIND_CPU }] (npu_ge models choose NPUs "
     "with the device_ids parameter)"),
    (re.compile(r"unexpected platform type '?graph_executor'?", re.I),
     'replace platform: "graph_executor" with backend: "npu_ge" in config.pbtxt'),
    (re.compile(r"^no model directory (\S+)", re.I),
     "check the name (`geadmin models list` lists the repository's models), or create the model "
     "(`geadmin models create`, or the New model page)"),
    (re.compile(r"had not answered the reload after the load timeout", re.I),
     "Triton loads the new config beside the previous version, which serves meanwhile (the index says "
     "READY throughout) — a large model can take minutes: `geadmin status` names the model until the "
     "load ends; one that never ends waits on something (a Python model's initialize(), a device or a "
     "file that does not answer): fix that, then restart Triton (the Stack page, or SIGHUP to "
     "`geadmin up`)"),
    (re.compile(r"had not answered the load after the load timeout", re.I),
     "Triton keeps the model LOADING until its initialize returns — a large model can take minutes: "
     "watch it with `geadmin models list`; one that never ends waits on something (a Python "
     "model's initialize(), a device or a file that does not answer): fix that, then restart "
     "Triton (the Stack page, or SIGHUP to `geadmin up`), as a stuck load holds until then"),
    (re.compile(r"cannot load the ACL runtime libascendcl", re.I),
     "this host has no CANN runtime: run on an Ascend host with the CANN toolkit "
     "(source /usr/local/Ascend/ascend-toolkit/set_env.sh before starting Triton)"),
)
FIX_SEPARATOR = " — fix: "


def is_generic(reason: str) -> bool:
    lowered = reason.lower()
    return any(marker in lowered for marker in GENERIC_MARKERS)


def fix_for(reason: str) -> str:
    """The fix for a known reason ("" when the table has none)."""
    for pattern, fix in KNOWN_FIXES:
        match = pattern.search(reason)
        if match:
            return fix.replace("{0}", match.group(1)) if match.groups() else fix
    return ""


def with_fix(reason: str) -> str:
    """`reason`, with its fix appended when the table knows one and it is not there yet."""
    fix = fix_for(reason)
    if not fix or FIX_SEPARATOR in reason or fix in reason:
        return reason
    return f"{reason}{FIX_SEPARATOR}{fix}"


def lead(*, log_reason: str = "", layout: Sequence[str] = (), api: str = "") -> str:
    """The headline: the most specific finding, with its fix."""
    if layout and (not log_reason or is_generic(log_reason)):
        return with_fix("; ".join(layout))  # every layout finding is specific: all of them lead
    if log_reason:
        return with_fix(log_reason)
    return with_fix(api)


def best_reason(index_reason: str, log_reason: str) -> str:
    """The index's reason and the log's line merged: the log's is usually the fuller one;
    the index's is kept when it adds something."""
    if not log_reason:
        return index_reason
    if index_reason and index_reason not in log_reason and not is_generic(index_reason):
        return f"{index_reason} — Triton log: {log_reason}"
    return log_reason
