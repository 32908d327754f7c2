"""Config editor: edit a model's config.pbtxt with live findings, knobs and diffs; apply it
safely (validated, reloaded, rolled back if Triton rejects it) and roll back to any revision.

The text area holds the one edited text; the knobs are a view of it and write back into it
(geadmin.repository.knobs); its findings and what it does to the ensembles that run the model
come from the plan of the change (geadmin.ops.models.change_plan, as for `geadmin config apply`).
"Preview impact" (pages/ui/preview_view.py) measures the edited text on a trial copy
beside the live model first, as `geadmin config apply --preview` does. Apply and the history's
rollback are pages/ui/config_change.py: asked about when a change takes
an ensemble down (and before every rollback), audited as refused when cancelled."""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from geadmin.errors import (
    ConfigParseError,
    GeAdminError,
    RepositoryError,
    TritonError,
)
from geadmin.repository import revisions, store
from geadmin.repository.knobs import Knobs, compare_with_live, parse_sizes, read_knobs, with_knobs
from geadmin.repository.modelconfig import parse_pbtxt, to_file_text
from geadmin.repository.validate import Finding, Severity
from geadmin.stack.target import Target
from pages.ui import keys
from pages.ui.config_change import Opened, apply_section, history_section, plan_apply
from pages.ui.context import client_for, selected_target
from pages.ui.links import preselect
from pages.ui.outside_text import defused
from pages.ui.preview_view import preview_section

MONOSPACE = ('<style>textarea[aria-label="config.pbtxt"] {font-family: "Source Code Pro", ui-monospace, '
             "monospace; font-size: 0.85rem; white-space: pre; overflow-wrap: normal;}</style>")
ICONS = {Severity.ERROR: ":material/error:", Severity.WARNING: ":material/warning:",
         Severity.INFO: ":material/info:"}


def render() -> None:
    st.title("Config editor")
    target = selected_target()
    if target.repository is None:
        st.info("No model repository is known for this server, so there is nothing to edit: start the "
                "stack with `geadmin up`, or set GEADMIN_REPOSITORY to the directory Triton serves.")
        return
    try:
        names = store.model_names(target.repository)
    except RepositoryError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
        return
    if not names:
        st.info(f"{target.repository} holds no model with a config.pbtxt yet.")
        return
    preselect(keys.EDITOR_MODEL, names)  # a deep link's model
    model = st.selectbox("Model", names, key=keys.EDITOR_MODEL)
    opened = open_model(target, model)
    if opened is None:
        return
    conflict_banner(target, opened)
    text_col, side_col = st.columns([3, 2])
    with text_col:
        st.html(MONOSPACE)
        text = st.text_area("config.pbtxt", key=keys.EDITOR_TEXT, height=460,
                            help="edit the text, or use the knobs on the right; findings update as you go")
    plan = plan_apply(target, opened, text)  # findings and impact, as `geadmin config apply` plans them
    with side_col:
        show_findings(plan.findings if plan is not None else ())
        knobs_form(text)
    comparisons(target, opened, text)
    preview_section(target, opened.model, opened.text, text)
    apply_section(target, opened, text, plan)
    history_section(target, opened)


def open_model(target: Target, model: str, *, reread: bool = False) -> Opened | None:
    """The opened file; read again (and the editor text reset) when the model or server changes."""
    opened: Opened | None = st.session_state.get(keys.EDITOR_OPENED)
    if not reread and opened is not None and (opened.server, opened.model) == (target.spec.name, model):
        return opened
    assert target.repository is not None
    try:
        current = store.read_config(target.repository, model)
    except RepositoryError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
        return None
    opened = Opened(target.spec.name, model, current.sha256, current.text)
    st.session_state[keys.EDITOR_OPENED] = opened
    st.session_state[keys.EDITOR_TEXT] = opened.text
    return opened


def conflict_banner(target: Target, opened: Opened) -> None:
    assert target.repository is not None
    try:
        current = store.read_config(target.repository, opened.model)
    except RepositoryError as exc:
        st.error(defused(str(exc)), icon=":material/error:")
        return
    if current.sha256 == opened.sha256:
        return
    st.warning(f"{defused(opened.model)}/config.pbtxt changed on disk since you opened it "
               "(someone else applied a change, or the file was edited). Applying now is refused; reopen it "
               "to start from the new file (your edits are discarded), or copy your edits first.",
               icon=":material/sync_problem:")
    with st.expander("What changed on disk"):
        diff = revisions.text_diff(opened.text, current.text, f"{opened.model}/config.pbtxt",
                               "when you opened it", "on disk now")
        st.code(diff or "(no textual change)", language="diff")
    st.button("Reopen from disk", key=keys.EDITOR_REOPEN, on_click=_reopen)


def _reopen() -> None:
    st.session_state.pop(keys.EDITOR_OPENED, None)  # the next run reads the file again


def show_findings(findings: Sequence[Finding]) -> None:
    counts = {s: sum(f.severity is s for f in findings) for s in Severity}
    errors, warnings = counts[Severity.ERROR], counts[Severity.WARNING]
    st.markdown(f"**Findings** — {errors} error{'s' * (errors != 1)}, "
                f"{warnings} warning{'s' * (warnings != 1)}")
    if not findings:
        st.caption(":material/check_circle: no findings: Triton's and npu_ge's rules pass")
    for finding in findings:
        where = f"line {finding.line} · " if finding.line else ""
        path = f" {defused(finding.path)}" if finding.path else ""
        # the config's own words (names, values) are in the message: never markdown
        st.markdown(f"{ICONS[finding.severity]} {where}`{finding.rule}`{path}: {defused(finding.message)}  \n"
                    f"&nbsp;&nbsp;**fix:** {defused(finding.fix)}")


def knobs_form(text: str) -> None:
    st.markdown("**Knobs**")
    try:
        knobs = read_knobs(parse_pbtxt(text))
    except ConfigParseError:
        st.caption("Fix the parse error to use the knobs.")
        return
    if error := st.session_state.pop(keys.EDITOR_KNOB_ERROR, None):
        st.error(defused(error), icon=":material/error:")
    prefix = f"{keys.EDITOR_KNOB_PREFIX}{revisions.sha256_of(text.encode())[:12]}."  # new widgets per text
    with st.form(keys.EDITOR_KNOB_FORM, border=True):
        st.number_input("max_batch_size", min_value=0, value=knobs.max_batch_size, key=prefix + "mbs")
        st.checkbox("dynamic batching", value=knobs.dynamic_batching, key=prefix + "batching")
        st.number_input("max queue delay (µs)", min_value=0, value=knobs.max_queue_delay_us,
                        key=prefix + "delay")
        st.text_input("preferred batch sizes", value=", ".join(map(str, knobs.preferred_batch_sizes)),
                      key=prefix + "sizes", help="e.g. 4, 8")
        st.number_input("instance count", min_value=1, value=knobs.instance_count or 1, key=prefix + "count",
                        disabled=knobs.instance_count is None,
                        help="several instance groups: set their counts in the text")
        if knobs.device_ids is not None:
            st.text_input("device_ids (npu_ge)", value=knobs.device_ids, key=prefix + "devices",
                          help="NPUs for the instances, e.g. 0,1; instance i runs on device_ids[i % n]")
        st.text_input("versions served", value=knobs.versions or "", key=prefix + "versions",
                      help="version_policy: all, latest N, or versions such as 1, 2; empty: the latest")
        st.form_submit_button("Write knobs into the text", on_click=_write_knobs, args=(prefix, knobs))


def _write_knobs(prefix: str, shown: Knobs) -> None:
    """Form callback (runs before the rerun, so it may set the text area's value)."""
    state = st.session_state
    try:
        knobs = Knobs(int(state[prefix + "mbs"]), bool(state[prefix + "batching"]),
                      int(state[prefix + "delay"]),
                      parse_sizes(state[prefix + "sizes"]),
                      int(state[prefix + "count"]) if shown.instance_count is not None else None,
                      state.get(prefix + "devices") if shown.device_ids is not None else None,
                      state.get(prefix + "versions", shown.versions))
        result = with_knobs(state[keys.EDITOR_TEXT], knobs)
    except GeAdminError as exc:
        state[keys.EDITOR_KNOB_ERROR] = f"The knobs were not written: {exc}"
        return
    state[keys.EDITOR_TEXT] = result.text


def comparisons(target: Target, opened: Opened, text: str) -> None:
    edited, live_tab, highlighted = st.tabs(["Edited vs on disk", "On disk / live in Triton / edited",
                                             "Highlighted"])
    with edited:
        diff = revisions.text_diff(opened.text, text, f"{opened.model}/config.pbtxt", "on disk", "edited")
        st.code(diff or "No changes yet.", language="diff" if diff else "text")
    with live_tab:
        live_comparison(target, opened, text)
    with highlighted:
        st.code(text, language="protobuf", line_numbers=True)


def live_comparison(target: Target, opened: Opened, text: str) -> None:
    client = client_for(target)
    try:
        live = client.model_config(opened.model)
    except TritonError as exc:
        st.info(f"No live config to compare with: {defused(str(exc))}")
        return
    for label, source in (("on disk", opened.text), ("edited", text)):
        try:
            comparison = compare_with_live(source, live)
        except ConfigParseError as exc:
            st.caption(f"The {label} text does not parse: {defused(str(exc))}")
            continue
        if comparison.same:
            st.markdown(f":material/check_circle: every field set **{label}** is live in Triton")
        else:
            st.markdown(f":material/difference: fields set **{label}** that Triton serves differently: "
                        + ", ".join(f"`{p}`" for p in comparison.differing))
    with st.expander("Triton's live config (normalized, defaults filled in)"):
        st.code(to_file_text(live), language="protobuf")
